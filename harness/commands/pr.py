"""`harness pr`: the pull-request comment of a base/head run, and a gate on it.

Reports go to stdout, messages to stderr. Exit status: 0 ok, 1 the `--fail-on` gate tripped,
2 bad input (a missing or malformed file, a document without revisions).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from harness.analysis import fail_on as failing
from harness.commands.document_files import (
    RESULT,
    format_option,
    load_bundle,
    load_result,
    write_stdout,
)
from harness.errors import BadInput
from protocol.codec import encode

__all__ = ["pr"]


@click.command()
@click.argument("result", type=RESULT, required=False)
@click.option(
    "--bundles",
    nargs=2,
    type=click.Path(path_type=Path),
    metavar="BASE HEAD",
    help="The base and head bundles (runner build): their static counters, with RESULT where "
    "it lacks them, or alone (no RESULT: counters only, untimed, no GPU).",
)
@format_option(
    "markdown", "json", help="markdown for the pull-request comment or job summary; json for tools."
)
@failing.counter_option(default="never")
@click.option(
    "--min-effect",
    type=click.FloatRange(min=0),
    default=0.02,
    show_default=True,
    help="Smallest change of head/base that counts, as a fraction (0.02 = 2%).",
)
def pr(result, bundles, output_format: str, fail_on: failing.FailOn, min_effect: float):
    """Per case of a base/head run RESULT: base gap, head gap, head/base with its paired
    interval and a verdict (faster / slower / same / unstable / failed / not run), and beside
    it the counters of base and head that differ, most telling first (spills, registers, instructions
    in loops, ...); a "same" time whose code changed says so.

    RESULT comes from `harness run --base-bundle DIR --head-bundle DIR` (or `runner bench
    --bundle base=DIR --bundle head=DIR`): both revisions of the compiler timed in one context,
    in the same rounds, on one GPU, so head/base needs no second machine and no history.
    --fail-on slower: exit 1 when some head is slower; unstable: also when one is unstable,
    failed or not run (a case the run skipped: its budget, --case). Counter words gate on the
    code itself: --fail-on slower,spills,registers:8.

    \b
    Examples:
      python -m harness pr results/20261201T120000Z-nvidia-h200-abc.json --fail-on slower
      python -m harness pr --bundles bundle-base/ bundle-head/ --fail-on spills
    """
    from harness.analysis import pull_request

    if result is None and not bundles:
        raise BadInput("pr: give a base/head RESULT document, or --bundles BASE HEAD, or both")
    manifests = tuple(load_bundle(p) for p in bundles or ())
    document = None
    if result is None:
        found = pull_request.bundle_rows(*manifests)
    else:
        document = load_result(result)
        try:
            found = pull_request.rows(document, min_effect, manifests)
        except ValueError as exc:
            raise BadInput(f"{result}: {exc}") from None
    if output_format == "json":
        data = {"min_effect": min_effect, "rows": [r.to_dict() for r in found]}
        write_stdout(encode(data, pretty=True))
    else:
        click.echo(pull_request.markdown(document, found, min_effect), nl=False)
    tripped = pull_request.gate(found, fail_on)
    if tripped:
        names = ", ".join(f"{r.case_id}/{r.candidate} {why}" for r, why in tripped)
        click.echo(f"pr: --fail-on {fail_on} tripped by {len(tripped)}: {names}", err=True)
        sys.exit(1)
