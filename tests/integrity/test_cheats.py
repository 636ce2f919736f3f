"""The cheats suite (tests/cheats/, issues 13 and 30) on the CPU: it is a valid suite whose kernels
build, and `runner check`'s null models refuse exactly the cases whose tolerance lets zeros (or
an f16 computation) through.
tests/integrity/test_cheats_gpu.py runs it on the GPU box."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from runner.definition import manifest
from runner.measurement.gate.correctness import passing_null_models
from tests.conftest import ROOT

SUITE = ROOT / "tests" / "cheats" / "cases.toml"


def test_only_the_loose_case_lets_outputs_that_did_no_work_pass():
    suite = manifest.load(SUITE)
    admitted = {
        case.id: [p.rsplit(" (max relative error", 1)[0] for p in passing_null_models(suite, case)]
        for case in suite.cases
    }
    assert admitted.pop("loose_zeros")[0] == "all zeros"
    # the gate cheats' deliberately loose f32 case (issue 30): its tolerance admits f16
    assert "the reference on inputs rounded to f16" in admitted.pop("half_in_f32")
    assert all(found == [] for found in admitted.values()), admitted
    assert len(suite.cases) == 19 and all(c.baseline.name == "cuda" for c in suite.cases)


def runner_check() -> subprocess.CompletedProcess:
    """`runner check` of the cheats suite (its report on stderr); skips without nvcc."""
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH (the cheats are CUDA C++)")
    return subprocess.run(
        [sys.executable, "-m", "runner", "check", str(SUITE)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=540,
    )


def test_runner_check_builds_every_cheat_and_fails_only_the_loose_case():
    done = runner_check()
    assert done.returncode == 1, done.stderr
    lines = done.stderr.splitlines()
    failures = [line for line in lines if line.startswith("FAIL")]
    assert len(failures) == 2, failures
    assert failures[0].startswith(
        "FAIL  loose_zeros: tolerance: outputs that did not do the work pass it at the check "
        "size: all zeros"
    )
    assert failures[1].startswith("FAIL  half_in_f32: tolerance: ") and "f16" in failures[1]
    built = [line for line in lines if line.startswith("ok    ")]
    assert len(built) == sum(len(c.impls) for c in manifest.load(SUITE).cases), lines
    assert "19 case(s), 2 failure(s), 0 skipped" in done.stderr


def test_each_gpu_module_keeps_its_own_verdict_table():
    """cheats.md and cheats-state.md keep their names; every other module gets its own."""
    from tests.integrity.conftest import table_name

    assert table_name("tests.integrity.test_cheats_gpu") == "cheats.md"
    assert table_name("tests.integrity.test_cheats_state_gpu") == "cheats-state.md"
    assert table_name("tests.integrity.test_honest_third_gpu") == "cheats-honest-third.md"
    names = {table_name(p.stem) for p in Path(__file__).parent.glob("test_*_gpu.py")}
    assert len(names) == len(list(Path(__file__).parent.glob("test_*_gpu.py")))
