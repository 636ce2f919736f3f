"""`harness ingest`: result documents into the history store.

Its own module, importing only what an ingest needs (the store, the document reader, the trust
check), so a backfill of one `harness ingest` call per file pays no analysis or dashboard
imports. Reports go to stderr. Exit status: 0 ok, 2 bad input (a missing or malformed file, a
document that does not match the schema, a run refused for the history, a database that is not
a kernelgap history or is newer than this tool).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import click

from harness.commands.document_files import DB_OPTION, RESULT, load_bundle, load_result, opened
from harness.errors import BadInput, TrustError
from harness.history.store import prepared
from harness.running import trust
from protocol.progress import Live

__all__ = ["ingest"]

PARALLEL_FROM = 16  # files; below, starting worker processes costs more than it saves
CHUNK = 8  # files a worker takes at a time
EVERY_POINT_UP_TO = 16  # files; a larger ingest reports a line a run, and its news (--verbose: all)


@click.command()
@click.argument("results", nargs=-1, required=True, type=RESULT, metavar="RESULT...")
@DB_OPTION
@click.option(
    "--trusted",
    is_flag=True,
    help="Write to the history. Without it (the default, for pull-request runs) the document is "
    "validated and what would be stored is printed; nothing is written.",
)
@click.option(
    "--cases",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The suite manifest the history belongs to (default with --trusted: "
    f"{trust.DEFAULT_CASES}). The GPU pin is its [suite] gpu; a document of another suite, version or "
    "manifest (sha256) is refused.",
)
@click.option(
    "--gpu",
    "gpu_pin",
    metavar="MODEL",
    help="For a runner.bench document, which has no manifest: the GPU model the history pins "
    "(named by the repository's workflow); a run on another model is refused.",
)
@click.option(
    "--bundle",
    type=click.Path(path_type=Path),
    help="A bundle (runner build) whose static analysis gives the static counters of "
    "implementations the document lacks one for, where the PTX is the same (same sha256).",
)
@click.option(
    "--verbose",
    is_flag=True,
    help=f"Report every point of every run. By default only an ingest of up to "
    f"{EVERY_POINT_UP_TO} files does; a larger one reports a line a run and the points that "
    "start a series or did not run ok (a 10,000-run backfill would print 900,000 lines).",
)
@click.option("-q", "--quiet", is_flag=True, help="Report only how many runs were stored.")
def ingest(
    results: tuple[Path, ...],
    db: Path,
    trusted: bool,
    cases: Path | None,
    gpu_pin: str | None,
    bundle: Path | None,
    verbose: bool,
    quiet: bool,
):
    """Store the result documents RESULT... in the history (only with --trusted).

    The same run ingested twice is stored once. Every document is read, validated and checked
    (from 16 files on, in worker processes, one per CPU) and stored as it comes, all in one
    transaction (a backfill of thousands of runs in one call), or none if one cannot be: a
    history file the call created is then removed. The GPU pin comes from the repository, never
    from the document: a trusted ingest reads the suite manifest (--cases) and refuses a run of
    another suite, version or manifest, or on another GPU model than it pins. A result whose
    series key changed (source, case version, ...) starts a new series. Each implementation's
    counters (its `static` block, or --bundle's for the same PTX, and with --profile its ncu
    metrics) are kept beside its timing series.
    What was (or would be) stored is reported on stderr: every point for up to 16 files (or
    with --verbose), else a line a run and the points that start a series or did not run ok.

    \b
    Example:
      python -m harness ingest results/20261201T080202Z-nvidia-h200-772e86c32415.json --trusted
      python -m harness ingest results/*.json --trusted
    """
    manifest = load_bundle(bundle) if bundle is not None else None
    check = functools.partial(_checked, cases=cases, gpu_pin=gpu_pin, trusted=trusted, manifests={})
    every_point = verbose or len(results) <= EVERY_POINT_UP_TO
    # Untrusted: an existing file is opened read-only; a missing one is never created.
    live = Live("harness ingest", unit="files", quiet=quiet)  # a status line on a terminal
    with live, opened(db, readonly=not trusted and db.exists()) as store:
        if trusted:
            plan = functools.partial(
                _planned, check=check, db=db, bundle=manifest, render=every_point
            )
            reports = store.ingest_planned(_counted(live, _in_order(plan, results), results))
        else:
            reports = [
                store.ingest(d, trusted=False, what=w, check=False, bundle=manifest)
                for d, w in _counted(live, map(check, results), results)
            ]
    for report in [] if quiet else reports:  # what was (or would be) stored, not a document
        click.echo(report.text(every_point), err=True)
    if len(reports) > 1 or quiet:
        stored = sum(r.stored for r in reports)
        click.echo(f"{stored} of {len(reports)} runs stored", err=True)


def _counted(live: Live, items, results: tuple[Path, ...]):
    """`items` (one per file of `results`, in order), moving the status line as each comes."""
    for done, item in enumerate(items, 1):
        live.advance(done, len(results), Path(results[done - 1]).name)
        yield item


def _checked(
    result: Path,
    cases: Path | None,
    gpu_pin: str | None,
    trusted: bool,
    manifests: dict | None = None,
):
    """(document, what) of one file, read, validated and checked against the suite manifest
    (read once per call and process: `manifests` keeps it); BadInput naming the file if not."""
    document = load_result(result)
    what = "stdin" if str(result) == "-" else str(result)
    try:
        canon = trust.canon_for(document, cases, gpu_pin, trusted, manifests)
        if canon is not None:
            trust.check(document, canon, what)
    except TrustError as exc:
        raise BadInput(str(exc)) from None
    return document, what


def _planned(result: Path, check, db: Path, bundle: dict | None, render: bool = True):
    """One file's plan and `runs` row (store.prepared), its document checked first and,
    with `render`, its report's point lines rendered (in a worker process, not in the
    writer's tail)."""
    document, what = check(result)
    report, row = prepared(document, path=db, what=what, bundle=bundle)
    if render:
        report.prerender()
    return report, row


def _in_order(plan, results: tuple[Path, ...]):
    """plan(result) of each result, in order: in worker processes (one per CPU) for a batch of
    PARALLEL_FROM files or more, where reading, validating and planning each file is most of
    the time; in this process for fewer, for stdin, or where fork() is not available."""
    workers = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    if len(results) < PARALLEL_FROM or workers < 2 or any(str(r) == "-" for r in results):
        yield from map(plan, results)
        return
    import multiprocessing  # here: a call of a few files need not import it
    from concurrent.futures import ProcessPoolExecutor

    if "fork" not in multiprocessing.get_all_start_methods():
        yield from map(plan, results)
        return
    # fork: the workers need nothing imported again, and run no `python -m harness` main.
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"))
    try:
        yield from pool.map(plan, results, chunksize=CHUNK)
    finally:  # a bad file: stop the rest at once
        pool.shutdown(cancel_futures=True)
