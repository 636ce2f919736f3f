"""`harness dashboard`: build the static dashboard site from the history store.

Exit status: 0 built, 2 bad input (no history database or an empty one, a database that is not
a kernelgap history, an --out that is a file, a --repo-url that is not http(s)).
"""

from __future__ import annotations

from pathlib import Path

import click

from harness.commands.document_files import out_folder
from harness.dashboard.build import GAB_DATA, MAX_POINTS, RAW_RUNS, build_site
from harness.errors import BadInput, DashboardError, StoreError
from protocol.progress import Live

__all__ = ["dashboard"]


@click.command()
@click.option(
    "--db",
    type=click.Path(dir_okay=False, path_type=Path),
    default="history.sqlite",
    show_default=True,
    help="The history database (one SQLite file); only read.",
)
@click.option(
    "--out",
    required=True,
    type=click.Path(path_type=Path),
    callback=out_folder,
    help="The site's folder (created if missing); open OUT/index.html, also from disk.",
)
@click.option(
    "--repo-url",
    metavar="URL",
    help="The repository's web address (https://github.com/OWNER/REPO): clicking a point then "
    "opens URL/commit/SHA instead of the run's raw document.",
)
@click.option(
    "--format",
    "formats",
    multiple=True,
    type=click.Choice(["github-action-benchmark"]),
    help=f"Also write the history in that format: github-action-benchmark -> OUT/{GAB_DATA} "
    "(window.BENCHMARK_DATA, the layout of that action's data.js; one key per GPU model, "
    "mode and suite version).",
)
@click.option(
    "--max-points",
    type=click.IntRange(min=50),
    default=MAX_POINTS,
    show_default=True,
    help="Points drawn per series (every k-th, plus the newest, unstable and step points); "
    "the store is never trimmed.",
)
@click.option(
    "--raw-runs",
    type=click.IntRange(min=0),
    default=RAW_RUNS,
    show_default=True,
    help="Raw run documents written to OUT/runs/ (the newest drawn runs); ones already there "
    "are kept and linked. Without --repo-url an older point's hover says its document is not "
    "published and which --raw-runs would publish it.",
)
@click.option("--title", help="The page title (default: '<suite name>: kernel gap dashboard').")
@click.option("-q", "--quiet", is_flag=True, help="Nothing on stderr but errors.")
def dashboard(
    db: Path,
    out: Path,
    repo_url: str | None,
    formats: tuple[str, ...],
    max_points: int,
    raw_runs: int,
    title: str | None,
    quiet: bool,
):
    """Build a static site of the history: headline, latest gaps, charts per case.

    The site works offline, opened straight from disk (file://): plotly.js is copied into OUT
    from the plotly package, and the data sits beside the page in OUT/data.js. What was
    written is reported on stderr.

    \b
    Example:
      python -m harness dashboard --db history.sqlite --out site/ --repo-url https://github.com/o/r
    """
    if repo_url and not repo_url.startswith(("https://", "http://")):
        raise BadInput(f"--repo-url {repo_url!r}: expected an http(s) address of the repository")
    try:
        with Live("harness dashboard", quiet=quiet):  # on a terminal: how long it has built
            report = build_site(
                db,
                out,
                repo_url=repo_url,
                formats=formats,
                max_points=max_points,
                raw_runs=raw_runs,
                title=title,
            )
    except (StoreError, DashboardError) as exc:
        raise BadInput(str(exc)) from None
    if not quiet:
        click.echo(report.text(), err=True)  # what was written: progress, not a document
