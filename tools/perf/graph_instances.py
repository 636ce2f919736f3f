"""Benchmark (not a test): do instances of the same CUDA graph run at offsets of their own?

On the GPU box, for torch.add at n = 2^10, 2^14, 2^20 it captures GRAPHS graphs of CALLS calls
each, three ways (one memory pool shared by all, a pool per graph, and `out=` one fixed
tensor), replays them in rotated rounds and prints, per way and repeat, the spread of the
graphs' medians ("between-graph sd") against one graph's own standard error ("within se").
A between-graph spread well above the within-graph error is an offset that stays with the
instance: what runner.bench's INSTANCES rotation averages out (runner/bench/cuda_device.py).

    python tools/perf/graph_instances.py [--sizes 10,14,20]

(--sizes 21,22,23: around the L2's size, where a call's hits depend on where its buffers sit.)
"""

from __future__ import annotations

import statistics
import sys

GRAPHS, ROUNDS, REPLAYS, CALLS = 12, 40, 20, 100
SIZES = (10, 14, 20)


def capture(torch, stream, fn, pool):
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, pool=pool, stream=stream):
        for _ in range(CALLS):
            fn()
    return graph


WAYS = ("shared pool", "own pools", "out= fixed")


def made(torch, stream, way: str, a, b, c) -> list:
    """GRAPHS captures of torch.add(a, b), the `way` WAYS names."""
    pool = torch.cuda.graph_pool_handle() if way == "shared pool" else None
    if way == "out= fixed":
        return [capture(torch, stream, lambda: torch.add(a, b, out=c), None) for _ in range(GRAPHS)]
    return [capture(torch, stream, lambda: torch.add(a, b), pool) for _ in range(GRAPHS)]


def spread(torch, stream, graphs) -> tuple[float, float, float, float, float]:
    """(mean us per call, between-graph sd, median within-graph se, the lowest and the highest
    graph median over their mean), all but the first relative."""
    times = [[] for _ in graphs]
    start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
    for r in range(ROUNDS):
        order = list(range(len(graphs)))
        order = order[r % len(graphs) :] + order[: r % len(graphs)]
        for i in order:
            with torch.cuda.stream(stream):
                start.record()
                for _ in range(REPLAYS):
                    graphs[i].replay()
                end.record()
            end.synchronize()
            times[i].append(start.elapsed_time(end) * 1e3 / (REPLAYS * CALLS))
    kept = [t[3:] for t in times]  # the first rounds warm up
    medians = [statistics.median(t) for t in kept]
    mean = statistics.fmean(medians)
    within = statistics.median(1.2533 * statistics.stdev(t) / len(t) ** 0.5 / mean for t in kept)
    ratios = [m / mean for m in medians]
    return mean, statistics.stdev(ratios), within, min(ratios), max(ratios)


def main() -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes", default=",".join(map(str, SIZES)), help="log2 n, comma-separated"
    )
    sizes = [int(k) for k in parser.parse_args().sizes.split(",")]
    import torch

    torch.cuda.init()
    stream = torch.cuda.Stream()
    for k in sizes:
        a, b = (torch.rand(1 << k, device="cuda") for _ in range(2))
        c = torch.empty_like(a)
        torch.cuda.synchronize()
        for name in WAYS:
            for repeat in range(2):
                graphs = made(torch, stream, name, a, b, c)
                torch.cuda.synchronize()
                mean, between, within, lo, hi = spread(torch, stream, graphs)
                print(
                    f"2^{k} {name:12s} #{repeat}: {mean:.4f} us/call; between-graph sd "
                    f"{between * 100:.3f}%  within se {within * 100:.3f}%  range {lo:.4f}..{hi:.4f}",
                    flush=True,
                )
                del graphs
                torch.cuda.synchronize()
        print(f"graph_instances: 2^{k} done", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
