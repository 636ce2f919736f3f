"""Text and markdown tables of change findings (harness.analysis.change_review) for `harness changes`
and for the change section of `harness regressions`."""

from __future__ import annotations

from harness.analysis.change_review import ChangeFinding
from harness.analysis.changes import ChangePolicy
from harness.analysis.counter_diff import sentence
from harness.analysis.drift import DriftPolicy
from harness.escaping import markdown as md
from harness.escaping import terminal

__all__ = [
    "code_lines",
    "code_words",
    "commit_range",
    "markdown",
    "markdown_rows",
    "method_line",
    "text",
]

SHOWN_COUNTERS = 5  # counter sentences per step


def _value(metric: str, value: float) -> str:
    return f"{value:.4f}x" if metric == "gap" else f"{value * 1e6:.3f} us"


def _commit(sha: str | None) -> str:
    return (sha or "-")[:12]


def commit_range(f: ChangeFinding) -> str:
    """'abc..def' (after abc, up to and including def) with the two dates."""
    return (
        f"{_commit(f.from_commit)}..{_commit(f.to_commit)} "
        f"({(f.from_utc or '-')[:16]} .. {f.to_utc[:16]})"
    )


def method_line(change: ChangePolicy, trend: DriftPolicy) -> str:
    return (
        f"Steps: ruptures KernelCPD (PELT) proposes, kept when Mann-Whitney U p < {change.alpha:g} "
        f"and |change of median| >= {change.min_effect * 100:g}% with >= {change.min_size} "
        f"stable points either side. Drift: Theil-Sen slope over the newest {trend.window} stable "
        f"points, Kendall p < {trend.alpha:g}, |total| >= {trend.min_total * 100:g}%. Unstable "
        "and failed points take no part."
    )


def _cells(f: ChangeFinding) -> list[str]:
    return [
        f.kind,
        f"{f.case_id} / {f.impl} ({f.role})",
        f.metric,
        f"{_value(f.metric, f.before)} -> {_value(f.metric, f.after)}",
        f"{f.relative * 100:+.1f}% {f.direction}",
        f"{f.p_value:.1e}",
        commit_range(f),
        f"{f.points_before}/{f.points_after}",
        str(f.age),
        f.series_id,
    ]


HEADERS = [
    *("kind", "case / impl", "metric", "before -> after", "change", "p"),
    *("commits (after .. up to)", "points before/after", "age", "series"),
]


def code_words(compiler_before: str, compiler_after: str, counters: tuple, recorded: bool) -> str:
    """What changed in the code across a step: compilers, then counters (CounterChange, most
    telling first), in words; `harness changes` and the dashboard's counter steps say it so."""
    words = []
    if compiler_before != compiler_after:
        words.append(f"compiler {compiler_before or '-'} -> {compiler_after or '-'}")
    elif compiler_after:
        words.append(f"same compiler ({compiler_after})")
    if not recorded:
        words.append("no counters recorded on both sides")
    elif not counters:
        words.append("no counter changed (the same code: look at the machine or the inputs)")
    else:
        shown = [sentence(c, ("before", "after")) for c in counters[:SHOWN_COUNTERS]]
        if counters[SHOWN_COUNTERS:]:
            shown.append(f"+{len(counters) - SHOWN_COUNTERS} more")
        words.append("counters: " + "; ".join(shown))
    return "; ".join(words)


def _code(f: ChangeFinding) -> str:
    return code_words(f.compiler_before, f.compiler_after, f.counters, f.counters_recorded)


def code_lines(findings: list[ChangeFinding]) -> list[str]:
    """One line per step: its series, metric and commit range, and what changed in the code."""
    return [
        f"{f.case_id} / {f.impl} {f.metric} step at {commit_range(f)}: {_code(f)}"
        for f in findings
        if f.kind == "step"
    ]


def text(findings: list[ChangeFinding], series_count: int, change, trend) -> str:
    head = f"changes: {len(findings)} over {series_count} series\n{method_line(change, trend)}\n"
    if not findings:
        return head
    rows = [HEADERS, *(_cells(f) for f in findings)]
    rows = [[terminal(c) for c in r] for r in rows]  # names come from documents anyone writes
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADERS))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    code = [terminal(line) for line in code_lines(findings)]
    if code:
        lines += ["", "What changed in the code across each step:", *(f"  {c}" for c in code)]
    return head + "\n".join(lines) + "\n"


def markdown_rows(findings: list[ChangeFinding]) -> list[str]:
    rows = [
        "| " + " | ".join(HEADERS) + " |",
        "|" + "---|" * len(HEADERS),
    ]
    for f in findings:
        cells = [md(c, cell=True) for c in _cells(f)]
        cells[0] = f"**{cells[0]}**" if f.direction == "slower" else cells[0]
        cells[-1] = md(f.series_id, cell=True, code=True)
        rows.append("| " + " | ".join(cells) + " |")
    return rows


def markdown(findings: list[ChangeFinding], series_count: int, change, trend) -> str:
    slower = sum(f.direction == "slower" for f in findings)
    head = (
        f"## Change points: {len(findings)} ({slower} slower) over {series_count} series\n\n"
        f"{method_line(change, trend)}\n"
    )
    if not findings:
        return head
    code = [f"- {md(line)}" for line in code_lines(findings)]
    if code:
        code = ["", "What changed in the code across each step:", "", *code]
    return head + "\n" + "\n".join([*markdown_rows(findings), *code]) + "\n"
