"""`harness robust`: do hot and cold, events and CUPTI agree on each gap? (harness.analysis.robust)

The verdict goes to stdout (markdown or JSON), messages to stderr. Exit status: 0 every gap
measured by two methods or more is robust, 1 some are not, 2 bad input.
"""

from __future__ import annotations

import sys

import click

from harness.commands.document_files import RESULT, format_option, load_result, write_stdout
from harness.errors import BadInput
from harness.escaping import markdown as md
from protocol.codec import encode

__all__ = ["robust"]


@click.command()
@click.argument("results", type=RESULT, nargs=-1, required=True)
@format_option("markdown", "json", help="markdown for a job summary; json for tools.")
def robust(results, output_format):
    """Robust verdict per gap over RESULTS (two documents or more of one suite on one GPU
    model, measured by different methods: hot and cold, events and CUPTI).

    A gap is robust when every method's gap agrees with every other's within their 95%
    intervals; otherwise the verdict names the methods that differ and by how much.

    \b
    Example:
      python -m harness robust results/hot.json results/cold.json results/cold-cupti.json
    """
    from harness.analysis.robust import robust_gaps

    if len(results) < 2:
        raise BadInput("robust: give two result documents or more (one per method)")
    found = robust_gaps([load_result(path) for path in results])
    if output_format == "json":
        write_stdout(encode([r.to_dict() for r in found], pretty=True))
    else:
        click.echo(_markdown(found), nl=False)
    if not found:
        click.echo("robust: no gap was measured by two methods in these documents", err=True)
    sys.exit(0 if all(r.robust for r in found) else 1)


def _markdown(found) -> str:
    lines = ["## kernelgap robust verdicts\n", ""]
    if not found:
        return "\n".join([*lines, "No gap was measured by two methods or more.\n"])
    lines += ["| Case | Candidate | Gaps by method | Verdict |", "|---|---|---|---|"]
    for r in found:
        gaps = "; ".join(f"{m} {g[0]:.4f}x ({g[1]:.4f} to {g[2]:.4f})" for m, g in r.gaps.items())
        lines.append(
            f"| {md(r.case_id, cell=True)} v{r.case_version} | {md(r.candidate, cell=True)} vs {md(r.baseline, cell=True)} "
            f"| {md(gaps, cell=True)} | {md(r.describe(), cell=True)} |"
        )
    robust_count = sum(r.robust for r in found)
    lines += ["", f"{robust_count} of {len(found)} gaps robust.", ""]
    return "\n".join(lines)
