"""The in-run A/A control on a real GPU (runner.measurement.aa_control): tests/gpu_suite's
scale_aa, hot and cold, must carry a case-level `aa_control` whose gap is within 2% of 1.0
(and its interval, which adds the term it sets, holds 1.0 within a little), and every
candidate's gap must take the control's term (systematic_source "control"). Run on the GPU box:

    python -m pytest -m gpu tests/runner/measurement/test_aa_control_gpu.py -s

(-s prints each mode's control; with KERNELGAP_TEST_ARTIFACTS=DIR the documents are kept there).
"""

from __future__ import annotations

import pytest

from protocol.validation import validate
from tests.support.gpu_bench import run_bench

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("mode", ["hot", "cold"])
def test_every_case_carries_its_aa_control_and_its_gaps_take_the_term(mode, tmp_path):
    document = tmp_path / f"aa-{mode}.json"
    suite = "tests/gpu_suite/cases.toml"
    doc, bench = run_bench(suite, document, "--case", "scale_aa", "--mode", mode)
    validate(doc, "result")
    (case,) = doc["cases"]
    assert case["status"] == "ok", case.get("error")
    aa = case["aa_control"]
    print(
        f"\n{mode}: A/A control {aa['ratio_of_medians']:.5f} [{aa['ci_low']:.5f}, "
        f"{aa['ci_high']:.5f}], load sd {aa['load_sd']:.3%}, systematic {aa['systematic']:.3%}"
    )
    assert "A/A control" in bench.stderr
    assert abs(aa["ratio_of_medians"] - 1.0) < 0.02
    assert aa["ci_low"] <= 1.0 + 0.002 and aa["ci_high"] >= 1.0 - 0.002
    assert aa["loads"] == 8 and len(aa["samples_s"]) == len(aa["sample_loads"])
    assert aa_name_is_hidden(case)
    gaps = [i["gap"] for i in case["implementations"].values() if i.get("gap")]
    assert gaps
    for gap in gaps:
        assert gap["systematic_source"] == "control"
        assert gap["systematic"] == aa["systematic"]


def aa_name_is_hidden(case: dict) -> bool:
    """The control is never a row of the case (so never in a geomean)."""
    return not any(name.endswith("~aa") for name in case["implementations"])
