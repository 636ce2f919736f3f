"""fidelity.py's torch side: torch.add through runner.bench, triton's do_bench and
do_bench_cudagraph, torch.profiler's CUPTI durations and ncu's target (see fidelity.py)."""

from __future__ import annotations

import statistics
import sys
from contextlib import nullcontext

TORCH_KERNEL = "vectorized_elementwise_kernel"  # torch.add on contiguous float32 (not torch.rand's)
NCU_LAUNCHES = 5  # what ncu profiles in each target process (fidelity.py)
SMALL_LOG2N = 18  # up to 2^18 a cold A/A row takes more samples (fidelity_ptx.COLD_SAMPLES)


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def l2_flush_tensor(torch):
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    return torch.ones(max(3 * l2, 64 << 20) // 4, dtype=torch.float32, device="cuda")


PROFILED_LAUNCHES = 300  # torch.profiler's reading: the mean of this many cold launches


def profiler_durations(torch, launch, flush, name_part: str, stream: int | None = None) -> float:
    """Mean kernel duration (us) of `launch` from torch.profiler's CUPTI records over
    PROFILED_LAUNCHES launches, each right behind a read-only flush of 3x the L2 on its stream
    (`stream`, a CUstream handle; else torch's current one), as the runner queues a cold launch
    behind its flush. The mean, as a runner cold sample is the mean of its launches: on the
    H200 at 2^18 (session 26) the median of such launches read 2.94 us and their mean 3.01 us,
    and launched after a host sync instead (the GPU idle before the launch) 2.88 us and 2.93 us."""
    sink = []
    for _ in range(3):
        launch()
    torch.cuda.synchronize()
    on = torch.cuda.stream(torch.cuda.ExternalStream(stream)) if stream else nullcontext()

    def work():
        for _ in range(PROFILED_LAUNCHES):
            with on:
                sink.append(flush.sum())
            launch()

    return profiled_mean(torch, work, name_part, PROFILED_LAUNCHES)


def profiled_mean(torch, work, name_part: str, launches: int) -> float:
    """Mean duration (us) of the kernels named like `name_part` that `work()` queues (there
    must be `launches` of them), from torch.profiler's CUPTI records."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        work()
        torch.cuda.synchronize()
    found = [
        e.time_range.elapsed_us()
        for e in prof.events()
        if name_part in e.name and e.device_type.name == "CUDA"
    ]
    if len(found) != launches:
        raise RuntimeError(
            f"torch.profiler recorded {len(found)} kernels named like {name_part!r} for "
            f"{launches} launches"
        )
    return statistics.fmean(found)


def add_workload(sizes: list[int], label: str = "fidelity-add"):
    """torch.add of two float32 vectors of 2^k elements for k in `sizes`, as a runner.bench
    workload, and a second callable doing the same (the A/A's other side)."""
    import torch

    from runner import bench

    class Add(bench.Workload):
        name, version = label, 1
        rows = tuple(bench.Row(f"n{k}", n=1 << k) for k in sizes)
        dtypes = ("float32",)

        def gen_inputs(self, params, dtype, seed):
            g = torch.Generator(device="cuda").manual_seed(seed)
            return tuple(
                torch.rand(params["n"], generator=g, device="cuda", dtype=torch.float32)
                for _ in range(2)
            )

        def reference(self, a, b):
            return (a.double() + b.double()).float()

    def again(a, b):
        return torch.add(a, b)

    return Add(), again


def torch_side(sizes: list[int]) -> list[dict]:
    import torch
    import triton.testing

    from runner import bench

    add, again = add_workload(sizes)

    rows = []
    for case in bench.cases(add):
        n = case.params["n"]
        row = {"log2n": n.bit_length() - 1}
        for label, mode, timer in (
            ("cold_cupti", "cold", "cupti"),
            ("cold_events", "cold", "events"),
            ("hot_events", "hot", "events"),
        ):
            # the A/A rows get the samples they need (a short cold call spreads by +-10%, see
            # fidelity_ptx.COLD_SAMPLES: 16 s gave 1146 samples a side at 2^14, a standard error of
            # the gap of about 0.13%); cold by events is only a figure here
            budget = {"cold_cupti": 16.0, "cold_events": 1.0, "hot_events": 3.0}[label]
            if label == "cold_cupti" and row["log2n"] <= SMALL_LOG2N:
                budget = 40.0
            options = bench.TimingOptions(mode=mode, timer=timer, budget_s=budget, max_samples=8000)
            session = bench.Session(options=options)
            c = bench.Runner(torch.add, case, options=options, session=session).compare(
                {"again": again}
            )
            base, aa = c.rows["add"], c.document_case["implementations"]["again"]["gap"]
            row[f"{label}_us"] = base.median_s * 1e6
            row[f"{label}_aa"] = [aa["ratio_of_medians"], aa["ci_low"], aa["ci_high"]]
            impls = c.document_case["implementations"]
            row[f"{label}_samples"] = [impls[k]["timing"]["samples_s"] for k in ("add", "again")]
            say(f"torch 2^{row['log2n']} {label}: {row[f'{label}_us']:.3f} us, A/A {aa}")
        a, b = case.inputs
        row["do_bench_us"] = triton.testing.do_bench(lambda a=a, b=b: a + b) * 1e3
        row["do_bench_cudagraph_us"] = (
            triton.testing.do_bench_cudagraph(lambda a=a, b=b: a + b) * 1e3
        )
        case.release()
        rows.append(row)
    return rows


def torch_profiler(sizes: list[int]) -> dict:
    """torch.profiler's durations of torch.add (its own process: one CUPTI subscriber each)."""
    import torch

    flush = l2_flush_tensor(torch)
    out = {}
    for log2n in sizes:
        a, b = (torch.rand(1 << log2n, device="cuda") for _ in range(2))
        out[log2n] = profiler_durations(
            torch, lambda a=a, b=b: torch.add(a, b), flush, TORCH_KERNEL
        )
    return out


def torch_target(log2n: int) -> None:
    import torch

    a, b = (torch.rand(1 << log2n, device="cuda") for _ in range(2))
    for _ in range(NCU_LAUNCHES):
        torch.add(a, b)
    torch.cuda.synchronize()
