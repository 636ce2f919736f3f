"""GPU: the correctness-gate cheats of tests/cheats/cases.toml (issue 30, classes 3, 4 and 5):
lower precision inside the tolerance, correctness on the declared input range only, a read one
element past the end. `runner bench` runs only these cases; each cheat must be refused at the
check with a message naming what was found, and the honest controls (cuda, cuda_again) must
pass both input sets. Rows join test_cheats_gpu.py's verdict table.

Run on the GPU box: `pytest -m gpu tests/integrity/test_cheats_gate_gpu.py` (tests/integrity/test_cheats_gate.py
runs the same verdicts on the CPU with numpy emulations of the kernels).
"""

from __future__ import annotations

import subprocess
import sys

import orjson
import pytest

from protocol.validation import validate
from tests.conftest import ROOT
from tests.integrity.test_cheats_gate import GATE_CASES
from tests.integrity.test_cheats_gpu import (
    SUITE,
    artifacts,
    assert_honest_untouched,
    needs_nvcc,
    ptx_verdict,
    record,
)

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def gate_run(tmp_path_factory):
    needs_nvcc()
    out = tmp_path_factory.mktemp("gate-cheats") / "result.json"
    command = [sys.executable, "-m", "runner", "bench", str(SUITE), "-o", str(out)]
    for case_id in GATE_CASES:
        command += ["--case", case_id]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=540)
    assert out.exists(), done.stderr[-3000:]
    if artifacts():
        (artifacts() / "cheats-gate-ptx.json").write_bytes(out.read_bytes())
    doc = orjson.loads(out.read_bytes())
    validate(doc, "result", "gate cheats run")
    assert done.returncode == 1, "the cheats must make the run exit 1"
    cases = {c["id"]: c for c in doc["cases"]}
    assert set(cases) == set(GATE_CASES), sorted(cases)
    return cases


def refused(case: dict, impl: str) -> dict:
    """The check record of `impl`, which must have failed the gate (and so the case)."""
    assert case["status"] == "failed" and case["error"]["phase"] == "check", case.get("error")
    check = case["implementations"][impl]["check"]
    assert check["status"] == "failed", check
    assert f"{impl}: " in case["error"]["message"]
    return check


def honest_passed_both_input_sets(case: dict) -> None:
    assert_honest_untouched(case)
    for name in ("cuda", "cuda_again"):
        check = case["implementations"][name]["check"]
        assert check["inputs_passed"] == ["declared", "edges"], check
        assert check["rounding_shortcuts"] == [], check


@pytest.mark.parametrize("impl", ["half", "bf16"])
def test_f32_through_a_lower_precision_is_refused_naming_the_null_model(gate_run, impl):
    case = gate_run["half_in_f32"]
    check = refused(case, impl)
    named = {s["null_model"] for s in check["rounding_shortcuts"]}
    model = f"the reference computed in {impl.replace('half', 'f16')}"
    assert any(n.startswith(model) for n in named), named
    assert any("resembles the null model" in p and model in p for p in check["problems"])
    honest_passed_both_input_sets(case)
    # the tolerance is loose enough to admit f16: reported, not a failure of the honest kernels
    assert any("f16" in t for t in case["implementations"]["cuda"]["check"]["tolerance_admits"])
    record(f"f32 through {impl}", "PTX", ptx_verdict(case), "; ".join(check["problems"][:2]))


def test_f64_with_f32_arithmetic_is_refused_naming_the_null_model(gate_run):
    case = gate_run["f32_math_in_f64"]
    check = refused(case, "f32_math")
    named = {s["null_model"] for s in check["rounding_shortcuts"]}
    assert any("f32" in n for n in named), named
    honest_passed_both_input_sets(case)
    record("f64 with f32 arithmetic", "PTX", ptx_verdict(case), case["error"]["message"])


@pytest.mark.parametrize(
    ("case_id", "impl", "what"),
    [
        ("sign_shortcut", "abs_dropped", "fabs dropped (exact for x >= 0)"),
        ("negative_ints", "shift", "x >> 2 for x / 4 (exact for x >= 0)"),
    ],
)
def test_a_shortcut_exact_on_the_declared_range_fails_on_the_edges(gate_run, case_id, impl, what):
    case = gate_run[case_id]
    check = refused(case, impl)
    assert check["inputs_passed"] == ["declared"], check
    assert any("on the edges inputs" in p for p in check["problems"]), check["problems"]
    honest_passed_both_input_sets(case)
    record(what, "PTX", ptx_verdict(case), case["error"]["message"])


@pytest.mark.parametrize(
    ("impl", "found", "what"),
    [
        ("plus_zero", "expected -0.0", "a * x + 0.0 (loses -0.0)"),
        ("over_x", "got nan", "a * x * (x / x) (NaN at zero)"),
    ],
)
def test_a_shortcut_wrong_only_at_zero_fails_on_the_edges(gate_run, impl, found, what):
    case = gate_run["zero_shortcut"]
    check = refused(case, impl)
    assert check["inputs_passed"] == ["declared"], check
    assert any("on the edges inputs" in p and found in p for p in check["problems"])
    honest_passed_both_input_sets(case)
    record(what, "PTX", ptx_verdict(case), "; ".join(check["problems"][:2]))


def test_a_read_one_element_past_the_end_reads_a_nan_canary(gate_run):
    case = gate_run["reads_past_end"]
    check = refused(case, "past_end")
    n = 4099  # check_dims
    declared = [
        c for c in check["against"] if c.get("inputs", "declared") == "declared" and c["mismatches"]
    ]
    assert declared and declared[0]["mismatches"] == 1, check["against"]
    first = declared[0]["first_mismatch"]
    assert first["index"] == n - 1 and first["got"] == "nan", first
    assert check["out_of_bounds_writes"] == {}, check
    honest_passed_both_input_sets(case)
    record("reads one element past the end", "PTX", ptx_verdict(case), check["problems"][0])
