"""Whole-history reads of the store for analysis over every point (change points, drift).

`Store.points()` builds a dict per point with every column, which is right for one series and
too slow for all of them (a 10,000-run history has about a million points). These reads take
only the value columns, for many series in one query, as numpy arrays, and look runs up only
for the points a finding names. They go through the store's one read gate (`Store._query`), so
a missing file is an empty history and a corrupt one a StoreError, as everywhere else.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.store import Store

__all__ = ["RunInfo", "SeriesValues", "run_info", "series_values"]

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
    where, params = "", ()
    if len(wanted) <= min(500, len(rowids) // 4):  # a few series: the index; else one scan
        where, params = f"WHERE series IN ({','.join('?' * len(wanted))})", tuple(wanted)
    # No ORDER BY: a sequential scan and a numpy sort are several times faster than walking the
    # index, whose order sends every row to another page of a table holding the samples.
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
