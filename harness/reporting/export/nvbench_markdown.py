"""A markdown report laid out like nvbench's: a section per case and device, then a table.

The layout and the number formats are nvbench's; the column names are not, because the
statistics differ: nvbench's "GPU Time" is a mean (and "Batch GPU" a batched one), its "Noise"
the relative standard deviation, its "BWUtil" a fraction of the theoretical peak. Here the
columns say what they hold (LEGEND, printed under the tables): the median per-launch time, MAD /
median, bytes per second at the median and its fraction of the measured copy bandwidth. A run
with a primary candidate (harness.reporting.table) states its geometric-mean gap under the title.
"""

from __future__ import annotations

from harness.escaping import markdown as md
from harness.reporting.summary import headline
from harness.reporting.table import MARKDOWN, Column, ImplRow, format_table, impl_rows

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
    Column("Median / launch", True),
    Column("MAD / median", True),
    Column("Bytes/s at median", True),
    Column("Of copy BW", True),
    Column("Gap", True),
]
LEGEND = (
    "Columns (not nvbench's statistics, hence not its names):",
    "- Samples: timed samples (hot: one graph replay of B launches each; cold: the mean of B "
    "cold launches each, B = 1 before result schema 1.7.0).",
    "- Median / launch: median over the samples of the per-launch kernel time (hot: a sample's "
    "time / B).",
    "- MAD / median: median absolute deviation over the median (noise; above 3% is unstable).",
    "- Bytes/s at median: the bytes the case declares moving per launch / the median.",
    "- Of copy BW: that as a fraction of the device's measured device-to-device copy bandwidth "
    "(not the theoretical peak).",
    "- Gap: the candidate's median / the baseline's (ratio of medians); 1.0x is parity.",
)


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
    return ("\n".join(lines).rstrip("\n") + "\n\n" + "\n".join(LEGEND) + "\n").encode()
