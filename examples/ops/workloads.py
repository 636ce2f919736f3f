"""Workloads shared by the correctness tests and the benchmarks of examples/ops/.

A workload says what is computed (rows x dtypes), makes the inputs of a case on the GPU from a
seed, names the reference (computed in float64 where that applies) and how outputs are
verified, and gives FLOPs and bytes per call for the roofline. Copy this file to start.
"""

from __future__ import annotations

import torch

from runner import bench


def _generator(seed: int) -> torch.Generator:
    return torch.Generator(device="cuda").manual_seed(seed)


class BatchedMatmul(bench.Workload):
    """C[b] = A[b] @ B[b] for b in range(batch)."""

    name = "batched-matmul"
    version = 1
    rows = (
        bench.Row("square-1k", b=8, m=1024, n=1024, k=1024, tier="smoke"),
        bench.Row("tall-skinny", b=4, m=8192, n=256, k=1024),
        bench.Row("square-4k", b=2, m=4096, n=4096, k=4096),
    )
    dtypes = ("float16", "float32")

    def gen_inputs(self, params, dtype, seed):
        g = _generator(seed)
        dt = getattr(torch, dtype)
        b, m, n, k = params["b"], params["m"], params["n"], params["k"]
        a = torch.rand((b, m, k), generator=g, device="cuda", dtype=torch.float32) * 2 - 1
        w = torch.rand((b, k, n), generator=g, device="cuda", dtype=torch.float32) * 2 - 1
        return a.to(dt), w.to(dt)

    def reference(self, a, w):
        return torch.matmul(a.double(), w.double()).to(a.dtype)

    def verification(self, params, dtype):
        zero_a = bench.zeroed_input(0)  # a negative control: the check must reject it
        if dtype == "float16":
            # fp16 outputs of magnitude ~10 round to 2^-7; one rounding either side of the
            # float64 result is 2 ulp apart at worst, so rtol 2e-3 rather than the default 1e-3
            return bench.Exact(rtol=2e-3, atol=1e-3, controls=(zero_a,))
        # fp32 accumulation over k terms drifts from the float64 sum by ~sqrt(k) ulp of the
        # partial sums (measured: 2.5e-5 at k = 1024), more than the default atol (3.8e-6)
        return bench.Exact(rtol=1e-5, atol=4e-6 * params["k"] ** 0.5, controls=(zero_a,))

    def flops(self, params, dtype):
        return 2.0 * params["b"] * params["m"] * params["n"] * params["k"]

    def bytes(self, params, dtype):
        b, m, n, k = params["b"], params["m"], params["n"], params["k"]
        return float(b * (m * k + k * n + m * n) * torch.finfo(getattr(torch, dtype)).bits // 8)


class Scale(bench.Workload):
    """y = alpha * x, the op under test works in place on its argument."""

    name = "scale"
    version = 1
    rows = (bench.Row("16M", n=1 << 24, tier="smoke"), bench.Row("256M", n=1 << 28))
    dtypes = ("float32",)
    alpha = 3.0

    def gen_inputs(self, params, dtype, seed):
        return (
            torch.rand(params["n"], generator=_generator(seed), device="cuda").to(
                getattr(torch, dtype)
            ),
        )

    def reference(self, x):
        return x * self.alpha

    def flops(self, params, dtype):
        return float(params["n"])

    def bytes(self, params, dtype):
        return 2.0 * params["n"] * torch.finfo(getattr(torch, dtype)).bits // 8
