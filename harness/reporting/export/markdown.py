"""A plain markdown table: one row per case and implementation, times per launch.

When the run has a primary candidate (harness.reporting.table), a bold line with its geometric-mean gap
comes first.
"""

from __future__ import annotations

from harness.escaping import markdown as md
from harness.reporting.summary import headline
from harness.reporting.table import MARKDOWN, Column, format_table, format_time, impl_rows

__all__ = ["render"]

COLUMNS = [
    Column("Case"),
    Column("Implementation"),
    Column("Role"),
    Column("Status"),
    Column("Samples", right=True),
    Column("Median", right=True),
    Column("MAD", right=True),
    Column("Noise", right=True),
    Column("Gap", right=True),
    Column("Gap 95% CI", right=True),
    Column("Note"),
]


def _cells(row) -> tuple[str, ...]:
    timed = row.median_s is not None
    unstable = "unstable" if timed and not row.stable else ""
    if not unstable and row.gap is not None and not row.gap_stable:
        unstable = "unstable gap"
    return (
        f"{row.case_id} v{row.case_version}",
        row.impl,
        row.role,
        row.status,
        str(row.samples) if timed else "-",
        format_time(row.median_s) if timed else "-",
        format_time(row.mad_s) if timed else "-",
        f"{row.noise:.2%}" if timed else "-",
        f"{row.gap:.4f}x" if row.gap is not None else "-",
        f"{row.gap_ci_low:.4f} – {row.gap_ci_high:.4f}" if row.gap is not None else "-",
        "; ".join(x for x in (unstable, row.error) if x),
    )


def render(document: dict) -> bytes:
    """The table as UTF-8 markdown; gap = median(candidate) / median(baseline)."""
    lead = headline(document)
    table = format_table(MARKDOWN, COLUMNS, [_cells(r) for r in impl_rows(document)])
    return (f"**{md(lead)}.**\n\n{table}" if lead else table).encode()
