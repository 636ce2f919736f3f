"""What changed in the code across a change point: the counters (harness.history.counters) that
differ between the last stable point before a step and the first after it, and the compiler
identity on each side. A step in time with no counter change and one compiler points at the
machine or the inputs; one with changed counters names the code change that likely caused it.
"""

from __future__ import annotations

import dataclasses

from harness.analysis.change_review import ChangeFinding
from harness.analysis.counter_diff import differences
from harness.history.counter_series import compilers_at, counters_at, run_rowids
from harness.history.series import describe_compiler
from harness.history.store import Store

__all__ = ["annotate"]


def annotate(store: Store, findings: list[ChangeFinding]) -> list[ChangeFinding]:
    """Each step with `counters` (CounterChange list, most telling first) and `compiler_before`
    and `compiler_after` filled in; drifts are left as they are (no one point to compare)."""
    rowids = run_rowids(
        store, {f.to_run_id for f in findings} | {f.from_run_id for f in findings if f.from_run_id}
    )
    out = []
    for f in findings:
        if f.kind != "step" or f.from_run_id not in rowids or f.to_run_id not in rowids:
            out.append(f)
            continue
        a, b = rowids[f.from_run_id], rowids[f.to_run_id]
        found = counters_at(store, f.series_id, {a, b})
        compilers = compilers_at(store, f.series_id, {a, b})
        before = found[a].all if a in found else {}
        after = found[b].all if b in found else {}
        out.append(
            dataclasses.replace(
                f,
                counters=tuple(differences(before, after)) if before and after else (),
                counters_recorded=bool(before and after),
                compiler_before=describe_compiler(*compilers.get(a, (None, None, None))),
                compiler_after=describe_compiler(*compilers.get(b, (None, None, None))),
            )
        )
    return out
