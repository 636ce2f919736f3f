"""Benchmark (not a test): the dashboard issue's targets, each the median of --repeat runs, on
the planted history of dashboard_history.py (--documents runs of --cases (12) cases x 4
implementations, every case swept over --points (8) sizes: about the bundled suite swept at
every point; hot and cold-mean, as the current runner writes them, every implementation with its
static counters and three cases' counters stepping, a run on another GPU model, a throttled
run), and the screenshots that show them (desktop and 390 x 844).

Timed:
  build          `python -m harness dashboard` as a command, without and with
                 --format github-action-benchmark (target: with it, <= 5 s of CPU), wall and
                 CPU (the child's user + system), with the load average when it began; and the
                 size of gab/data.js (target <= 10 MB)
  first view     headless Chromium, 1400 x 1000, file://: ms until the first window (mode
                 switch, headline with its trend, alerts, lead chart) is painted
  in view        ms until every chart in the window at open is drawn (target <= 2 s)
  jump           ms from scrolling to the bottom chart, as soon as the first view is painted
                 (plotly.min.js still loading), until it is drawn (target <= 2 s): sketched as
                 SVG (sketch.js); then until Plotly has drawn it (hover and zoom)
  ingest         `python -m harness ingest --trusted` of --ingest-runs files (history_ingest.py's
                 documents: 30 cases x 3 implementations, each with its static counters) in
                 one call into a fresh history:
                 each read, validated and checked, then all stored in one transaction (target
                 for 10,000: <= 60 s in all), wall and CPU; and the median of 5 calls of one
                 file each (target <= 200 ms); with the load average when the ingest began
--shots DIR writes first-window.png (hot), first-window-cold.png, alerts.png (every alert event
unfolded), case-page.png and trend.png (the suite chart, every run), and phone-*.png of the
first window (hot and cold), the alerts and the case page at 390 x 844. --no-ingest skips it.

    python tools/perf/dashboard_targets.py [--documents 1000] [--ingest-runs 10000]
        [--repeat 3] [--shots docs/images] [--ingest-only | --no-ingest] [--points 8] [--cases 12]
        [--db PATH (a history made by dashboard_history.py, used as is)]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dashboard_build import JUMP_JS, render, site_middle_chart
from dashboard_history import make_history
from history_ingest import ROOT, Variants

from harness.dashboard import build_site
from tests.support.harness_docs import suite_manifest

TARGETS = {
    "build + gab, CPU (s)": 5.0,  # CPU: the machine is shared, its wall time is not ours
    "gab/data.js (MB)": 10.0,
    "in view (ms)": 2000,
    "jump (ms)": 2000,
    "ingest (s)": 60.0,
    "ingest, one file per call (ms)": 200,
}
# As dashboard_build.JUMP_JS, but until the bottom chart is drawn with Plotly (not sketched).
JUMP_PLOTLY_JS = JUMP_JS.replace("node.dataset.drawn", "(node.data && node.dataset.drawn)")


def jump_plotly(index: Path) -> float:
    """ms from the jump to the bottom chart until Plotly has drawn it (sketch.js's SVG first)."""
    from tests.support.browser import Browser

    with Browser(width=1400, height=1000) as browser:
        browser.send("Page.addScriptToEvaluateOnNewDocument", {"source": JUMP_PLOTLY_JS})
        browser.open(index.as_uri())
        return browser.wait_for("window.jumpMs", timeout_s=120)


def build(db: Path, out: Path, gab: bool) -> tuple[float, float]:
    """(wall s, CPU s) of one `python -m harness dashboard` (CPU: the child's user + system)."""
    extra = ["--format", "github-action-benchmark"] if gab else []
    command = [sys.executable, "-m", "harness", "dashboard", "--db", str(db), "--out", str(out)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([*command, *extra], cwd=ROOT, check=True, capture_output=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def site_rows(rows: dict[str, list[float]], db: Path, site: Path, out: Path) -> None:
    """One repeat of the build and browser figures, added to `rows`."""
    for name, folder, gab in (("build", "b", False), ("build + gab", "g", True)):
        rows.setdefault(f"load average at the {name}", []).append(os.getloadavg()[0])
        wall, cpu = build(db, out / folder, gab=gab)
        rows.setdefault(f"{name} (s)", []).append(wall)
        rows.setdefault(f"{name}, CPU (s)", []).append(cpu)
    rows.setdefault("gab/data.js (MB)", []).append(
        (out / "g" / "gab" / "data.js").stat().st_size / 1e6
    )
    page = render(site / "index.html", site_middle_chart(site))
    rows.setdefault("first view (ms)", []).append(page["first_view"])
    rows.setdefault("in view (ms)", []).append(page["in_view"])
    rows.setdefault("jump (ms)", []).append(page["suite_at_once"])
    rows.setdefault("jump, Plotly drawn (ms)", []).append(jump_plotly(site / "index.html"))


def ingest_files(n: int, folder: Path, static: bool = True) -> tuple[Path, list[str]]:
    """(the suite manifest, n result files): history_ingest.py's documents, as a backfill has,
    each implementation with its static counters (`static`), written through to the disk."""
    variants = Variants(30, 30, n, static=static)
    docs = [variants.document(k) for k in range(n)]
    manifest = suite_manifest(folder, *docs)  # the repository's word on the suite (--cases)
    files = []
    for k, doc in enumerate(docs):
        path = folder / f"run-{k}.json"
        path.write_bytes(orjson.dumps(doc))
        files.append(str(path))
    os.sync()  # flushed now (4 GB at 10,000 files), not during the ingest timed next
    return manifest, files


def ingest(manifest: Path, files: list[str], db: Path) -> tuple[float, float]:
    """(wall s, CPU s) of one `harness ingest --trusted` of every file into the fresh history
    `db` (CPU: the child's user + system)."""
    command = [sys.executable, "-m", "harness", "ingest", "--trusted", "--cases", str(manifest)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(
        [*command, "--db", str(db), *files], cwd=ROOT, check=True, capture_output=True, text=True
    )
    seconds = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if f"{len(files)} of {len(files)} runs stored" not in done.stderr:
        raise SystemExit(f"ingest: not every run stored: {done.stderr[-300:]}")
    return seconds, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def ingest_one(manifest: Path, files: list[str], db: Path) -> float:
    """The median ms of one `harness ingest --trusted` call per file (files[:5], into `db`)."""
    command = [sys.executable, "-m", "harness", "ingest", "--trusted", "--cases", str(manifest)]
    times_ms = []
    for path in files[:5]:
        t0 = time.perf_counter()
        subprocess.run([*command, "--db", str(db), path], cwd=ROOT, check=True, capture_output=True)
        times_ms.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times_ms)


def counter_steps(site: Path) -> str:
    """What the site's counter panels hold: cases with a panel, with steps, and the steps; an
    error if the planted steps are missing (the figures would not be of counters)."""
    data = (site / "data.js").read_text()
    cases = orjson.loads(data[data.index("{") : data.rstrip().rindex("}") + 1])["cases"]
    panels = [c["counters"] for c in cases if c.get("counters")]
    stepped = [p for p in panels if p["steps"]]
    if len(stepped) < 3:
        raise SystemExit(f"counter panels: {len(stepped)} cases with steps; 3 were planted")
    steps = sum(len(p["steps"]) for p in stepped)
    return f"{len(panels)} cases with counters, {len(stepped)} with steps ({steps} steps)"


def screenshots(site: Path, shots: Path) -> list[Path]:
    """The first window in hot and cold, the alerts unfolded and a case page, at 1400 x 1000
    (also the suite chart over every run: trend.png) and at 390 x 844 (phone-*.png)."""
    from tests.support.browser import Browser  # ROOT on the path through dashboard_build

    data = (site / "data.js").read_text()
    cases = orjson.loads(data[data.index("{") : data.rstrip().rindex("}") + 1])["cases"]
    page = next(c["page"] for c in cases if c["id"] == "case_03")
    shots.mkdir(parents=True, exist_ok=True)
    out = []
    for width, height, prefix in ((1400, 1000, ""), (390, 844, "phone-")):
        with Browser(width=width, height=height) as browser:
            browser.open((site / "index.html").as_uri())
            browser.wait_for("document.body.dataset.rendered", timeout_s=60)
            browser.evaluate("kernelgapIdle()")
            out.append(browser.screenshot(shots / f"{prefix}first-window.png"))
            if not prefix:
                browser.evaluate("window.kernelgapSetRange('all')")
                browser.evaluate("document.getElementById('suite').scrollIntoView()")
                browser.evaluate("kernelgapIdle()")
                out.append(browser.screenshot(shots / "trend.png"))
                browser.evaluate("kernelgapSetRange('50')")
                browser.evaluate("window.scrollTo(0, 0)")
            browser.evaluate("kernelgapSetMode('cold-mean')")
            browser.evaluate("kernelgapIdle()")
            out.append(browser.screenshot(shots / f"{prefix}first-window-cold.png"))
            browser.evaluate("kernelgapSetMode('hot')")
            browser.evaluate(UNFOLD_ALERTS)
            browser.evaluate("document.getElementById('alerts').scrollIntoView()")
            out.append(browser.screenshot(shots / f"{prefix}alerts.png"))
            browser.open((site / page).as_uri())
            out.append(browser.screenshot(shots / f"{prefix}case-page.png"))
    return out


# Every alert event shown, the first one's series listed.
UNFOLD_ALERTS = """(() => { const more = document.querySelector('#alerts button.more');
  if (more) more.click(); const d = document.querySelector('#alerts details.covers');
  if (d) d.open = true; })()"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--documents", type=int, default=1000)
    parser.add_argument("--ingest-runs", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--ingest-only", action="store_true", help="time the ingest only (no history, no site)"
    )
    parser.add_argument("--shots", type=Path, help="a folder for the screenshots")
    parser.add_argument(
        "--no-ingest", action="store_true", help="the history and site only (no ingest)"
    )
    parser.add_argument(
        "--points", type=int, default=8, help="every case swept over this many sizes (1: none)"
    )
    parser.add_argument("--cases", type=int, default=12, help="cases in the planted history")
    parser.add_argument(
        "--db", type=Path, help="a planted history made already (dashboard_history.py): used as is"
    )
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="kernelgap-targets-"))
    db, site = tmp / "history.sqlite", tmp / "site"
    if args.db:
        db = args.db
    elif not args.ingest_only:
        made_s = make_history(db, args.documents, args.cases, points=args.points)
        print(f"history: {args.documents} runs in {made_s:.1f} s", file=sys.stderr)
    if not args.ingest_only:
        site = build_site(db, site).out
        print(f"counter panels: {counter_steps(site)}", file=sys.stderr)
    rows: dict[str, list[float]] = {}
    TARGETS["ingest (s)"] = 60.0 * args.ingest_runs / 10_000
    manifest, files = (None, []) if args.no_ingest else ingest_files(args.ingest_runs, tmp)
    for k in range(args.repeat):
        if not args.ingest_only:
            site_rows(rows, db, site, tmp / str(k))
        if args.no_ingest:
            continue
        load = os.getloadavg()[0]
        seconds, cpu = ingest(manifest, files, tmp / f"ingest-{k}.sqlite")
        rows.setdefault("ingest (s)", []).append(seconds)
        rows.setdefault("ingest, CPU (s)", []).append(cpu)
        rows.setdefault("ingest, one file per call (ms)", []).append(
            ingest_one(manifest, files, tmp / f"one-{k}.sqlite")
        )
        rows.setdefault("load average at the ingest", []).append(load)
        print(f"repeat {k + 1} of {args.repeat} done", file=sys.stderr)
    swept = f", every case swept over {args.points} sizes" if args.points > 1 else ""
    print(
        f"dashboard_targets: {args.documents}-run planted history of {args.cases} cases{swept}, "
        f"median of {args.repeat}"
    )
    print("| figure | median | runs | target | |\n|---|---|---|---|---|")
    for name, values in rows.items():
        target = TARGETS.get(name)
        verdict = (
            "" if target is None else ("met" if statistics.median(values) <= target else "MISSED")
        )
        shown = ", ".join(f"{v:.3g}" for v in values)
        print(
            f"| {name} | {statistics.median(values):.3g} | {shown} | {target or '-'} | {verdict} |"
        )
    if not args.no_ingest:
        print(f"| ingest: {args.ingest_runs} files in one `harness ingest` call | | | | |")
    if args.shots:
        for path in screenshots(site, args.shots):
            print(f"screenshot: {path} ({path.stat().st_size / 1e3:.0f} kB)")
    shutil.rmtree(tmp)  # 10,000 result files and the histories: gigabytes
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
