"""Steps that every series of a case took together: the baseline moved, the gap did not.

A driver update or a clock change makes every implementation of a case slower by the same
share; each time series then has its own step mark, and without a word a reader sees a
regression on every chart. A step of the times of every implementation of a case in one mode,
all in one direction, within WINDOW_RUNS runs of one another, with no step of a gap of that
case and mode near it, is named once: "every series moved together (+2.0%): the baseline
moved, the gap did not".
"""

from __future__ import annotations

import statistics

__all__ = ["WINDOW_RUNS", "moved_together"]

WINDOW_RUNS = 3  # change points of one shift may land a run or two apart in different series


def moved_together(marks: list[dict], impls_of_mode: dict[str, set[str]]) -> list[dict]:
    """The case's shared steps: {mode, run, relative, impls, text}, oldest first.

    marks: the case's change marks (harness.dashboard.alerts: impl, mode, metric, kind, run,
    relative; runs as indices into store.runs()); impls_of_mode: mode -> the implementations
    the case has in it (at least two are needed for 'together' to mean anything).
    """
    notes = []
    for mode, impls in impls_of_mode.items():
        if len(impls) < 2:
            continue
        steps = sorted(
            (m for m in marks if m["mode"] == mode and m["kind"] == "step"), key=lambda m: m["run"]
        )
        gap_runs = [m["run"] for m in steps if m["metric"] == "gap"]
        for cluster in _clusters([m for m in steps if m["metric"] == "time"]):
            shares = [m["relative"] for m in cluster]
            one_way = all(r > 0 for r in shares) or all(r < 0 for r in shares)
            first, last = cluster[0]["run"], cluster[-1]["run"]
            near_gap = any(first - WINDOW_RUNS <= r <= last + WINDOW_RUNS for r in gap_runs)
            if {m["impl"] for m in cluster} >= impls and one_way and not near_gap:
                share = statistics.median(shares)
                notes.append(
                    {
                        "mode": mode,
                        "run": last,
                        "relative": round(share, 5),
                        "impls": sorted(impls),
                        "text": f"every series moved together ({share * 100:+.1f}%): "
                        "the baseline moved, the gap did not",
                    }
                )
    return sorted(notes, key=lambda n: n["run"])


def _clusters(steps: list[dict]) -> list[list[dict]]:
    """Time steps (by run) split where two are more than WINDOW_RUNS runs apart."""
    out: list[list[dict]] = []
    for m in steps:
        if out and m["run"] - out[-1][-1]["run"] <= WINDOW_RUNS:
            out[-1].append(m)
        else:
            out.append([m])
    return out
