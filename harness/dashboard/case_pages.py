"""The dashboard's case pages, cases/<stem>.html: one case's history and its explanation on one
page that opens from disk with no script. Per timing mode: the current gaps, the gap of each
candidate and the time of each implementation over the runs the dashboard draws (inline SVG,
step marks dashed, red slower and green faster, each labelled), the steps every series took
together; then `harness explain` of the newest run as HTML, and links back to the dashboard
(the case's charts) and to the explanation's markdown. <stem> is explain_pages.file_stem.
Its counters (harness.dashboard.counter_panels) follow: each counter step explained, under the
id that the dashboard's step marks and the change marks it explains link to.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from harness.dashboard import sweep_charts
from harness.dashboard.explain_pages import file_stem
from harness.dashboard.sweep_charts import spaced, tick_label
from harness.escaping import html
from harness.history.series import gpu_model
from harness.reporting.table import format_time
from protocol.modes import describe

__all__ = ["FOLDER", "write"]

FOLDER = "cases"
WIDTH, HEIGHT, MARGIN = 1100, 230, (64, 80, 14, 30)  # px; margin: left, right, top, bottom
LABEL_ROWS = 4  # rows of step labels at most; a mark past them keeps its line and hover text
RUN_LABEL_PX = 130  # a run's label on the x axis ("2026-01-01 1a2b3c4") is about 115 px wide
DASHES = ("", "6 3", "2 3", "6 3 2 3")
PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>body{{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1160px;color:#1b1f24;
padding:0 12px;overflow-wrap:anywhere}} svg.history,svg.sweep{{max-width:100%;height:auto}} .scroll{{overflow-x:auto}}
pre{{overflow-x:auto}} @media (max-width:700px){{body{{margin:1em auto}} h1{{font-size:22px}}}}
h2{{border-bottom:2px solid #d8dde3}} .muted{{color:#5b6470}} .note{{color:#8a5a00}}
.tag{{border:1px solid currentColor;border-radius:4px;padding:0 6px;font-size:12px;font-weight:700}}
table{{border-collapse:collapse;font-size:13px}}td,th{{border:1px solid #d8dde3;padding:3px 8px}}
code{{font:12.5px ui-monospace,Menlo,Consolas,monospace}} svg text{{font:11px system-ui,sans-serif}}</style>
</head><body>
<p><a href="../index.html#{anchor}">&larr; dashboard: {case}</a> · <a href="../index.html">dashboard</a>{explain}</p>
<h1>{case} <span class="muted">v{version}, baseline {baseline}</span></h1>
{modes}
{counters}
<h2>Why: harness explain of the newest run</h2>
{report}
</body></html>
"""


def write(out: Path, data: dict, reports: dict[str, str], explain: dict[str, str]) -> int:
    """Write a page for every case of `data` (harness.dashboard.data) under out/cases/, and
    set each case's "page"; reports: case id -> explain HTML; explain: case id -> its page.
    Pages of cases no longer drawn are removed. The number written."""
    folder = out / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    kept = set()
    for case in data["cases"]:
        stem = file_stem(case["id"])
        link = explain.get(case["id"])
        text = PAGE.format(
            title=html(f"{case['id']}: history and explanation"),
            anchor=html(case["anchor"]),
            case=html(case["id"]),
            version=html(str(case["version"])),
            baseline=html(case["baseline"]),
            explain=f' · <a href="../{html(link)}">explain page</a>' if link else "",
            modes=_sweep(case, data) + "\n".join(_mode(case, data, mode) for mode in data["modes"]),
            counters=_counters(case, data["runs"]),
            report=reports.get(case["id"], "<p>Not in the newest run: no explanation.</p>"),
        )
        (folder / f"{stem}.html").write_text(text)
        case["page"] = f"{FOLDER}/{stem}.html"
        kept.add(stem)
    for stale in folder.glob("*.html"):
        if stale.stem not in kept:
            stale.unlink()
    return len(kept)


def _counters(case: dict, runs: dict) -> str:
    """The case's counters over time (counter_panels): each step with its explanation, under
    the id the dashboard's marks link to, and per line the counters as they are now."""
    panel = case.get("counters")
    if not panel:
        return ""
    out = [
        "<h2>Counters: what changed in the code</h2>",
        '<p class="muted">Static counters of each build (no noise: any change is a change), '
        "of the primary candidate and the baseline.</p>",
    ]
    for step in panel["steps"]:
        out.append(
            f'<p id="{html(step["id"])}"><span class="tag">{html(step["mode"])}'
            f"</span> <b>{html(step['impl'])}</b> step at commit "
            f"{html(_commit(runs, step['run']))} (after "
            f"{html(_commit(runs, step['from']))}, "
            f"{html(runs['date'][step['run']][:16])} UTC): {html(step['text'])}</p>"
        )
    if not panel["steps"]:
        out.append("<p>No counter changed in the runs the dashboard draws.</p>")
    for line in panel["lines"]:
        now = panel["sets"][line["set"][-1]]
        words = ", ".join(
            f"{label} {value:g}"
            for label, value in zip(panel["labels"], now, strict=True)
            if value is not None
        )
        out.append(
            f'<p class="muted"><span class="tag">{html(line["mode"])}</span> '
            f"{html(line['impl'])} now: {html(words)}</p>"
        )
    return "\n".join(out)


def _commit(runs: dict, run: int, digits: int = 12) -> str:
    """Run `run`'s commit, its first `digits` digits ("-" without one), not escaped."""
    return (runs["commit"][run] or "-")[:digits]


def _sweep(case: dict, data: dict) -> str:
    """A swept case's gap-versus-size chart and times by size (sweep_charts), one per mode
    (the mode shown at open first), or nothing."""
    sweeps = data.get("sweeps", {})
    out = []
    for mode in sorted(sweeps, key=lambda m: (m != data["mode"], m)):
        found = sweeps[mode].get(case["id"])
        if not found:
            continue
        chart = sweep_charts.svg(
            found["latest"],
            found["earlier"],
            data["colors"],
            found["earlier_run"],
            found["latest_run"],
        )
        what = "size and by option" if "options" in found["latest"] else "size"
        if not found["latest"]["points"]:
            what = "option"
        info = describe(mode)
        tag = f'<span class="tag" title="{html(info.title)}">{info.symbol} {html(mode)}</span>'
        out.append(f"<h2>Gap by {what} {tag}</h2>{chart}\n")
    return "".join(out)


def _mode(case: dict, data: dict, mode: str) -> str:
    """One mode's sections, one per GPU model (the one shown at open first): a chart never
    draws a point of another model."""
    gpus = data.get("gpus") or [None]
    return "".join(_section(case, data, mode, gpu, len(gpus) > 1) for gpu in gpus)


def _section(case: dict, data: dict, mode: str, gpu: str | None, named: bool) -> str:
    """One mode's section on one GPU model: current gaps (of the model of the mode's newest
    run), shared steps, the gap chart, the time chart and the recent history as a table."""

    def ours(item: dict) -> bool:
        return gpu is None or item.get("gpu") in (gpu, None)

    series = [s for s in case["series"] if s["mode"] == mode and ours(s)]
    if not series:
        return ""
    runs = data["runs"]
    newest = gpu is None or gpu_model(data["views"][mode]["gpu"]) == gpu
    table = data["views"][mode]["table"] if newest else []
    rows = [r for r in table if r["case"] == case["id"] and r["candidate"]]
    now = " · ".join(
        f"{html(r['candidate'])} <b>{r['gap']:.3f}x</b>" if r["gap"] else html(r["candidate"])
        for r in rows
    )
    notes = "".join(
        f'<p class="note">&#9888; {html(t["text"])} (commit '
        f"{html(_commit(runs, t['run']))}, {html(runs['date'][t['run']][:10])})</p>"
        for t in case.get("together", [])
        if t["mode"] == mode and newest
    )
    marks = [m for m in case.get("changes", []) if m["mode"] == mode and ours(m)]
    gap = [(s, s["gap"]) for s in series if s["role"] == "candidate"]
    times = [(s, s["t"]) for s in series]
    info = describe(mode)
    tag = f'<span class="tag" title="{html(info.title)}">{info.symbol} {html(mode)}</span>'
    where = f"{case['id']}, {mode}" + (f", {gpu}" if named else "")
    on = f" · {html(gpu)}" if named and not newest else ""
    return (
        f"<h2>{tag} mode{on}</h2>"
        f"<p>now: {now or 'no gap in the newest run'}</p>{notes}"
        f"<h3>gap (x {html(case['baseline'])}, lower is better)</h3>"
        + _chart(
            gap, [m for m in marks if m["metric"] == "gap"], runs, "gap", f"{where}: gap over time"
        )
        + f"<h3>time per launch ({html(case['unit'])})</h3>"
        + _chart(
            times,
            [m for m in marks if m["metric"] != "gap"],
            runs,
            case["unit"],
            f"{where}: time per launch ({case['unit']}) over time",
        )
        + _history_table(series, runs, case["unit"], where)
    )


HISTORY_ROWS = 10  # the newest runs in a case's history table (the charts' text equivalent)


def _history_table(series: list[dict], runs: dict, unit: str, where: str) -> str:
    """The charts' text equivalent: the newest HISTORY_ROWS drawn runs, one row each, with each
    candidate's gap and each implementation's time ("-" where a series has no point)."""
    newest = sorted({r for s in series for r in s["run"]}, key=lambda r: runs["n"][r])
    newest = newest[-HISTORY_ROWS:][::-1]
    columns = [(s, "gap", s["gap"]) for s in series if s["role"] == "candidate"]
    columns += [(s, "t", s["t"]) for s in series]
    head = "".join(
        f"<th>{html(s['name'])} {'gap' if what == 'gap' else html(unit)}</th>"
        for s, what, _ in columns
    )
    at = [dict(zip(s["run"], values, strict=True)) for s, _, values in columns]
    body = []
    for r in newest:
        cells = []
        for (_, what, _), values in zip(columns, at, strict=True):
            v = values.get(r)
            cells.append("-" if v is None else f"{v:.3f}x" if what == "gap" else f"{v:.4g}")
        body.append(
            f"<tr><td>{html(runs['date'][r][:16])}</td>"
            f"<td>{html(_commit(runs, r, 7))}</td><td>{'</td><td>'.join(cells)}</td></tr>"
        )
    return (
        f"<details class='history-table'><summary>{html(where)}: the newest "
        f"{len(newest)} runs as a table</summary><div class='scroll'><table><caption>"
        f"{html(where)}: recent history</caption><tr><th>date (UTC)</th><th>commit</th>"
        f"{head}</tr>{''.join(body)}</table></div></details>"
    )


def _chart(
    lines: list[tuple[dict, list]], marks: list[dict], runs: dict, unit: str, name=""
) -> str:
    """An SVG line chart named `name`: x the run's place among its mode's runs, one line per
    series, y ticks at round values (a gap's from parity, drawn dashed where it is in view);
    step labels below it, a row further down where one would touch the one before, each saying
    on hover what moved between which commits; then the date and commit of five runs across the
    x axis. It scales to the page's width (viewBox)."""
    lines = [
        (s, [v if v is not None and math.isfinite(v) else None for v in ys]) for s, ys in lines
    ]
    points = [(runs["n"][r], v) for s, ys in lines for r, v in zip(s["run"], ys, strict=True)]
    values = [v for _, v in points if v is not None]
    if not values:
        return '<p class="muted">nothing to draw</p>'
    name = name or f"{unit} over time"
    frame = _Frame(points, values, unit == "gap")
    placed, label_rows = _place_marks(marks, runs, frame)
    axis_y = frame.top + frame.h + 14 * (label_rows + 1) + 4  # run labels, under the step labels
    out = [
        f'<svg viewBox="0 0 {WIDTH} {axis_y + 8}" width="{WIDTH}" role="img" class="history" '
        f'aria-label="{html(name)}"><title>{html(name)}</title>',
        *frame.grid(unit),
    ]
    drawn_runs = _polylines(lines, runs, frame, out)
    out.extend(_step_marks(placed, runs, frame))
    out.extend(_clock_marks(drawn_runs, runs, frame))
    out.extend(_run_labels(drawn_runs, runs, frame, axis_y))
    legend = " ".join(
        f'<span style="color:{html(s["color"])}">&#9632;</span> {html(s["name"])}' for s, _ in lines
    )
    return "\n".join(out) + f"</svg><p class='muted'>{legend}</p>"


class _Frame:
    """A history chart's axes: pixels of a run's place (x) and of a value (y), and its grid."""

    def __init__(self, points: list[tuple], values: list[float], gap: bool):
        self.x0, self.x1 = min(x for x, _ in points), max(x for x, _ in points)
        self.gap = gap
        self.step, self.ticks = spaced(min(values), max(values), anchor=1.0 if gap else 0.0)
        self.y0, self.y1 = self.ticks[0], self.ticks[-1]
        self.left, right, self.top, bottom = MARGIN
        self.w, self.h = WIDTH - self.left - right, HEIGHT - self.top - bottom

    def xpx(self, x):
        return self.left + self.w * (x - self.x0) / max(self.x1 - self.x0, 1)

    def ypx(self, y):
        return self.top + self.h * (self.y1 - y) / (self.y1 - self.y0)

    def grid(self, unit: str) -> list[str]:
        """The y ticks with their grid lines, and parity dashed where it is in view."""
        left, right = self.left, self.left + self.w
        out = []
        for y in self.ticks:
            tick = tick_label(y, self.step, "x" if self.gap else "", least=1 if self.gap else 0)
            out.append(
                f'<line x1="{left}" x2="{right}" y1="{self.ypx(y):.1f}" y2="{self.ypx(y):.1f}" '
                f'stroke="#eceff2"/><text x="{left - 6}" y="{self.ypx(y) + 4:.1f}" '
                f'text-anchor="end">{tick}</text>'
            )
        if self.gap and self.y0 <= 1.0 <= self.y1:
            out.append(
                f'<line x1="{left}" x2="{right}" y1="{self.ypx(1.0):.1f}" y2="{self.ypx(1.0):.1f}" '
                'stroke="#5b6470" stroke-dasharray="2 2"><title>parity (1.0x)</title></line>'
            )
        return out


def _place_marks(marks: list[dict], runs: dict, frame: _Frame) -> tuple[list[tuple], int]:
    """([(mark, x px, label row)], rows used): a label goes a row down where it would touch the
    one before; past LABEL_ROWS a mark keeps its line and hover text, no label."""
    rows: list[float] = []  # per label row, where its last label ends
    placed = []
    for m in sorted(marks, key=lambda m: runs["n"][m["run"]]):
        x = frame.xpx(runs["n"][m["run"]])
        row = next((k for k, end in enumerate(rows) if x - 45 > end), len(rows))
        if row < LABEL_ROWS:
            rows[row : row + 1] = [x + 45]
        placed.append((m, x, row))
    return placed, len(rows)


def _polylines(lines, runs: dict, frame: _Frame, out: list[str]) -> dict[float, int]:
    """One polyline per series into `out`; {x: run} of every point drawn."""
    n = np.asarray(runs["n"])
    drawn_runs: dict[float, int] = {}
    for s, ys in lines:
        drawn = [(r, v) for r, v in zip(s["run"], ys, strict=True) if v is not None]
        drawn_runs.update((runs["n"][r], r) for r, _ in drawn)
        at = np.array([r for r, _ in drawn], dtype=np.int64)
        y = np.array([v for _, v in drawn], dtype=np.float64)
        # every point at once: numpy does xpx's and ypx's operations in the same order
        xs, ys_px = frame.xpx(n[at]).tolist(), frame.ypx(y).tolist()
        path = " ".join(map("{:.1f},{:.1f}".format, xs, ys_px))
        if len(xs) == 1:  # one point draws no line
            out.append(
                f'<circle cx="{xs[0]:.1f}" cy="{ys_px[0]:.1f}" r="3" fill="{html(s["color"])}"/>'
            )
        dash = DASHES[s.get("segment", 0) % len(DASHES)]
        out.append(
            f'<polyline points="{path}" fill="none" stroke="{html(s["color"])}" '
            f'stroke-width="1.8" stroke-dasharray="{dash}"><title>{html(s["name"])}'
            "</title></polyline>"
        )
    return drawn_runs


def _step_marks(placed: list[tuple], runs: dict, frame: _Frame) -> list[str]:
    """Each step's dashed rule, red slower and green faster, with its label where it has a row
    (a link to the counter step that explains it) and what moved on hover."""
    out = []
    top, h = frame.top, frame.h
    for m, x, row in placed:
        color = "#b3261e" if m["relative"] > 0 else "#0a7a3d"
        sign = "&#9650;" if m["relative"] > 0 else "&#9660;"
        text = ""
        if row < LABEL_ROWS:
            text = (
                f'<text x="{x:.1f}" y="{top + h + 14 + 14 * row}" fill="{color}" text-anchor='
                f'"middle">{sign}{m["relative"] * 100:+.1f}% {html(m["impl"])}</text>'
            )
        if text and m.get("step"):  # a counter step explains it: the label links to it
            text = f'<a href="#{html(m["step"])}">{text}</a>'
        out.append(
            f"<g><title>{html(_moved(m, runs))}</title>"
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top}" y2="{top + h}" stroke="{color}" '
            f'stroke-dasharray="4 3"/>{text}</g>'
        )
    return out


def _clock_marks(drawn_runs: dict[float, int], runs: dict, frame: _Frame) -> list[str]:
    """A run measured with its clocks below their usual ones (data["runs"]["clock"]): an amber
    dotted rule and "throttled" at the top, the reason from its document on hover."""
    notes = runs.get("clock") or []
    out = []
    for x, r in sorted(drawn_runs.items()):
        if r < len(notes) and notes[r]:
            px = frame.xpx(x)
            out.append(
                f'<g class="throttled"><title>{html(_commit(runs, r))}: '
                f'{html(notes[r])}</title><line x1="{px:.1f}" x2="{px:.1f}" '
                f'y1="{frame.top}" y2="{frame.top + frame.h}" stroke="#b26b00" '
                f'stroke-dasharray="1 2"/><text x="{px + 3:.1f}" y="{frame.top + 10}" '
                f'fill="#b26b00">&#9888; throttled</text></g>'
            )
    return out


def _run_labels(drawn_runs: dict[float, int], runs: dict, frame: _Frame, axis_y: float) -> list:
    """The date and commit of five runs across the x axis, none closer than a label's width."""
    shown = sorted(drawn_runs)
    x0, x1 = frame.x0, frame.x1
    at_x: list[float] = []
    nearest = {min(shown, key=lambda x: abs(x - (x0 + (x1 - x0) * k / 4))) for k in range(5)}
    for x in sorted(nearest):
        if at_x and frame.xpx(x) - frame.xpx(at_x[-1]) < RUN_LABEL_PX:
            if len(at_x) == 1:
                continue  # the first run keeps its label; the newest takes the one before's
            at_x.pop()
        at_x.append(x)
    out = []
    for k, x in enumerate(at_x):
        r = drawn_runs[x]
        anchor = "start" if k == 0 else "end" if k == len(at_x) - 1 else "middle"
        out.append(
            f'<text x="{frame.xpx(x):.1f}" y="{axis_y}" text-anchor="{anchor}" fill="#5b6470">'
            f"{html(runs['date'][r][:10] + ' ' + _commit(runs, r, 7))}</text>"
        )
    return out


def _moved(mark: dict, runs: dict) -> str:
    """What a step mark says on hover: "step +3.0%, forth gap 1.245x -> 1.282x (p 4e-05), after
    commit 1011d8fa3d4b (2026-01-01) up to 3fb4d05ecb70 (2026-01-01)"; times in their unit."""
    since = mark.get("from", -1)
    after = (
        f"after commit {_commit(runs, since)} ({runs['date'][since][:10]}) " if since >= 0 else ""
    )
    metric = mark.get("metric", "")

    def value(v) -> str:
        if not isinstance(v, int | float):
            return "?"
        return f"{v:.4g}x" if metric == "gap" else format_time(v)  # a time's are seconds

    return (
        f"{mark.get('kind', 'step')} {mark['relative'] * 100:+.1f}%, {mark['impl']} {metric} "
        f"{value(mark.get('before'))} -> {value(mark.get('after'))} (p {mark.get('p', '?')}), "
        f"{after}up to {_commit(runs, mark['run'])} ({runs['date'][mark['run']][:10]})"
    )
