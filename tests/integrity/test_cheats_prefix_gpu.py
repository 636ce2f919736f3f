"""GPU: the runner's internal kernel prefix (issue 30, items 7e and 8). The runner's own kernels
are known by the function launched (runner.measurement.timing.cupti), never by name:

- PTX, honest: an entry named kg_scale_f64 times in cold mode by CUPTI like the same body named
  scale_f64 (it used to fail: 'CUPTI recorded 0 kernel(s)');
- callable, honest: a Triton kernel named kg_scale is seen by CUPTI and timed;
- callable, cheat: work done on a side stream by a kernel named kg_* is flagged like any other
  side-stream work (the name used to hide it from the window watch).

Verdicts join tests/integrity/test_cheats_gpu.py's table. Run on the GPU box:
`pytest -m gpu tests/integrity/test_cheats_prefix_gpu.py`.
"""

from __future__ import annotations

import subprocess
import sys

import orjson
import pytest

from protocol.validation import validate
from tests.conftest import ROOT
from tests.integrity import test_cheats_gpu as cheats
from tests.integrity.test_cheats_gpu import (
    ALPHA,
    SUITE,
    cupti_reason,
    honest,
    needs_nvcc,
    record,
    scale_case,
    torch_module,
)

# the cheats' fixtures: one session on the runner's CUDA device, its options, the verdict table
session, options = cheats.session, cheats.options

pytestmark = pytest.mark.gpu


def needs_cupti():
    why = cupti_reason()
    if why:
        pytest.skip(f"the internal-prefix checks time by CUPTI: {why}")


def test_ptx_an_honest_kernel_named_with_the_internal_prefix_times_by_cupti(tmp_path):
    needs_nvcc()
    needs_cupti()
    out = tmp_path / "result.json"
    done = subprocess.run(
        [
            *(sys.executable, "-m", "runner", "bench", str(SUITE), "--case", "internal_prefix"),
            *("--mode", "cold", "--timer", "cupti", "-o", str(out)),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert out.exists(), done.stderr[-3000:]
    doc = orjson.loads(out.read_bytes())
    validate(doc, "result", "internal prefix run")
    (case,) = doc["cases"]
    message = case.get("error", {}).get("message", "")
    record("kernel named kg_* (honest)", "PTX", case["status"], message or "timed")
    assert case["status"] == "ok", message
    assert done.returncode == 0, done.stderr[-3000:]
    impl = case["implementations"]["kg_named"]
    assert impl["timing"]["timer"] == "cupti", impl["timing"]
    gap = impl["gap"]
    assert abs(gap["ratio_of_medians"] - 1.0) < 0.03, gap


def kg_scale_kernel():
    """A Triton kernel whose name (its Python function's) carries the runner's prefix."""
    pytest.importorskip("triton", reason="the callable case names its kernel through Triton")
    import triton
    import triton.language as tl

    @triton.jit
    def kg_scale(x_ptr, out_ptr, alpha, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        inside = offsets < n
        x = tl.load(x_ptr + offsets, mask=inside, other=0.0)
        tl.store(out_ptr + offsets, x * alpha, mask=inside)

    def launch(y, out):
        n = y.numel()
        kg_scale[((n + 1023) // 1024,)](y, out, ALPHA, n, BLOCK=1024)
        return out

    return launch


def test_callable_an_honest_kg_named_triton_kernel_is_seen_and_timed(session, options):
    needs_cupti()
    torch = torch_module()
    from runner import bench

    launch = kg_scale_kernel()

    def kg_named(y):
        return launch(y, torch.empty_like(y))

    options(mode="cold", budget_s=1.0)
    c = bench.Runner(honest, scale_case(), name="mul").compare({"kg_named": kg_named})
    row = c["kg_named"]
    record("kernel named kg_* (honest)", "callable", "flagged" if row.flags else "ok", row.flags)
    assert row.flags == [], row.flags
    window = c.document_case["implementations"]["kg_named"]["integrity"]["window"]
    assert window["checked"] and window["findings"] == [], window
    timing = c.document_case["implementations"]["kg_named"]["timing"]
    assert timing["timer"] == "cupti" and timing["stats"]["median_s"] > 0, timing


def test_callable_side_stream_work_named_with_the_internal_prefix_is_flagged(session, options):
    needs_cupti()
    torch = torch_module()
    from runner import bench

    launch = kg_scale_kernel()
    side = torch.cuda.Stream()

    def hidden_by_name(y):
        out = torch.empty_like(y)
        with torch.cuda.stream(side):
            launch(y, out)
        side.synchronize()  # done before it returns: the timing stream never sees it
        return out

    options(mode="cold", budget_s=1.0)
    case = scale_case(count_copies=True)  # cold, uncaptured: every launch is one real call
    with pytest.raises(bench.IntegrityFailed) as failure:
        bench.Runner(honest, case, name="mul").compare({"hidden": hidden_by_name})
    flags = " ".join(failure.value.comparison.rows["hidden"].flags)
    record("side-stream work named kg_*", "callable", "flagged", flags)
    assert "kg_scale" in flags and "not the timing stream" in flags, flags
