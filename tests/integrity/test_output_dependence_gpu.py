"""GPU: cheats that skip settled outputs are caught (issue 13), an honest copy of the baseline
(A/A) is flagged by nothing. Two cheats: one skips where its output is not one of the gate's old
poison patterns (the timed size's check, each launch's outputs poisoned with a finite byte of
their own, now catches it before any timing); one skips a thread's work when its first output
already holds the answer, which every check launch (poisoned first) computes in full; hot launches
rotate over input sets, so it finds no answer of its own in place and gains nothing, and where it
did the output-dependence and physics checks would catch it."""

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
from tests.integrity.test_cheats_gpu import caught_at_the_timed_size, ptx_verdict, record

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


# Skips all of a thread's elements when its first two already hold their answers and those differ:
# a uniform poison (every byte the same, as the gate's are) can hold two equal answers but never two
# different ones, so every launch the gate checks computes everything, even where an answer equals
# the poison; a hot replay, its outputs settled, reads four elements a thread. (Skipping only the
# settled stores saves nothing: on an H100 the read of y costs what the store did.)
SETTLED = """\
extern "C" __global__ void scale_i64(const long long* __restrict__ x, long long* __restrict__ y,
                                     long long k, long long c, long long n)
{
    long long stride = (long long)gridDim.x * blockDim.x;
    long long a = (long long)blockIdx.x * blockDim.x + threadIdx.x, b = a + stride;
    if (b < n) {
        long long want_a = k * x[a] + c, want_b = k * x[b] + c;
        if (want_a != want_b && y[a] == want_a && y[b] == want_b) return;
    }
    for (long long i = a; i < n; i += stride) y[i] = k * x[i] + c;
}
"""

IMPL = '[[case.impl]]\nname = "{name}"\nrole = "{role}"\ntoolchain = "nvcc"\nsource = "kernels/{source}"\nentry = "scale_i64"\n\n'


def suite(tmp_path: Path) -> Path:
    """The bundled suite's scale_i64 at one size, twice: case scale_i64 with the pattern cheat,
    case scale_i64_settled with the settled one, each beside the baseline and a copy of it."""
    shutil.copytree(
        ROOT / "benchmarks", tmp_path / "s", ignore=shutil.ignore_patterns("perf", "ops")
    )
    (tmp_path / "s" / "kernels" / "scale_i64_cheat.cu").write_text(CHEAT)
    (tmp_path / "s" / "kernels" / "scale_i64_settled.cu").write_text(SETTLED)
    cases = tmp_path / "s" / "cases.toml"
    text = cases.read_text()
    start = text.index('[[case]]\nid = "scale_i64"')
    end = text.index("[[case]]", start + 10)
    case = text[start:end].replace(
        "dims = { n = 134217728, blocks = 4224 }", "dims = { n = 33554432, blocks = 4224 }"
    )
    case = re.sub(r"(?m)^axes = .*\n", "", case)  # one size, not the suite's sweep
    case = case[: case.index("[[case.impl]]")]
    honest = IMPL.format(name="cuda", role="baseline", source="scale_i64.cu") + IMPL.format(
        name="cuda_again", role="candidate", source="scale_i64.cu"
    )
    pattern = (
        case + honest + IMPL.format(name="cheat", role="candidate", source="scale_i64_cheat.cu")
    )
    settled = case.replace('id = "scale_i64"', 'id = "scale_i64_settled"', 1) + honest
    settled += IMPL.format(name="settled", role="candidate", source="scale_i64_settled.cu")
    head = text[: text.index("[[case]]")].replace('primary = "warpforth"', "")
    cases.write_text(head + pattern + settled)
    return cases


def assert_honest_at_parity(case: dict) -> None:
    impls = case["implementations"]
    for honest in ("cuda", "cuda_again"):
        assert impls[honest]["check"]["status"] == "passed", impls[honest]["check"]
        assert f"{honest}:" not in (case.get("error") or {}).get("message", ""), case.get("error")
        if "integrity" in impls[honest]:
            assert impls[honest]["integrity"]["output_dependent"] is False
            assert 0.9 < impls[honest]["integrity"]["ratio"] < 1.1, impls[honest]["integrity"]
    if impls["cuda_again"].get("gap"):  # timed: the honest copy keeps its gap, at parity
        gap = impls["cuda_again"]["gap"]
        assert 0.98 < gap["ratio_of_medians"] < 1.02, gap


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
    cases = {c["id"]: c for c in doc["cases"]}
    case = cases["scale_i64"]
    if message := caught_at_the_timed_size(case, "cheat"):
        record("skips outputs that are no old poison", "PTX hot", ptx_verdict(case), message)
    else:  # past the gate: the output-dependence and physics checks
        assert case["status"] == "failed" and case["error"]["phase"] == "timing", case["error"]
        message = case["error"]["message"]
        assert "physically impossible timing" in message and "cheat: " in message
        assert "output-dependent timing" in message
        assert case["implementations"]["cheat"]["integrity"]["output_dependent"] is True
        assert case["implementations"]["cheat"]["gap"] is None
    assert_honest_at_parity(case)

    case = cases["scale_i64_settled"]
    impls = case["implementations"]
    if impls["settled"]["check"]["status"] != "passed":
        # caught before timing (a first version, keyed on one element, skipped where its answer
        # equalled the poison: on an H100, 319 of 100,003 elements wrong on the edge inputs)
        assert case["status"] == "failed" and case["error"]["phase"] == "check", case["error"]
        assert "settled" in case["error"]["message"]
        assert all(impls[n]["check"]["status"] == "passed" for n in ("cuda", "cuda_again"))
        record(
            "skips the store where the answer is there",
            "PTX hot",
            ptx_verdict(case),
            case["error"]["message"],
        )
        return
    if case["status"] == "ok":
        # hot launches rotate over input sets, so a launch's outputs hold another set's answer,
        # never its own: the skip never fires (on an H100, x1.019 the baseline, both timed alike)
        gap = impls["settled"]["gap"]["ratio_of_medians"]
        assert gap > 0.98 and impls["settled"]["integrity"]["output_dependent"] is False, gap
        assert_honest_at_parity(case)
        record(
            "skips the store where the answer is there",
            "PTX hot",
            ptx_verdict(case),
            f"gained nothing: x{gap:.3f} the baseline (no launch finds its own answer in place)",
        )
        return
    assert case["status"] == "failed" and case["error"]["phase"] == "timing", case.get("error")
    message = case["error"]["message"]
    assert "output-dependent timing" in message and "settled: " in message, message
    assert "physically impossible timing" in message, message
    assert impls["settled"]["integrity"]["output_dependent"] is True, impls["settled"]["integrity"]
    # the untrusted row loses its gap, naming why; the honest copy keeps its own (at parity)
    assert impls["settled"]["gap"] is None
    assert "cannot be trusted" in impls["settled"]["gap_note"]
    assert_honest_at_parity(case)
    record("skips the store where the answer is there", "PTX hot", ptx_verdict(case), message)
