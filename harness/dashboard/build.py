"""Build the static dashboard site from the history store.

The site, every file beside index.html so that it works from file:// and from any web server:
  index.html          the page (page.html as is: it holds no data)
  app.js              draws the headline, the table and the charts from data.js with Plotly
  plotly.min.js       plotly.js as shipped inside the plotly Python package (no CDN; copied
                      once: an identical file already there is left alone)
  data.js             `window.KERNELGAP_DATA = {...};` (layout DATA_FORMAT_VERSION, below)
  runs/<run_id>.json  raw result documents, named by content hash and so never rewritten
  explain/<case>.*    harness explain of each case of the newest run (.md and a .html page)
  gab/data.js         with --format github-action-benchmark only: the history's gaps and suite
                      geomeans in that action's layout, `window.BENCHMARK_DATA = {...};`
                      (harness.dashboard.gab)
  marks.js            the open alerts and the change-point marks (harness.dashboard.alerts)
  overview.js         the lead chart: the newest run's gap per case, sorted, with intervals

What is drawn is trimmed for display only (the store keeps every point): a series of more than
max_points points shows every k-th point, k = ceil(n / (max_points - TAIL_POINTS)) counted back
from the newest, plus the newest TAIL_POINTS, every unstable point and both sides of every step
(a change of more than STEP_FRACTION from the previous point in the median time or the gap).

Headline: the geometric-mean gap exp(mean(ln gap)) per candidate over the ok cases of the newest
run whose gap is stable (the rule of harness.summary.geomean_gaps), and its change against the
latest earlier run of the same GPU model, timing mode and suite version that shares stable
cases with it, computed over those common cases only (a case that failed, became unstable or is
new in one of the two runs would otherwise move the change by itself). On the suite line, a
point whose set of stable cases differs from the previous drawn point's says so ("cases: 7
(was 8); without transpose"). A series never joins points of different series keys: each key is
its own trace, labelled with what changed against the implementation's previous key ("source
changed", "suite v2", "mode cold", ...). The compiler that built a point (toolchain, version,
sha256) is not part of the key: it is shown on hover, from data["compilers"] (each distinct
description once; a series' `compiler` holds indices into it, -1 where unknown).

The suite's primary candidate (harness.primary, from the newest run) leads: its headline card
and its suite line come first, and data["primary"] names it (None: the existing order).
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import resources
from itertools import pairwise
from pathlib import Path

import numpy as np
import orjson

from harness.dashboard import explain_pages
from harness.dashboard.alerts import findings
from harness.dashboard.gab import GAB_DATA, gab_key, github_action_benchmark_data
from harness.primary import primary_candidate
from harness.series import COMPILER_FIELDS, describe_compiler, run_mode, series_label
from harness.store import Store
from harness.summary import signature

__all__ = [
    "DATA_FORMAT_VERSION",
    "GAB_DATA",
    "BuildReport",
    "DashboardError",
    "build_site",
    "collect",
    "display_indices",
    "gab_key",
    "github_action_benchmark_data",
]

DATA_FORMAT_VERSION = 1
MAX_POINTS = 300  # per drawn series; enough to see a trend across a 1400 px wide chart
TAIL_POINTS = 30  # the newest points are always drawn: they are the ones people check
STEP_FRACTION = 0.05  # the regression rule's minimum effect; a step this big is always drawn
RAW_RUNS = 20  # raw documents written per build (newest drawn runs); older ones stay
MAX_FAILED_MARKS = 50  # runs where a case failed, marked on its charts (the newest ones)
PALETTE = ("#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#8c564b", "#7f7f7f")
BASELINE_COLOR = "#333333"
RUN_ID = re.compile(r"[0-9a-f]{64}")  # store run ids; anything else never becomes a file name
UNITS = ((1e-6, "ns", 1e9), (1e-3, "µs", 1e6), (1.0, "ms", 1e3), (math.inf, "s", 1.0))
CHANGE_WORDS = {  # key field -> how a change of it is named in a legend
    "gpu": lambda v: f"GPU {v}",
    "mode": lambda v: f"mode {v}",
    "suite_version": lambda v: f"suite v{v}",
    "case_version": lambda v: f"case v{v}",
    "source_sha256": lambda v: "source changed",
    "baseline_source_sha256": lambda v: "baseline source changed",
}
SUITE_FIELDS = ("gpu", "mode", "suite_version")


class DashboardError(ValueError):
    """The dashboard cannot be built as asked; the message says why and what to do."""


@dataclass
class BuildReport:
    """What build_site() wrote."""

    out: Path
    runs: int
    cases: int
    series: int
    points_stored: int
    points_drawn: int
    raw_written: int
    raw_published: int
    files: dict[str, int] = field(default_factory=dict)  # path in the site -> bytes

    def text(self) -> str:
        sizes = ", ".join(f"{name} {size / 1e3:.0f} kB" for name, size in self.files.items())
        return (
            f"dashboard: {self.out / 'index.html'}\n"
            f"  {self.runs} runs, {self.cases} cases, {self.series} series; "
            f"{self.points_drawn} of {self.points_stored} points drawn\n"
            f"  raw documents: {self.raw_written} written, {self.raw_published} in runs/\n"
            f"  {sizes}"
        )


def display_indices(
    n: int,
    unstable: np.ndarray,
    values: tuple[np.ndarray, ...] = (),
    max_points: int = MAX_POINTS,
    tail: int = TAIL_POINTS,
) -> np.ndarray:
    """Indices (ascending) of the points of an n-point series that are drawn (module doc)."""
    if n <= max_points:
        return np.arange(n)
    keep = np.zeros(n, dtype=bool)
    stride = math.ceil(n / max(1, max_points - tail))
    keep[(n - 1) % stride :: stride] = True
    keep[0] = True
    keep[-tail:] = True
    keep |= unstable
    for v in values:
        with np.errstate(divide="ignore", invalid="ignore"):
            step = np.abs(v[1:] / v[:-1] - 1.0) > STEP_FRACTION  # NaN compares False
        keep[1:] |= step
        keep[:-1] |= step
    return np.flatnonzero(keep)


def _round(values: np.ndarray, digits: int = 6) -> list:
    """`values` to `digits` significant digits as a list (NaN -> None): a smaller data.js."""
    a = np.asarray(values, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        magnitude = np.floor(np.log10(np.abs(a)))
    scale = 10.0 ** (digits - 1 - np.where(np.isfinite(magnitude), magnitude, 0))
    rounded = np.round(a * scale) / scale
    return [None if math.isnan(x) else x for x in rounded.tolist()]


def _flags(values: list) -> np.ndarray:
    return np.array([bool(v) for v in values], dtype=bool)


def _floats(values: list) -> np.ndarray:
    return np.array([math.nan if v is None else v for v in values], dtype=float)


def _unit(seconds: float | None) -> tuple[str, float]:
    """The display unit of a case's times: the one that puts its baseline in [1, 1000)."""
    for limit, name, scale in UNITS:
        if seconds is not None and seconds < limit:
            return name, scale
    return "µs", 1e6


def _change(previous: dict | None, key: dict) -> str:
    """What differs in `key` from the implementation's previous key, in words ('' if first)."""
    if previous is None:
        return ""
    words = [
        describe(key[name])
        for name, describe in CHANGE_WORDS.items()
        if name in key
        and key[name] != previous[name]
        # A baseline's own source hash is also its baseline source hash: say it once.
        and not (name == "baseline_source_sha256" and key.get("role") == "baseline")
    ]
    return ", ".join(words) or "key changed"


def _run_labels(runs: list[dict]) -> list[str]:
    """A unique x-axis category per run: the short commit, '#2' on a commit's second run."""
    seen: dict[str, int] = defaultdict(int)
    labels = []
    for run in runs:
        base = run["commit_sha"][:7] if run["commit_sha"] else f"run {run['run_id'][:7]}"
        seen[base] += 1
        labels.append(base if seen[base] == 1 else f"{base}#{seen[base]}")
    return labels


def _anchor(case_id: str, taken: set) -> str:
    anchor = "case-" + (re.sub(r"[^A-Za-z0-9_-]+", "-", case_id).strip("-") or "x")
    while anchor in taken:
        anchor += "-"
    taken.add(anchor)
    return anchor


@dataclass
class _Series:
    """One series' points as arrays (the ok ones), and the runs where its case failed."""

    info: dict
    run: np.ndarray
    median_s: np.ndarray
    mad_s: np.ndarray
    noise: np.ndarray
    stable: np.ndarray
    gap: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    gap_stable: np.ndarray
    failed: dict[int, str]  # run -> 'phase: message' of each run where the case failed
    compiler: list[str]  # per ok point: describe_compiler() of its build ('' when unknown)

    @classmethod
    def read(cls, store: Store, info: dict, run_index: dict[str, int]) -> _Series:
        every = store.points(info["series_id"])
        points = [p for p in every if p["case_status"] == "ok" and p["median_s"] is not None]
        failed = {
            run_index[p["run_id"]]: f"{p['case_status']}: {p['error_phase']}: {p['error_message']}"
            for p in every
            if p["case_status"] == "failed"
        }
        column = {name: [p[name] for p in points] for name in points[0]} if points else {}
        get = column.get
        return cls(
            info,
            np.array([run_index[r] for r in get("run_id", [])], dtype=np.int64),
            _floats(get("median_s", [])),
            _floats(get("mad_s", [])),
            _floats(get("noise", [])),
            _flags(get("stable", [])),
            _floats(get("gap", [])),
            _floats(get("gap_ci_low", [])),
            _floats(get("gap_ci_high", [])),
            _flags(get("gap_stable", [])),
            failed,
            [describe_compiler(*(p[f] for f in COMPILER_FIELDS)) for p in points],
        )


def collect(
    store: Store,
    *,
    repo_url: str | None = None,
    max_points: int = MAX_POINTS,
    title: str | None = None,
    marked: tuple[list[dict], dict[str, list]] | None = None,
) -> dict:
    """The dashboard's data (what data.js holds) from the history in `store`.

    marked: (open alerts, {case_id: change marks}) from harness.dashboard.alerts.findings, with
    runs as indices into store.runs(); they become data["alerts"] and each case's "changes".

    Every run in data["runs"] is one that a drawn point, the headline or the table refers to;
    its "raw" flags and "raw_runs" are 0 here (build_site sets them when it publishes documents).
    """
    runs = store.runs()
    if not runs:
        raise DashboardError(
            f"{store.path}: the history has no runs; store one with "
            "`python -m harness ingest RESULT.json --db PATH --trusted`"
        )
    run_index = {r["run_id"]: i for i, r in enumerate(runs)}
    latest_doc = store.raw_document(runs[-1]["run_id"])
    all_series = [_Series.read(store, info, run_index) for info in store.list_series()]
    used = {len(runs) - 1}
    alerts, marks = marked or ([], {})
    used.update(m["run"] for ms in marks.values() for m in ms)
    used.update(m["from"] for ms in marks.values() for m in ms if m["from"] >= 0)
    used.update(a["run"] for a in alerts)
    primary = primary_candidate(latest_doc)
    compilers: dict[str, int] = {}  # description -> its index in data["compilers"]
    colors = _colors(all_series)
    case_order = _case_order(latest_doc, all_series)
    anchors: set = set()
    cases = []
    for case_id in case_order:
        members = [s for s in all_series if s.info["case_id"] == case_id]
        anchor = _anchor(case_id, anchors)
        cases.append(_case(case_id, members, colors, max_points, used, anchor, compilers))
    suite, headline = _suite(all_series, runs, colors, max_points, used, primary)
    anchor_of = {c["id"]: c["anchor"] for c in cases}
    compact = {g: i for i, g in enumerate(sorted(used))}
    for case in cases:
        for s in case["series"]:
            s["run"] = [compact[g] for g in s["run"]]
        case["failed"]["run"] = [compact[g] for g in case["failed"]["run"]]
    for case in cases:
        case["changes"] = [
            {**m, "run": compact[m["run"]], "from": compact.get(m["from"], -1)}
            for m in marks.get(case["id"], [])
        ]
    alerts = [{**a, "run": compact[a["run"]], "anchor": anchor_of.get(a["case"])} for a in alerts]
    for trace in suite:
        trace["run"] = [compact[g] for g in trace["run"]]
    for card in headline:
        card["primary"] = card["candidate"] == primary
        card["run"] = compact[card["run"]]
        if card["previous"]:
            card["previous"]["run"] = compact[card["previous"]["run"]]
    labels = _run_labels(runs)
    chosen = [runs[g] for g in sorted(used)]
    suite_doc = latest_doc["suite"]
    return {
        "format": DATA_FORMAT_VERSION,
        "title": title or f"{suite_doc['name']}: kernel gap dashboard",
        "generated_utc": datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "repo_url": (repo_url or "").rstrip("/") or None,
        "raw_runs": 0,  # how many newest drawn runs get runs/<id>.json: set by build_site
        "primary": primary,
        "colors": colors,
        "compilers": list(compilers),
        "counts": {
            "runs": len(runs),
            "series": len(all_series),
            "points_stored": sum(s.info["points"] for s in all_series),
            "points_drawn": sum(len(s["run"]) for c in cases for s in c["series"]),
        },
        "runs": {
            "id": [r["run_id"] for r in chosen],
            "commit": [r["commit_sha"] for r in chosen],
            "date": [r["started_utc"][:19].replace("T", " ") for r in chosen],
            "label": [labels[g] for g in sorted(used)],
            "raw": [0] * len(chosen),
        },
        "latest": {
            "run": compact[len(runs) - 1],
            "suite": f"{suite_doc['name']} v{suite_doc['version']}",
            "gpu": latest_doc["environment"]["device"]["name"],
            "mode": run_mode(latest_doc),
            "complete": latest_doc["complete"],
            "cards": headline,
            "signature": [list(pair) for pair in signature(latest_doc)],
        },
        "alerts": alerts,
        "table": _table(latest_doc, anchor_of),
        "cases": cases,
        "suite": suite,
    }


def _colors(all_series: list[_Series]) -> dict[str, str]:
    """One colour per candidate name, the same in every chart; baselines are dark grey."""
    names = sorted({s.info["impl"] for s in all_series if s.info["role"] == "candidate"})
    colors = {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(names)}
    for s in all_series:
        if s.info["role"] == "baseline":
            colors.setdefault(s.info["impl"], BASELINE_COLOR)
    return colors


def _case_order(latest_doc: dict, all_series: list[_Series]) -> list[str]:
    """The newest run's cases in its order, then cases no longer run, by id."""
    order = [c["id"] for c in latest_doc["cases"]]
    rest = sorted({s.info["case_id"] for s in all_series} - set(order))
    present = {s.info["case_id"] for s in all_series}
    return [c for c in order if c in present] + rest


def _case(case_id, members, colors, max_points, used, anchor, compilers) -> dict:
    """One case's chart data: its series (one trace per series key), times in one unit."""
    failed = {run: text for s in members for run, text in s.failed.items()}
    members = [s for s in members if len(s.run)]
    members.sort(key=lambda s: (s.info["role"] != "baseline", s.info["impl"], s.info["first_utc"]))
    latest = max(members, key=lambda s: s.info["last_utc"]) if members else None
    baseline = latest.info["baseline"] if latest else ""
    base_medians = [s.median_s[-1] for s in members if s.info["role"] == "baseline"]
    unit, scale = _unit(
        base_medians[-1] if base_medians else (latest.median_s[-1] if latest else None)
    )
    previous: dict[str, dict] = {}
    segments: dict[str, int] = defaultdict(int)
    series = []
    for s in members:
        info = s.info
        change = _change(previous.get(info["impl"]), info)
        previous[info["impl"]] = info
        # A baseline has no gap: only its own stability counts.
        unstable = ~s.stable | (~s.gap_stable & ~np.isnan(s.gap))
        keep = display_indices(len(s.run), unstable, (s.median_s, s.gap), max_points)
        used.update(s.run[keep].tolist())
        name = info["impl"] + (" (baseline)" if info["role"] == "baseline" else "")
        entry = {
            "impl": info["impl"],
            "role": info["role"],
            "name": f"{name} · {change}" if change else name,
            "change": change,
            "segment": segments[info["impl"]],
            "color": colors[info["impl"]],
            "key": series_label(info),
            "stored": info["points"],
            "run": s.run[keep].tolist(),
            "t": _round(s.median_s[keep] * scale),
            "mad": _round(s.mad_s[keep] * scale, 3),
            "noise": _round(s.noise[keep], 3),
            "ok": s.stable[keep].astype(int).tolist(),
            "compiler": [
                compilers.setdefault(s.compiler[k], len(compilers)) if s.compiler[k] else -1
                for k in keep.tolist()
            ],
        }
        segments[info["impl"]] += 1
        if info["role"] == "candidate":
            entry.update(
                gap=_round(s.gap[keep]),
                lo=_round(s.ci_low[keep]),
                hi=_round(s.ci_high[keep]),
                gap_ok=s.gap_stable[keep].astype(int).tolist(),
            )
        series.append(entry)
    version = latest.info["case_version"] if latest else None
    newest_failed = sorted(failed)[-MAX_FAILED_MARKS:]
    used.update(newest_failed)
    return {
        "id": case_id,
        "version": version,
        "anchor": anchor,
        "baseline": baseline,
        "unit": unit,
        "series": series,
        "failed": {
            "run": newest_failed,
            "error": [failed[r].splitlines()[0] for r in newest_failed],
        },
        "failed_runs": len(failed),
    }


def _suite(all_series, runs, colors, max_points, used, primary) -> tuple[list[dict], list[dict]]:
    """The suite geomean gap per run (one trace per candidate and GPU/mode/suite version) and
    the headline cards of the newest run; the primary candidate's first."""
    # (gpu, mode, suite version, candidate) -> run -> {(case id, case version): ln gap} of the
    # cases whose gap is stable, and -> run -> cases with a gap (stable or not).
    logs: dict[tuple, dict[int, dict]] = defaultdict(dict)
    gaps: dict[tuple, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    baselines: dict[tuple, set] = defaultdict(set)
    for s in all_series:
        if s.info["role"] != "candidate":
            continue
        key = (*(s.info[f] for f in SUITE_FIELDS), s.info["impl"])
        case = (s.info["case_id"], s.info["case_version"])
        per_run, counts = logs[key], gaps[key]
        has_gap = ~np.isnan(s.gap)
        ln_gap = np.log(np.where(has_gap, s.gap, 1.0))
        for run, ln, stable, present in zip(
            s.run.tolist(), ln_gap.tolist(), s.gap_stable.tolist(), has_gap.tolist(), strict=True
        ):
            if present:
                counts[run] += 1
                if stable:
                    per_run.setdefault(run, {})[case] = ln
        if len(s.run) and s.run[-1] == len(runs) - 1:
            baselines[key].add(s.info["baseline"])
    latest = len(runs) - 1
    traces, cards = [], []
    previous_key: dict[str, dict] = {}  # candidate -> its previous suite key
    # A candidate that never had a gap (never checked) has no line and no card.
    order = (k for k in gaps if gaps[k])
    for key in sorted(order, key=lambda k: (k[3] != primary, k[3], min(gaps[k]))):
        impl, per_run = key[3], logs[key]
        if latest in gaps[key]:
            cards.append(_card(key, per_run, gaps[key][latest], latest, baselines[key]))
            used.add(latest)
        if not per_run:
            continue
        run_arr = np.array(sorted(per_run), dtype=np.int64)
        gap = np.array([_geomean(per_run[r].values()) for r in run_arr.tolist()])
        keep = display_indices(len(run_arr), np.zeros(len(run_arr), bool), (gap,), max_points)
        used.update(run_arr[keep].tolist())
        drawn = [per_run[r].keys() for r in run_arr[keep].tolist()]
        suite_key = dict(zip(SUITE_FIELDS, key[:3], strict=True))
        change = _change(previous_key.get(impl), suite_key)
        previous_key[impl] = suite_key
        traces.append(
            {
                "impl": impl,
                "name": f"{impl} · {change}" if change else impl,
                "change": change,
                "color": colors[impl],
                "suite": f"{key[0]} | {key[1]} | suite v{key[2]}",
                "run": run_arr[keep].tolist(),
                "gap": _round(gap[keep]),
                "cases": [len(c) for c in drawn],
                # How each point's cases differ from the previous drawn point's ('' if alike).
                "cases_note": [""] + [_case_set_note(a, b) for a, b in pairwise(drawn)],
            }
        )
    for card in cards:
        if card["previous"]:
            used.add(card["previous"]["run"])
    return traces, cards


def _geomean(ln_gaps) -> float:
    values = list(ln_gaps)
    return math.exp(math.fsum(values) / len(values))


def _case_set_note(before, after, shown: int = 3) -> str:
    """'' when two points' stable cases are the same, else what changed:
    'cases: 7 (was 8); without transpose; with matmul v2'."""
    if before == after:
        return ""
    gone, new = before - after, after - before
    both = {c for c, _ in gone} & {c for c, _ in new}  # a case whose version changed

    def names(cases) -> str:
        words = sorted(f"{c} v{v}" if c in both else c for c, v in cases)
        more = f" and {len(words) - shown} more" if len(words) > shown else ""
        return ", ".join(words[:shown]) + more

    parts = [f"cases: {len(after)} (was {len(before)})"]
    parts += [f"without {names(gone)}"] if gone else []
    parts += [f"with {names(new)}"] if new else []
    return "; ".join(parts)


def _card(key: tuple, per_run: dict, with_gap: int, latest: int, baselines: set) -> dict:
    """A headline card: the newest run's geomean gap of one candidate over its stable cases,
    and its change against the previous run sharing stable cases with it, over those common
    cases only: exp(mean over common cases c of (ln gap_now(c) - ln gap_before(c))) - 1, so a
    case that became unstable, failed or new between the runs does not move the change."""
    now = per_run.get(latest, {})
    gap = _geomean(now.values()) if now else None
    earlier = [r for r, before in per_run.items() if r < latest and now.keys() & before.keys()]
    previous, change = None, None
    if earlier:
        r = max(earlier)
        before = per_run[r]
        common = sorted(now.keys() & before.keys())
        change = math.exp(math.fsum(now[c] - before[c] for c in common) / len(common)) - 1.0
        previous = {
            "run": r,
            "gap": _geomean(before.values()),  # over all of its stable cases, as once shown
            "cases": len(before),
            "common": len(common),
            "common_gap": _geomean(before[c] for c in common),
            "common_gap_now": _geomean(now[c] for c in common),
        }
    return {
        "candidate": key[3],
        "baseline": ", ".join(sorted(baselines)) or "baseline",
        "gpu": key[0],
        "mode": key[1],
        "suite_version": key[2],
        "gap": gap,
        "cases": len(now),
        "of": with_gap,
        "run": latest,
        "previous": previous,
        "change": change,
    }


def _table(document: dict, anchor_of: dict[str, str]) -> list[dict]:
    """Rows of the newest run: one per candidate of each case (one per case that failed)."""
    rows = []
    for case in document["cases"]:
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


def _write_if_changed(path: Path, data: bytes) -> None:
    if not (path.exists() and path.stat().st_size == len(data) and path.read_bytes() == data):
        path.write_bytes(data)


def _copy_plotly(out: Path) -> None:
    """plotly.min.js from the plotly package into `out`, unless an identical copy is there."""
    source = resources.files("plotly") / "package_data" / "plotly.min.js"
    if not source.is_file():
        raise DashboardError(
            f"plotly.min.js not found in the plotly package ({source}); reinstall plotly>=5.20"
        )
    _write_if_changed(out / "plotly.min.js", source.read_bytes())


def _publish_runs(store: Store, data: dict, out: Path, raw_runs: int) -> int:
    """Write the raw documents of the newest `raw_runs` drawn runs that are not in runs/ yet;
    flag every drawn run whose document is there (from this build or an earlier one)."""
    folder = out / "runs"
    folder.mkdir(exist_ok=True)
    present = {p.stem for p in folder.glob("*.json")}
    ids = data["runs"]["id"]
    wanted = ids[::-1][:raw_runs]
    written = 0
    for run_id in wanted:
        if run_id in present or not RUN_ID.fullmatch(run_id):
            continue
        document = store.raw_document(run_id)
        (folder / f"{run_id}.json").write_bytes(orjson.dumps(document))  # compact: ~40% smaller
        present.add(run_id)
        written += 1
    data["runs"]["raw"] = [int(run_id in present) for run_id in ids]
    data["raw_runs"] = raw_runs  # the page names it for a point without a document
    return written


def build_site(
    db: str | Path,
    out: str | Path,
    *,
    repo_url: str | None = None,
    formats: tuple[str, ...] = (),
    max_points: int = MAX_POINTS,
    raw_runs: int = RAW_RUNS,
    title: str | None = None,
) -> BuildReport:
    """Build the site for the history at `db` into the folder `out` (created if missing).

    formats: ("github-action-benchmark",) also writes gab/data.js. raw_runs: raw documents
    published (runs/<run_id>.json) for the newest drawn runs; documents already in runs/ stay.
    Raises StoreError for an unusable database and DashboardError for an empty history.
    """
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise DashboardError(f"--out {out}: exists and is not a folder")
    unknown = set(formats) - {"github-action-benchmark"}
    if unknown:
        raise DashboardError(
            f"--format {', '.join(sorted(unknown))}: unknown; known: github-action-benchmark"
        )
    with Store(db, readonly=True) as store:
        marked = findings(store) if store.runs() else None
        data = collect(store, repo_url=repo_url, max_points=max_points, title=title, marked=marked)
        out.mkdir(parents=True, exist_ok=True)
        written = _publish_runs(store, data, out, raw_runs)
        latest_id = store.runs()[-1]["run_id"]
        pages = explain_pages.write(out, store.raw_document(latest_id), f"run {latest_id}")
        for row in data["table"]:
            row["explain"] = pages.get(row["case"])
        gab = github_action_benchmark_data(store, repo_url) if formats else None
    package = resources.files("harness.dashboard")
    _write_if_changed(out / "index.html", (package / "page.html").read_bytes())
    _write_if_changed(out / "app.js", (package / "app.js").read_bytes())
    for name in ("marks.js", "overview.js"):
        _write_if_changed(out / name, (package / name).read_bytes())
    _copy_plotly(out)
    (out / "data.js").write_bytes(b"window.KERNELGAP_DATA = " + orjson.dumps(data) + b";\n")
    names = ["index.html", "app.js", "marks.js", "overview.js", "plotly.min.js", "data.js"]
    if gab is not None:
        (out / GAB_DATA).parent.mkdir(exist_ok=True)
        (out / GAB_DATA).write_bytes(b"window.BENCHMARK_DATA = " + orjson.dumps(gab) + b";\n")
        names.append(GAB_DATA.as_posix())
    files = {name: (out / name).stat().st_size for name in names}
    files["runs/"] = sum(p.stat().st_size for p in (out / "runs").glob("*.json"))
    counts = data["counts"]
    return BuildReport(
        out=out,
        runs=counts["runs"],
        cases=len(data["cases"]),
        series=counts["series"],
        points_stored=counts["points_stored"],
        points_drawn=counts["points_drawn"],
        raw_written=written,
        raw_published=sum(data["runs"]["raw"]),
        files=files,
    )
