"""torch.bmm under test against torch.matmul and a hand-written Triton kernel.

    pytest examples/ops -m smoke --bench-report report.md --bench-output result.json
    pytest examples/ops --bench-verify          # correctness only, nothing timed

Copy this file to benchmark your own op: keep the cases from bench.cases()/bench.params() and
time only through bench.Runner(op, case).compare(...), so every row is checked against the
reference before it is timed and lands in the result document.
"""

from __future__ import annotations

import pytest

# Without torch or triton nothing here can be collected (skipped, with the reason); without a
# GPU and its driver every test is skipped with the reason: such a machine is no failure of an op.
torch = pytest.importorskip("torch", reason="the ops examples time torch: pip install '.[ops]'")
pytest.importorskip("triton", reason="the Triton implementation needs triton (torch's CUDA wheels bring it)")  # fmt: skip

from triton_bmm import triton_bmm  # noqa: E402 (after the skips: they import torch and triton)
from workloads import BatchedMatmul, Scale  # noqa: E402

from runner import bench  # noqa: E402

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="no CUDA GPU and driver visible to torch: run the ops examples on a GPU box",
)


@pytest.mark.parametrize("case", bench.params(BatchedMatmul()))
def test_bmm(case):
    comparison = bench.Runner(torch.bmm, case).compare(
        {
            "torch.matmul": torch.matmul,
            "triton": triton_bmm,
            "reference (fp64)": case.reference,  # unchanged: not checked against itself
        }
    )
    assert comparison["torch.matmul"].verified and comparison["triton"].verified


@pytest.mark.parametrize("case", bench.params(BatchedMatmul()))
def test_triton_bmm_matches_the_reference(case):
    """The workload's data and reference serve the correctness tests too."""
    bench.check(triton_bmm, *case.inputs, reference=case.reference, verification=case.verification)


# count_copies=True: the copy implementation below is timed with its copy (by default, bench.cases
# leaves device-to-device copies made inside a call out of its time)
@pytest.mark.parametrize("case", bench.params(Scale(), count_copies=True))
def test_scale_in_place(case):
    (x,) = case.inputs
    private = x.clone()  # the op writes its argument: a private copy, restored before each call
    op = bench.Implementation(
        run=lambda y: y.mul_(Scale.alpha), args=(private,), reset=lambda: private.copy_(x)
    )
    bench.Runner(op, case, name="mul_").compare(
        {
            "torch.mul": lambda y: torch.mul(y, Scale.alpha),
            "copy (floor)": bench.Implementation(
                run=lambda y: y.clone(), noncomparable_reason="a plain copy: the memory-bound floor"
            ),
        }
    )
