"""The runner's statistics: the core (intervals, bootstrap, summaries) is protocol.statistics,
shared with the harness; here are what stays fixed within a run on the GPU (placement terms, the
systematic term a gap's interval adds) and the floor they set.
"""

from __future__ import annotations

import math

from protocol.statistics import MAX_SYSTEMATIC, z_of

__all__ = [
    "COLD_GRAPH_NODE_S",
    "COLD_PLACEMENT_S",
    "INSTANCE_SD",
    "TORCH_GRAPH_NODE_S",
    "floor_half_width",
    "systematic",
]

INSTANCE_SD = 3e-4
"""Relative standard uncertainty of a gap that stays fixed within a run, so that no resampling
of its rounds can see it: what one load of a module, its buffers and its graph instance take
from placement (hot A/A gaps: docs/method/intervals-and-headline.md, section 6). A gap's
interval adds it (see gap)."""


COLD_PLACEMENT_S = 5e-9
"""Standard uncertainty, in seconds, of a cold launch's time that stays fixed within a run: a
cold launch finds its code and arguments outside the L2 too, and where they sit (a module's
load, a graph instance's node) costs a few nanoseconds more or less for the life of the run
(cold A/A gaps: docs/method/intervals-and-headline.md, section 6). A cold gap's interval adds
it, relative to the baseline's median (systematic)."""


TORCH_GRAPH_NODE_S = 1.2e-9
"""Standard uncertainty, in seconds per call, of a hot figure replayed from torch CUDA graphs
that stays fixed within a run: each instance of a graph runs at an offset of its own, and
runner.bench's instances a side average most of it out, not all
(docs/method/intervals-and-headline.md, section 6). runner.bench's hot gaps add it, over the
baseline's median."""


COLD_GRAPH_NODE_S = 20e-9
"""The same for a cold launch of a torch CUDA graph node (runner.bench, a call whose copies the
case leaves out; docs/method/intervals-and-headline.md, section 6)."""


def systematic(mode: str, baseline_median_s: float | None, per_call_s: float = 0.0) -> float:
    """The relative standard uncertainty a gap's interval adds for what stays fixed within a
    run (protocol.statistics.gap's `systematic`): INSTANCE_SD, with, over the baseline's median and in
    quadrature, COLD_PLACEMENT_S in cold mode and `per_call_s` (runner.bench's graphs:
    TORCH_GRAPH_NODE_S hot, COLD_GRAPH_NODE_S cold); at most MAX_SYSTEMATIC / 2."""
    s = INSTANCE_SD
    if baseline_median_s and baseline_median_s > 0:
        cold = COLD_PLACEMENT_S if mode == "cold" else 0.0
        s = math.hypot(s, cold / baseline_median_s, per_call_s / baseline_median_s)
    return min(s, MAX_SYSTEMATIC / 2)


def floor_half_width(confidence: float = 0.95, systematic: float = INSTANCE_SD) -> float:
    """The narrowest relative half-width a gap's interval can have: its systematic term alone
    (INSTANCE_SD, the least any gap has)."""
    return z_of(confidence) * systematic
