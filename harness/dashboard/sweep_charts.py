"""The dashboard's gap-versus-size charts: per swept case, each candidate's gap over its points
(x: log2 of the point's size, the product of its axis values) for the newest run, solid, and an
earlier run, dashed; beside it the absolute median time of the baseline and every candidate
(log2 of the time). Data from result documents (`curves`), drawn as inline SVG (`svg`) on the
case's page, which opens from disk with no script.

Axis ticks of the dashboard's SVG charts (these and the case pages' histories): multiples of a
round step (1, 2, 2.5 or 5 times a power of ten) from an anchor (parity, 1.0x, for gaps), each
labelled with as many decimals as the spacing needs, so that no two ticks read alike and a tick
labelled 1.0x sits on parity.
"""

from __future__ import annotations

import math

from harness.dashboard.case_charts import BASELINE_COLOR
from harness.escaping import html
from harness.reporting.table import format_time
from protocol.points import is_option_point, swept_cases

__all__ = ["curves", "measured_points", "nice_step", "spaced", "svg", "tick_label"]

WIDTH, HEIGHT, MARGIN = 540, 240, (72, 16, 14, 34)  # px; margin: left, right, top, bottom


def nice_step(rough: float) -> float:
    """The round step nearest above `rough`, at least 0.0001 (labels carry four decimals at
    most: finer ticks would repeat a label)."""
    if rough <= 0:
        return 1.0
    rough = max(rough, 1e-4)
    power = 10 ** math.floor(math.log10(rough))
    return next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= rough * (1 - 1e-9))


def tick_label(v: float, step: float, suffix: str = "", least: int = 1) -> str:
    """A tick's label, with the decimals the spacing needs and at least `least` (0.998x, 0.999x;
    not 1x three times; 80, 90 for times)."""
    decimals = min(4, max(least, math.ceil(-math.log10(step) - 1e-9))) if step > 0 else 3
    if decimals < 4 and abs(round(step, decimals) - step) > 1e-12:
        decimals += 1  # a step of 0.025 needs 3 decimals
    return f"{v:.{decimals}f}{suffix}"


def spaced(y0: float, y1: float, anchor: float = 0.0, steps: int = 4) -> tuple[float, list[float]]:
    """(step, ticks): [y0, y1] widened to the multiples of a round step from `anchor` around it,
    the step about a `steps`-th of the range; the first and last tick bound the axis."""
    if y1 - y0 < 1e-12:
        y0, y1 = y0 - max(abs(y0) * 0.01, 1e-4), y1 + max(abs(y1) * 0.01, 1e-4)
    step = nice_step((y1 - y0) / steps)
    first = math.floor((y0 - anchor) / step + 1e-9)
    last = math.ceil((y1 - anchor) / step - 1e-9)
    return step, [anchor + i * step for i in range(first, last + 1)]


def _size(values: str) -> float | None:
    """log2 of the product of a point id's axis values ("rows=2^5,cols=2^5" -> 10.0); None
    where a value is not a positive number or a power of two ("n=2^27x": no position)."""
    total = 0.0
    for pair in values.split(","):
        value = pair.split("=", 1)[-1]
        try:
            log2 = float(value[2:]) if value.startswith("2^") else math.log2(float(value))
        except ValueError:  # not a number, or not above zero
            return None
        if not math.isfinite(log2):
            return None
        total += log2
    return total


def _lines(blocks: list[tuple[str, dict | None]]) -> tuple[dict, dict]:
    """({candidate: [gap|None]}, {implementation: [median_s|None]}) over `blocks`."""
    gaps: dict[str, list] = {}
    times: dict[str, list] = {}
    for i, (_, block) in enumerate(blocks):
        ok = block is not None and block.get("status") == "ok"
        for name, impl in (block or {}).get("implementations", {}).items():
            gap, timing = impl.get("gap"), impl.get("timing")
            if impl.get("role") == "candidate":
                gaps.setdefault(name, [None] * len(blocks))[i] = (
                    gap["ratio_of_medians"] if ok and gap else None
                )
            times.setdefault(name, [None] * len(blocks))[i] = (
                timing["stats"]["median_s"] if ok and timing else None
            )
    return gaps, times


def curves(document: dict) -> dict[str, dict]:
    """{case id: {"points": [{id, x}], "baseline", "gaps": {candidate: [gap|None]}, "times":
    {implementation: [median_s|None]}}} for every swept case of `document`, its sizes; a case
    with an option axis also has "options": the same over the headline (the implementation as
    declared) and each option point, x counting them."""
    out = {}
    for case, blocks in swept_cases(document):
        sizes = [(p, b) for p, b in blocks if not is_option_point(case, p)]
        options = [(p, b) for p, b in blocks if is_option_point(case, p) and p != case["point"]]
        gaps, times = _lines(sizes)
        entry = {
            "points": [{"id": pid, "x": _size(pid)} for pid, _ in sizes],
            "baseline": case["baseline"],
            "gaps": gaps,
            "times": times,
        }
        if options:
            declared = (case.get("options") or {}).get("headline")
            axis = options[0][0].split("=", 1)[0]
            head = f"{axis}={declared}" if declared else f"{axis} as declared"
            built = [(head, case), *options]
            gaps, times = _lines(built)
            entry["options"] = {
                "points": [{"id": pid, "x": i} for i, (pid, _) in enumerate(built)],
                "baseline": case["baseline"],
                "gaps": gaps,
                "times": times,
            }
        out[case["id"]] = entry
    return out


def measured_points(curve: dict) -> int:
    """How many of a `curves()` entry's points have a gap or a time (a run of single points
    measures one), its option points included."""
    series = [*curve["gaps"].values(), *curve["times"].values()]
    found = sum(any(ys[i] is not None for ys in series) for i in range(len(curve["points"])))
    return found + (measured_points(curve["options"]) if "options" in curve else 0)


def _polyline(xs, ys, xpx, ypx, color: str, dash: str, title: str) -> str:
    """A line through the measured points, broken where a point has none (failed, skipped or
    not run: a line across it would draw a gap nobody measured), with a dot at each."""
    runs: list[list[str]] = [[]]
    for x, y in zip(xs, ys, strict=True):
        if y:
            runs[-1].append(f"{xpx(x):.1f},{ypx(y):.1f}")
        elif runs[-1]:
            runs.append([])
    lines = "".join(
        f'<polyline points="{" ".join(run)}" fill="none" stroke="{color}" stroke-width="1.8" '
        f'stroke-dasharray="{dash}"><title>{html(title)}</title></polyline>'
        for run in runs
        if run
    )
    dots = "".join(
        f'<circle cx="{xpx(x):.1f}" cy="{ypx(y):.1f}" r="2.5" fill="{color}"/>'
        for x, y in zip(xs, ys, strict=True)
        if y
    )
    return lines + dots


def _chart(
    lines: list[tuple], xs: list[float], labels: list[str], what: str, log_y: bool,
    by_option: bool = False,
) -> str:  # fmt: skip
    """One SVG: `lines` of (ys, color, dash, title) over the points at log2 sizes `xs`, or with
    `by_option`, over the ways an implementation was built, one step apart, named by `labels`."""
    lines = [([y if y and math.isfinite(y) else None for y in ys], *rest) for ys, *rest in lines]
    values = [y for ys, *_ in lines for y in ys if y]
    if not values:
        return ""
    ty = (lambda y: math.log2(y)) if log_y else (lambda y: y)
    y0, y1 = ty(min(values)), ty(max(values))
    if not log_y:
        y0, y1 = min(y0, 1.0), max(y1, 1.0)  # parity always in view
    y0, y1 = (y0 - 0.5, y1 + 0.5) if y1 - y0 < 1e-9 else (y0, y1)
    if log_y:  # times: five ticks spread evenly, each labelled with its exact value
        ticks = [(y0 + (y1 - y0) * k / 4, None) for k in range(5)]
    else:  # gaps: the range widened to ticks that parity (1.0x) is one of, a step apart
        step, at = spaced(y0, y1, anchor=1.0)
        y0, y1, ticks = at[0], at[-1], [(v, step) for v in at]
    left, right, top, bottom = MARGIN
    w, h = WIDTH - left - right, HEIGHT - top - bottom
    x0, x1 = min(xs), max(max(xs), min(xs) + 1)

    def xpx(x):
        return left + w * (x - x0) / (x1 - x0)

    def ypx(y):
        return top + h * (y1 - ty(y)) / (y1 - y0)

    out = [
        f'<svg viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" class="sweep" role="img" '
        f'aria-label="{what}"><title>{what}</title>'
    ]
    for v, step in ticks:
        label = format_time(2**v) if step is None else tick_label(v, step, "x")
        y = top + h * (y1 - v) / (y1 - y0)
        out.append(
            f'<line x1="{left}" x2="{left + w}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eceff2"/>'
            f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{label}</text>'
        )
    for x, label in zip(xs, labels, strict=True):
        tick = html(label.split("=", 1)[-1]) if by_option else f"2^{x:g}"
        out.append(
            f'<text x="{xpx(x):.1f}" y="{top + h + 14}" text-anchor="middle">{tick}</text>'
            f"<title>{html(label)}</title>"
        )
    if not log_y:
        out.append(
            f'<line x1="{left}" x2="{left + w}" y1="{ypx(1.0):.1f}" y2="{ypx(1.0):.1f}" '
            'stroke="#5b6470" stroke-dasharray="2 2"/>'
        )
    out += [_polyline(xs, ys, xpx, ypx, c, d, t) for ys, c, d, t in lines]
    axis = html(labels[0].split("=", 1)[0]) if by_option else "size (elements or threads, log2)"
    out.append(
        f'<text x="{left + w / 2:.1f}" y="{HEIGHT - 4}" text-anchor="middle">{axis}</text></svg>'
    )
    return "".join(out)


def svg(
    latest: dict,
    earlier: dict | None,
    colors: dict,
    earlier_label: str,
    latest_label: str = "the newest run",
) -> str:
    """The case's charts from `curves()` entries: gap by size (the newest run solid, the
    earlier dashed) and median time by size of every implementation in the newest run; then the
    same by option where the case has an option axis."""
    charts = ""
    if latest["points"]:
        charts += _pair(latest, earlier, colors, earlier_label, latest_label, "size")
    if "options" in latest:
        options = (earlier or {}).get("options")
        charts += _pair(latest["options"], options, colors, earlier_label, latest_label, "option")
    legend = " ".join(
        f'<span style="color:{html(colors.get(n, BASELINE_COLOR))}">&#9632;</span> {html(n)}'
        for n in latest["times"] or latest.get("options", {}).get("times", {})
    )
    newest = html(latest_label)
    note = (
        f"solid: {newest}; dashed: {html(earlier_label)}"
        if earlier
        else f"{newest} (no earlier run has this sweep)"
    )
    return (
        f"<div>{charts}</div>"
        f"<p class='muted'>{legend}. Gap: {note}. Time: median per launch, the solid line's run."
        "</p>"
    )


def _pair(latest, earlier, colors, earlier_label: str, latest_label: str, by: str) -> str:
    """Gap and median time by size (or by option) of one `curves()` entry."""
    placed = [i for i, p in enumerate(latest["points"]) if p["x"] is not None]
    if not placed:  # no point id gives a size
        return ""
    xs = [latest["points"][i]["x"] for i in placed]
    labels = [latest["points"][i]["id"] for i in placed]
    gap_lines = [
        ([ys[i] for i in placed], colors.get(n, "#333"), "", f"{n}, {latest_label}")
        for n, ys in latest["gaps"].items()
    ]
    if earlier is not None:
        at = {p["id"]: i for i, p in enumerate(earlier["points"])}
        for name, ys in earlier["gaps"].items():
            aligned = [ys[at[pid]] if pid in at else None for pid in labels]
            gap_lines.append((aligned, colors.get(name, "#333"), "5 3", f"{name}, {earlier_label}"))
    time_lines = [
        (
            [ys[i] for i in placed],
            BASELINE_COLOR if n == latest["baseline"] else colors.get(n, "#333"),
            "",
            n,
        )
        for n, ys in latest["times"].items()
    ]
    option = by == "option"
    return _chart(gap_lines, xs, labels, f"gap by {by}", False, option) + _chart(
        time_lines, xs, labels, f"median time by {by}", True, option
    )
