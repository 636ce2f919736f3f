"""Reads of the counters kept beside the timing series (harness.history.counters; store version 5).

`counter_points()` is one series' counters run by run, with each run's commit and compiler
identity; `counters_at()` the same for a few runs (what `harness changes` compares across a
change point); `counter_series()` turns them into one series per counter with its steps.
`static_changes()` is what the dashboard's counter panel reads for many series at once: only
the runs where a series' static counters changed (a counter set is stored once per distinct
analysis, so equal set ids are equal counters), and `counter_sets()` decodes those sets. A file
older than version 5, read before its migration, has no counters: every read is empty.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import orjson

from harness.history.counters import from_essentials, profiled, value
from harness.history.series import COMPILER_FIELDS
from harness.history.store import Store

__all__ = [
    "CounterPoint",
    "compilers_at",
    "counter_points",
    "counter_series",
    "counter_sets",
    "counters_at",
    "run_rowids",
    "static_changes",
]


@dataclass(frozen=True)
class CounterPoint:
    """One run's counters of one series: static and profiled maps {name: [value, unit]}."""

    run: int
    run_id: str
    commit: str | None
    started_utc: str
    compiler: tuple[str | None, str | None, str | None]  # COMPILER_FIELDS
    static: dict = field(default_factory=dict)
    profile: dict = field(default_factory=dict)
    all: dict = field(default_factory=dict)  # static and profile together


SELECT = (
    "SELECT c.run, r.run_id, r.commit_sha, r.started_utc, "
    + ", ".join(f"p.{f}" for f in COMPILER_FIELDS)
    + ", c.static, cs.essentials, c.profile FROM counters c JOIN runs r ON r.run = c.run "
    "JOIN points p ON p.series = c.series AND p.started_us = c.started_us AND p.run = c.run "
    "LEFT JOIN counter_sets cs ON cs.counter_set = c.static WHERE c.series = ?"
)


def _point(row: tuple, decoded: dict[int, dict]) -> CounterPoint:
    """A CounterPoint of a SELECT row; `decoded` caches each counter set's names (a series
    refers to a few sets, each many times)."""
    run, run_id, commit, started, *rest = row
    *compiler, set_id, essentials, profile = rest
    if set_id not in decoded:
        decoded[set_id] = from_essentials(essentials)
    static = decoded[set_id]
    profiled_ = orjson.loads(profile) if profile else {}
    return CounterPoint(
        run, run_id, commit, started, tuple(compiler), static, profiled_,
        {**static, **profiled_} if profiled_ else static,
    )  # fmt: skip


def _rowid(store: Store, series_id: str) -> int | None:
    if store._version < 5:
        return None
    found = store._series_rowids().get(series_id)
    if found is None:
        rows = store._query("SELECT series FROM series WHERE series_id = ?", (series_id,))
        found = rows[0][0] if rows else None
    return found


def counter_points(store: Store, series_id: str) -> list[CounterPoint]:
    """The series' runs that have counters, oldest first."""
    rowid = _rowid(store, series_id)
    if rowid is None:
        return []
    rows = store._query(SELECT + " ORDER BY c.started_us, c.run", (rowid,))
    decoded: dict[int, dict] = {}
    return [_point(r, decoded) for r in rows]


def counters_at(store: Store, series_id: str, runs: set[int]) -> dict[int, CounterPoint]:
    """{run rowid: its counters} for the `runs` of the series that have them."""
    rowid = _rowid(store, series_id)
    wanted = sorted(int(r) for r in runs)
    if rowid is None or not wanted:
        return {}
    sql = SELECT + f" AND c.run IN ({','.join('?' * len(wanted))})"
    decoded: dict[int, dict] = {}
    return {p.run: p for p in (_point(r, decoded) for r in store._query(sql, (rowid, *wanted)))}


def counter_series(store: Store, series_id: str) -> dict:
    """A timing series' counters, one series each, every run kept (the dashboard's panels read
    only the changes: static_changes): {"run_ids", "commits", "utc": the runs with counters, oldest first;
    "counters": {name: {"unit", "profiled", "values", "steps"}}}. `steps` are the positions
    whose value differs from the point before (static counters only: they carry no noise, so
    every difference is a step; profiled ones are drawn without steps). A run without the
    counter reads None (an instruction class a build lacks reads 0)."""
    points = counter_points(store, series_id)
    names = sorted({name for p in points for name in p.all})
    counters = {}
    for name in names:
        values = [value(p.all, name) for p in points]
        steps = []
        if not profiled(name):
            steps = [
                i
                for i in range(1, len(values))
                if values[i] != values[i - 1] and None not in (values[i], values[i - 1])
            ]
        counters[name] = {
            "unit": next(p.all[name][1] for p in points if name in p.all),
            "profiled": profiled(name),
            "values": values,
            "steps": steps,
        }
    return {
        "run_ids": [p.run_id for p in points],
        "commits": [p.commit for p in points],
        "utc": [p.started_utc for p in points],
        "counters": counters,
    }


def compilers_at(store: Store, series_id: str, runs: set[int]) -> dict[int, tuple]:
    """{run rowid: (toolchain, toolchain_version, compiler_sha256)} of the series' points in
    `runs` (all None in a version 1 file read before its migration)."""
    rowid = store._series_rowids().get(series_id)
    wanted = sorted(int(r) for r in runs)
    if rowid is None or not wanted or store._version < 2:
        return {r: (None, None, None) for r in wanted}
    sql = (
        f"SELECT run, {', '.join(COMPILER_FIELDS)} FROM points WHERE series = ? "
        f"AND run IN ({','.join('?' * len(wanted))})"
    )
    return {run: tuple(rest) for run, *rest in store._query(sql, (rowid, *wanted))}


def run_rowids(store: Store, run_ids: set[str]) -> dict[str, int]:
    """{run_id: run rowid} of the given run ids that the store holds."""
    wanted = sorted(run_ids)
    out: dict[str, int] = {}
    for start in range(0, len(wanted), 500):  # SQLite's limit on bound parameters
        chunk = wanted[start : start + 500]
        sql = f"SELECT run_id, run FROM runs WHERE run_id IN ({','.join('?' * len(chunk))})"
        out.update(dict(store._query(sql, tuple(chunk))))
    return out


def static_changes(store: Store, series_ids: list[str]) -> dict[str, list[tuple[str, int]]]:
    """{series_id: [(run_id, counter set), ...]}: each series' first run with static counters,
    every run whose set differs from the run before, and its newest run, oldest first (one
    scan of the counters table, no counter decoded)."""
    rowids = store._series_rowids() if store._version >= 5 else {}
    wanted = {rowids[s]: s for s in series_ids if s in rowids}
    out: dict[str, list[tuple[str, int]]] = {}
    if not wanted:
        return out
    keys = sorted(wanted)
    rows = []
    for start in range(0, len(keys), 500):  # SQLite's limit on bound parameters
        chunk = keys[start : start + 500]
        rows += store._query(
            "SELECT c.series, r.run_id, c.static FROM counters c JOIN runs r ON r.run = c.run "
            f"WHERE c.series IN ({','.join('?' * len(chunk))}) AND c.static IS NOT NULL "
            "ORDER BY c.series, c.started_us, c.run",
            tuple(chunk),
        )
    last: dict[int, tuple[str, int]] = {}
    for series, run_id, set_id in rows:
        kept = out.setdefault(wanted[series], [])
        if not kept or kept[-1][1] != set_id:
            if series in last and kept and last[series] != kept[-1]:
                kept.append(last[series])  # the run before the change
            kept.append((run_id, set_id))
        last[series] = (run_id, set_id)
    for series, sid in wanted.items():
        if series in last and out.get(sid) and out[sid][-1] != last[series]:
            out[sid].append(last[series])  # the newest run
    return out


def counter_sets(store: Store, set_ids: set[int]) -> dict[int, dict[str, list]]:
    """{counter set: its static counters {name: [value, unit]}} of the given sets."""
    wanted = sorted(set_ids)
    out: dict[int, dict[str, list]] = {}
    for start in range(0, len(wanted), 500):  # SQLite's limit on bound parameters
        chunk = wanted[start : start + 500]
        sql = (
            "SELECT counter_set, essentials FROM counter_sets "
            f"WHERE counter_set IN ({','.join('?' * len(chunk))})"
        )
        out.update({k: from_essentials(blob) for k, blob in store._query(sql, tuple(chunk))})
    return out
