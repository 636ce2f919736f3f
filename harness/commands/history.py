"""`harness history` and `harness regressions`: the history store's read commands.

Reports go to stdout, messages to stderr. Exit status: 0 ok, 1 `regressions` found an alert,
2 bad input (a missing or malformed file, a document that does not match the schema, a run
refused for the history, a database that is not a kernelgap history or is newer than this tool).
"""

from __future__ import annotations

from pathlib import Path

import click
import orjson

from harness.analysis import fail_on as failing
from harness.analysis.change_review import ChangeFinding, find_changes
from harness.analysis.change_review import tripped as changes_tripped
from harness.analysis.changes import ChangePolicy
from harness.analysis.drift import DriftPolicy
from harness.analysis.regressions import Finding, Policy, current_series, review
from harness.commands.document_files import DB_OPTION, format_option, opened
from harness.errors import BadInput
from harness.escaping import markdown as md
from harness.escaping import terminal
from harness.history import cards
from harness.history.store import Store
from harness.reporting import change_report

__all__ = ["history", "regressions"]

# points per series searched for the newest change points: a step among the newest few needs
# its level before it, and this holds two detection windows of it
CHANGE_LOOKBACK = 2 * ChangePolicy.window


def _echo_json(value) -> None:
    click.echo(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode())


def _us(value: float | None) -> str:
    return "-" if value is None else f"{value * 1e6:.3f} us"


def _gap(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}x"


def _select(store: Store, case_id: str | None, wanted: str | None) -> list[dict]:
    """Series of `case_id` (or all) matching `wanted`: a series id, a unique id prefix, or
    'case/impl' (every series of that implementation, across key changes)."""
    series = store.list_series(case_id)
    if case_id is not None and not series:
        known = sorted({terminal(s["case_id"]) for s in store.list_series(None)})
        raise BadInput(
            f"--case {case_id}: no series of that case in {store.path} "
            f"(cases: {', '.join(known[:10]) or 'none'}{', ...' if len(known) > 10 else ''})"
        )
    if wanted is None:
        return series
    exact = [s for s in series if s["series_id"] == wanted]
    by_prefix = [s for s in series if s["series_id"].startswith(wanted)]
    by_name = [s for s in series if f"{s['case_id']}/{s['impl']}" == wanted]
    chosen = exact or by_name or (by_prefix if len(by_prefix) == 1 else [])
    if chosen:
        return chosen
    if len(by_prefix) > 1:
        ids = ", ".join(s["series_id"] for s in by_prefix[:5])
        raise BadInput(f"--series {wanted}: ambiguous id prefix ({ids}, ...); give more digits")
    names = sorted({terminal(f"{s['case_id']}/{s['impl']}") for s in series})[:10]
    raise BadInput(
        f"--series {wanted}: no such series in {store.path}; give a series id or CASE/IMPL "
        f"(known: {', '.join(names) or 'none'})"
    )


def _shown(row: dict) -> dict:
    """The row with every text value safe to print on a terminal (harness.escaping.terminal),
    escaped before padding so the columns still line up."""
    return {k: terminal(v) if isinstance(v, str) else v for k, v in row.items()}


def _aligned(header: list[str], rows: list[list[str]], indent: str = "") -> list[str]:
    """The header and rows as lines, each column as wide as its widest cell (GPU names, case
    ids and error messages vary in length), columns two spaces apart."""
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    return [
        (indent + "  ".join(f"{cell!s:<{w}}" for cell, w in zip(row, widths, strict=True))).rstrip()
        for row in [header, *rows]
    ]


SERIES_COLUMNS = ["series", "case", "v", "impl", "role", "gpu", "mode", "suite", "source",
                  "baseline", "points", "first", "last"]  # fmt: skip
POINT_COLUMNS = ["date", "commit", "median", "noise", "stable", "gap", "gap 95% CI", "check",
                 "status"]  # fmt: skip


def _series_table(series: list[dict]) -> list[str]:
    rows = [
        [
            s["series_id"],
            s["case_id"],
            str(s["case_version"]),
            s["impl"],
            s["role"],
            s["gpu"],
            s["mode"] or "-",
            f"v{s['suite_version']}",
            (s["source_sha256"] or "unbuilt")[:8],
            (s["baseline_source_sha256"] or "unbuilt")[:8],
            str(s["points"]),
            (s["first_utc"] or "-")[:19],
            (s["last_utc"] or "-")[:19],
        ]
        for s in map(_shown, series)
    ]
    return _aligned(SERIES_COLUMNS, rows)


def _points_table(points: list[dict]) -> list[str]:
    rows = []
    for p in map(_shown, points):
        ci = "-" if p["gap_ci_low"] is None else f"[{p['gap_ci_low']:.4f}, {p['gap_ci_high']:.4f}]"
        status = p["case_status"]
        if p["error_message"]:
            status += f": {p['error_phase']}: {p['error_message']}"
        noise = "-" if p["noise"] is None else f"{p['noise'] * 100:.2f}%"
        stable = "-" if p["stable"] is None else ("yes" if p["stable"] else "NO")
        rows.append(
            [
                p["started_utc"][:19],
                (p["commit_sha"] or "-")[:12],
                _us(p["median_s"]),
                noise,
                stable,
                _gap(p["gap"]),
                ci,
                p["check_status"] or "-",
                status,
            ]
        )
    return _aligned(POINT_COLUMNS, rows, indent="  ")


@click.command()
@DB_OPTION
@click.option("--case", "case_id", help="Only the series of this case id.")
@click.option(
    "--series",
    "wanted",
    metavar="KEY_OR_ID",
    help="A series id (or a unique prefix of one), or CASE/IMPL for every series of that "
    "implementation.",
)
@click.option(
    "--last",
    type=click.IntRange(min=0),
    default=20,
    show_default=True,
    help="Points shown per series (newest ones; 0 = all) when --case or --series is given.",
)
@format_option("table", "json", help="table for a terminal; json for tools.")
def history(db: Path, case_id: str | None, wanted: str | None, last: int, output_format: str):
    """List the history's series; with --case or --series, their points too (oldest first).

    \b
    Examples:
      python -m harness history --db history.sqlite
      python -m harness history --series axpy_f64/warpforth --last 5
    """
    with opened(db) as store:
        series = _select(store, case_id, wanted)
        with_points = case_id is not None or wanted is not None
        if with_points:
            for s in series:
                points = store.points(s["series_id"])
                s["shown"] = points[-last:] if last else points
    if output_format == "json":
        _echo_json({"db": str(db), "series": series})  # "points" is the count, "shown" the points
        return
    if not series:
        click.echo(f"{db}: no series")
        return
    if not with_points:
        click.echo("\n".join(_series_table(series)))
        return
    for s in series:
        shown = s["shown"]
        title = f"{s['series_id']}  {s['label']}  ({len(shown)} of {s['points']} points)"
        click.echo(terminal(title))
        click.echo("\n".join(_points_table(shown)))
        click.echo("")


def _finding_row(f: Finding) -> str:
    value = _gap if f.metric == "gap" else _us
    change = "-" if f.relative is None else f"{f.relative * 100:+.1f}%"
    limit = "-" if f.threshold is None else f"±{f.threshold * 100:.1f}%"
    mark = {"alert": "**ALERT**", "unstable": "unstable (no alert)"}.get(f.status, f.status)
    data = [  # every cell but the status mark comes from the store: escaped, pipes included
        f"{f.case_id} / {f.impl} ({f.role})",
        f.metric,
        value(f.newest),
        value(f.reference),
        f"{change} {f.direction or ''}".strip(),
        limit,
        str(f.history),
        f"{f.started_utc[:19]} {(f.commit or '-')[:12]}",
    ]
    cells = [
        mark,
        *(md(cell, cell=True) for cell in data),
        md(f.series_id, cell=True, code=True),
        md(f.note, cell=True),
    ]
    return "| " + " | ".join(cells) + " |"


def _changes_markdown(found: list[ChangeFinding], policy: Policy) -> str:
    head = (
        f"\n### Change points and drifts in the newest {policy.window} stable points: "
        f"{len(found)}\n\n{change_report.method_line(ChangePolicy(), DriftPolicy())}\n"
    )
    return head + ("\n" + "\n".join(change_report.markdown_rows(found)) + "\n" if found else "")


def _markdown(
    findings: list[Finding], policy: Policy, series_count: int, found: list[ChangeFinding]
) -> str:
    alerts = [f for f in findings if f.alert]
    head = (
        f"## Regressions: {len(alerts) + len(found)} alert(s) over {series_count} current "
        "series\n\n"
        f"{policy.method()} Unstable newest points are shown, never alerted.\n\n"
        "| status | case / impl | metric | newest | reference | change | threshold | history "
        "| run | series | note |\n|---|---|---|---|---|---|---|---|---|---|---|"
    )
    order = {"alert": 0, "unstable": 1, "failed": 2, "short": 3, "ok": 4}
    ranked = sorted(findings, key=lambda f: (order[f.status], f.case_id, f.impl, f.metric))
    table = "\n".join([head, *(_finding_row(f) for f in ranked)]) + "\n"
    return table + _changes_markdown(found, policy)


def _verdict(finding: Finding) -> str:
    """A finding as a --fail-on verdict: an alert is slower or faster, an unstable newest point
    unstable, anything else (ok, failed, too short a history) same."""
    if finding.alert:
        return finding.direction
    return "unstable" if finding.status == "unstable" else "same"


@click.command()
@DB_OPTION
@click.option(
    "--window",
    type=click.IntRange(min=1),
    default=Policy.window,
    show_default=True,
    help="Previous stable points the newest one is compared with.",
)
@click.option("--case", "case_id", help="Only the series of this case id.")
@format_option("markdown", "json", help="markdown for a job summary; json for tools.")
@failing.option(default="slower")
def regressions(db: Path, window: int, case_id: str | None, output_format: str, fail_on: str):
    """Check the newest point of every current series against its recent history.

    Alerts when a candidate's gap or absolute time, or a baseline's absolute time, moved: the
    median of the newest runs against the runs before, at a stated false-alarm rate from the
    history's sigma-scaled spread (docs/method/alerts.md), in either direction; and, beside that
    rule, on change points (steps hidden in noise, as `harness changes` finds them) among the
    newest --window stable points and on a drift over the newest 20. By default only slower
    ones set exit status 1.

    \b
    Example:
      python -m harness regressions --db history.sqlite --fail-on gap-slower
    """
    policy = Policy(window=window)
    with opened(db) as store:
        series = current_series(store.list_series(case_id))
        points_of = {s["series_id"]: store.recent(s["series_id"], window) for s in series}
        recent = [
            f
            for f in find_changes(store, series, last=CHANGE_LOOKBACK)
            if f.age <= window  # a drift's age is 1: it is about the newest points
        ]
        # the history's own estimates (a series' own where it has two cards), or the default
        between = cards.by_model(store) | cards.by_series(store)
    findings = review(series, points_of, policy, between)
    if output_format == "json":
        _echo_json(
            {
                "db": str(db),
                "policy": {k: getattr(policy, k) for k in Policy.__dataclass_fields__},
                "alerts": sum(f.alert for f in findings) + len(recent),
                "findings": [f.to_dict() for f in findings],
                "changes": [f.to_dict() for f in recent],
            }
        )
    else:
        click.echo(_markdown(findings, policy, len(series), recent), nl=False)
    tripped = [f for f in findings if failing.trips(fail_on, f.metric, _verdict(f))]
    tripped += changes_tripped(recent, fail_on)
    if tripped:
        raise SystemExit(1)
