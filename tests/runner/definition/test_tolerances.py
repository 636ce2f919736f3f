"""The default tolerance per dtype (runner.definition.spec.DEFAULT_TOLERANCES): derived from the
dtype, the same for both front ends and a suite's missing part, and the table docs/python-api.md
prints."""

from __future__ import annotations

import re

import numpy as np
import pytest

from runner.bench.verification import tolerance_for
from runner.definition import manifest
from runner.definition.spec import ATOL_EPS, DEFAULT_TOLERANCES, default_tolerance
from runner.measurement.gate import arrays
from tests.conftest import ROOT
from tests.runner.definition.test_manifest import write_suite

EPS = {"f64": np.finfo(np.float64).eps, "f32": np.finfo(np.float32).eps}


def test_atol_is_the_dtypes_resolution_times_a_constant_never_above_rtol():
    for name, (rtol, atol) in DEFAULT_TOLERANCES.items():
        assert 0 < atol <= rtol, name
    for name, eps in EPS.items():  # the two where rtol is many ulps: atol is well below it
        assert DEFAULT_TOLERANCES[name][1] == ATOL_EPS * eps
        assert DEFAULT_TOLERANCES[name][1] < DEFAULT_TOLERANCES[name][0] / 2
    # rtol refuses the next lower precision: an f32 rounding of an f64 value, f16 of f32
    assert DEFAULT_TOLERANCES["f64"][0] < np.finfo(np.float32).eps / 2
    assert DEFAULT_TOLERANCES["f32"][0] < np.finfo(np.float16).eps / 2


@pytest.mark.parametrize(
    "names,row",
    [
        (("f64", "float64", "complex128"), "f64"),
        (("f32", "float32", "complex64"), "f32"),
        (("float16", "half"), "f16"),
        (("bfloat16",), "bf16"),
    ],
)
def test_every_name_of_a_dtype_takes_its_row_in_both_front_ends(names, row):
    for name in names:
        assert default_tolerance(name) == DEFAULT_TOLERANCES[row]
        assert tolerance_for(name) == DEFAULT_TOLERANCES[row]


def test_integers_and_bools_are_exact():
    for name in ("i32", "u64", "int32", "int64", "uint8", "bool"):
        assert default_tolerance(name) == (0.0, 0.0)


def test_near_zero_a_value_is_judged_on_its_own_scale_below_the_old_absolute_part():
    """f64 outputs of magnitude 1e-13 off by 1e-13: atol = rtol (1e-12) passed them all; the
    default now refuses them, while an honest rounding error of an f32-scale dot product passes."""
    rtol, atol = DEFAULT_TOLERANCES["f64"]
    expected = np.full(8, 1e-13)
    assert arrays.compare(expected * 2, expected, 1e-12, 1e-12)["mismatches"] == 0  # the old
    assert arrays.compare(expected * 2, expected, rtol, atol)["mismatches"] == 8
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((64, 256)), rng.standard_normal((256, 64))
    exact = a @ b
    blocked = sum(a[:, k : k + 16] @ b[k : k + 16] for k in range(0, 256, 16))  # another order
    assert arrays.compare(blocked, exact, rtol, atol)["mismatches"] == 0


def test_a_suite_tolerance_part_left_out_takes_the_same_default(tmp_path):
    given = "{ rtol = 1e-12, atol = 0.0 }"
    case = manifest.load(write_suite(tmp_path, given, "{ rtol = 1e-6 }")).cases[0]
    assert (case.rtol, case.atol) == (1e-6, DEFAULT_TOLERANCES["f32"][1])
    case = manifest.load(write_suite(tmp_path, given, "{ atol = 1e-7 }")).cases[0]
    assert (case.rtol, case.atol) == (DEFAULT_TOLERANCES["f32"][0], 1e-7)
    case = manifest.load(write_suite(tmp_path, given, "{ exact = true }")).cases[0]
    assert (case.rtol, case.atol, case.exact) == (0.0, 0.0, True)


def test_the_docs_table_is_the_code_table():
    text = (ROOT / "docs" / "python-api.md").read_text()
    section = text[text.index("## Default tolerances") :]
    rows = re.findall(r"^\| \w+ \((\w+)\) \| ([\d.e+-]+) \| ([\d.e+-]+) \|$", section, re.M)
    assert {name for name, _, _ in rows} == set(DEFAULT_TOLERANCES)
    for name, rtol, atol in rows:
        want_rtol, want_atol = DEFAULT_TOLERANCES[name]
        assert float(rtol) == want_rtol, name
        assert float(atol) == pytest.approx(want_atol, rel=1e-3), name
