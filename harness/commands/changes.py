"""`harness changes`: change points and drift in every history series, with their commit ranges.

Reports go to stdout, messages to stderr. Exit status: 0 ok, 1 the `--fail-on` gate tripped,
2 bad input (a database that is not a kernelgap history, a malformed --since).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import click

from harness.analysis import fail_on as failing
from harness.analysis.change_counters import annotate
from harness.analysis.change_review import find_changes, tripped
from harness.analysis.changes import ChangePolicy
from harness.analysis.drift import DriftPolicy
from harness.commands.document_files import DB_OPTION, format_option, opened
from harness.commands.history import _echo_json
from harness.errors import BadInput
from harness.history.store_schema import normalize_utc
from harness.reporting import change_report

__all__ = ["changes"]


def _since(text: str | None) -> str | None:
    """--since as a normalized UTC timestamp: YYYY-MM-DD or an ISO time (UTC if no zone)."""
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise BadInput(
            f"--since {text!r}: expected a date (2026-01-31) or an ISO time (2026-01-31T12:00Z)"
        ) from None
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC).replace(tzinfo=None)
    return normalize_utc(moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ"))


@click.command()
@DB_OPTION
@click.option("--case", "case_id", help="Only the series of this case id.")
@click.option(
    "--since",
    metavar="DATE",
    help="Only changes whose first point after the change started at or after DATE "
    "(2026-01-31, or an ISO time; UTC). The whole history is still searched.",
)
@format_option(
    "text",
    "markdown",
    "json",
    help="text for a terminal; markdown for a job summary; json for tools.",
)
@failing.option(default="never")
@click.option(
    "--alpha",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    default=ChangePolicy.alpha,
    show_default=True,
    help="Mann-Whitney U p-value below which a step is significant.",
)
@click.option(
    "--min-effect",
    type=click.FloatRange(0, 1, max_open=True),
    default=ChangePolicy.min_effect,
    show_default=True,
    help="Smallest change of the median reported, as a fraction (0.01 = 1%).",
)
def changes(db: Path, case_id, since, output_format, fail_on, alpha, min_effect):
    """List the change points (steps) and drifts of every series in the history.

    A step is a level shift found by change point detection over the series' stable points,
    kept when significant and at least --min-effect; it is named by the commit range where it
    happened, with the medians before and after, its size and its p-value. A drift is a
    significant trend over the newest 20 stable points (at least 5% in total). Unstable and
    failed points take no part, so they never alert. Each step is annotated with the counters
    (static figures, profiled metrics) that differ between the last point before it and the
    first after it, and the compiler on each side.

    \b
    Example:
      python -m harness changes --db history.sqlite --since 2026-12-01 --fail-on slower
    """
    change = ChangePolicy(alpha=alpha, min_effect=min_effect)
    trend = DriftPolicy()
    since_utc = _since(since)
    with opened(db) as store:
        series = store.list_series(case_id)
        found = annotate(store, find_changes(store, series, change, trend))
    if since_utc is not None:
        found = [f for f in found if normalize_utc(f.to_utc) >= since_utc]
    if output_format == "json":
        _echo_json(
            {
                "db": str(db),
                "since": since_utc,
                "change_policy": vars(change),
                "drift_policy": vars(trend),
                "series": len(series),
                "changes": [f.to_dict() for f in found],
            }
        )
    elif output_format == "markdown":
        click.echo(change_report.markdown(found, len(series), change, trend), nl=False)
    else:
        click.echo(change_report.text(found, len(series), change, trend), nl=False)
    gate = tripped(found, fail_on)
    if gate:
        click.echo(f"changes: --fail-on {fail_on} tripped by {len(gate)} change(s)", err=True)
        raise SystemExit(1)
