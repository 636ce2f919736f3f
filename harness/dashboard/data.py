"""The dashboard's data: what data.js holds (layout DATA_FORMAT_VERSION), from the history.

data["runs"] lists only the runs that something on the page refers to (a drawn point, a mark,
an alert, the headline, the table); every other part names runs by their index in it. The
charts' parts come from harness.dashboard.case_charts (each case), .counter_panels (each case's
counters under its chart: None where the history has none) and .geomeans (the suite line and
the headline cards). data["views"] holds, per timing mode, its newest run's headline cards
(with their trends), signature and table (a row per candidate of each case); data["mode"] is the
one shown at open (hot where the history has it), data["latest"] and data["table"] its view's.
data["sweeps"] holds, per mode, each swept case's gap and time curves (sweep_charts.curves) of
two runs chosen by _sweeps, for the case pages.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime

import numpy as np

from harness.dashboard.alerts import events, moved_together
from harness.dashboard.case_charts import (
    MAX_POINTS,
    Series,
    case_anchor,
    case_chart,
    case_order,
    line_colors,
    read_series,
    run_modes,
)
from harness.dashboard.counter_panels import counter_panels, link_marks
from harness.dashboard.geomeans import suite_geomeans
from harness.dashboard.sweep_charts import curves, measured_points
from harness.errors import DashboardError
from harness.history.series import gpu_model, run_mode
from harness.history.store import Store
from harness.reporting.summary import signature
from harness.reporting.table import primary_candidate
from protocol.modes import describe
from protocol.points import is_point_row, split_id

__all__ = ["DATA_FORMAT_VERSION", "collect"]

DATA_FORMAT_VERSION = 3  # 3: data["sweeps"] per mode ({mode: {case id: curves}})


def collect(
    store: Store,
    *,
    repo_url: str | None = None,
    max_points: int = MAX_POINTS,
    title: str | None = None,
    marked: tuple[list[dict], dict[str, list]] | None = None,
    series: list[Series] | None = None,
    runs: list[dict] | None = None,
) -> dict:
    """The dashboard's data (what data.js holds) from the history in `store`.

    marked: (open alerts, {case_id: change marks}) from harness.dashboard.alerts.findings, with
    runs as indices into store.runs(); they become data["alerts"] and each case's "changes".
    series: read_series(store, store.runs()) when the caller has read it already; runs:
    store.runs(), likewise.

    Every run in data["runs"] is one that a drawn point, the headline or the table refers to;
    its "raw" flags and "raw_runs" are 0 here (build_site sets them when it publishes documents).
    """
    runs = _stored_runs(store) if runs is None else runs
    all_series = read_series(store, runs) if series is None else series
    mode_of = run_modes(all_series)
    gpu_of = {r: s.info["gpu"] for s in all_series for r in [*s.run.tolist(), *s.failed]}
    latest_of, default = _latest_runs(mode_of, len(runs))
    docs = {m: store.raw_document(runs[g]["run_id"]) for m, g in latest_of.items()}
    latest_doc = docs[default]
    alerts, marks = marked or ([], {})
    alerts = events(alerts, _places(mode_of))
    used = _marked_runs(len(runs) - 1, alerts, marks) | set(latest_of.values())
    primary = primary_candidate(latest_doc)
    compilers: dict[str, int] = {}  # description -> its index in data["compilers"]
    colors = line_colors(all_series)
    headline_series = [s for s in all_series if not split_id(s.info["case_id"])[1]]
    cases = _cases(latest_doc, headline_series, colors, used, compilers, max_points, marks)
    _add_counters(cases, counter_panels(store, headline_series, runs, colors, primary, used), marks)
    suite, headline = suite_geomeans(
        headline_series, runs, colors, used, primary, max_points, latest_of=latest_of
    )
    anchor_of = {c["id"]: c["anchor"] for c in cases}
    compact = {g: i for i, g in enumerate(sorted(used))}
    alerts = [_renumbered_event(e, compact, anchor_of) for e in alerts]
    _renumber(compact, cases, marks, suite, headline, primary)
    views = _views(docs, latest_of, compact, headline, anchor_of)
    suite_doc = latest_doc["suite"]
    gpu = gpu_model(views[default]["gpu"])  # the GPU model the charts show at open
    return {
        "format": DATA_FORMAT_VERSION,
        "title": title or f"{suite_doc['name']}: kernel gap dashboard",
        "generated_utc": datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "repo_url": (repo_url or "").rstrip("/") or None,
        "raw_runs": 0,  # how many newest drawn runs get runs/<id>.json: set by build_site
        "primary": primary,
        "colors": colors,
        "compilers": list(compilers),
        "counts": _counts(runs, all_series, cases),
        "runs": {
            **_drawn_runs(runs, sorted(used), mode_of, gpu_of),
            "clock": _clock_notes(store, runs, headline_series, sorted(used)),
        },
        "gpu": gpu,
        "gpus": sorted(set(gpu_of.values()), key=lambda g: (g != gpu, g)),
        "mode": default,  # the mode shown at open: the newest run's
        "modes": sorted(views, key=lambda m: (m != default, m or "")),
        "views": views,
        "mode_info": _mode_info(views, all_series),
        "latest": views[default],
        "alerts": alerts,
        "table": views[default]["table"],
        "cases": cases,
        "suite": suite,
        "sweeps": _sweeps(store, runs, all_series),
    }


def _stored_runs(store: Store) -> list[dict]:
    """store.runs(), refused with what to do next when the history has none."""
    runs = store.runs()
    if not runs:
        raise DashboardError(
            f"{store.path}: the history has no runs; store one with "
            "`python -m harness ingest RESULT.json --db PATH --trusted`"
        )
    return runs


def _views(docs: dict, latest_of: dict[str, int], compact: dict[int, int], headline, anchor_of):
    """{mode: its newest run's headline and table}, runs numbered as drawn (`compact`)."""
    return {
        m: {
            **_latest(docs[m], compact[g], [c for c in headline if c["mode"] == m]),
            "table": _table(docs[m], anchor_of),
        }
        for m, g in latest_of.items()
    }


def _counts(runs: list[dict], all_series: list, cases: list[dict]) -> dict[str, int]:
    """How many runs, series and points the history holds, and how many points are drawn."""
    return {
        "runs": len(runs),
        "series": len(all_series),
        "points_stored": sum(s.info["points"] for s in all_series),
        "points_drawn": sum(len(s["run"]) for c in cases for s in c["series"]),
    }


def _mode_info(views: dict, all_series: list) -> dict:
    """{mode: describe(mode) as a dict} for every mode with a view or a series."""
    return {
        m: describe(m).as_dict()
        for m in sorted({*views, *(s.info["mode"] for s in all_series)}, key=lambda m: m or "")
    }


def _latest_runs(mode_of: dict[int, str], n_runs: int) -> tuple[dict[str, int], str]:
    """({mode: index of its newest run}, the mode shown at open): hot (the steady state, the
    suite's default) where the history has it, else the newest run's mode (a run with no point
    has none: "unknown")."""
    latest_of = {m: g for g, m in sorted(mode_of.items())}
    newest_mode = mode_of.get(n_runs - 1) or "unknown"
    latest_of.setdefault(newest_mode, n_runs - 1)
    return latest_of, "hot" if "hot" in latest_of else newest_mode


def _sweeps(store: Store, runs: list[dict], all_series: list) -> dict:
    """{mode: {case id: {latest, latest_run, earlier, earlier_run}}}: per mode, each swept
    case's curve (harness.dashboard.sweep_charts.curves) from the newest run that measured at
    least half of the most points any run measured of it (and two or more), against the oldest
    such run (None where there is one). Which runs those are comes from the point series
    already read, so only the chosen runs' documents are read: a run of single points
    (`--point`, a headline check), of another case, or a sweep cut short by its budget never
    replaces a case's curve."""
    runs_of: dict[tuple[str, str], dict[str, list]] = defaultdict(lambda: defaultdict(list))
    swept = {split_id(s.info["case_id"])[0] for s in all_series if split_id(s.info["case_id"])[1]}
    for s in all_series:
        case_id, point = split_id(s.info["case_id"])
        if case_id in swept and s.run.size:
            runs_of[(s.info["mode"], case_id)][point].append(s.run)
    curves_of: dict[int, dict] = {}  # run -> its document's curves, each read once

    def curve(run: int, case_id: str) -> dict | None:
        if run not in curves_of:
            curves_of[run] = curves(store.raw_document(runs[run]["run_id"]))
        return curves_of[run].get(case_id)

    out: dict[str, dict] = {}
    for (mode, case_id), per_point in sorted(runs_of.items()):
        # points measured per run: each point's runs counted once
        counts = np.bincount(
            np.concatenate([np.unique(np.concatenate(r)) for r in per_point.values()])
        )
        most = int(counts.max())
        full = np.flatnonzero(counts >= max(2, -(-most // 2))).tolist()
        if not full:
            continue
        latest = curve(full[-1], case_id)
        if latest is None or measured_points(latest) < 2:
            continue
        earlier = curve(full[0], case_id) if full[0] < full[-1] else None
        out.setdefault(mode, {})[case_id] = {
            "latest": latest,
            "latest_run": _swept_label("newest", mode, runs[full[-1]]),
            "earlier": earlier,
            "earlier_run": _swept_label("oldest", mode, runs[full[0]]) if earlier else "",
        }
    return out


def _swept_label(which: str, mode: str, run: dict) -> str:
    when = run["started_utc"][:16].replace("T", " ")
    return f"the {which} {mode} run that swept it, {when}"


def _cases(latest_doc, all_series, colors, used, compilers, max_points, marks) -> list[dict]:
    """Each case's chart data (case_charts.case_chart), in the newest run's order, with the
    steps every series of it took together (together.moved_together)."""
    members = defaultdict(list)
    for s in all_series:
        members[s.info["case_id"]].append(s)
    anchors: set = set()
    cases = [
        case_chart(c, members[c], colors, used, case_anchor(c, anchors), compilers, max_points)
        for c in case_order(latest_doc, all_series)
    ]
    for case in cases:
        case["together"] = moved_together(marks.get(case["id"], []), _impls_by_mode(case))
    return cases


def _add_counters(cases: list[dict], panels: dict[str, dict], marks: dict[str, list]) -> None:
    """Each case's counter panel (None without one); its change marks that a counter step
    explains name the step."""
    for case in cases:
        case["counters"] = panels.get(case["id"])
        link_marks(marks.get(case["id"], []), case["counters"])


def _impls_by_mode(case: dict) -> dict[str, set[str]]:
    """mode -> the implementations of the case's current series in it (its newest key)."""
    out: dict[str, set[str]] = defaultdict(set)
    for s in case["series"]:
        out[s["mode"]].add(s["impl"])
    return out


def _marked_runs(latest: int, alerts: list[dict], marks: dict[str, list]) -> set[int]:
    """The runs (indices into store.runs()) the latest run, the change marks and the alert
    events name: each is drawn whatever the thinning."""
    used = {latest}
    used.update(m["run"] for ms in marks.values() for m in ms)
    used.update(m["from"] for ms in marks.values() for m in ms if m["from"] >= 0)
    used.update(r for e in alerts for r in (e["run"], e["from"]) if r >= 0)
    return used


CLOCK_SHARE = 0.25  # a run with more of its gaps unstable than this is read for its clocks
CLOCK_READS = 50  # such runs read at most (the newest): each is one raw document


def _clock_notes(store: Store, runs: list[dict], headline: list, used: list[int]) -> list:
    """Per drawn run: why its clocks were below their usual ones, from its document's cases'
    clocks blocks (runner.document.apply_clocks), or None. A throttled run leaves its gaps unstable
    while its times may stay stable: only runs where more than CLOCK_SHARE of the candidates'
    gaps are unstable are read, the newest CLOCK_READS of them."""
    unstable: dict[int, int] = defaultdict(int)
    total: dict[int, int] = defaultdict(int)
    for s in headline:
        if s.info["role"] == "candidate":
            for r, ok in zip(s.run.tolist(), s.gap_stable.tolist(), strict=True):
                total[r] += 1
                unstable[r] += not ok
    drawn = set(used)
    suspect = [r for r in sorted(total) if r in drawn and unstable[r] > CLOCK_SHARE * total[r]]
    notes = {r: _clock_note(store.raw_document(runs[r]["run_id"])) for r in suspect[-CLOCK_READS:]}
    return [notes.get(r) for r in used]


def _clock_note(document: dict) -> str | None:
    """'clocks below usual in 25 of 25 cases: HW thermal slowdown, ... (e.g. case: note)'."""
    cases = [c for c in document.get("cases", []) if not is_point_row(c)]  # a sweep's: its case's
    flagged = [c for c in cases if (c.get("clocks") or {}).get("flagged")]
    if not flagged:
        return None
    reasons: dict[str, int] = defaultdict(int)
    for case in flagged:
        for reason, count in case["clocks"].get("reasons", {}).items():
            reasons[reason] += count
    top = ", ".join(sorted(reasons, key=lambda k: -reasons[k])[:3])
    worst = max(flagged, key=lambda c: c["clocks"]["flagged"] / max(1, c["clocks"]["samples"]))
    example = worst["clocks"].get("note") or f"{worst['clocks']['flagged']} samples flagged"
    return (
        f"clocks below the run's usual in {len(flagged)} of {len(cases)} cases: "
        f"{top} (e.g. {worst['id']}: {example})"
    )


def _places(mode_of: dict[int, str]) -> dict[int, int]:
    """Run index -> its place among the runs of its mode (change ranges are compared in it)."""
    count: dict[str, int] = defaultdict(int)
    out = {}
    for g, mode in sorted(mode_of.items()):
        out[g] = count[mode]
        count[mode] += 1
    return out


def _renumbered_event(event: dict, compact: dict[int, int], anchor_of: dict) -> dict:
    """An alert event with its runs as indices into data["runs"] and each series' case anchor."""
    series = [
        {
            **a,
            "run": compact.get(a["run"], -1),
            "from": compact.get(a["from"], -1),
            "anchor": anchor_of.get(split_id(a["case"])[0]),
        }
        for a in event["series"]
    ]
    return {
        **event,
        "run": compact[event["run"]],
        "from": compact.get(event["from"], -1),
        "series": series,
    }


def _drawn_runs(runs: list[dict], used: list[int], mode_of: dict, gpu_of: dict) -> dict:
    """data["runs"]: the drawn runs' ids, commits, dates, labels, modes, GPU models and
    ordinals (the run's place among the runs of its mode on its GPU model, as a chart shows
    them: "the last 50 runs" are counted by it), column by column."""
    labels = _run_labels(runs, mode_of)
    chosen = [runs[g] for g in used]
    ordinal, count = {}, defaultdict(int)
    for g in range(len(runs)):
        chart = (mode_of.get(g), gpu_of.get(g))
        ordinal[g] = count[chart]
        count[chart] += 1
    return {
        "mode": [mode_of.get(g) for g in used],
        "gpu": [gpu_of.get(g) for g in used],
        "n": [ordinal[g] for g in used],
        "id": [r["run_id"] for r in chosen],
        "commit": [r["commit_sha"] for r in chosen],
        "date": [r["started_utc"][:19].replace("T", " ") for r in chosen],
        "label": [labels[g] for g in used],
        "raw": [0] * len(chosen),
    }


def _latest(latest_doc: dict, run: int, headline: list) -> dict:
    """data["latest"]: the newest run's suite, GPU, mode, headline cards and signature."""
    suite_doc = latest_doc["suite"]
    return {
        "run": run,
        "suite": f"{suite_doc['name']} v{suite_doc['version']}",
        "gpu": latest_doc["environment"]["device"]["name"],
        "mode": run_mode(latest_doc),
        "complete": latest_doc["complete"],
        "cards": headline,
        "signature": [list(pair) for pair in signature(latest_doc)],
    }


def _renumber(compact: dict[int, int], cases, marks, suite, headline, primary) -> None:
    """Runs named by their index in store.runs() -> by their index in data["runs"] (compact);
    each case gets its change marks, each card its primary flag."""
    for case in cases:
        for s in case["series"]:
            s["run"] = [compact[g] for g in s["run"]]
        case["failed"]["run"] = [compact[g] for g in case["failed"]["run"]]
        case["changes"] = [
            {**m, "run": compact[m["run"]], "from": compact.get(m["from"], -1)}
            for m in marks.get(case["id"], [])
        ]
        for note in case["together"]:
            note["run"] = compact[note["run"]]
        for item in (case["counters"] or {}).get("lines", []):
            item["run"] = [compact[g] for g in item["run"]]
        for step in (case["counters"] or {}).get("steps", []):
            step.update(run=compact[step["run"]], **{"from": compact[step["from"]]})
    for trace in suite:
        trace["run"] = [compact[g] for g in trace["run"]]
    for card in headline:
        card["primary"] = card["candidate"] == primary
        card["run"] = compact[card["run"]]
        card["trend"]["run"] = [compact[g] for g in card["trend"]["run"]]
        if card["previous"]:
            card["previous"]["run"] = compact[card["previous"]["run"]]


def _run_labels(runs: list[dict], mode_of: dict[int, str]) -> list[str]:
    """A unique x-axis label per run among the runs of its mode (a chart shows one mode): the
    short commit, '#2' on a commit's second run in that mode."""
    seen: dict[tuple, int] = defaultdict(int)
    labels = []
    for g, run in enumerate(runs):
        base = run["commit_sha"][:7] if run["commit_sha"] else f"run {run['run_id'][:7]}"
        seen[base, mode_of.get(g)] += 1
        count = seen[base, mode_of.get(g)]
        labels.append(base if count == 1 else f"{base}#{count}")
    return labels


def _table(document: dict, anchor_of: dict[str, str]) -> list[dict]:
    """Rows of the newest run: one per candidate of each case (one per case that failed)."""
    rows = []
    for case in document["cases"]:
        if is_point_row(case):  # a sweep's other points: on its case's page
            continue
        base = {
            "case": case["id"],
            "version": case["version"],
            "anchor": anchor_of.get(case["id"]),
            "baseline": case["baseline"],
        }
        impls = case["implementations"]
        if case["status"] != "ok":
            error = case.get("error") or {}
            note = f"{error.get('phase', '')}: {error.get('message', '')}".strip(": ")
            rows.append(
                {
                    **base,
                    "candidate": None,
                    "status": case["status"],
                    "note": note.splitlines()[0] if note else "",
                }
            )
            continue
        base_stats = ((impls.get(case["baseline"]) or {}).get("timing") or {}).get("stats")
        for name, impl in impls.items():
            if impl["role"] != "candidate":
                continue
            stats = (impl.get("timing") or {}).get("stats")
            gap = impl.get("gap")
            row = {
                **base,
                "candidate": name,
                "base_s": base_stats["median_s"] if base_stats else None,
                "cand_s": stats["median_s"] if stats else None,
                "gap": gap["ratio_of_medians"] if gap else None,
                "lo": gap["ci_low"] if gap else None,
                "hi": gap["ci_high"] if gap else None,
            }
            if impl.get("status") == "skipped":
                row.update(status="skipped", note=impl.get("skip_reason", ""))
            elif not gap:
                row.update(
                    status="no gap",
                    note=impl.get("gap_note") or f"check {impl.get('check', {}).get('status')}",
                )
            elif not gap["stable"]:
                noisy = [
                    n for n in (case["baseline"], name) if not impls[n]["timing"]["stats"]["stable"]
                ]
                row.update(
                    status="unstable", note=f"noise above the limit: {', '.join(noisy) or 'gap'}"
                )
            else:
                row.update(status="stable", note="")
            rows.append(row)
    return rows
