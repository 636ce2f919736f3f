"""`harness compare`'s markdown report of a Comparison (harness.analysis.compare), for a pull-request
comment or a CI job summary; every name and reason from the documents is escaped."""

from __future__ import annotations

from harness.analysis.compare import Comparison, GapChange, TimeChange
from harness.escaping import markdown as md
from harness.reporting.table import MARKDOWN, Column, format_table, format_time

__all__ = ["markdown"]


def _pct(ratio: float) -> str:
    return f"{(ratio - 1) * 100:+.2f}%"


def _verdict_cell(verdict: str) -> str:
    return f"**{verdict}**" if verdict in ("slower", "unstable") else verdict


def _label(run: dict) -> str:
    commit = md(run["commit"][:12], code=True) if run["commit"] else "`unknown commit`"
    started = md(run["started_utc"][:16].replace("T", " "))
    return f"{commit} ({started} UTC, {md(run['gpu'])})"


def _columns(first: str, second: str, base: str, head: str, conf: str) -> list[Column]:
    titles = (first, second, base, head, "Change", f"{conf} CI", "p", "Verdict")
    return [Column(t, right=i in (2, 3, 4, 5, 6)) for i, t in enumerate(titles)]


def _row(r: TimeChange | GapChange, what: str, base: str, head: str) -> tuple[str, ...]:
    """One table row: the case, what is compared, its base and head figures, then the change."""
    return (
        f"{r.case_id} v{r.case_version}",
        what,
        base,
        head,
        _pct(r.change.ratio),
        f"{_pct(r.change.ci_low)} … {_pct(r.change.ci_high)}",
        f"{r.p_value:.2g}",
        _verdict_cell(r.verdict),
    )


def markdown(comparison: Comparison) -> str:
    """A markdown report for a pull-request comment or a CI job summary; every name and reason
    from the documents is escaped (harness.escaping.markdown)."""
    c, policy = comparison, comparison.policy
    counts = ", ".join(f"{n} {v}" for v, n in c.counts().items() if n)
    conf = f"{c.bootstrap.confidence:.0%}"
    parts = [
        "## kernelgap compare\n\n"
        f"base {_label(c.base)} → head {_label(c.head)}: {counts or 'nothing compared'}\n\n"
        f"A change counts when the two-sided Mann-Whitney U p-value is below {policy.alpha:g} "
        f"and the median moves by at least {policy.min_effect:.1%}; `unstable` when either "
        "side's noise is above the runner's limit. Change = head / base - 1 (+ is slower); "
        f"the interval is a {conf} bootstrap interval of the ratio of medians.\n"
    ]
    if c.times:
        rows = [
            _row(
                r,
                f"{r.impl} ({r.role})",
                format_time(r.base_median_s),
                format_time(r.head_median_s),
            )
            for r in c.times
        ]
        columns = _columns("Case", "Implementation", "Base", "Head", conf)
        parts.append(format_table(MARKDOWN, columns, rows))
    if c.gaps:
        rows = [
            _row(r, f"{r.candidate} vs {r.baseline}", f"{r.base_gap:.4f}x", f"{r.head_gap:.4f}x")
            for r in c.gaps
        ]
        columns = _columns("Case", "Candidate", "Base gap", "Head gap", conf)
        parts.append(
            "### Gaps (candidate / baseline; lower is better)\n\n"
            + format_table(MARKDOWN, columns, rows)
        )
        across = sorted({r.between_cards for r in c.gaps if r.between_cards is not None})
        if across:
            sds = ", ".join(f"{sd:.2%}" for sd in across)
            parts.append(
                f"The two runs ran on different cards: each gap's interval is widened by the "
                f"between-card term (SD {sds} of a gap, harness.history.cards) and a change within it "
                "reads `same`.\n"
            )
    if c.not_compared:
        items = [
            f"- {md(r.case_id, code=True)}{f' / {md(r.impl, code=True)}' if r.impl else ''}: "
            f"{md(r.reason)}\n"
            for r in c.not_compared
        ]
        parts.append("### Not compared\n\n" + "".join(items))
    return "\n".join(parts)
