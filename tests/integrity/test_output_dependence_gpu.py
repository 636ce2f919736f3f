"""GPU: cheats are caught (issue 13). A kernel that skips the work when its output already holds
the answer passes the gate (which poisons outputs first) and the timed-size cross-check, but
not the hot-mode output-dependence check or the physical-limit check; an honest copy of the
baseline (A/A) is flagged by neither."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from protocol.validation import validate
from tests.conftest import ROOT

pytestmark = pytest.mark.gpu

# Skips element i when y[i] is not one of the gate's poison patterns (all-ones, 0x5A bytes):
# it reads y and nothing else there, so in hot replay it moves half the bytes and writes none.
CHEAT = """\
extern "C" __global__ void scale_i64(const long long* __restrict__ x, long long* __restrict__ y,
                                     long long k, long long c, long long n)
{
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        long long seen = y[i];
        if (seen != -1LL && seen != 0x5A5A5A5A5A5A5A5ALL) continue;
        y[i] = k * x[i] + c;
    }
}
"""


def suite(tmp_path: Path) -> Path:
    shutil.copytree(
        ROOT / "benchmarks", tmp_path / "s", ignore=shutil.ignore_patterns("perf", "ops")
    )
    (tmp_path / "s" / "kernels" / "scale_i64_cheat.cu").write_text(CHEAT)
    cases = tmp_path / "s" / "cases.toml"
    text = cases.read_text()
    start = text.index('[[case]]\nid = "scale_i64"')
    end = text.index("[[case]]", start + 10)
    case = text[start:end].replace(
        "dims = { n = 134217728, blocks = 4224 }", "dims = { n = 33554432, blocks = 4224 }"
    )
    case = re.sub(r"(?m)^axes = .*\n", "", case)  # one size, not the suite's sweep
    case = case[: case.index("[[case.impl]]")] + (
        '[[case.impl]]\nname = "cuda"\nrole = "baseline"\ntoolchain = "nvcc"\nsource = "kernels/scale_i64.cu"\nentry = "scale_i64"\n\n'
        '[[case.impl]]\nname = "cuda_again"\nrole = "candidate"\ntoolchain = "nvcc"\nsource = "kernels/scale_i64.cu"\nentry = "scale_i64"\n\n'
        '[[case.impl]]\nname = "cheat"\nrole = "candidate"\ntoolchain = "nvcc"\nsource = "kernels/scale_i64_cheat.cu"\nentry = "scale_i64"\n'
    )
    head = text[: text.index("[[case]]")].replace('primary = "warpforth"', "")
    cases.write_text(head + case)
    return cases


def test_a_kernel_that_skips_settled_outputs_is_caught_and_an_honest_copy_is_not(tmp_path):
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH (the cheat is CUDA C++)")
    out = tmp_path / "result.json"
    done = subprocess.run(
        [sys.executable, "-m", "runner", "bench", str(suite(tmp_path)), "-o", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert out.exists(), done.stderr[-3000:]
    doc = orjson.loads(out.read_bytes())
    validate(doc, "result", "cheat run")
    if os.environ.get("KERNELGAP_TEST_ARTIFACTS"):
        shutil.copy(out, Path(os.environ["KERNELGAP_TEST_ARTIFACTS"]) / "integrity-cheat.json")
    (case,) = doc["cases"]
    impls = case["implementations"]
    assert all(impls[n]["check"]["status"] == "passed" for n in impls)  # the gate is fooled
    assert case["status"] == "failed" and case["error"]["phase"] == "timing", case.get("error")
    message = case["error"]["message"]
    assert "physically impossible timing" in message and "cheat: " in message
    assert "output-dependent timing" in message
    assert "cuda_again" not in message and "cuda:" not in message
    assert impls["cheat"]["integrity"]["output_dependent"] is True
    for honest in ("cuda", "cuda_again"):
        assert impls[honest]["integrity"]["output_dependent"] is False
        assert 0.9 < impls[honest]["integrity"]["ratio"] < 1.1, impls[honest]["integrity"]
    # the untrusted row loses its gap, naming why; the honest copy keeps its own (at parity)
    assert impls["cheat"]["gap"] is None
    assert "cannot be trusted" in impls["cheat"]["gap_note"]
    assert 0.98 < impls["cuda_again"]["gap"]["ratio_of_medians"] < 1.02, impls["cuda_again"]["gap"]
