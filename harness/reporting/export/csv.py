"""CSV: one row per case and implementation with the main numbers, in seconds (RFC 4180 quoting).

Empty cells where a value does not apply (no timing, no gap); booleans as true/false; floats
in full precision (Python's shortest round-trip repr). Unlike the other formats it has no
headline line for the primary candidate: a CSV's first line is its header, and readers select
the primary's rows by `implementation`.

Text cells come from documents anyone can write; a spreadsheet reads one starting with
`= + - @` (or a tab, carriage return or newline) as a formula (=HYPERLINK(...) phones home).
Such a cell gets a leading `'` (harness.escaping.csv_text), and a cell holding a carriage return
or newline is quoted whole (escaping.csv_row), so no reader splits its row there. Numbers are
written by this module, never from text, and are left as they are.
"""

from __future__ import annotations

from harness.escaping import csv_text
from harness.reporting.table import CSV, Column, format_table, impl_rows

__all__ = ["COLUMNS", "render"]

# column name -> ImplRow field
COLUMNS = {
    "case": "case_id",
    "case_version": "case_version",
    "implementation": "impl",
    "role": "role",
    "status": "status",
    "baseline": "baseline",
    "mode": "mode",
    "samples": "samples",
    "median_s": "median_s",
    "mad_s": "mad_s",
    "noise": "noise",
    "stable": "stable",
    "gap": "gap",
    "gap_ci_low": "gap_ci_low",
    "gap_ci_high": "gap_ci_high",
    "gap_stable": "gap_stable",
    "bytes_per_s": "bytes_per_s",
    "fraction_of_peak_bandwidth": "fraction_of_peak_bandwidth",
    "source_sha256": "source_sha256",
    "error": "error",
}


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value) if isinstance(value, float) else str(value)
    return csv_text(str(value))


def render(document: dict) -> bytes:
    rows = [[_cell(getattr(r, field)) for field in COLUMNS.values()] for r in impl_rows(document)]
    return format_table(CSV, [Column(c) for c in COLUMNS], rows).encode()
