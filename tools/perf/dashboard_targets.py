"""Benchmark (not a test): the dashboard issue's targets, each the median of --repeat runs, on
the planted history of dashboard_history.py (--documents runs of 25 cases x 4 implementations,
hot and cold), and the screenshots that show them.

Timed:
  build          `python -m harness dashboard` as a command, without and with
                 --format github-action-benchmark (target: with it, <= 5 s)
  first view     headless Chromium, 1400 x 1000, file://: ms until the first window (mode
                 switch, headline with its trend, alerts, lead chart) is painted
  in view        ms until every chart in the window at open is drawn (target <= 2 s)
  jump           ms from scrolling to the bottom chart, as soon as the first view is painted
                 (plotly.min.js still loading), until it is drawn (target <= 2 s): sketched as
                 SVG (sketch.js); then until Plotly has drawn it (hover and zoom)
  ingest         --ingest-runs documents (history_ingest.py's: 30 cases x 3 implementations),
                 each read from JSON bytes, version-checked and validated against the schema
                 (protocol.documents.load_result, as `harness ingest` reads a file) and stored
                 with Store.ingest_many (one transaction) into a fresh history (target for
                 10,000: <= 60 s in all)
  ingest (CLI)   `python -m harness ingest A.json B.json ... --trusted` of --cli-files files,
                 per run, against one call per file
--shots DIR writes first-window.png, case-page.png and trend.png (the suite chart, every run).

    python tools/perf/dashboard_targets.py [--documents 1000] [--ingest-runs 10000]
        [--repeat 3] [--shots docs/images]
"""

from __future__ import annotations

import argparse
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
from harness.history.store import Store
from protocol import documents
from tests.support.harness_docs import suite_manifest

TARGETS = {"build + gab (s)": 5.0, "in view (ms)": 2000, "jump (ms)": 2000, "ingest (s)": 60.0}
# As dashboard_build.JUMP_JS, but until the bottom chart is drawn with Plotly (not sketched).
JUMP_PLOTLY_JS = JUMP_JS.replace("node.dataset.drawn", "(node.data && node.dataset.drawn)")


def jump_plotly(index: Path) -> float:
    """ms from the jump to the bottom chart until Plotly has drawn it (sketch.js's SVG first)."""
    from tests.support.browser import Browser

    with Browser(width=1400, height=1000) as browser:
        browser.send("Page.addScriptToEvaluateOnNewDocument", {"source": JUMP_PLOTLY_JS})
        browser.open(index.as_uri())
        return browser.wait_for("window.jumpMs", timeout_s=120)


def build(db: Path, out: Path, gab: bool) -> float:
    extra = ["--format", "github-action-benchmark"] if gab else []
    command = [sys.executable, "-m", "harness", "dashboard", "--db", str(db), "--out", str(out)]
    t0 = time.perf_counter()
    subprocess.run([*command, *extra], cwd=ROOT, check=True, capture_output=True)
    return time.perf_counter() - t0


def ingest(raw: list[bytes], folder: Path) -> float:
    """Seconds to read, validate and store the documents `raw` in a fresh history (module
    doc)."""
    n = len(raw)
    t0 = time.perf_counter()
    batch = [(documents.load_result(data, f"doc {k}"), f"doc {k}") for k, data in enumerate(raw)]
    with Store(folder / f"ingest-{time.monotonic_ns()}.sqlite") as store:
        stored = sum(r.stored for r in store.ingest_many(batch))
    if stored != n:
        raise SystemExit(f"ingest: {stored} of {n} stored")
    return time.perf_counter() - t0


def ingest_cli(n: int, folder: Path) -> tuple[float, float]:
    """ms per run: one `harness ingest` of n files, and one call per file (of 5 files)."""
    variants = Variants(30, 30, n)
    docs = [variants.document(k) for k in range(n)]
    manifest = suite_manifest(folder, *docs)  # the repository's word on the suite (--cases)
    files = []
    for k, doc in enumerate(docs):
        path = folder / f"run-{k}.json"
        path.write_bytes(orjson.dumps(doc))
        files.append(str(path))
    command = [sys.executable, "-m", "harness", "ingest", "--trusted", "--cases", str(manifest)]
    t0 = time.perf_counter()
    subprocess.run(
        [*command, "--db", str(folder / "many.sqlite"), *files],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    many_ms = (time.perf_counter() - t0) / n * 1e3
    t0 = time.perf_counter()
    for path in files[:5]:
        subprocess.run(
            [*command, "--db", str(folder / "one.sqlite"), path],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
    return many_ms, (time.perf_counter() - t0) / 5 * 1e3


def screenshots(site: Path, shots: Path) -> list[Path]:
    from tests.support.browser import Browser  # ROOT on the path through dashboard_build

    data = (site / "data.js").read_text()
    cases = orjson.loads(data[data.index("{") : data.rstrip().rindex("}") + 1])["cases"]
    shots.mkdir(parents=True, exist_ok=True)
    out = []
    with Browser(width=1400, height=1000) as browser:
        browser.open((site / "index.html").as_uri())
        browser.wait_for("document.body.dataset.rendered", timeout_s=60)
        browser.evaluate("kernelgapIdle()")
        out.append(browser.screenshot(shots / "first-window.png"))
        browser.evaluate("window.kernelgapSetRange('all')")
        browser.evaluate("document.getElementById('suite').scrollIntoView()")
        browser.evaluate("kernelgapIdle()")
        out.append(browser.screenshot(shots / "trend.png"))
        page = next(c["page"] for c in cases if c["id"] == "case_03")
        browser.open((site / page).as_uri())
        out.append(browser.screenshot(shots / "case-page.png"))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--documents", type=int, default=1000)
    parser.add_argument("--ingest-runs", type=int, default=10_000)
    parser.add_argument("--cli-files", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--shots", type=Path, help="a folder for the screenshots")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="kernelgap-targets-"))
    db = tmp / "history.sqlite"
    print(
        f"history: {args.documents} runs in {make_history(db, args.documents):.1f} s",
        file=sys.stderr,
    )
    site = build_site(db, tmp / "site").out
    rows: dict[str, list[float]] = {}
    variants = Variants(30, 30, args.ingest_runs)
    raw = [orjson.dumps(variants.document(k)) for k in range(args.ingest_runs)]  # the files
    for k in range(args.repeat):
        rows.setdefault("build (s)", []).append(build(db, tmp / f"b{k}", gab=False))
        rows.setdefault("build + gab (s)", []).append(build(db, tmp / f"g{k}", gab=True))
        page = render(site / "index.html", site_middle_chart(site))
        rows.setdefault("first view (ms)", []).append(page["first_view"])
        rows.setdefault("in view (ms)", []).append(page["in_view"])
        rows.setdefault("jump (ms)", []).append(page["suite_at_once"])
        rows.setdefault("jump, Plotly drawn (ms)", []).append(jump_plotly(site / "index.html"))
        rows.setdefault("ingest (s)", []).append(ingest(raw, tmp))
        print(f"repeat {k + 1} of {args.repeat} done", file=sys.stderr)
    many_ms, one_ms = ingest_cli(args.cli_files, tmp)
    print(f"dashboard_targets: {args.documents}-run planted history, median of {args.repeat}")
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
    print(f"| ingest of {args.ingest_runs} runs | see ingest (s) | | | |")
    print(f"| `harness ingest` of {args.cli_files} files (ms/run) | {many_ms:.1f} | | | |")
    print(f"| `harness ingest` one file per call (ms/run) | {one_ms:.0f} | | | |")
    if args.shots:
        for path in screenshots(site, args.shots):
            print(f"screenshot: {path} ({path.stat().st_size / 1e3:.0f} kB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
