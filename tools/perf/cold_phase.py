"""Cold launches by their place in the launch sequence, and cold A/A by how sides are ordered.

    python tools/perf/cold_phase.py positions      (on a GPU box with nvcc and cupti-python)
    python tools/perf/cold_phase.py spread
    python tools/perf/cold_phase.py rounds
    python tools/perf/cold_phase.py loads interleaved|thue-morse

positions: fidelity.py's axpy at 2^10 and 2^18, one load, 400 CUPTI windows of 16 cold launches
each (reset, flush, launch, as the engine queues them): each position's mean against the mean.
spread: 16 loads of it, one launch of each a window in shuffled order, 580 windows: each load's
mean, and how far the means spread against their standard errors.
rounds: the engine's cold A/A by CUPTI (the runner's loads a side, 2000 samples) at 2^10 and 2^14
with the rounds in Thue-Morse order (the engine's) and in A B / B A repeated, with every launch's
time by its place G in the sequence of cold launches (G mod 8, and G // 16 mod 8).
loads: fidelity.py's cold runs of the PTX engine (fidelity_ptx.engine_run) at 2^14 and 2^18 with
the loads split between the sides in turn (A A' A A' ...) or as the runner splits them
(fidelity_ptx.side_loads). Run each in a fresh process.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import fidelity  # tools/perf, on the path above


def tmean(xs: list[float], cut: float = 0.1) -> float:
    xs = sorted(xs)
    k = int(len(xs) * cut)
    return statistics.fmean(xs[k : len(xs) - k])


def percent(values: list[float], mean: float) -> str:
    return "[" + " ".join(f"{(v / mean - 1) * 100:+.2f}" for v in values) + "]"


def positions(ptx: str, log2n: int, windows: int = 400, width: int = 16) -> None:
    from runner.measurement.gate.launch_audit import LaunchPlan
    from runner.measurement.timing import cupti
    from runner.measurement.timing.cold import cold_launch
    from runner.measurement.timing.cuda import CudaBackend

    zero_poison = LaunchPlan(poison=0, inputs_seed=0, audited=False)  # 0x00 bytes, as before

    axpy = fidelity.Axpy(ptx, 1 << log2n)
    window = cupti.ActivityWindow(int(axpy.ctx.handle), int(axpy.stream.handle))
    b = CudaBackend(
        axpy.stream, axpy.internal, {"X": axpy.items[0]}, axpy.resets, 1000, window=window
    )
    b.warmup("X", 10)
    by_position: list[list[float]] = [[] for _ in range(width)]
    for w in range(windows):
        seconds = b.cold_batch(
            "X", width, lambda: [cold_launch(b, "X", zero_poison) for _ in range(width)]
        )
        if w >= 10:  # the first windows warm up
            for p, s in enumerate(seconds):
                by_position[p].append(s)
    mean = tmean([s for p in by_position for s in p])
    print(
        f"positions 2^{log2n}: {mean * 1e6:.4f} us; by position %: "
        f"{percent([tmean(p) for p in by_position], mean)}",
        flush=True,
    )
    b.close()
    window.close()
    axpy.close()


def spread(ptx: str, log2n: int, loads: int = 16, windows: int = 600) -> None:
    """Each load's cold launches, one of each load a window in shuffled order: how far the
    loads' means spread, against their standard errors."""
    import random

    from runner.measurement.gate.launch_audit import LaunchPlan
    from runner.measurement.timing import cupti
    from runner.measurement.timing.base import CopyTurns
    from runner.measurement.timing.cold import cold_launch
    from runner.measurement.timing.cuda import CudaBackend

    zero_poison = LaunchPlan(poison=0, inputs_seed=0, audited=False)  # 0x00 bytes, as before

    axpy = fidelity.Axpy(ptx, 1 << log2n, modules=loads)
    window = cupti.ActivityWindow(int(axpy.ctx.handle), int(axpy.stream.handle))
    b = CudaBackend(
        axpy.stream, axpy.internal, {"X": axpy.items[0]}, axpy.resets, 1000, window=window
    )
    b.warmup("X", 10)
    by_load: list[list[float]] = [[] for _ in range(loads)]
    rng = random.Random(1)
    for w in range(windows):
        order = rng.sample(range(loads), loads)
        b.cold_items, b.turns = {"X": [axpy.items[i] for i in order]}, CopyTurns()
        seconds = b.cold_batch(
            "X", loads, lambda: [cold_launch(b, "X", zero_poison) for _ in range(loads)]
        )
        if w >= 20:  # the first windows warm up
            for i, s in zip(order, seconds, strict=True):
                by_load[i].append(s)
    means = [tmean(x) for x in by_load]
    mean = statistics.fmean(means)
    se = statistics.fmean(statistics.stdev(x) / len(x) ** 0.5 for x in by_load)
    print(
        f"spread 2^{log2n}: {mean * 1e6:.4f} us; loads %: {percent(means, mean)}; sd of the "
        f"loads' means {statistics.pstdev(means) / mean * 100:.3f}% against a standard error of "
        f"{se / mean * 100:.3f}%",
        flush=True,
    )
    b.close()
    window.close()
    axpy.close()


def rounds(ptx: str, log2n: int, repeated: bool, samples: int = 2000) -> None:
    from protocol import statistics as pstats
    from runner.execution.case import COLD_LOADS
    from runner.measurement.timing import TimingSettings, base, cupti, measure
    from runner.measurement.timing.cuda import CudaBackend

    axpy = fidelity.Axpy(ptx, 1 << log2n, modules=2 * COLD_LOADS)
    loads = fidelity.side_loads(axpy.items)  # as the runner splits them, in both orders
    thue_morse = base.round_order
    if repeated:  # the rounds only (sample_plan reads base.round_order)
        base.round_order = lambda names, r: list(names) if r % 2 == 0 else list(reversed(names))
    window = cupti.ActivityWindow(int(axpy.ctx.handle), int(axpy.stream.handle))
    items = {n: loads[n][0] for n in loads}
    b = CudaBackend(
        axpy.stream, axpy.internal, items, axpy.resets, 1000, window=window, cold_items=loads
    )
    placed, timed = [], []  # (G, name) of every cold launch; (G, name, seconds) of the sampled
    timed_cold, cold_batch = b.timed_cold, b.cold_batch

    def count(name):
        placed.append((len(placed), name))
        return timed_cold(name)

    def batch(name, n, launches):
        first = len(placed)
        seconds = cold_batch(name, n, launches)
        timed.extend((g, who, s) for (g, who), s in zip(placed[first:], seconds, strict=True))
        return seconds

    b.timed_cold, b.cold_batch = count, batch
    t0 = time.perf_counter()
    settings = TimingSettings(mode="cold", samples=samples, max_samples=samples, timer="cupti")
    m = measure(b, ["A", "A'"], settings)
    g = pstats.gap(m.impls["A"].samples_s, m.impls["A'"].samples_s)
    mean = tmean([s for _, _, s in timed])

    def by(key, k):
        return percent([tmean([s for gg, _, s in timed if key(gg) == i]) for i in range(k)], mean)

    label = "A B / B A repeated" if repeated else "Thue-Morse"
    print(
        f"rounds {label:18s} 2^{log2n} batch {m.impls['A'].batch} {time.perf_counter() - t0:.1f} s: "
        f"A'/A {g['ratio_of_medians']:.4f} [{g['ci_low']:.4f}, {g['ci_high']:.4f}]",
        flush=True,
    )
    print(
        f"   by G mod 8 %: {by(lambda x: x % 8, 8)}  by G // 16 mod 8 %: "
        f"{by(lambda x: (x // 16) % 8, 8)}",
        flush=True,
    )
    b.close()
    window.close()
    axpy.close()
    base.round_order = thue_morse


def loads(ptx: str, how: str) -> None:
    from fidelity_ptx import engine_run

    split = (lambda items: {"A": items[0::2], "A'": items[1::2]}) if how == "interleaved" else None
    for log2n in (14, 18):
        cells = []
        for timer in ("cupti", "events"):
            row = engine_run(ptx, log2n, "cold", timer, 20.0, split=split)
            a, b = row[f"cold_{timer}_samples"]
            q = len(a) // 4
            quarters = " ".join(
                f"{statistics.median(b[i * q : (i + 1) * q]) / statistics.median(a[i * q : (i + 1) * q]):.4f}"
                for i in range(4)
            )
            r, lo, hi = row[f"cold_{timer}_aa"]
            cells.append(f"cold_{timer} A/A {r:.4f} [{lo:.4f}, {hi:.4f}], quarters {quarters}")
        print(f"loads {how:11s} 2^{log2n}: " + " | ".join(cells), flush=True)


def main() -> int:
    part = sys.argv[1] if len(sys.argv) > 1 else ""
    if part in ("-h", "--help"):
        print(__doc__)
        return 0
    if part not in ("positions", "spread", "rounds", "loads"):
        print(__doc__, file=sys.stderr)
        return 2
    ptx = fidelity.device_ptx()
    if part in ("positions", "spread"):
        for log2n in (10, 18):
            (positions if part == "positions" else spread)(ptx, log2n)
    elif part == "rounds":
        for log2n in (10, 14):
            rounds(ptx, log2n, repeated=False)
            rounds(ptx, log2n, repeated=True)
    else:
        how = sys.argv[2] if len(sys.argv) > 2 else "thue-morse"
        if how not in ("interleaved", "thue-morse"):
            print(__doc__, file=sys.stderr)
            return 2
        loads(ptx, how)
    return 0


if __name__ == "__main__":
    sys.exit(main())
