"""Gap by size: one compact table per swept case (a row per point, a column per candidate) and
the curve's summary in a sentence; gap by option: one table per case with an option axis (a row
per way its implementation was built, the headline's first). `harness summary` writes them in markdown; the lab script
tools/perf/sweep_table.py prints them as plain text.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.reporting.table import (
    Column,
    Markup,
    format_table,
    format_time,
    lead_first,
    primary_candidate,
)
from protocol.points import is_option_point, swept_cases

__all__ = ["SweepTable", "curve_sentence", "render", "sweep_tables"]


@dataclass(frozen=True)
class SweepTable:
    case_id: str
    version: int
    baseline: str
    headline: str
    candidates: list[str]
    rows: list[tuple[str, ...]]  # point (headline marked), baseline time, a gap per candidate
    curve: dict
    kind: str = "size"  # "option": a row per option value (`options` of the case block)


def _gap_cell(block: dict, name: str) -> str:
    if block.get("status") != "ok":
        return block.get("status", "-")
    gap = (block["implementations"].get(name) or {}).get("gap")
    if not gap:
        return "-"
    return f"{gap['ratio_of_medians']:.3f}x" + ("" if gap.get("stable", True) else " (unstable)")


def _baseline_cell(block: dict) -> str:
    timing = (block.get("implementations", {}).get(block.get("baseline")) or {}).get("timing")
    return format_time(timing["stats"]["median_s"]) if timing else "-"


def sweep_tables(document: dict) -> list[SweepTable]:
    """A table per swept case of `document` (nested or as rows), in the suite's order: its gap
    by size, then, for a case with an option axis, its gap by option."""
    primary = primary_candidate(document)
    tables = []
    for case, blocks in swept_cases(document):
        names = sorted(
            {
                n
                for _, b in blocks
                if b
                for n, i in b.get("implementations", {}).items()
                if i.get("role") == "candidate"
            }
        )
        candidates = lead_first(names, primary)
        sizes = [(p, b) for p, b in blocks if not is_option_point(case, p) or p == case["point"]]
        options = [(p, b) for p, b in blocks if is_option_point(case, p) and p != case["point"]]
        if len(sizes) > 1 or not options:
            rows = [_row(case, pid, block, candidates, pid) for pid, block in sizes]
            tables.append(_table(case, candidates, rows, case.get("curve") or {}, "size"))
        if options:
            declared = (case.get("options") or {}).get("headline")
            axis = options[0][0].split("=", 1)[0]
            head = f"{axis}={declared}" if declared else f"{axis} as declared"
            rows = [_row(case, case["point"], case, candidates, head)]
            rows += [_row(case, pid, block, candidates, pid) for pid, block in options]
            tables.append(_table(case, candidates, rows, {}, "option"))
    return tables


def _row(case: dict, pid: str, block: dict | None, candidates: list[str], label: str) -> tuple:
    block = {**(block or {"status": "-"}), "baseline": case["baseline"]}
    label = f"{label} (headline)" if pid == case["point"] else label
    return (label, _baseline_cell(block), *(_gap_cell(block, n) for n in candidates))


def _table(case: dict, candidates: list[str], rows: list, curve: dict, kind: str) -> SweepTable:
    return SweepTable(
        case["id"], case["version"], case["baseline"], case["point"], candidates, rows, curve, kind
    )


def curve_sentence(name: str, curve: dict) -> str:
    """'warpforth: 1.02x (n=2^21) to 2.10x (n=2^11); within 1.1x from n=2^19 on'."""
    near = curve["near_parity_from"]
    where = f"within 1.1x from {near} on" if near else "not within 1.1x at the largest sizes"
    return (
        f"{name}: {curve['min_gap']:.3f}x ({curve['min_at']}) to {curve['max_gap']:.3f}x "
        f"({curve['max_at']}); {where}"
    )


def render(table: SweepTable, markup: Markup) -> str:
    """The table in `markup`, then a line per candidate's curve."""
    columns = [Column("Point" if table.kind == "size" else "Built as"),
               Column(f"{table.baseline} time", True)]  # fmt: skip
    columns += [Column(f"{n} gap", True) for n in table.candidates]
    lines = [
        markup.escape(curve_sentence(n, table.curve[n]))  # point ids and names are data
        for n in table.candidates
        if n in table.curve
    ]
    return (
        format_table(markup, columns, table.rows)
        + "".join(f"\n- {line}" for line in lines)
        + ("\n" if lines else "")
    )
