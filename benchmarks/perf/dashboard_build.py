"""Benchmark (not a test): build the dashboard for about 200 series x 1,000 points, then time
how long headless Chromium takes to render it from file://.

History: --documents (1,000) synthetic runs of --cases (67) cases x 3 implementations (baseline
'cuda', candidates 'forth' and 'ptx') x 30 samples = 201 series (202: case 5's 'forth' changes
its source half-way, a new series) of 1,000 points each, stored through Store.ingest() (the
real path, one transaction per run; untimed). The runs are the variants of
benchmarks/perf/history_ingest.py (steps, ~1% unstable points, an occasional failed case).

Timed:
  build   build_site() in process, default options (300 points drawn per series at most, the
          newest 20 raw documents written), into a fresh folder; then `python -m harness
          dashboard` as a command (adds the interpreter's start and imports); then the same
          with --format github-action-benchmark (every run's raw document is read for it).
  render  headless Chromium opens index.html from file://; the page writes performance.now()
          (ms since navigation start) when what is on screen is drawn (first view: header,
          headline, table and any chart in the window) and when every chart is drawn.
Targets: build under 5 s, render under 2 s.

    python benchmarks/perf/dashboard_build.py [--documents 1000] [--cases 67] [--db PATH]
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(Path(__file__).resolve().parent)]

from browser import Browser, chromium_path  # noqa: E402
from history_ingest import Variants  # noqa: E402

from harness.dashboard import build_site  # noqa: E402
from harness.store import Store  # noqa: E402

BUILD_TARGET_S, RENDER_TARGET_S = 5.0, 2.0


def make_history(db: Path, documents: int, cases: int) -> float:
    variants = Variants(cases, 30, documents)
    t0 = time.perf_counter()
    with Store(db) as store:
        for k in range(documents):
            document = variants.document(k)
            # Commit hashes like git's (the variants number them, so all start 0000000).
            document["suite"]["commit"] = hashlib.sha1(f"commit {k}".encode()).hexdigest()
            store.ingest(document, trusted=True, check=False)
    return time.perf_counter() - t0


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def render(index: Path, loads: int) -> list[dict]:
    """The page's timings (ms since navigation start) per load, in a fresh browser each time:
    script (plotly.min.js and data.js loaded, app.js starts), first_view, first_chart, rendered."""
    out = []
    for _ in range(loads):
        with Browser(width=1400, height=1000) as browser:
            browser.open(index.as_uri())
            browser.wait_for("document.body.dataset.rendered === 'all'", timeout_s=120)
            state = orjson.loads(
                browser.evaluate("document.getElementById('render-state').textContent")
            )
            if state["errors"] or browser.errors():
                raise SystemExit(f"the page reported errors: {state['errors'] or browser.errors()}")
            out.append({k[:-3]: state[k] for k in state if k.endswith("_ms")})
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--documents", type=int, default=1000)
    parser.add_argument("--cases", type=int, default=67)
    parser.add_argument("--loads", type=int, default=3, help="page loads timed (median shown)")
    parser.add_argument("--db", type=Path, help="the history to use (made here if missing)")
    args = parser.parse_args()
    tmp = tempfile.TemporaryDirectory(prefix="kernelgap-dashboard-")
    db = args.db or Path(tmp.name) / "history.sqlite"
    if not db.exists():
        ingest_s = make_history(db, args.documents, args.cases)
        print(f"history: {args.documents} runs ingested in {ingest_s:.1f} s (untimed)")
    with Store(db, readonly=True) as store:
        series = store.list_series()
    points = sum(s["points"] for s in series)
    print(f"history: {len(series)} series, {points} points, {db.stat().st_size / 1e6:.0f} MB")

    site = Path(tmp.name) / "site"
    t0 = time.perf_counter()
    report = build_site(db, site)
    build_s = time.perf_counter() - t0
    print(report.text())
    total = folder_bytes(site)
    print(
        f"build (in process): {build_s:.2f} s, target < {BUILD_TARGET_S:g} s: "
        f"{'met' if build_s < BUILD_TARGET_S else 'MISSED'}"
    )
    print(
        f"output: {total / 1e6:.1f} MB in all: data.js {report.files['data.js'] / 1e6:.2f} MB, "
        f"plotly.min.js {report.files['plotly.min.js'] / 1e6:.2f} MB, "
        f"runs/ {report.files['runs/'] / 1e6:.1f} MB ({report.raw_published} raw documents)"
    )
    command = [sys.executable, "-m", "harness", "dashboard", "--db", str(db)]
    for extra, label in (([], "command"), (["--format", "github-action-benchmark"], "+ gab")):
        out = Path(tmp.name) / f"site-{len(extra)}"
        t0 = time.perf_counter()
        subprocess.run(
            [*command, "--out", str(out), *extra], cwd=ROOT, check=True, capture_output=True
        )
        wall_s = time.perf_counter() - t0
        gab = out / "gab" / "data.js"
        size = f", gab/data.js {gab.stat().st_size / 1e6:.1f} MB" if gab.exists() else ""
        print(
            f"build ({label}: python -m harness dashboard {' '.join(extra)}): {wall_s:.2f} s{size}"
        )

    if chromium_path() is None:
        print("render: skipped (chromium is not installed)")
        return 0
    loads = render(site / "index.html", args.loads)
    ms = {key: statistics.median(load[key] for load in loads) for key in loads[0]}
    target_ms = RENDER_TARGET_S * 1e3
    print(
        f"render (headless Chromium, file://, 1400x1000 window, median of {len(loads)} loads, "
        f"ms since navigation start):\n"
        f"  plotly.min.js + data.js loaded: {ms['script']:.0f} ms\n"
        f"  first view painted (header, headline, table): {ms['first_view']:.0f} ms, "
        f"target < {target_ms:.0f} ms: {'met' if ms['first_view'] < target_ms else 'MISSED'}\n"
        f"  first case chart drawn: {ms['first_chart']:.0f} ms\n"
        f"  every chart drawn ({report.cases + 1} figures, in the background): "
        f"{ms['rendered']:.0f} ms ({'met' if ms['rendered'] < target_ms else 'over'} the target)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
