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
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from harness.history.series import run_mode
from harness.history.store import Store
from harness.reporting.export.github_action_benchmark import entries as gab_entries

__all__ = ["GAB_DATA", "compact_benches", "gab_key", "github_action_benchmark_data"]

GAB_DATA = Path("gab") / "data.js"
DIGITS = 5  # significant digits kept of each value: far below any gap's interval


def compact_benches(benches: list[dict]) -> list[dict]:
    """The gap and suite geomean entries of one run, as {name, unit, value}."""
    return [
        {"name": b["name"], "unit": b["unit"], "value": float(f"{b['value']:.{DIGITS}g}")}
        for b in benches
        if "/gap" in b["name"] or b["name"].startswith("suite/")
    ]


def github_action_benchmark_data(store: Store, repo_url: str | None = None) -> dict:
    """Every run of the history in github-action-benchmark's data.js layout.

    One entry per run, oldest first, under one key per GPU model, timing mode and suite
    version (gab_key(): that action's page draws each key as its own charts, so runs that must
    not share a line never do), with compact_benches() of the run. The history knows no commit
    message, author or commit time: message names the run and its raw document, author and
    committer are "unknown" (that action's page shows committer.username) and timestamp is the
    run's start.
    """
    repo = (repo_url or "").rstrip("/")
    entries: dict[str, list[dict]] = {}
    for run in store.runs():
        document = store.raw_document(run["run_id"])
        started = datetime.fromisoformat(run["started_utc"].replace("Z", "+00:00"))
        sha = run["commit_sha"]
        person = {"name": "unknown", "email": "", "username": "unknown"}
        entries.setdefault(gab_key(document), []).append(
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
                "benches": compact_benches(gab_entries(document)),
            }
        )
    return {
        "lastUpdate": int(datetime.now(UTC).timestamp() * 1000),
        "repoUrl": repo,
        "entries": entries,
    }


def gab_key(document: dict) -> str:
    """The github-action-benchmark key of a run: 'kernelgap <GPU model> <mode> suite v<N>'.

    GPU model and suite version as in its series keys; the mode is the run's (options.mode, or
    for an older document that recorded null there, the one its cases ran in).
    """
    gpu = document["environment"]["device"]["name"]
    mode = run_mode(document) or "mode unknown"
    return f"kernelgap {gpu} {mode} suite v{document['suite']['version']}"
