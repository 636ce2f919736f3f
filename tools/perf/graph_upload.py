"""Benchmark (not a test): what a graph instance's first launch costs a hot sample, before and
after runner.bench uploads every instance (and replays it once) untimed.

torch's CUDAGraph.instantiate does not call cuGraphUpload, so without it the first launch of
each of the 16 instances of a hot graph uploads inside a timed sample; the cost grows with the
graph's nodes. On the GPU box this times a 100-call torch composite (100 small kernels a call,
so a 100-call graph holds 10,000 nodes) against itself, hot, by events, with
CallableBackend.upload_graphs off ("before") and on ("after"), and prints per setting and
repeat: the median per call, the A/A ratio with its interval, the in-run A/A control's ratio
(the op timed again as a hidden side, with graphs of its own), and for each side the mean of its
first INSTANCES samples over the median of the others (where the uploads land); then the
before/after summary (medians over the repeats) and the wall time, which must stay under 2
minutes on the H200 (three sides of 16 instances of a 10,000-node graph each comparison).

Before the fix, a hot comparison of this composite cannot complete: the host waits for an
instance's upload inside cuGraphLaunch while the runner's blocking kernel holds the stream
(the blocker's 10 s stall guard ends it). So the first launches are also timed directly, with
no blocker: INSTANCES fresh instances made as runner.bench makes them (graph_capture.
CapturedGraph), uploaded or not, each launched twice; per launch the host's time in the launch
call and the device time between events, the first launch against the second.

    python tools/perf/graph_upload.py [--upload both|on|off] [--repeats 3] [--log2n 14] [--first-only]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

CALLS = 100  # torch calls in one call of the composite


def composite_workload(log2n: int):
    """y = 3 x through CALLS kernels: 49 pairs of (x 2, x 0.5), then x 3, then + 0 (every step
    exact in float32, so the reference is exact)."""
    import torch

    from runner import bench

    class Composite(bench.Workload):
        name, version = "graph-upload-composite", 1
        rows = (bench.Row(f"n{log2n}", n=1 << log2n),)
        dtypes = ("float32",)

        def gen_inputs(self, params, dtype, seed):
            g = torch.Generator(device="cuda").manual_seed(seed)
            return (torch.rand(params["n"], generator=g, device="cuda") * 2 - 1,)

        def reference(self, x):
            return x * 3

        def bytes(self, params, dtype):
            return 8.0 * params["n"] * CALLS

    def composite(x):
        y = x
        for _ in range((CALLS - 2) // 2):
            y = torch.mul(torch.mul(y, 2.0), 0.5)
        return torch.add(torch.mul(y, 3.0), 0.0)

    def composite_again(x):
        return composite(x)

    (case,) = bench.cases(Composite())
    return case, composite, composite_again


def first_launches(device, upload: bool, log2n: int) -> dict:
    """Medians over INSTANCES fresh instances of the composite's CALLS-call graph: the host's
    time in the first and second launch call, and the device time of each (events around it)."""
    from runner.bench.cuda_device import INSTANCES
    from runner.bench.graph_capture import CapturedGraph

    torch = device.torch
    _, composite, _ = composite_workload(log2n)
    with torch.cuda.stream(device.torch_stream):
        x = torch.rand(1 << log2n, device="cuda")
    device.stream.synchronize()
    pool = torch.cuda.graph_pool_handle()
    rows = []
    for _ in range(INSTANCES):
        graph = CapturedGraph(device, lambda: composite(x), CALLS, False, pool, upload=upload)
        row = []
        with torch.cuda.stream(device.torch_stream):
            for _launch in range(2):
                start, end = (
                    torch.cuda.Event(enable_timing=True),
                    torch.cuda.Event(enable_timing=True),
                )
                start.record()
                t0 = time.perf_counter()
                graph.replay()
                host_ms = (time.perf_counter() - t0) * 1e3
                end.record()
                end.synchronize()
                row.append((host_ms, start.elapsed_time(end)))
        rows.append(row)
        graph.close()

    def for_all(launch: int, what: int) -> float:
        return statistics.median(r[launch][what] for r in rows)

    return {
        "host_first_ms": for_all(0, 0),
        "host_second_ms": for_all(1, 0),
        "device_first_ms": for_all(0, 1),
        "device_second_ms": for_all(1, 1),
    }


def print_first_launches(device, settings, log2n: int) -> None:
    from runner.bench.cuda_device import INSTANCES

    print(
        f"\nfirst launches, no blocker: medians over {INSTANCES} fresh instances of the "
        f"{CALLS}-call graph ({CALLS * CALLS} nodes)"
    )
    print(
        "| upload | host in 1st launch (ms) | host in 2nd (ms) | device 1st (ms) "
        "| device 2nd (ms) | device 1st / 2nd |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for upload in settings:
        r = first_launches(device, upload, log2n)
        label = "on (after)" if upload else "off (before)"
        print(
            f"| {label} | {r['host_first_ms']:.3f} | {r['host_second_ms']:.3f} | "
            f"{r['device_first_ms']:.3f} | {r['device_second_ms']:.3f} | "
            f"{r['device_first_ms'] / r['device_second_ms']:.3f} |",
            flush=True,
        )


def first_over_rest(samples: list[float], first: int) -> float:
    return statistics.fmean(samples[:first]) / statistics.median(samples[first:])


def run(device, upload: bool, log2n: int, budget_s: float) -> dict:
    """One A/A comparison of the composite on `device` (a runner.bench CudaDevice)."""
    from runner import bench
    from runner.bench import cuda_device

    cuda_device.CallableBackend.upload_graphs = upload
    case, a, b = composite_workload(log2n)
    options = bench.TimingOptions(mode="hot", timer="events", budget_s=budget_s, recheck=False)
    session = bench.Session(options=options, device=device)
    c = bench.Runner(a, case, name="composite", options=options, session=session).compare(
        {"again": b}
    )
    doc = c.document_case["implementations"]
    first = cuda_device.INSTANCES
    control = c.document_case.get("aa_control") or {}
    return {
        "control": control.get("ratio_of_medians", float("nan")),
        "median_us": doc["composite"]["timing"]["stats"]["median_s"] * 1e6,
        "gap": doc["again"]["gap"],
        "first_a": first_over_rest(doc["composite"]["timing"]["samples_s"], first),
        "first_b": first_over_rest(doc["again"]["timing"]["samples_s"], first),
        "samples": len(doc["composite"]["timing"]["samples_s"]),
        "prepare_s": c.document_case["phases_s"].get("prepare", 0.0),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upload", choices=("both", "on", "off"), default="both")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--log2n", type=int, default=14)
    parser.add_argument("--budget", type=float, default=1.0, help="seconds per comparison")
    parser.add_argument(
        "--first-only", action="store_true", help="only the first launches (no comparisons)"
    )
    args = parser.parse_args()
    from runner.bench.cuda_device import INSTANCES, CudaDevice

    settings = {"both": (False, True), "on": (True,), "off": (False,)}[args.upload]
    device = CudaDevice()
    print(
        f"{CALLS}-call torch composite, n = 2^{args.log2n} float32, hot, events; "
        f"first = mean of the first {INSTANCES} samples / median of the rest"
    )
    print(
        "| upload | repeat | samples | median (us/call) | A/A | 95% interval | control "
        "| first/rest A | first/rest B |"
    )
    print("| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: |")
    t0 = time.monotonic()
    found: dict[bool, list[dict]] = {u: [] for u in settings}
    for repeat in range(0 if args.first_only else args.repeats):
        for upload in settings:  # alternated, so a drift over the run hits both settings
            try:
                r = run(device, upload, args.log2n, args.budget)
            except Exception as exc:  # e.g. the host stalled behind the blocker: say so, go on
                reason = " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
                print(f"| {'on' if upload else 'off (before)'} | {repeat} | failed: {reason} |")
                continue
            found[upload].append(r)
            g = r["gap"] or {}
            print(
                f"| {'on' if upload else 'off (before)'} | {repeat} | {r['samples']} | "
                f"{r['median_us']:.2f} | x{g.get('ratio_of_medians', float('nan')):.4f} | "
                f"[{g.get('ci_low', float('nan')):.4f}, {g.get('ci_high', float('nan')):.4f}] | "
                f"x{r['control']:.4f} | {r['first_a']:.4f} | {r['first_b']:.4f} |",
                flush=True,
            )
    print_first_launches(device, settings, args.log2n)
    device.close()
    if not args.first_only:
        print_summary(found)
    print(f"wall: {time.monotonic() - t0:.1f} s (target: under 120 s)")
    return 0


def print_summary(found: dict[bool, list[dict]]) -> None:
    """Before (upload off) and after (on): medians over the repeats of |A/A - 1| and of the
    first samples' excess over the rest, both sides pooled."""
    print("\n| setting | A/A off 1 (median) | first/rest - 1 (median) |")
    print("| --- | ---: | ---: |")
    for upload, runs in found.items():
        label = "after (uploaded)" if upload else "before (not uploaded)"
        if not runs:
            print(f"| {label} | every comparison failed | - |")
            continue
        off = [abs((r["gap"] or {}).get("ratio_of_medians", float("nan")) - 1) for r in runs]
        first = [v - 1 for r in runs for v in (r["first_a"], r["first_b"])]
        print(f"| {label} | {statistics.median(off):.4%} | {statistics.median(first):+.4%} |")


if __name__ == "__main__":
    sys.exit(main())
