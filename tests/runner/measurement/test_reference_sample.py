"""runner.measurement.gate.timed_size: which references the timed size can sample, and the
sample itself against a stand-in for the baseline's outputs (the reference's own windows)."""

from __future__ import annotations

import numpy as np
import pytest

from runner.definition import manifest
from runner.definition.reference import load_reference
from runner.measurement.gate import correctness as gate
from runner.measurement.gate import timed_size as reference_sample
from tests.conftest import ROOT

SUITE = manifest.load(ROOT / "benchmarks" / "cases.toml")


def slicing(case_id: str):
    case = SUITE.case(case_id)
    return (
        case,
        load_reference(SUITE, case),
        reference_sample.slicing_of(case, load_reference(SUITE, case)),
    )


@pytest.mark.parametrize(
    ("case_id", "dim", "unit"),
    [("axpy_f64", "n", {"x": 1, "y": 1}), ("reduce_sum_f64", "blocks", {"x": 256, "out": 1})],
)
def test_proportional_dims_whose_windows_the_reference_computes_alone_are_sampled(
    case_id, dim, unit
):
    _, _, found = slicing(case_id)
    assert found == reference_sample.Slicing(dim, unit)


@pytest.mark.parametrize(
    ("case_id", "why"),
    [
        ("matmul_f64_tiled", "no dim along which every buffer's length grows in proportion"),
        ("attention_f32_naive", "does not compute a window on its own"),
    ],
)
def test_references_that_cannot_be_sampled_say_why(case_id, why):
    _, _, found = slicing(case_id)
    assert isinstance(found, str) and why in found


def baseline_stand_in(case, reference, cut, plant=None):
    """read(buffer, start, count) of the reference's outputs at the timed size (one window
    per read), with element `plant` (absolute) of each buffer changed."""

    def read(name, start, count):
        u = cut.unit[name]
        out = reference_sample.window_outputs(
            case, reference, cut, case.dims, start // u, count // u
        )
        got = np.asarray(out[name]).astype(gate.output_dtypes(case)[name])
        if plant is not None and start <= plant < start + count:
            got[plant - start] += 1
        return got

    return read


def test_the_sample_passes_the_reference_and_finds_a_planted_error_by_its_index():
    case, reference, cut = slicing("reduce_sum_f64")
    found = reference_sample.sample(
        case, reference, cut, baseline_stand_in(case, reference, cut), seed=3
    )
    assert found["out"]["mismatches"] == 0 and found["out"]["elements"] == 256
    last = case.dims["blocks"] - 1  # the last window always ends the output
    planted = baseline_stand_in(case, reference, cut, plant=last)
    found = reference_sample.sample(case, reference, cut, planted, seed=3)
    assert found["out"]["mismatches"] == 1 and found["out"]["first_mismatch"]["index"] == last
    assert "4 windows of 64 blocks" in found["out"]["sampled"]
