"""Whole-history reads of the store for analysis over every point (change points, drift).

`Store.points()` builds a dict per point with every column, which is right for one series and
too slow for all of them (a 10,000-run history has about a million points). These reads take
only the columns asked for, for many series in one query, as numpy arrays (series_values: the
values that change detection reads; series_columns: any columns, as the dashboard draws them),
and look runs up only for the points a finding names. They go through the store's one read gate (`Store._query`), so
a missing file is an empty history and a corrupt one a StoreError, as everywhere else.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from harness.history.series import COMPILER_FIELDS
from harness.history.store import Store

__all__ = ["RunInfo", "SeriesValues", "run_info", "series_columns", "series_values"]

MISSING = -1.0  # stands for NULL in the numeric columns (values are > 0, flags 0 or 1)


@dataclass(frozen=True)
class SeriesValues:
    """One series' points, oldest first: run rowid, median_s, stable, gap, gap_stable (NaN and
    False where the point has none: a failed case, an unchecked candidate)."""

    run: np.ndarray
    median_s: np.ndarray
    stable: np.ndarray
    gap: np.ndarray
    gap_stable: np.ndarray

    def metric(self, value: str, flag: str) -> tuple[np.ndarray, np.ndarray]:
        """(positions, values) of the points whose `value` exists, is > 0 and whose `flag` is set."""
        values, flags = getattr(self, value), getattr(self, flag)
        keep = np.flatnonzero(flags & (values > 0))
        return keep, values[keep]


@dataclass(frozen=True)
class RunInfo:
    run_id: str
    commit: str | None
    started_utc: str


COLUMNS = (
    f"series, started_us, run, coalesce(median_s, {MISSING}), coalesce(gap, {MISSING}), "
    "coalesce(stable, 0) + 2 * coalesce(gap_stable, 0)"
)


def _values(part: np.ndarray) -> SeriesValues:
    flags = part[:, 5].astype(np.int64)
    return SeriesValues(
        run=part[:, 2].astype(np.int64),
        median_s=np.where(part[:, 3] == MISSING, np.nan, part[:, 3]),
        stable=(flags & 1) == 1,
        gap=np.where(part[:, 4] == MISSING, np.nan, part[:, 4]),
        gap_stable=(flags & 2) == 2,
    )


def series_values(
    store: Store, series_ids: list[str], last: int | None = None
) -> dict[str, SeriesValues]:
    """The points of every series in `series_ids` (unknown ids are left out); with `last`, only
    each one's newest `last` points (one indexed query per series)."""
    rowids = store._series_rowids()
    wanted = {rowids[s]: s for s in series_ids if s in rowids}
    if not wanted:
        return {}
    if last is not None:
        out = {}
        sql = f"SELECT {COLUMNS} FROM points WHERE series = ? ORDER BY started_us DESC, run DESC LIMIT ?"
        for rowid, sid in wanted.items():
            rows = store._query(sql, (rowid, last))
            if rows:
                out[sid] = _values(np.array(rows[::-1], dtype=np.float64))
        return out
    where, params = _only(wanted, rowids)  # and no ORDER BY: a numpy sort
    rows = store._query(f"SELECT {COLUMNS} FROM points {where}", params)
    if not rows:
        return {}
    table = np.array(rows, dtype=np.float64)
    table = table[np.lexsort((table[:, 2], table[:, 1], table[:, 0]))]
    edges = np.flatnonzero(np.diff(table[:, 0])) + 1
    out = {}
    for part in np.split(table, edges):
        sid = wanted.get(int(part[0, 0]))
        if sid is not None:
            out[sid] = _values(part)
    return out


def series_columns(
    store: Store, series_ids: list[str], text: tuple[str, ...], numbers: tuple[str, ...]
) -> dict[str, dict[str, np.ndarray]]:
    """Every point of each series in `series_ids` (unknown ids are left out), oldest first, as
    one array per column: "run" (the run's rowid) and "run_id" (str), then the `text` columns
    (object arrays, None where NULL) and the `numbers` columns (float64, NaN where NULL).
    Compiler columns of a version 1 file, read before its migration, are all None. One scan of
    the table, as series_values."""
    rowids = store._series_rowids()
    wanted = {rowids[s]: s for s in series_ids if s in rowids}
    if not wanted:
        return {}
    missing = (() if store._version >= 2 else COMPILER_FIELDS) + (
        () if store._version >= 4 else ("gpu_uuid",)
    )
    names = (*text, *numbers)
    where, params = _only(wanted, rowids)
    picked = ", ".join("NULL" if n in missing else n for n in names)
    rows = store._query(f"SELECT series, started_us, run, {picked} FROM points {where}", params)
    if not rows:
        return {}
    table = np.array(rows, dtype=object)  # faster than a zip into columns
    series, started, run = (table[:, k].astype(np.int64) for k in range(3))
    order = np.lexsort((run, started, series))
    table, run = table[order], run[order]
    run_ids = dict(store._query("SELECT run, run_id FROM runs"))
    columns = {"run": run, "run_id": np.array([run_ids[r] for r in run.tolist()], dtype=object)}
    for k, name in enumerate(names, start=3):
        columns[name] = table[:, k] if name in text else table[:, k].astype(np.float64)
    series = series[order]
    edges = [0, *(np.flatnonzero(np.diff(series)) + 1).tolist(), series.size]
    out = {}
    for start, stop in itertools.pairwise(edges):
        sid = wanted.get(int(series[start]))
        if sid is not None:
            out[sid] = {name: column[start:stop] for name, column in columns.items()}
    return out


def _only(wanted: dict[int, str], rowids: dict[str, int]) -> tuple[str, tuple]:
    """The WHERE clause that reads only the `wanted` series: for a few, through the index; for
    many, none (one sequential scan, then a numpy sort, is several times faster than walking the
    index, whose order sends every row to another page of a table holding the samples)."""
    if len(wanted) <= min(500, len(rowids) // 4):
        return f"WHERE series IN ({','.join('?' * len(wanted))})", tuple(wanted)
    return "", ()


def run_info(store: Store, runs) -> dict[int, RunInfo]:
    """run rowid -> (run_id, commit, started_utc) for the given rowids."""
    runs = sorted({int(r) for r in runs})
    out: dict[int, RunInfo] = {}
    for start in range(0, len(runs), 500):  # SQLite's limit on bound parameters
        chunk = runs[start : start + 500]
        sql = (
            "SELECT run, run_id, commit_sha, started_utc FROM runs "
            f"WHERE run IN ({','.join('?' * len(chunk))})"
        )
        for run, rid, commit, started in store._query(sql, tuple(chunk)):
            out[run] = RunInfo(rid, commit, started)
    return out
