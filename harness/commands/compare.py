"""`harness compare`, `harness summary` and `harness export`: read result documents, write reports.

Reports go to stdout, messages to stderr. Exit status: 0 ok, 1 the `--fail-on` gate tripped,
2 bad input (a missing file, malformed JSON, a document that does not match the schema).
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import click

from harness.analysis import fail_on as failing
from harness.commands.document_files import (
    RESULT,
    format_option,
    load_result,
    write_stdout,
)
from harness.errors import BadInput
from harness.escaping import terminal
from protocol.codec import encode

__all__ = ["EXPORT_FORMATS", "compare", "export", "summary"]

# --format name -> module under harness.reporting.export with render(document) -> bytes
EXPORT_FORMATS = {
    "github-action-benchmark": "github_action_benchmark",
    "markdown": "markdown",
    "nvbench-markdown": "nvbench_markdown",
    "csv": "csv",
}


@click.command()
@click.argument("base", type=RESULT)
@click.argument("head", type=RESULT)
@format_option(
    "markdown", "json", help="markdown for a pull-request comment or job summary; json for tools."
)
@failing.option(default="never")
@click.option(
    "--min-effect",
    type=click.FloatRange(min=0),
    default=0.02,
    show_default=True,
    help="Smallest change of the median that counts, as a fraction (0.02 = 2%).",
)
@click.option(
    "--alpha",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    default=0.05,
    show_default=True,
    help="Mann-Whitney U p-value below which a change is significant.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Bootstrap seed.")
@click.option(
    "--history",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="A history store whose points on several cards of the GPU model estimate the "
    "between-card term (harness.history.cards); without it, or with fewer than 3 cards, 0.7%.",
)
def compare(base, head, output_format, fail_on, min_effect, alpha, seed, history):
    """Compare result document HEAD with BASE, case by case and implementation by implementation.

    A time or gap is `slower` or `faster` when the Mann-Whitney U test on the raw samples is
    significant AND the median moved by at least --min-effect; `unstable` when the runner marked
    either side unstable; else `same`. Results whose series key differs (GPU model, timing
    mode, suite or case version, source hashes) are listed as not comparable. Two runs on
    different cards (GPU UUIDs) have each gap's interval widened by the between-card term, and
    a gap change within it reads `same`.

    \b
    Example:
      python -m harness compare base/result.json results/result.json --fail-on gap-slower
    """
    from harness.analysis import compare as comparing
    from harness.history import cards
    from harness.history.series import gpu_model
    from harness.history.store import Store
    from harness.reporting.compare_report import markdown

    base_doc, head_doc = load_result(base), load_result(head)
    policy = comparing.Policy(min_effect=min_effect, alpha=alpha)
    between = cards.DEFAULT_BETWEEN_CARD_SD
    if history is not None:
        with Store(history, readonly=True) as store:  # the head's GPU model's estimate
            between = cards.from_store(
                store, gpu_model(head_doc["environment"]["device"]["name"])
            ).sd
    try:
        result = comparing.compare(
            base_doc, head_doc, policy, comparing.Bootstrap(seed=seed), between
        )
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    if output_format == "json":
        write_stdout(encode(result.to_json(), pretty=True))
    else:
        click.echo(markdown(result), nl=False)
    tripped = comparing.gate(result, fail_on)
    if tripped:
        names = terminal(", ".join(f"{r.label} {r.verdict}" for r in tripped))
        click.echo(f"compare: --fail-on {fail_on} tripped by {len(tripped)}: {names}", err=True)
        sys.exit(1)


@click.command()
@click.argument("result", type=RESULT)
def summary(result):
    """Markdown summary of RESULT for $GITHUB_STEP_SUMMARY: geomean gap, gaps, failures, hardware.

    \b
    Example:
      python -m harness summary results/result.json >> "$GITHUB_STEP_SUMMARY"
    """
    from harness.reporting.summary import markdown

    click.echo(markdown(load_result(result)), nl=False)


@click.command()
@click.option(
    "--format",
    "output_format",
    type=click.Choice(list(EXPORT_FORMATS)),
    required=True,
    help="github-action-benchmark: its customSmallerIsBetter JSON; others: tables.",
)
@click.argument("result", type=RESULT)
def export(output_format, result):
    """Write RESULT in another format to stdout (bytes; redirect to a file).

    \b
    Example:
      python -m harness export results/result.json --format github-action-benchmark > gab.json
    """
    module = importlib.import_module(f"harness.reporting.export.{EXPORT_FORMATS[output_format]}")
    write_stdout(module.render(load_result(result)))
