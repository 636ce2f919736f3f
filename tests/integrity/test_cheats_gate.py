"""The correctness-gate cheats of tests/cheats/cases.toml (issue 30) on the CPU: each kernel
emulated in numpy on the fake device memory (tests/support/fake_gate_device.py) goes through the real
gate; every cheat is refused for what it does and every honest control passes.
tests/integrity/test_cheats_gate_gpu.py runs the CUDA kernels themselves on the GPU box."""

from __future__ import annotations

import numpy as np
import pytest

from runner.definition import manifest
from runner.definition.reference import load_reference
from runner.measurement.gate.correctness import edges_problems, passing_null_models
from runner.measurement.precision import round_to
from tests.conftest import ROOT
from tests.support.fake_gate_device import run_gate

SUITE = manifest.load(ROOT / "tests" / "cheats" / "cases.toml")
GATE_CASES = (
    "half_in_f32",
    "f32_math_in_f64",
    "sign_shortcut",
    "zero_shortcut",
    "negative_ints",
    "reads_past_end",
)


def axpy_in(precision: str | None):
    """a * x + y with one fused rounding, in `precision` (None: the output's own)."""

    def kernel(m):
        a, x, y = m.scalar("a"), m["x"].astype(np.float64), m["y"].astype(np.float64)
        if precision is not None:
            a, x, y = (round_to(np.asarray(v, np.float64), precision) for v in (a, x, y))
        exact = np.longdouble(a) * x.astype(np.longdouble) + y.astype(np.longdouble)
        out = exact.astype(np.float64)
        m["out"][:] = round_to(out, precision).astype(m["out"].dtype) if precision else out

    return kernel


def scale(m):
    m["out"][:] = m.scalar("a") * m["x"]


def with_errstate(kernel):
    def wrapped(m):
        with np.errstate(all="ignore"):
            kernel(m)

    return wrapped


KERNELS = {
    ("half_in_f32", "cuda"): axpy_in(None),
    ("half_in_f32", "half"): axpy_in("f16"),
    ("half_in_f32", "bf16"): axpy_in("bf16"),
    ("f32_math_in_f64", "cuda"): axpy_in(None),
    ("f32_math_in_f64", "f32_math"): axpy_in("f32"),
    ("sign_shortcut", "cuda"): lambda m: m["out"].__setitem__(
        slice(None), m.scalar("a") * np.abs(m["x"])
    ),
    ("sign_shortcut", "abs_dropped"): scale,
    ("zero_shortcut", "cuda"): scale,
    ("zero_shortcut", "plus_zero"): lambda m: m["out"].__setitem__(
        slice(None), m.scalar("a") * m["x"] + 0.0
    ),
    ("zero_shortcut", "over_x"): lambda m: m["out"].__setitem__(
        slice(None), m.scalar("a") * m["x"] * (m["x"] / m["x"])
    ),
    ("negative_ints", "cuda"): lambda m: m["out"].__setitem__(  # C division truncates
        slice(None), m["x"] // 4 + ((m["x"] % 4 != 0) & (m["x"] < 0))
    ),
    ("negative_ints", "shift"): lambda m: m["out"].__setitem__(slice(None), m["x"] >> 2),
    ("reads_past_end", "cuda"): scale,
    ("reads_past_end", "past_end"): lambda m: m["out"].__setitem__(
        slice(None), m.scalar("a") * m["x"] + 0.0 * m.reach("x", 1)[1:]
    ),
}
# what each cheat's refusal must say
FOUND = {
    ("half_in_f32", "half"): "resembles the null model 'the reference computed in f16",
    ("half_in_f32", "bf16"): "resembles the null model 'the reference computed in bf16",
    ("f32_math_in_f64", "f32_math"): "resembles the null model 'the reference",
    ("sign_shortcut", "abs_dropped"): "on the edges inputs",
    ("zero_shortcut", "plus_zero"): "expected -0.0",
    ("zero_shortcut", "over_x"): "got nan",
    ("negative_ints", "shift"): "on the edges inputs",
    ("reads_past_end", "past_end"): "got nan",
}


@pytest.mark.parametrize(("case_id", "impl"), sorted(KERNELS), ids=lambda v: str(v))
def test_each_gate_cheat_is_refused_and_each_control_passes(case_id, impl, monkeypatch):
    case = SUITE.case(case_id)
    record = run_gate(
        case,
        load_reference(SUITE, case),
        with_errstate(KERNELS[case_id, impl]),
        monkeypatch=monkeypatch,
    )
    if impl == "cuda":
        assert record["status"] == "passed", record["problems"]
        assert record["inputs_passed"] == ["declared", "edges"]
        return
    assert record["status"] == "failed"
    assert any(FOUND[case_id, impl] in p for p in record["problems"]), record["problems"]


def test_only_the_deliberately_loose_gate_case_is_refused_by_runner_check():
    for case_id in GATE_CASES:
        case = SUITE.case(case_id)
        admitted = passing_null_models(SUITE, case)
        if case_id == "half_in_f32":
            want = "the reference computed in f16 (inputs and result rounded to f16) (max relative"
            assert any(a.startswith(want) for a in admitted), admitted
        else:
            assert admitted == [], (case_id, admitted)
        assert edges_problems(SUITE, case) == [], case_id


def test_every_gate_cheat_has_an_emulation_here():
    impls = {(c, i.name) for c in GATE_CASES for i in SUITE.case(c).impls if i.name != "cuda_again"}
    assert impls == set(KERNELS)
