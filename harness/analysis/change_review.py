"""Change points and drift of every history series, as findings with their commit range.

`review_changes()` applies harness.analysis.changes (steps) and harness.analysis.drift (trends) to each series'
metrics, as `harness regressions` does: a candidate's gap and absolute median time, a baseline's
absolute median time. Only stable points take part (an unstable or failed point is never a
change, never part of one, and so never alerts). A step says where it happened as a commit
range: from the last stable point before it (exclusive) to the first one after it (inclusive);
points in between that were unstable or failed are inside that range.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass

from harness.analysis import fail_on as failing
from harness.analysis.changes import ChangePolicy, steps
from harness.analysis.drift import DriftPolicy, drift
from harness.analysis.regressions import METRICS
from harness.history import cards
from harness.history.store import RunInfo, SeriesValues, Store, run_info, series_values

__all__ = ["ChangeFinding", "find_changes", "review_changes", "tripped"]

CARD_Z = 1.959963984540054  # the two-sided 95% normal quantile


@dataclass(frozen=True)
class ChangeFinding:
    """One step or drift of one metric of one series.

    kind: "step" (a change point) or "drift" (a trend over the newest points).
    before, after: for a step the medians of the levels either side; for a drift the fitted
    line's values at the window's first and newest point. relative = after / before - 1.
    p_value: Mann-Whitney U (step) or Kendall's tau (drift). points_before, points_after: stable
    points in the two levels (a drift: 0 and the window's size).
    from_*: the last stable point before the change (a drift: the window's first point);
    to_*: the first stable point after it (a drift: the newest point). The change happened in
    the commits after from_commit up to and including to_commit.
    age: stable points from the `to` point to the newest, both counted (1: it is the newest).
    """

    kind: str
    series_id: str
    label: str
    case_id: str
    impl: str
    role: str
    metric: str
    before: float
    after: float
    relative: float
    p_value: float
    points_before: int
    points_after: int
    from_run_id: str | None
    from_commit: str | None
    from_utc: str | None
    to_run_id: str
    to_commit: str | None
    to_utc: str
    age: int
    note: str = ""
    # filled in by harness.analysis.change_counters (a step only): the counters that differ
    # from the `from` point to the `to` point, and the compiler on each side
    counters: tuple = ()
    counters_recorded: bool = False
    compiler_before: str = ""
    compiler_after: str = ""

    @property
    def direction(self) -> str:
        return "slower" if self.relative > 0 else "faster"

    def to_dict(self) -> dict:
        out = {**asdict(self), "direction": self.direction}
        out["counters"] = [c.to_dict() for c in self.counters]
        return out


@dataclass(frozen=True)
class _Found:
    kind: str
    series: dict
    metric: str
    before: float
    after: float
    relative: float
    p_value: float
    points_before: int
    points_after: int
    from_run: int | None
    to_run: int
    age: int
    sides: tuple[tuple[int, ...], tuple[int, ...]] = ((), ())  # a step's runs before and after


def _detect(series: dict, values: SeriesValues, change: ChangePolicy, trend: DriftPolicy):
    metrics = ("gap", "time") if series["role"] == "candidate" else ("time",)
    for metric in metrics:
        positions, y = values.metric(*METRICS[metric])
        runs = values.run[positions]
        for s in steps(y, change) if y.size else []:
            yield _Found(
                "step",
                series,
                metric,
                s.before,
                s.after,
                s.relative,
                s.p_value,
                s.points_before,
                s.points_after,
                int(runs[s.index - 1]),
                int(runs[s.index]),
                int(y.size - s.index),
                (
                    tuple(runs[s.index - s.points_before : s.index].tolist()),
                    tuple(runs[s.index : s.index + s.points_after].tolist()),
                ),
            )
        d = drift(y, trend) if y.size else None
        if d is not None:
            yield _Found(
                "drift",
                series,
                metric,
                d.first,
                d.last,
                d.last / d.first - 1,
                d.p_value,
                0,
                d.points,
                int(runs[-d.points]),
                int(runs[-1]),
                1,
            )


def review_changes(
    series: list[dict],
    values_of: dict[str, SeriesValues],
    run_info: Callable[[set[int]], dict[int, RunInfo]],
    change: ChangePolicy | None = None,
    trend: DriftPolicy | None = None,
    cards_of: Callable[[str, set[int]], dict[int, str | None]] | None = None,
    between_cards: float | dict[str, float] = 0.0,
) -> list[ChangeFinding]:
    """Steps and drifts of every series in `series` (list_series() rows) whose values are in
    `values_of`; `run_info(rowids)` looks the named runs up. Ordered by case, impl, metric, date.
    With `cards_of(series_id, runs)` (each run's card UUID), a gap step whose two levels ran on
    different cards must also exceed what two cards differ by, 1.96 x sqrt(2) x
    `between_cards` (harness.history.cards; or its entry for the series' GPU model); a smaller one is
    left out as the card change itself."""
    change, trend = change or ChangePolicy(), trend or DriftPolicy()
    found = [
        f
        for s in series
        if s["series_id"] in values_of
        for f in _detect(s, values_of[s["series_id"]], change, trend)
    ]
    across: set[int] = set()  # ids of the findings whose levels ran on different cards
    if cards_of is not None:
        for f in found:
            if f.kind == "step" and f.metric == "gap":
                seen = cards_of(f.series["series_id"], set(f.sides[0]) | set(f.sides[1]))
                before = {seen.get(r) for r in f.sides[0]}
                after = {seen.get(r) for r in f.sides[1]}
                if None in before | after or before != after:
                    across.add(id(f))
        found = [
            f
            for f in found
            if id(f) not in across
            or abs(math.log1p(f.relative))
            > CARD_Z * math.sqrt(2) * cards.sd_for(between_cards, f.series.get("gpu"))
        ]
    info = run_info({f.to_run for f in found} | {f.from_run for f in found if f.from_run})
    out = []
    for f in found:
        a, b = info.get(f.from_run), info[f.to_run]
        note = ""
        if f.kind == "drift":
            note = f"{f.relative * 100:+.1f}% over the newest {f.points_after} stable points"
        elif f.series["role"] == "baseline":
            note = "the baseline's own time moved on an unchanged source: the machine, not the code"
        elif id(f) in across:
            sd = cards.sd_for(between_cards, f.series.get("gpu"))
            note = f"its two levels ran on different cards; beyond the between-card SD {sd:.2%}"
        out.append(
            ChangeFinding(
                kind=f.kind,
                series_id=f.series["series_id"],
                label=f.series["label"],
                case_id=f.series["case_id"],
                impl=f.series["impl"],
                role=f.series["role"],
                metric=f.metric,
                before=f.before,
                after=f.after,
                relative=f.relative,
                p_value=f.p_value,
                points_before=f.points_before,
                points_after=f.points_after,
                from_run_id=a.run_id if a else None,
                from_commit=a.commit if a else None,
                from_utc=a.started_utc if a else None,
                to_run_id=b.run_id,
                to_commit=b.commit,
                to_utc=b.started_utc,
                age=f.age,
                note=note,
            )
        )
    out.sort(key=lambda f: (f.case_id, f.impl, f.metric, f.to_utc, f.kind))
    return out


def find_changes(
    store: Store,
    series: list[dict],
    change: ChangePolicy | None = None,
    trend: DriftPolicy | None = None,
    last: int | None = None,
) -> list[ChangeFinding]:
    """Steps and drifts of `series` (list_series() rows) read from `store`; with `last`, only
    each series' newest `last` points are searched (enough for the newest changes)."""
    values = series_values(store, [s["series_id"] for s in series], last=last)
    return review_changes(
        series,
        values,
        lambda runs: run_info(store, runs),
        change,
        trend,
        lambda sid, runs: store.cards_of(sid, runs),
        cards.by_model(store),
    )


def tripped(findings: list[ChangeFinding], fail_on: str) -> list[ChangeFinding]:
    """The findings that make `--fail-on fail_on` exit 1 (harness.analysis.fail_on's words: a step or a
    drift is a slower or faster verdict on its metric)."""
    return [f for f in findings if failing.trips(fail_on, f.metric, f.direction)]
