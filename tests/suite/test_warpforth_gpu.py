"""GPU: every WarpForth candidate of the real suite passes the correctness gate and is timed.

The Forth kernels are compiled where warpforthc lives: this test builds a bundle when warpforthc
is on PATH, else takes the bundle that $KERNELGAP_BUNDLE names (`python -m runner build
benchmarks/cases.toml --out bundle/` on the host, carried to the GPU box), else skips saying so.
Every case runs once (a swept one at its headline point) and timing is shortened (2 ms
samples): this checks the path, not the numbers.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from protocol.validation import validate
from runner.definition import manifest
from runner.execution.suite import FIRST_SAMPLES
from tests.conftest import ROOT

pytestmark = pytest.mark.gpu
SUITE = ROOT / "benchmarks" / "cases.toml"


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    if shutil.which("warpforthc"):
        out = tmp_path_factory.mktemp("bundle")
        subprocess.run(
            [sys.executable, "-m", "runner", "build", str(SUITE), "--out", str(out)],
            cwd=ROOT,
            check=True,
            capture_output=True,
            timeout=600,
        )
        return out
    given = os.environ.get("KERNELGAP_BUNDLE")
    if not given:
        pytest.skip("warpforthc is not on PATH and $KERNELGAP_BUNDLE names no bundle built with it")
    return Path(given)


@pytest.fixture(scope="module")
def suite_run(bundle, tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "result.json"
    command = [sys.executable, "-m", "runner", "bench", str(SUITE), "--bundle", str(bundle)]
    # every case once, a swept one at its headline point: every sweep point of the suite is
    # more than one device call (10 minutes) holds
    command += [a for s in manifest.load(SUITE).headline_selectors() for a in ("--case", s)]
    done = subprocess.run(
        [*command, "--target-sample-ms", "2", "-o", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=580,
    )
    assert out.exists(), f"no document written; stderr:\n{done.stderr}"
    return orjson.loads(out.read_bytes()), done


def test_every_case_passes_the_gate_with_warpforth_llvm_and_cuda(suite_run):
    doc, done = suite_run
    validate(doc, "result", "suite run")
    assert done.returncode == 0, done.stderr[-4000:]
    assert doc["suite"]["primary"] == "warpforth"
    rounds = {c.id: c.settings.samples for c in manifest.load(SUITE).cases}  # the case's own
    for case in doc["cases"]:
        assert case["status"] == "ok", (case["id"], case.get("error"))
        impls = case["implementations"]
        assert {"cuda", "llvm", "warpforth"} <= set(impls), case["id"]
        for name, impl in impls.items():
            assert impl["check"]["status"] == "passed", (case["id"], name, impl["check"])
            assert impl["check"]["unwritten_elements"] == 0
            # the sequential rule (suite.FIRST_SAMPLES rounds first) may stop a decided case
            # early; it then says so and why, else every round of the case's settings is taken
            count = impl["timing"]["stats"]["count"]
            seq = case.get("sequential")
            assert count >= FIRST_SAMPLES, (case["id"], name, count)
            if seq is None:
                assert count >= rounds[case["id"]], (case["id"], name, count)
            else:
                assert seq["samples"] == count, (case["id"], name, seq)
                if count < rounds[case["id"]]:
                    assert seq["stopped_by"] in ("target", "floor"), (case["id"], seq)
        wf = impls["warpforth"]
        assert wf["build"]["toolchain"] == "command" and len(wf["build"]["compiler_sha256"]) == 64
        assert wf["ptx"]["target"] == "sm_70"  # JIT-compiled by the driver for the H200
        assert wf["gap"]["ratio_of_medians"] > 0
        assert wf["gap"]["ci_low"] <= wf["gap"]["ratio_of_medians"] <= wf["gap"]["ci_high"]
