"""GPU: `runner check --sanitize` (issue 30, items 5 and 6). tests/sanitize/ plants a read one
element past the end of an input (memcheck) and a cross-warp race in a warp-synchronous
reduction tail (racecheck), next to honest controls; both faults must be found and the controls
must come out clean. The whole suite (benchmarks/cases.toml) is checked too when
KERNELGAP_SANITIZE_SUITE=1 (about 3 tools x 90 implementations: tens of minutes).
Run on the GPU box: `pytest -m gpu tests/runner/execution/test_sanitize_gpu.py` (needs compute-sanitizer).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import orjson
import pytest

from protocol.validation import validate
from tests.conftest import ROOT

pytestmark = pytest.mark.gpu

SUITE = ROOT / "tests" / "sanitize" / "cases.toml"


def _sanitize(cases, tmp_path, *extra, timeout_s=1800):
    from runner.explain import static

    if static.find("compute-sanitizer") is None:
        pytest.skip("compute-sanitizer is not installed here (it comes with the CUDA toolkit)")
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH (the sanitize suite's kernels are CUDA C++)")
    out = tmp_path / "sanitize.json"
    done = subprocess.run(
        [sys.executable, "-m", "runner", "check", str(cases), "--sanitize", "-o", str(out), *extra],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        cwd=ROOT,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH")))),
        },
    )
    sys.stderr.write(done.stderr)
    assert out.exists(), done.stderr[-3000:]
    document = orjson.loads(out.read_bytes())
    validate(document, "sanitize")
    return done, document


def _runs(document, case_id, impl):
    case = next(c for c in document["cases"] if c["id"] == case_id)
    return {r["tool"]: r for r in case["implementations"][impl]["runs"]}


def test_the_planted_faults_are_found_and_the_honest_controls_are_clean(tmp_path):
    done, document = _sanitize(SUITE, tmp_path)
    assert done.returncode == 1, done.stderr[-3000:]
    assert document["status"] == "errors"

    past_end = _runs(document, "scale", "past_end")["memcheck"]
    assert past_end["status"] == "errors" and past_end["errors"] >= 1, past_end
    assert "scale_past_end" in past_end["kernels"], past_end
    assert any("out of bounds" in " ".join(f["lines"]) for f in past_end["findings"]), past_end

    racy = _runs(document, "block_sum", "racy")["racecheck"]
    assert racy["status"] == "errors" and racy["errors"] >= 1, racy
    assert any("Race reported" in k for k in racy["kinds"]), racy

    for case_id, impl in (("scale", "cuda"), ("block_sum", "cuda")):
        for tool, run in _runs(document, case_id, impl).items():
            assert run["status"] == "clean", (case_id, impl, tool, run)
    assert "FAIL  scale/past_end: sanitize: memcheck:" in done.stderr


def test_initcheck_passes_the_honest_controls(tmp_path):
    """Outputs are poisoned before the launch and inputs generated on the device: an honest
    kernel reads nothing uninitialised."""
    _done, document = _sanitize(SUITE, tmp_path, "--sanitize-tools", "initcheck")
    for case_id in ("scale", "block_sum"):
        run = _runs(document, case_id, "cuda")["initcheck"]
        assert run["status"] == "clean", run


@pytest.mark.skipif(
    os.environ.get("KERNELGAP_SANITIZE_SUITE") != "1",
    reason="the whole suite takes tens of minutes: set KERNELGAP_SANITIZE_SUITE=1",
)
def test_the_whole_suite_is_clean(tmp_path):
    done, document = _sanitize(ROOT / "benchmarks" / "cases.toml", tmp_path, timeout_s=3600)
    bad = [
        (c["id"], name, r["tool"], r.get("kinds") or r.get("reason"))
        for c in document["cases"]
        for name, impl in c["implementations"].items()
        for r in impl["runs"]
        if r["status"] != "clean"
    ]
    assert document["summary"]["runs"] > 0
    assert not bad, bad
    assert done.returncode == 0, done.stderr[-3000:]
