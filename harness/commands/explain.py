"""`harness explain`: per case, the candidate and its baseline side by side and the differences
that most plausibly explain the gap, from a result document or a bundle (never runs a tool).

Exit status: 0 ok, 2 bad input (unreadable, not a result document or bundle, an unknown case).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from harness.commands.document_files import format_option
from harness.errors import BadInput, SourceError
from harness.explain import report, sources

__all__ = ["explain"]


@click.command()
@click.argument("source", type=click.Path(exists=False, path_type=Path))
@click.argument("other", type=click.Path(exists=False, path_type=Path), required=False)
@click.option("--case", "case_ids", multiple=True, help="Explain only this case (repeatable).")
@click.option(
    "--candidate",
    "candidates",
    multiple=True,
    help="Explain this candidate (repeatable; default: the suite's primary where a case has it, "
    "else every candidate).",
)
@click.option(
    "--bundle",
    type=click.Path(path_type=Path),
    help="A bundle (runner build) whose static analysis fills in implementations of a result "
    "document that lack it, where the PTX is the same (same sha256).",
)
@format_option(
    "markdown",
    "text",
    help="markdown for a pull request or $GITHUB_STEP_SUMMARY; text for a terminal.",
)
def explain(source, other, case_ids, candidates, bundle, output_format):
    """Explain each case's gap from SOURCE: a result document (runner bench; its `static` and,
    with --profile, `profile` blocks) or a bundle folder (runner build; static only).

    With OTHER too (a document or bundle of the same suite: two compiler revisions), each
    implementation built in both is explained as X@B against X@A (SOURCE is A), not a
    candidate against its baseline; --candidate then names implementations.

    \b
    Examples:
      python -m harness explain results/20261201T120000Z-nvidia-h200-abc.json --bundle bundle/
      python -m harness explain bundle-base/ bundle-head/ --candidate warpforth
    """
    try:
        loaded = sources.load(source)
        if bundle is not None:
            sources.attach_bundle(loaded, sources.load(bundle))
        if other is not None:
            second = sources.load(other)
            if bundle is not None:
                sources.attach_bundle(second, sources.load(bundle))
            loaded = sources.across(loaded, second)
            candidates = tuple(f"{c}@{sources.SIDES[1]}" for c in candidates)
    except SourceError as exc:
        raise BadInput(str(exc)) from None
    known = {c.id for c in loaded.cases}
    unknown = [c for c in case_ids if c not in known]
    if unknown:
        raise BadInput(
            f"{loaded.what}: no case {', '.join(unknown)} (cases: {', '.join(sorted(known))})"
        )
    text = report.render(
        loaded, tuple(case_ids), tuple(candidates), markdown=output_format == "markdown"
    )
    sys.stdout.write(text)
