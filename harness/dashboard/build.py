"""Build the static dashboard site from the history store.

The site, every file beside index.html so that it works from file:// and from any web server:
  index.html          the page (page.html as is: it holds no data)
  app.js              draws the headline, the table and the charts from data.js; it loads
                      plotly.min.js itself once the page's first view is on screen, and draws a
                      chart only when it comes into (or near) the window (lazy.js)
  charts.js           the history charts' Plotly figures: each case's, the suite's
  plotly.min.js       plotly.js as shipped inside the plotly Python package (no CDN; copied
                      once: an identical file already there is left alone)
  data.js             `window.KERNELGAP_DATA = {...};` (harness.dashboard.data: what it holds)
  runs/<run_id>.json  raw result documents, named by content hash and so never rewritten
  explain/<stem>.*    harness explain of each case of the newest run (.md and a .html page;
                      <stem>: a readable prefix of the case id and a hash of all of it)
  cases/<stem>.html   each case's page: its history per mode (SVG, no script), the explain
                      report as HTML, links back (harness.dashboard.case_pages)
  sketch.js           a history chart as plain SVG while plotly.min.js loads (then Plotly's)
  headline.js         the headline cards of the chosen mode with their trends, and the alerts
  gab/data.js         with --format github-action-benchmark only: the history's gaps and suite
                      geomeans in that action's layout, `window.BENCHMARK_DATA = {...};`
                      (harness.dashboard.gab)
  marks.js            the open alerts and the change-point marks (harness.dashboard.alerts)
  counters.js         each case's counter panel under its chart: static counters over time,
                      their steps marked and linked to the case page (.counter_panels)
  overview.js         the lead chart: the newest run's gap per case, sorted, with intervals,
                      drawn as SVG without plotly.js so that it is on screen at once
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import orjson

from harness.dashboard import case_pages, explain_pages
from harness.dashboard.alerts import between_cards, findings
from harness.dashboard.case_charts import MAX_POINTS, TAIL_POINTS, display_indices, read_series
from harness.dashboard.data import DATA_FORMAT_VERSION, collect
from harness.dashboard.gab import GAB_DATA, gab_key, github_action_benchmark_data
from harness.errors import DashboardError
from harness.history.store import Store, collection_paused

__all__ = [
    "DATA_FORMAT_VERSION",
    "GAB_DATA",
    "MAX_POINTS",
    "RAW_RUNS",
    "TAIL_POINTS",
    "BuildReport",
    "build_site",
    "collect",
    "display_indices",
    "gab_key",
    "github_action_benchmark_data",
]

RAW_RUNS = 20  # raw documents written per build (newest drawn runs); older ones stay
RUN_ID = re.compile(r"[0-9a-f]{64}")  # store run ids; anything else never becomes a file name
PAGE_FILES = (
    "app.js",
    "charts.js",
    "counters.js",
    "headline.js",
    "lazy.js",
    "marks.js",
    "overview.js",
    "sketch.js",
)  # copied as they are


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
    _check_options(out, formats)
    # every point's arrays make no cycles: the collector's passes over them are only cost
    with Store(db, readonly=True) as store, collection_paused():
        data, written, gab = _write_history_pages(
            store, out, repo_url, formats, max_points, raw_runs, title
        )
    files = _write_page_files(out, data, gab)
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


def _check_options(out: Path, formats: tuple[str, ...]) -> None:
    """Refuse an --out that is a file and a --format this build does not know."""
    if out.exists() and not out.is_dir():
        raise DashboardError(f"--out {out}: exists and is not a folder")
    unknown = set(formats) - {"github-action-benchmark"}
    if unknown:
        raise DashboardError(
            f"--format {', '.join(sorted(unknown))}: unknown; known: github-action-benchmark"
        )


def _write_history_pages(
    store: Store,
    out: Path,
    repo_url: str | None,
    formats: tuple[str, ...],
    max_points: int,
    raw_runs: int,
    title: str | None,
) -> tuple[dict, int, dict | None]:
    """(data.js's data, raw documents written, github-action-benchmark's data or None): what
    needs the open history, with the raw documents, explain pages and case pages written."""
    runs = store.runs()
    # One read of every point, for the charts and for the change-point search.
    series = read_series(store, runs) if runs else None
    values = {s.info["series_id"]: s.values for s in series or ()}
    every = {s.info["series_id"]: s.every for s in series or ()}
    between = between_cards(series) if runs else None
    marked = (
        findings(store, values_of=values, between=between, every_of=every, runs=runs)
        if runs
        else None
    )
    data = collect(
        store,
        repo_url=repo_url,
        max_points=max_points,
        title=title,
        marked=marked,
        series=series,
        runs=runs or None,
    )
    out.mkdir(parents=True, exist_ok=True)
    written = _publish_runs(store, data, out, raw_runs)
    latest_id = runs[-1]["run_id"]
    pages, reports = explain_pages.write(out, store.raw_document(latest_id), f"run {latest_id}")
    case_pages.write(out, data, reports, pages)
    for view in data["views"].values():
        for row in view["table"]:
            row["explain"] = pages.get(row["case"])
    gab = (
        github_action_benchmark_data(store, repo_url, series, data["primary"], runs)
        if formats
        else None
    )
    return data, written, gab


def _write_page_files(out: Path, data: dict, gab: dict | None) -> dict[str, int]:
    """Write the page, its scripts, Plotly, data.js (and gab/data.js); {file name: bytes}."""
    package = resources.files("harness.dashboard")
    _write_if_changed(out / "index.html", (package / "page.html").read_bytes())
    for name in PAGE_FILES:
        _write_if_changed(out / name, (package / name).read_bytes())
    _copy_plotly(out)
    # a run that names no timing mode keys its view by None: "null", as JavaScript reads obj[null]
    encoded = orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS)
    (out / "data.js").write_bytes(b"window.KERNELGAP_DATA = " + encoded + b";\n")
    names = ["index.html", *PAGE_FILES, "plotly.min.js", "data.js"]
    if gab is not None:
        (out / GAB_DATA).parent.mkdir(exist_ok=True)
        (out / GAB_DATA).write_bytes(b"window.BENCHMARK_DATA = " + orjson.dumps(gab) + b";\n")
        names.append(GAB_DATA.as_posix())
    files = {name: (out / name).stat().st_size for name in names}
    files["runs/"] = sum(p.stat().st_size for p in (out / "runs").glob("*.json"))
    return files
