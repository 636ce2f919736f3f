"""Benchmark (not a test): how well `harness changes` finds steps and drifts, over many seeded
synthetic histories, next to the best a locator can do.

For each noise level (uniform, as a band of the given total width around the level) and each of
--seeds histories of 2 x --half points with a 3% step in the middle:
  found      the step was reported (a change point within +-10 points of it);
  within 2   a change point within +-2 points of it;
  extra      change points reported elsewhere (per history);
  oracle     the least-squares single split (knowing there is exactly one step) within +-2.
Then false steps per history on pure noise, steps added by three single outliers, and drifts of
0.5% per run over the newest 20 runs reported.

    python tools/perf/change_detection.py [--seeds 500] [--half 40]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from harness.analysis.changes import steps
from harness.analysis.drift import drift


def history(n, band, seed, step_at=None, step=0.0):
    rng = np.random.default_rng(seed)
    values = 1 + band / 2 * rng.uniform(-1, 1, n)
    if step_at is not None:
        values[step_at:] *= 1 + step
    return values


def oracle(values, at) -> bool:
    y = np.log(values)
    n = y.size
    c1, c2 = np.cumsum(y), np.cumsum(y**2)
    ks = np.arange(5, n - 4)
    left = c2[ks - 1] - c1[ks - 1] ** 2 / ks
    right = (c2[-1] - c2[ks - 1]) - (c1[-1] - c1[ks - 1]) ** 2 / (n - ks)
    return abs(int(ks[np.argmin(left + right)]) - at) <= 2


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=500)
    parser.add_argument("--half", type=int, default=40)
    args = parser.parse_args()
    n, at = 2 * args.half, args.half
    t0 = time.perf_counter()
    print(f"3% step at point {at} of {n}, {args.seeds} seeded histories per row")
    print("band  found   within 2  extra/history  oracle within 2")
    for band in (0.05, 0.10):
        found = near = extra = best = 0
        for seed in range(args.seeds):
            values = history(n, band, seed, at, 0.03)
            got = [s.index for s in steps(values)]
            found += any(abs(i - at) <= 10 for i in got)
            near += any(abs(i - at) <= 2 for i in got)
            extra += sum(abs(i - at) > 10 for i in got)
            best += oracle(values, at)
        s = args.seeds
        print(
            f"{band:>4.0%}  {found / s:6.1%}  {near / s:8.1%}  {extra / s:13.3f}  {best / s:15.1%}"
        )
    for band in (0.05, 0.10):
        false = sum(len(steps(history(n, band, 10_000 + s))) for s in range(args.seeds))
        added = 0
        for s in range(args.seeds):
            clean = history(n, band, 20_000 + s)
            spiked = clean.copy()
            spiked[[10, n // 2 - 3, n - 20]] *= [2.0, 1.5, 0.7]
            added += len(steps(spiked)) - len(steps(clean))
        drifts = 0
        for s in range(args.seeds):
            values = history(40, band, 30_000 + s)
            values[20:] *= 1.005 ** np.arange(1, 21)
            drifts += drift(values) is not None
        print(
            f"band {band:.0%}: false steps per history {false / args.seeds:.3f}; steps added by "
            f"3 outliers {added}; 0.5%/run drift over 20 runs reported {drifts / args.seeds:.1%}"
        )
    print(f"({time.perf_counter() - t0:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
