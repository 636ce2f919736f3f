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
"""

from __future__ import annotations

import numpy as np

from harness.analysis.change_review import ChangeFinding, find_changes, review_changes
from harness.analysis.regressions import Policy, current_series, review
from harness.dashboard.case_charts import Series
from harness.history import cards
from harness.history.store import Store
from harness.history.store_values import SeriesValues, run_info

__all__ = ["between_cards", "findings"]


def _mark(f: ChangeFinding, run_index: dict[str, int], mode: str | None) -> dict:
    return {
        "impl": f.impl,
        "mode": mode,
        "metric": f.metric,
        "kind": f.kind,
        "run": run_index[f.to_run_id],
        "from": run_index.get(f.from_run_id, -1) if f.from_run_id else -1,
        "relative": round(f.relative, 5),
        "p": float(f"{f.p_value:.2g}"),
        "before": float(f"{f.before:.6g}"),
        "after": float(f"{f.after:.6g}"),
    }


def _alert(case_id, impl, mode, metric, kind, relative, run, text) -> dict:
    return {
        "case": case_id,
        "impl": impl,
        "mode": mode,
        "metric": metric,
        "kind": kind,
        "relative": round(relative, 5),
        "direction": "slower" if relative > 0 else "faster",
        "run": run,
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
) -> tuple[list[dict], dict[str, list]]:
    """(open alerts, {case_id: [mark, ...]}) for the history in `store`; slower alerts first.
    values_of: every series' points (series_values(), or as the dashboard read them), when the
    caller has them already: the search then reads no points. between: the between-card SD
    per GPU model (between_cards()), when the caller has it."""
    policy = policy or Policy()
    run_index = {r["run_id"]: i for i, r in enumerate(store.runs())}
    series = store.list_series()
    mode_of = {s["series_id"]: s["mode"] for s in series}  # each alert and mark names its mode
    between = cards.by_model(store) if between is None else between
    if values_of is None:
        changes = find_changes(store, series)
    else:
        changes = review_changes(
            series,
            values_of,
            lambda runs: run_info(store, runs),
            cards_of=store.cards_of,
            between_cards=between,
        )
    marks: dict[str, list] = {}
    for f in changes:
        marks.setdefault(f.case_id, []).append(_mark(f, run_index, mode_of.get(f.series_id)))
    current = current_series(series)
    current_ids = {s["series_id"] for s in current}
    points_of = {s["series_id"]: store.recent(s["series_id"], policy.window) for s in current}
    alerts = [
        _alert(
            f.case_id,
            f.impl,
            mode_of.get(f.series_id),
            f.metric,
            "newest point",
            f.relative,
            run_index[f.run_id],
            f"newest point {f.relative * 100:+.1f}% against the median of {f.history} "
            f"(threshold ±{f.threshold * 100:.1f}%)" + (f"; {f.note}" if f.note else ""),
        )
        for f in review(current, points_of, policy, between)
        if f.alert
    ]
    for f in changes:
        if f.series_id in current_ids and f.age <= policy.window:
            what = "step" if f.kind == "step" else f"drift over {f.points_after} points"
            alerts.append(
                _alert(
                    f.case_id,
                    f.impl,
                    mode_of.get(f.series_id),
                    f.metric,
                    f.kind,
                    f.relative,
                    run_index[f.to_run_id],
                    f"{what} {f.relative * 100:+.1f}% (p {f.p_value:.1e}) after commit "
                    f"{(f.from_commit or '-')[:12]} up to {(f.to_commit or '-')[:12]}",
                )
            )
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
