"""gab/data.js: the history in github-action-benchmark's data.js layout, small enough to publish.

`harness export --format github-action-benchmark RESULT.json` gives one run every entry that
action knows (times, gaps, suite geomeans, each with its interval and an `extra` of provenance).
For the whole history that is too much: 1,000 runs of a 67-case suite made a 179 MB data.js,
three quarters of it `extra`, and that action's page draws a chart per entry name. So the
history keeps, per run, what it is about: the gap entries and the suite geomean entries
(harness.reporting.export.github_action_benchmark's names and units), each as name, unit and value (five
significant digits). Times, intervals and provenance (series key, compiler, driver, commit)
stay in the run's raw document, which the run's commit message names: runs/<run_id>.json, as
the dashboard publishes it for its newest runs; every one is kept in the history store, and
`harness export` of a document gives its full entries.

A swept case keeps its headline point's gap entries; its other points are summarised, per run
and candidate, as one entry, the geometric mean of their stable gaps
("<case>/v<N>/sweep_geomean_gap/<candidate>", with how many points in its unit). Runs older than
the newest FULL_RUNS keep every THIN-th run's case entries (counted back from the newest) and
every run's suite geomeans: 10,000 runs of a swept suite stay near a few MB.

The entries are made from the series the dashboard has read already (one scan of the points),
never from the raw documents: the names and values are those of `harness export` (a gap entry
per stable gap, the suite geomean over the fixed set of protocol.headline), without the
provenance (`extra`) that this file never carries.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from harness.dashboard.case_charts import Series, read_series, rounded, run_modes
from harness.dashboard.geomeans import SUITE_FIELDS
from harness.history.series import run_mode
from harness.history.store import Store
from harness.reporting.table import lead_first
from protocol.points import split_id

__all__ = ["GAB_DATA", "gab_key", "github_action_benchmark_data"]

GAB_DATA = Path("gab") / "data.js"
DIGITS = 5  # significant digits kept of each value: far below any gap's interval
FULL_RUNS = 500  # the newest runs with every case entry
THIN = 100  # older runs: every THIN-th keeps its case entries, every one its suite geomeans


def _benches_by_run(
    all_series: list[Series], primary: str | None, full: np.ndarray
) -> dict[int, list[dict]]:
    """Run index -> its gap entries and suite geomean entries ({name, unit, value}), named as
    harness.reporting.export.github_action_benchmark names them; the primary's geomean first.
    full[run index]: whether the run keeps its case entries (module doc: FULL_RUNS, THIN); the
    others keep their suite geomeans only, and no entry is made for them to be dropped."""
    gaps: dict[int, list[dict]] = defaultdict(list)
    runs_of: dict[str, list[np.ndarray]] = defaultdict(list)  # baseline -> runs with its gaps
    swept: dict[tuple, list[tuple[np.ndarray, np.ndarray]]] = defaultdict(list)  # (runs, gaps)
    for s in all_series:
        if s.info["role"] != "candidate":
            continue
        info = s.info
        case_id, point = split_id(info["case_id"])
        shown = s.stable & s.gap_stable & ~np.isnan(s.gap)
        kept = shown & full[s.run]
        if point:  # summarised below: one entry per swept case, candidate and run
            if kept.any():
                key = (case_id, info["case_version"], info["impl"], info["baseline"])
                swept[key].append((s.run[kept], s.gap[kept]))
            continue
        runs_of[info["baseline"]].append(s.run[shown])
        name = f"{info['case_id']}/v{info['case_version']}/gap/{info['impl']}"
        unit = f"x {info['baseline']}"
        for run, gap in zip(s.run[kept].tolist(), rounded(s.gap[kept], DIGITS), strict=True):
            gaps[run].append({"name": name, "unit": unit, "value": gap})
    baselines: dict[int, set] = defaultdict(set)  # the suite entries' unit: x <its baseline>
    for baseline, parts in runs_of.items():
        for run in np.unique(np.concatenate(parts)).tolist():
            baselines[run].add(baseline)
    for (case_id, version, impl, baseline), parts in swept.items():
        name = f"{case_id}/v{version}/sweep_geomean_gap/{impl}"
        for run, values in _by_run(parts):
            logs = list(map(math.log, values))
            value = _digits(math.exp(math.fsum(logs) / len(logs)))
            unit = f"x {baseline}, {len(logs)} points"
            gaps[run].append({"name": name, "unit": unit, "value": value})
    out = {}
    suites = _suite_geomeans(all_series)
    for run in gaps.keys() | suites.keys():
        names = baselines[run]
        unit = f"x {next(iter(names))}" if len(names) == 1 else "x baseline"
        suite = [
            {"name": f"suite/geomean_gap/{n}", "unit": unit, "value": _digits(suites[run][n])}
            for n in lead_first(sorted(suites[run]), primary)
        ]
        lead = suite[:1] if suite and suite[0]["name"].endswith(f"/{primary}") else []
        out[run] = [*lead, *gaps[run], *suite[len(lead) :]]
    return out


def _by_run(parts: list[tuple[np.ndarray, np.ndarray]]):
    """(run, its values as a list) of (runs, values) arrays joined, each run once, in order."""
    runs = np.concatenate([r for r, _ in parts])
    values = np.concatenate([v for _, v in parts])
    order = np.argsort(runs, kind="stable")
    runs, values = runs[order], values[order]
    if not runs.size:
        return
    edges = [0, *(np.flatnonzero(np.diff(runs)) + 1).tolist(), runs.size]
    for start, stop in itertools.pairwise(edges):
        yield int(runs[start]), values[start:stop].tolist()


def _suite_geomeans(all_series: list[Series]) -> dict[int, dict[str, float]]:
    """run -> {candidate: its suite geomean gap}: the mean ln gap over the run's cases in
    geomeans.gaps_by_run's logs, the same ln values grouped with numpy rather than a dict per
    point (math.fsum is exact: the order of the sum does not matter). Where two series of a
    key give a run the same case, the later one counts, as in gaps_by_run's dict."""
    parts: dict[tuple, list] = defaultdict(list)  # key -> [(runs, ln gaps, case)]
    for s in all_series:
        if s.info["role"] != "candidate":
            continue
        key = (*(s.info[f] for f in SUITE_FIELDS), s.info["impl"])
        has_gap = ~np.isnan(s.gap)
        ln_gap = np.log(np.where(has_gap, s.gap, 1.0))  # as gaps_by_run computes it
        case = (s.info["case_id"], s.info["case_version"])
        parts[key].append((s.run[has_gap], ln_gap[has_gap], case))
    suites: dict[int, dict[str, float]] = defaultdict(dict)
    for key, found in parts.items():
        codes = {case: k for k, case in enumerate(dict.fromkeys(c for _, _, c in found))}
        runs = np.concatenate([r for r, _, _ in found])
        logs = np.concatenate([ln for _, ln, _ in found])
        pair = runs * len(codes) + np.concatenate(
            [np.full(r.size, codes[c], dtype=np.int64) for r, _, c in found]
        )
        last = pair.size - 1 - np.unique(pair[::-1], return_index=True)[1]  # the later series'
        if last.size < pair.size:
            runs, logs = runs[np.sort(last)], logs[np.sort(last)]
        for run, values in _by_run([(runs, logs)]):
            suites[run][key[3]] = math.exp(math.fsum(values) / len(values))
    return suites


def _digits(value: float) -> float:
    return float(f"{value:.{DIGITS}g}")


def github_action_benchmark_data(
    store: Store,
    repo_url: str | None = None,
    series: list[Series] | None = None,
    primary: str | None = None,
    runs: list[dict] | None = None,
) -> dict:
    """Every run of the history in github-action-benchmark's data.js layout.

    One entry per run, oldest first, under one key per GPU model, timing mode and suite
    version (gab_key(): that action's page draws each key as its own charts, so runs that must
    not share a line never do), with the run's gap and suite geomean entries. The history
    knows no commit message, author or commit time: message names the run and its raw
    document, author and committer are "unknown" (that action's page shows
    committer.username) and timestamp is the run's start. series: read_series(store,
    store.runs()) when the caller has read it; primary: the candidate whose geomean leads;
    runs: store.runs(), when the caller has read them.
    """
    repo = (repo_url or "").rstrip("/")
    runs = store.runs() if runs is None else runs
    series = read_series(store, runs) if series is None else series
    age = len(runs) - 1 - np.arange(len(runs))  # runs before the newest
    benches = _benches_by_run(series, primary, (age < FULL_RUNS) | (age % THIN == 0))
    modes = run_modes(series)
    entries: dict[str, list[dict]] = {}
    person = {"name": "unknown", "email": "", "username": "unknown"}
    for index, run in enumerate(runs):
        started = datetime.fromisoformat(run["started_utc"].replace("Z", "+00:00"))
        sha = run["commit_sha"]
        key = _key(run["gpu"], modes.get(index), run["suite_version"])
        entries.setdefault(key, []).append(
            {
                "commit": {
                    "id": sha or run["run_id"],
                    "message": f"kernelgap run {run['run_id'][:12]} on {run['gpu']} "
                    f"(raw document: runs/{run['run_id']}.json)",
                    "timestamp": started.isoformat(),
                    "url": f"{repo}/commit/{sha}" if repo and sha else repo,
                    "author": person,
                    "committer": person,
                },
                "date": int(started.timestamp() * 1000),
                "tool": "customSmallerIsBetter",
                "benches": benches.get(index, []),
            }
        )
    return {
        "lastUpdate": int(datetime.now(UTC).timestamp() * 1000),
        "repoUrl": repo,
        "entries": entries,
    }


def _key(gpu: str, mode: str | None, suite_version) -> str:
    return f"kernelgap {gpu} {mode or 'mode unknown'} suite v{suite_version}"


def gab_key(document: dict) -> str:
    """The github-action-benchmark key of a run: 'kernelgap <GPU model> <mode> suite v<N>'.

    GPU model and suite version as in its series keys; the mode is the run's (options.mode, or
    for an older document that recorded null there, the one its cases ran in).
    """
    gpu = document["environment"]["device"]["name"]
    return _key(gpu, run_mode(document), document["suite"]["version"])
