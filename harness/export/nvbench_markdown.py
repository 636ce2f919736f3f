"""A markdown report in the style of nvbench's: a section per case and device, then a table.

Columns follow nvbench's names: Samples ("30x"), GPU Time (median per launch), Noise, and,
where the case declares its bytes, GlobalMem BW and BWUtil (fraction of the measured peak).
Unlike nvbench, Noise is MAD / median (robust), not the relative standard deviation. A run with
a primary candidate (harness.primary) states its geometric-mean gap under the title.
"""

from __future__ import annotations

from harness.escaping import markdown as md
from harness.export.table import MARKDOWN, Column, ImplRow, format_table, impl_rows
from harness.summary import headline

__all__ = ["render"]


def format_duration(seconds: float) -> str:
    """nvbench's duration format: three decimals in s, ms, us or ns."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3f} {unit}"
    return f"{seconds / 1e-9:.3f} ns"


def format_bandwidth(bytes_per_s: float) -> str:
    """Decimal units as nvbench prints them: 4.127 TB/s."""
    for unit, scale in (("TB/s", 1e12), ("GB/s", 1e9), ("MB/s", 1e6), ("KB/s", 1e3)):
        if bytes_per_s >= scale:
            return f"{bytes_per_s / scale:.3f} {unit}"
    return f"{bytes_per_s:.3f} B/s"


COLUMNS = [
    Column("Impl"),
    Column("Role"),
    Column("Samples", True),
    Column("GPU Time", True),
    Column("Noise", True),
    Column("GlobalMem BW", True),
    Column("BWUtil", True),
    Column("Gap", True),
]


def _cells(row: ImplRow) -> tuple[str, ...]:
    bandwidth = row.bytes_per_s
    fraction = row.fraction_of_peak_bandwidth
    gap = "" if row.gap is None else f"{row.gap:.4f}x" + ("" if row.gap_stable else " (unstable)")
    return (
        row.impl,
        row.role,
        f"{row.samples}x",
        format_duration(row.median_s),
        f"{row.noise:.2%}",
        format_bandwidth(bandwidth) if bandwidth is not None else "",
        f"{fraction:.2%}" if fraction is not None else "",
        gap,
    )


def render(document: dict) -> bytes:
    """The report as UTF-8 markdown; names and messages escaped (harness.escaping.markdown)."""
    device = document["environment"]["device"]
    lines = ["# Benchmark Results", ""]
    lead = headline(document)
    if lead:
        lines += [f"{md(lead)}.", ""]
    rows = impl_rows(document)
    for case in document["cases"]:
        title = f"## {md(case['id'])} v{case['version']}"
        lines += [title, "", f"### [0] {md(device['name'])}", ""]
        mine = [r for r in rows if r.case_id == case["id"] and r.case_version == case["version"]]
        timed = [r for r in mine if r.median_s is not None]
        if timed:
            lines.append(format_table(MARKDOWN, COLUMNS, [_cells(r) for r in timed]))
        lines += [
            f"- {md(r.impl)}: {md(r.status)}" + (f": {md(r.error)}" if r.error else "")
            for r in mine
            if r.median_s is None
        ]
        if len(timed) != len(mine):
            lines.append("")
    return ("\n".join(lines).rstrip("\n") + "\n").encode()
