"""Hot mode for the Python API: rows of about the same speed share one batch.

The engine calibrates each implementation's batch on its own (runner.measurement.timing.hot),
from noisy first batches, so two identical callables can end with batches of 200 and 300 calls:
samples of different lengths, different graphs (a batch under `graph_calls` is one graph of
its own; 16 instances above it), and a per-sample overhead spread over different counts. An
A/A must be timed identically. After calibration, rows whose batches are within a factor of
SHARE of the largest of a group take the group's smallest batch (samples then last between
1/SHARE and 1 of the calibrated length; a row more than SHARE slower keeps its own). The
shared batch's graphs are warmed untimed, as the engine warms a calibrated one.
"""

from __future__ import annotations

import time

from runner.measurement.timing.hot import HotMode

__all__ = ["SHARE", "SharedBatchHot", "shared_batches"]

SHARE = 2.0


def shared_batches(batches: dict[str, int]) -> dict[str, int]:
    """Each row's batch after sharing: groups in descending order of batch, a group holding
    every row whose batch is at least its largest / SHARE, each row taking its group's
    smallest (already a whole number of graphs, as every calibrated batch is)."""
    out: dict[str, int] = {}
    ordered = sorted(batches, key=lambda n: -batches[n])
    while ordered:
        top = batches[ordered[0]]
        group = [n for n in ordered if batches[n] * SHARE >= top]
        smallest = min(batches[n] for n in group)
        out.update(dict.fromkeys(group, smallest))
        ordered = [n for n in ordered if n not in group]
    return out


class SharedBatchHot(HotMode):
    """HotMode whose calibrated batches are shared (see the module docstring)."""

    def prepare(self, backend, names, settings, timings):
        super().prepare(backend, names, settings, timings)
        shared = shared_batches({n: timings[n].batch for n in names})
        for n in names:
            if shared[n] == timings[n].batch:
                continue
            c0 = time.perf_counter()
            timings[n].batch = shared[n]
            backend.reset(n)
            backend.timed_batch(n, shared[n])  # untimed: warms the shared batch's graphs
            timings[n].calibration_s += time.perf_counter() - c0
