"""What the dashboard marks: change points and drift on the charts, and the open alerts on top.

`findings(store)` runs the same rules as the command line over the whole history:
- marks: every step and drift of every series (harness.analysis.change_review, as `harness changes`
  lists them), per case, at the first run after the change (a drift: across its window);
- alerts: what `harness regressions` would alert on now (each mark and alert names the timing
  mode of its series, so a hot and a cold alert of one case and implementation differ): the newest point of a current series
  beyond max(5%, 3 x MAD) (harness.analysis.regressions), and the steps among the newest Policy.window
  stable points and the drifts of current series. Unstable points take part in neither.
Runs are given as indices into store.runs() (oldest first); harness.dashboard.build maps them
onto the runs it draws.

Alerts are shown as events (`events()`): the per-series alerts of one change (one GPU model and
mode, one direction, overlapping commit ranges) are one event listing the series it covers, a
change of times with no gap change ("the baseline moved, the gap did not") an event apart from a
gap change. Grouping is separate from the per-series rule that raises each alert. The same
shared shift on a case's chart is named once by `moved_together()`.
"""

from __future__ import annotations

import statistics

import numpy as np

from harness.analysis.change_review import ChangeFinding, find_changes, review_changes
from harness.analysis.regressions import READ_FIELDS, Policy, current_series, review
from harness.dashboard.case_charts import EVERY_WINDOW, NUMBERS, Series
from harness.history import cards
from harness.history.store import BOOL_FIELDS, RECENT_LOOKBACK, SeriesValues, Store, run_info
from protocol.points import split_id

__all__ = [
    "EVENT_RUNS",
    "WINDOW_RUNS",
    "between_cards",
    "events",
    "findings",
    "moved_together",
    "recent",
]

WINDOW_RUNS = 3  # change points of one shift may land a run or two (of its mode) apart
# Alerts of one event: change ranges this many runs of the mode apart at most. Wider than
# WINDOW_RUNS: next to a disturbed run (a throttled one) some series place the step a few runs off.
EVENT_RUNS = 6
# A sweep point's series is searched over its newest POINT_TAIL points only: its marks are drawn
# nowhere (a case's charts are its headline point's), so only its open alerts count, and those
# are among its newest points; a swept suite has several times more point series than cases.
POINT_TAIL = 100


def _mark(f: ChangeFinding, run_index: dict[str, int], info: dict) -> dict:
    return {
        "impl": f.impl,
        "mode": info.get("mode"),
        "gpu": info.get("gpu"),
        "metric": f.metric,
        "kind": f.kind,
        "run": run_index[f.to_run_id],
        "from": run_index.get(f.from_run_id, -1) if f.from_run_id else -1,
        "relative": round(f.relative, 5),
        "p": float(f"{f.p_value:.2g}"),
        "before": float(f"{f.before:.6g}"),
        "after": float(f"{f.after:.6g}"),
    }


def _alert(case_id, info, metric, kind, relative, runs: tuple[int, int], text) -> dict:
    """One series' alert; runs: (from, to), the change's commit range as run indices."""
    return {
        "case": case_id,
        "impl": info.get("impl"),
        "mode": info.get("mode"),
        "gpu": info.get("gpu"),
        "metric": metric,
        "kind": kind,
        "relative": round(relative, 5),
        "direction": "slower" if relative > 0 else "faster",
        "from": runs[0],
        "run": runs[1],
        "text": text,
    }


def between_cards(all_series: list[Series]) -> dict[str, float]:
    """{GPU model: its between-card SD} (harness.history.cards.by_model) from the series the
    dashboard has read, without reading every point again."""
    by_gpu: dict[str, list[tuple]] = {}
    for k, s in enumerate(all_series):
        if s.info["role"] != "candidate":
            continue
        kept = (s.gap > 0) & s.gpu_uuid.astype(bool)
        if kept.any():
            parts = (np.full(int(kept.sum()), k), s.gpu_uuid[kept], s.gap[kept])
            by_gpu.setdefault(s.info["gpu"], []).append((*parts, s.ci_low[kept], s.ci_high[kept]))
    out = {}
    for gpu, parts in sorted(by_gpu.items()):
        series, uuid, gap, low, high = (
            np.concatenate(column) for column in zip(*parts, strict=True)
        )
        log_se = cards.log_standard_errors(low, high)
        out[gpu] = cards.estimate_arrays(series, uuid, np.log(gap), log_se).sd
    return out


def findings(
    store: Store,
    policy: Policy | None = None,
    values_of: dict[str, SeriesValues] | None = None,
    between: dict[str, float] | None = None,
    every_of: dict[str, dict[str, np.ndarray]] | None = None,
    runs: list[dict] | None = None,
) -> tuple[list[dict], dict[str, list]]:
    """(open alerts, {case_id: [mark, ...]}) for the history in `store`; slower alerts first.
    values_of: every series' points (series_values(), or as the dashboard read them), when the
    caller has them already: the search then reads no points. between: the between-card SD
    per GPU model (between_cards()), when the caller has it. every_of: each series' columns
    as the dashboard read them (Series.every): the regression review then reads no points.
    runs: store.runs(), when the caller has read them."""
    policy = policy or Policy()
    runs = store.runs() if runs is None else runs
    run_index = {r["run_id"]: i for i, r in enumerate(runs)}
    series = store.list_series()
    info_of = {s["series_id"]: s for s in series}  # each alert and mark names its mode and GPU
    between = cards.by_model(store) if between is None else between
    changes = _changes(store, series, values_of, between)
    marks: dict[str, list] = {}
    for f in changes:
        marks.setdefault(f.case_id, []).append(_mark(f, run_index, info_of.get(f.series_id, {})))
    current = current_series(series)
    points_of = _recent_points(store, runs, current, policy, every_of)
    alerts = _newest_point_alerts(review(current, points_of, policy, between), run_index, info_of)
    current_ids = {s["series_id"] for s in current}
    alerts += _change_alerts(changes, current_ids, policy.window, run_index, info_of)
    alerts.sort(
        key=lambda a: (
            a["direction"] != "slower",
            a["case"],
            a["impl"],
            a["mode"] or "",
            a["metric"],
        )
    )
    return alerts, marks


def _changes(store: Store, series: list[dict], values_of, between: dict[str, float]) -> list:
    """The change-point search's findings: from the points already read where `values_of`
    holds them, else read from the store."""
    if values_of is None:
        return find_changes(store, series)
    return review_changes(
        series,
        _point_tails(series, values_of),
        lambda runs: run_info(store, runs),
        cards_of=store.cards_of,
        between_cards=between,
    )


def _recent_points(store: Store, runs: list[dict], current: list[dict], policy, every_of) -> dict:
    """{series_id: its newest policy.window points} for each current series."""
    if every_of is None or policy.window > EVERY_WINDOW:  # Series.every holds too few
        return {s["series_id"]: store.recent(s["series_id"], policy.window) for s in current}
    by_id = {r["run_id"]: r for r in runs}
    return {s["series_id"]: recent(every_of[s["series_id"]], by_id, policy.window) for s in current}


def _newest_point_alerts(reviewed, run_index: dict[str, int], info_of: dict) -> list[dict]:
    """An alert for each current series whose newest point the regression review flags."""
    alerts = []
    for f in reviewed:
        if f.alert:
            run = run_index[f.run_id]
            alerts.append(
                _alert(
                    f.case_id,
                    info_of[f.series_id],
                    f.metric,
                    "newest point",
                    f.relative,
                    (run - 1, run),
                    f"newest point {f.relative * 100:+.1f}% against the median of {f.history} "
                    f"(threshold ±{f.threshold * 100:.1f}%)" + (f"; {f.note}" if f.note else ""),
                )
            )
    return alerts


def _change_alerts(
    changes: list, current_ids: set[str], window: int, run_index: dict[str, int], info_of: dict
) -> list[dict]:
    """An alert for each change found in a current series within the last `window` points."""
    alerts = []
    for f in changes:
        if f.series_id in current_ids and f.age <= window:
            what = "step" if f.kind == "step" else f"drift over {f.points_after} points"
            to = run_index[f.to_run_id]
            alerts.append(
                _alert(
                    f.case_id,
                    info_of[f.series_id],
                    f.metric,
                    f.kind,
                    f.relative,
                    (run_index.get(f.from_run_id, to - 1) if f.from_run_id else to - 1, to),
                    f"{what} {f.relative * 100:+.1f}% (p {f.p_value:.1e}) after commit "
                    f"{(f.from_commit or '-')[:12]} up to {(f.to_commit or '-')[:12]}",
                )
            )
    return alerts


def recent(every: dict[str, np.ndarray], runs: dict[str, dict], window: int) -> list[dict]:
    """Store.recent(series, window) from a series' columns as read (Series.every; `runs`:
    run_id -> its store.runs() row): the same points, each with what the review reads of one
    (regressions.READ_FIELDS), so the review of every current series costs no query of its
    own (one each was most of a swept history's build)."""
    n = len(every["run"])
    if not n:
        return []
    first = max(0, n - RECENT_LOOKBACK * window - 1)
    keep = {n - 1}
    for flag in BOOL_FIELDS:
        keep.update((np.flatnonzero(every[flag][first : n - 1] == 1) + first)[-window:].tolist())
    at = np.array(sorted(keep))
    run_ids = every["run_id"][at].tolist()
    columns = {"run_id": run_ids}
    columns["started_utc"] = [runs[r]["started_utc"] for r in run_ids]
    columns["commit_sha"] = [runs[r]["commit_sha"] for r in run_ids]
    for name in READ_FIELDS:
        if name in columns:
            continue
        values = every[name][at].tolist()
        if name in NUMBERS:
            values = [None if v != v else v for v in values]  # NaN: NULL
        if name in BOOL_FIELDS:
            values = [None if v is None else bool(v) for v in values]
        columns[name] = values
    return [dict(zip(columns, row, strict=True)) for row in zip(*columns.values(), strict=True)]


def _point_tails(series: list[dict], values_of: dict[str, SeriesValues]) -> dict:
    """values_of with each sweep point's series cut to its newest POINT_TAIL points."""
    out = dict(values_of)
    for s in series:
        v = values_of.get(s["series_id"])
        if v is not None and split_id(s["case_id"])[1] and len(v.run) > POINT_TAIL:
            out[s["series_id"]] = SeriesValues(
                *(
                    column[-POINT_TAIL:]
                    for column in (v.run, v.median_s, v.stable, v.gap, v.gap_stable)
                )
            )
    return out


def events(alerts: list[dict], place: dict[int, int] | None = None) -> list[dict]:
    """The alerts as change events, in the order a compiler team acts on them: gap events
    before "baseline moved" ones, then by size, then newest first.

    Within one series a step stands for the newest point and the drifts it explains (folded
    into it). Series of one GPU model, mode and direction whose changes' commit ranges
    overlap (within EVENT_RUNS runs of the mode: `place`, run index -> its place among its
    mode's runs; the run index itself without it) are one change; its series of cases with a
    gap alert make one event ("gap"), the others one apart ("baseline": times moved, the gaps
    did not). An event: {kind, gpu, mode, direction, relative (the median of its lead metric's
    changes), from, run, cases, points, metrics, series: [alert, ...], text}.
    """
    place = place if place is not None else {}

    def at(run: int) -> int:
        return place.get(run, run)

    kept = _fold_within_series(alerts)
    groups: dict[tuple, list[list[dict]]] = {}
    for a in sorted(kept, key=lambda a: (at(a["from"]), at(a["run"]))):
        clusters = groups.setdefault((a["gpu"], a["mode"], a["direction"]), [])
        last = clusters[-1] if clusters else None
        if last and at(a["from"]) <= max(at(b["run"]) for b in last) + EVENT_RUNS:
            last.append(a)
        else:
            clusters.append([a])
    out = []
    for clusters in groups.values():
        for cluster in clusters:
            moved = {split_id(a["case"])[0] for a in cluster if a["metric"] == "gap"}
            gap = [a for a in cluster if split_id(a["case"])[0] in moved]
            rest = [a for a in cluster if split_id(a["case"])[0] not in moved]
            out.extend(
                _event(kind, part) for kind, part in (("gap", gap), ("baseline", rest)) if part
            )
    return sorted(out, key=lambda e: (e["kind"] != "gap", -abs(e["relative"]), -e["run"]))


def _fold_within_series(alerts: list[dict]) -> list[dict]:
    """A series' alerts less those its step explains: its newest point, and a drift whose
    window holds the step (the drift straddles it and overstates it). The step names them."""
    steps: dict[tuple, list[dict]] = {}
    for a in alerts:
        if a["kind"] == "step":
            steps.setdefault(_series_of(a), []).append(a)
    out = []
    for a in alerts:
        own = [s for s in steps.get(_series_of(a), []) if s["direction"] == a["direction"]]
        if a["kind"] == "newest point" and own:
            own[-1].setdefault("folded", []).append("newest point")
        elif a["kind"] == "drift" and any(a["from"] <= s["run"] <= a["run"] for s in own):
            next(s for s in own if a["from"] <= s["run"] <= a["run"]).setdefault(
                "folded", []
            ).append(a["text"].split(" (p ")[0])
        else:
            out.append(a)
    return out


def _series_of(a: dict) -> tuple:
    return (a["gpu"], a["mode"], a["case"], a["impl"], a["metric"])


def _event(kind: str, part: list[dict]) -> dict:
    lead = [a for a in part if a["metric"] == "gap"] if kind == "gap" else part
    share = statistics.median(a["relative"] for a in lead)
    cases = sorted({split_id(a["case"])[0] for a in part})
    points = sorted({a["case"] for a in part if split_id(a["case"])[1]})
    metrics = sorted({a["metric"] for a in part})
    first, a0 = min(a["from"] for a in part), part[0]
    size = f"{share * 100:+.1f}%"
    what = (
        f"gap {size} ({a0['direction']})"
        if kind == "gap"
        else f"times {size}: the baseline moved, the gap did not"
    )
    return {
        "kind": kind,
        "gpu": a0["gpu"],
        "mode": a0["mode"],
        "direction": a0["direction"],
        "relative": round(share, 5),
        "from": first,
        "run": max(a["run"] for a in part),
        "cases": cases,
        "points": len(points),
        "metrics": metrics,
        # its lead metric's series first (a gap event: the gaps), then by size
        "series": sorted(part, key=lambda a: (a not in lead, -abs(a["relative"]), a["case"])),
        "text": f"{what}: {len(part)} series of {len(cases)} case"
        + ("" if len(cases) == 1 else "s"),
    }


def moved_together(marks: list[dict], impls_of_mode: dict[str, set[str]]) -> list[dict]:
    """A case's steps that every series of it took together: {mode, run, relative, impls,
    text}, oldest first. A driver update or clock change makes every implementation of a case
    slower by one share; each series then has its own step mark, and without a word a reader
    sees a regression on every chart. A step of the times of every implementation of a case in
    one mode, one way, within WINDOW_RUNS runs of one another, with no gap step near it, is
    named once: "every series moved together (+2.0%): the baseline moved, the gap did not".

    marks: the case's change marks (_mark: impl, mode, metric, kind, run, relative; runs as
    indices into store.runs()); impls_of_mode: mode -> the implementations the case has in it
    (at least two are needed for 'together' to mean anything).
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
