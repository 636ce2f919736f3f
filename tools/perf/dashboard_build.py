"""Benchmark (not a test): build the dashboard for about 200 series x 1,000 points, then time
how long headless Chromium takes to render it from file://.

History: --documents (1,000) synthetic runs of --cases (67) cases x 3 implementations (baseline
'cuda', candidates 'forth' and 'ptx') x 30 samples = 201 series (202: case 5's 'forth' changes
its source half-way, a new series) of 1,000 points each, stored through Store.ingest() (the
real path, one transaction per run; untimed). The runs are the variants of
tools/perf/history_ingest.py (steps, ~1% unstable points, an occasional failed case).

Timed:
  build   build_site() in process, default options (300 points drawn per series at most, the
          newest 20 raw documents written), into a fresh folder; then `python -m harness
          dashboard` as a command (adds the interpreter's start and imports); then the same
          with --format github-action-benchmark (every run's raw document is read for it).
  render  headless Chromium (1400 x 1000 window, a fresh browser per load) opens index.html
          from file://; the page writes performance.now() (ms since navigation start) when
          data.js is loaded, when its first view is painted (header, alerts, headline, lead
          chart, table), when every chart in the window at open is drawn and painted (and how
          many that was, of all), and when plotly.min.js is loaded. Charts are drawn as they
          come into view: once the page is settled, a case chart half-way down and the suite
          chart at the bottom are each scrolled to and timed until drawn and painted; then the
          whole page is scrolled through a window at a time, waiting at each stop until what is
          in view is drawn. A second load scrolls to the suite chart as soon as the first view
          is painted, before plotly.min.js has loaded: the worst wait for a chart.
Targets: build under 5 s; every chart in view at open drawn within 2 s.

    python tools/perf/dashboard_build.py [--documents 1000] [--cases 67] [--db PATH]
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
sys.path[:0] = [str(ROOT), str(Path(__file__).resolve().parent)]

from history_ingest import Variants  # noqa: E402

from harness.dashboard import build_site  # noqa: E402
from harness.history.store import Store  # noqa: E402
from tests.support.browser import Browser, chromium_path  # noqa: E402

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


# Scrolls chart `id` to the middle of the window; ms until it is drawn and painted.
SCROLL_TO_JS = """(async (id) => {
  const node = document.getElementById(id), painted = () => new Promise((resolve) =>
    requestAnimationFrame(() => setTimeout(resolve, 0)));
  const t0 = performance.now();
  node.scrollIntoView({ block: "center" });
  while (!node.dataset.drawn) await painted();
  await painted();
  return performance.now() - t0;
})"""
# Scrolls to `y` and waits until what is in view is drawn; [ms, window height, page height].
SCROLL_STOP_JS = """(async (y) => {
  const t0 = performance.now();
  scrollTo(0, y);
  await kernelgapIdle();
  return [performance.now() - t0, innerHeight, document.documentElement.scrollHeight];
})"""
# Run before the page's own scripts: as soon as its first view is painted (data-rendered
# "first"), scroll to the suite chart and set window.jumpMs when it is drawn and painted.
JUMP_JS = """new MutationObserver((_, watch) => {
  if (!document.body || document.body.dataset.rendered !== "first") return;
  watch.disconnect();
  const node = document.getElementById("chart-suite"), t0 = performance.now();
  node.scrollIntoView({ block: "center" });
  const poll = () => node.dataset.drawn
    ? requestAnimationFrame(() => setTimeout(() => (window.jumpMs = performance.now() - t0), 0))
    : requestAnimationFrame(poll);
  poll();
}).observe(document, { subtree: true, attributeFilter: ["data-rendered"] });"""
STATE_JS = "JSON.parse(document.getElementById('render-state').textContent)"
SETTLED_JS = f"['view', 'all'].includes(document.body.dataset.rendered) && {STATE_JS}.plotly_ms"


def page_state(browser: Browser) -> dict:
    state = browser.evaluate(STATE_JS)
    if state["errors"] or browser.errors():
        raise SystemExit(f"the page reported errors: {state['errors'] or browser.errors()}")
    return state


def render(index: Path, middle: str) -> dict:
    """One load's figures (ms): the page's own timings, then the scrolls (module doc)."""
    with Browser(width=1400, height=1000) as browser:
        browser.open(index.as_uri())
        browser.wait_for(SETTLED_JS, timeout_s=120)
        browser.evaluate("kernelgapIdle()")
        state = page_state(browser)
        times = {k: v for k, v in state.items() if k.endswith("_ms") and isinstance(v, float | int)}
        out = {k[:-3]: v for k, v in times.items()}
        out.update(drawn_at_open=state["drawn_at_open"], charts=state["charts"])
        out["middle_scroll"] = browser.evaluate(f"{SCROLL_TO_JS}('{middle}')")
        browser.evaluate("kernelgapIdle()")
        out["suite_scroll"] = browser.evaluate(f"{SCROLL_TO_JS}('chart-suite')")
        stops, y, bottom = [], 0, False
        while not bottom:
            stop_ms, window_px, page_px = browser.evaluate(f"{SCROLL_STOP_JS}({y})")
            stops.append(stop_ms)
            bottom, y = y + window_px >= page_px, y + window_px
        state = page_state(browser)
        if state["drawn"] != state["charts"]:
            raise SystemExit(f"scrolled through, {state['drawn']} of {state['charts']} drawn")
        out.update(stops=len(stops), stop_median=statistics.median(stops), stops_total=sum(stops))
        out["chart_median"] = statistics.median(state["chart_ms"].values())
    with Browser(width=1400, height=1000) as browser:  # a reader who jumps at once
        browser.send("Page.addScriptToEvaluateOnNewDocument", {"source": JUMP_JS})
        browser.open(index.as_uri())
        out["suite_at_once"] = browser.wait_for("window.jumpMs", timeout_s=120)
        page_state(browser)
    return out


def site_middle_chart(site: Path) -> str:
    """The element id of the chart of the case half-way down the page."""
    text = (site / "data.js").read_text()
    cases = orjson.loads(text[text.index("{") : text.rstrip().rindex("}") + 1])["cases"]
    return "chart-" + cases[len(cases) // 2]["anchor"]


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
    middle = site_middle_chart(site)
    loads = [render(site / "index.html", middle) for _ in range(args.loads)]
    ms = {key: statistics.median(load[key] for load in loads) for key in loads[0]}
    target_ms = RENDER_TARGET_S * 1e3
    met = "met" if ms["in_view"] <= target_ms else "MISSED"
    print(
        f"render (headless Chromium, file://, 1400x1000 window, median of {len(loads)} loads, "
        f"ms since navigation start):\n"
        f"  data.js loaded, app.js starts: {ms['script']:.0f} ms\n"
        f"  first view painted (header, alerts, headline, lead chart, table): "
        f"{ms['first_view']:.0f} ms\n"
        f"  every chart in the window at open drawn: {ms['in_view']:.0f} ms, target <= "
        f"{target_ms:.0f} ms: {met} ({ms['drawn_at_open']:.0f} of {ms['charts']:.0f} charts "
        f"drawn at open)\n"
        f"  plotly.min.js loaded (after that, in the background): {ms['plotly']:.0f} ms\n"
        f"then, the page settled (ms from scrolling until drawn and painted):\n"
        f"  a case chart half-way down ({middle}): {ms['middle_scroll']:.0f} ms\n"
        f"  the suite chart at the bottom: {ms['suite_scroll']:.0f} ms\n"
        f"  the whole page a window at a time: {ms['stops']:.0f} stops, median "
        f"{ms['stop_median']:.0f} ms a stop, {ms['stops_total']:.0f} ms in all; one chart's "
        f"drawing, median {ms['chart_median']:.0f} ms\n"
        f"  the suite chart scrolled to as soon as the first view is painted (plotly.min.js "
        f"not loaded yet): {ms['suite_at_once']:.0f} ms"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
