"""Tolerances with teeth (issue 13): null models (zeros, a constant, a copy of an input, the
kernel that did nothing, an f32 computation in an f64 case) must fail every case of the suite,
and `runner check` fails a case whose tolerance or data lets one pass."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from runner.definition import manifest
from runner.measurement.gate.correctness import passing_null_models

ROOT = Path(__file__).resolve().parents[3]
SUITE = manifest.load(ROOT / "benchmarks" / "cases.toml")


@pytest.mark.parametrize("case_id", [c.id for c in SUITE.cases])
def test_no_null_model_passes_any_case_of_the_suite(case_id):
    assert passing_null_models(SUITE, SUITE.case(case_id)) == []


def names(passing: list[str]) -> list[str]:
    """The null models' names, without the figure each refusal carries."""
    return [p.rsplit(" (max relative error", 1)[0] for p in passing]


def edited(tmp_path: Path, old: str, new: str) -> manifest.Suite:
    shutil.copytree(
        ROOT / "benchmarks", tmp_path / "s", ignore=shutil.ignore_patterns("perf", "ops")
    )
    cases = tmp_path / "s" / "cases.toml"
    text = cases.read_text()
    assert old in text
    cases.write_text(text.replace(old, new, 1))
    return manifest.load(cases)


def test_a_tolerance_loose_enough_for_zeros_is_caught(tmp_path):
    suite = edited(
        tmp_path,
        "tolerance = { rtol = 1e-15, atol = 1e-15 }",
        "tolerance = { rtol = 1.0, atol = 1e-15 }",
    )
    passing = names(passing_null_models(suite, suite.case("axpy_f64")))
    assert "all zeros" in passing


def test_an_f32_computation_in_an_f64_case_is_caught_by_a_tolerance_that_admits_it(tmp_path):
    suite = edited(
        tmp_path,
        "tolerance = { rtol = 1e-13, atol = 1e-13 }",
        "tolerance = { rtol = 1e-5, atol = 1e-5 }",
    )
    assert names(passing_null_models(suite, suite.case("reduce_sum_f64"))) == [
        "the reference on inputs rounded to f32",
        "the reference computed in f32 (inputs and result rounded to f32)",
    ]


def test_a_kernel_that_did_nothing_passes_when_the_parameters_make_it_a_no_op(tmp_path):
    suite = edited(
        tmp_path,
        '{ name = "a", type = "f64", value = 2.5 }',
        '{ name = "a", type = "f64", value = 0.0 }',
    )
    assert "y untouched (a kernel that did nothing)" in names(
        passing_null_models(suite, suite.case("axpy_f64"))
    )


def test_degenerate_integer_data_lets_a_constant_pass(tmp_path):
    suite = edited(tmp_path, "low = -2147483648, high = 2147483647", "low = 0, high = 0")
    passing = names(passing_null_models(suite, suite.case("scale_i64")))
    assert "a constant (the mean of the expected output)" in passing


def test_runner_check_fails_the_case_and_names_the_null_model(tmp_path):
    suite = edited(
        tmp_path,
        "tolerance = { rtol = 1e-15, atol = 1e-15 }",
        "tolerance = { rtol = 1.0, atol = 1.0 }",
    )
    done = subprocess.run(
        [sys.executable, "-m", "runner", "check", str(suite.path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert done.returncode == 1
    assert (
        "FAIL  axpy_f64: tolerance: outputs that did not do the work pass it at the check size: all zeros"
        in done.stderr
    )


def test_a_reference_that_overflows_on_the_edges_asks_for_valid_ranges(tmp_path):
    from runner.measurement.gate.correctness import edges_problems

    assert all(edges_problems(SUITE, case) == [] for case in SUITE.cases)
    suite = edited(tmp_path, ", valid = { min = -1.0, max = 1.0 } },", " },")  # axpy's x
    problems = edges_problems(suite, suite.case("axpy_f64"))
    assert len(problems) == 1 and problems[0].startswith("y: the reference gives ")
    assert "non-finite values" in problems[0] and "valid = { min = ..., max = ... }" in problems[0]
