"""The middle layer the table formats share: rows from a result document, and one table writer.

As in hyperfine, formats differ only in how a row and the divider under the header are written
(`Markup`); which numbers go in a row comes from `impl_rows()` for every format alike.

`primary_candidate()`: the suite's primary candidate, the one the summary, the exports and the dashboard lead with.

A suite names its headline candidate in `[suite] primary` of its cases.toml (checked by the
manifest loader: it must be some case's candidate), which a result document carries as
`suite.primary` (since result schema 1.2.0). It comes from the suite alone: a document without
one (a suite that declares none, or an older document) has no primary, and every reader keeps
its existing order."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from harness import escaping

__all__ = [
    "CSV",
    "MARKDOWN",
    "TEXT",
    "Column",
    "ImplRow",
    "Markup",
    "format_table",
    "format_time",
    "impl_rows",
    "lead_first",
    "primary_candidate",
]


def primary_candidate(document: dict) -> str | None:
    """The headline candidate's name, `suite.primary`, or None where the suite declares none. A
    named primary that this run lacks (a `--case` subset, a skipped compiler) still leads:
    readers then say it has no gap rather than quietly promote another."""
    return (document.get("suite") or {}).get("primary") or None


def lead_first(names: Iterable[str], primary: str | None) -> list[str]:
    """`names` in their order with `primary` moved to the front (unchanged when it is absent)."""
    names = list(names)
    if primary not in names:
        return names
    return [primary, *(n for n in names if n != primary)]


@dataclass(frozen=True)
class Column:
    title: str
    right: bool = False  # numbers are right-aligned


@dataclass(frozen=True)
class Markup:
    """How one format writes a row of cells, and the divider under the header (None: none)."""

    row: Callable[[Sequence[str]], str]
    divider: Callable[[Sequence[Column], Sequence[int]], str] | None
    pad: bool  # pad cells to the column width so the raw text lines up
    escape: Callable[[str], str] = escaping.terminal  # a cell's data as this format shows it


def _markdown_cell(text: str) -> str:
    """A cell is data: no HTML, link or code span, a pipe escaped, newlines folded
    (harness.escaping.markdown). Cells that are markup on purpose use only `**bold**`."""
    return escaping.markdown(text, cell=True)


def _markdown_divider(columns: Sequence[Column], widths: Sequence[int]) -> str:
    return (
        "|"
        + "|".join(
            "-" * (w + 1) + ":" if c.right else "-" * (w + 2)
            for c, w in zip(columns, widths, strict=True)
        )
        + "|"
    )


MARKDOWN = Markup(
    row=lambda cells: "| " + " | ".join(cells) + " |",
    divider=_markdown_divider,
    pad=True,
    escape=_markdown_cell,
)


# Quoting is the row's (escaping.csv_row); text cells are made inert by the CSV export.
CSV = Markup(row=escaping.csv_row, divider=None, pad=False, escape=str)


# Aligned plain text for a terminal: control characters and bidirectional overrides visible.
TEXT = Markup(
    row=lambda cells: "  ".join(cells).rstrip(),
    divider=lambda columns, widths: "  ".join("-" * w for w in widths),
    pad=True,
)


def format_table(markup: Markup, columns: Sequence[Column], rows: Sequence[Sequence[str]]) -> str:
    """The table as text, one line per row, ending in a newline."""
    escape = markup.escape
    cells = [[escape(c.title) for c in columns]] + [[escape(x) for x in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    if markup.pad:
        cells = [
            [
                x.rjust(w) if c.right else x.ljust(w)
                for x, c, w in zip(r, columns, widths, strict=True)
            ]
            for r in cells
        ]
    lines = [markup.row(cells[0])]
    if markup.divider is not None:
        lines.append(markup.divider(columns, widths))
    lines += [markup.row(r) for r in cells[1:]]
    return "\n".join(lines) + "\n"


def format_time(seconds: float) -> str:
    """A time in the largest unit that keeps it >= 1, to 4 significant digits: 780.4 us, 1.000 ms."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 0.0)):
        if seconds >= scale:
            value = seconds / (scale or 1e-9)
            return f"{value:#.4g}".rstrip(".") + f" {unit}"
    raise ValueError(f"format_time: expected a time >= 0 s, got {seconds!r}")


@dataclass(frozen=True)
class ImplRow:
    """One case x implementation of a result document, with the numbers every table shows.

    Time fields are None where the implementation has no timing (failed case, skipped
    implementation); gap fields are None for the baseline and for candidates without a gap.
    """

    case_id: str
    case_version: int
    impl: str
    role: str
    status: str  # ok | failed | skipped | not timed
    error: str
    baseline: str
    mode: str | None
    samples: int | None
    median_s: float | None
    mad_s: float | None
    noise: float | None
    stable: bool | None
    gap: float | None
    gap_ci_low: float | None
    gap_ci_high: float | None
    gap_stable: bool | None
    bytes_per_s: float | None
    fraction_of_peak_bandwidth: float | None
    source_sha256: str | None


def impl_rows(document: dict) -> list[ImplRow]:
    """Every implementation of every case, in document order."""
    rows = []
    for case in document["cases"]:
        error = case.get("error")
        for name, impl in case["implementations"].items():
            timing, gap = impl.get("timing"), impl.get("gap")
            stats = timing["stats"] if timing else {}
            throughput = impl.get("throughput") or {}
            if case["status"] != "ok":
                status = case["status"]
            elif impl.get("status") == "skipped":
                status = "skipped"
            else:
                status = "ok" if timing else "not timed"
            rows.append(
                ImplRow(
                    case_id=case["id"],
                    case_version=case["version"],
                    impl=name,
                    role=impl["role"],
                    status=status,
                    error=(
                        f"{error['phase']}: {escaping.first_line(error['message'])}"
                        if error
                        else impl.get("skip_reason") or impl.get("gap_note") or ""
                    ),
                    baseline=case["baseline"],
                    mode=timing["mode"] if timing else None,
                    samples=stats.get("count"),
                    median_s=stats.get("median_s"),
                    mad_s=stats.get("mad_s"),
                    noise=stats.get("noise"),
                    stable=stats.get("stable"),
                    gap=gap["ratio_of_medians"] if gap else None,
                    gap_ci_low=gap["ci_low"] if gap else None,
                    gap_ci_high=gap["ci_high"] if gap else None,
                    gap_stable=gap["stable"] if gap else None,
                    bytes_per_s=throughput.get("bytes_per_s"),
                    fraction_of_peak_bandwidth=throughput.get("fraction_of_peak_bandwidth"),
                    source_sha256=(impl.get("build") or {}).get("source_sha256"),
                )
            )
    return rows
