"""A case page's history chart without a browser (case_pages._chart): round y ticks, parity
where it is in view, the runs' dates and commits along the x axis, and each step mark saying on
hover what moved between which commits, the data escaped."""

from __future__ import annotations

import itertools
import re

from harness.dashboard.case_pages import _chart


def history(runs: int = 40) -> dict:
    return {
        "n": list(range(runs)),
        "date": [f"2026-02-{1 + k // 4:02d} 0{k % 4}:00:00" for k in range(runs)],
        "commit": [f"{k:02d}ab<&>{k:030d}" for k in range(runs - 1)] + [None],
    }


def series(name: str, values: list[float]) -> tuple[dict, list[float]]:
    return {"name": name, "color": "#0072b2", "run": list(range(len(values)))}, values


def test_ticks_are_round_parity_is_drawn_and_the_x_axis_names_runs():
    runs = history()
    forth = series("forth", [1.31] * 20 + [1.245] * 20)
    llvm = series("llvm", [0.951] * 40)
    mark = {"impl": "forth", "metric": "gap", "kind": "step", "run": 20, "from": 19,
            "relative": -0.05, "p": 4e-05, "before": 1.31, "after": 1.245}  # fmt: skip
    svg = _chart([forth, llvm], [mark], runs, "gap")
    ticks = re.findall(r'text-anchor="end">([0-9.]+)x</text>', svg)
    assert ticks == ["0.9", "1.0", "1.1", "1.2", "1.3", "1.4"]
    assert "parity (1.0x)" in svg
    labels = re.findall(r'fill="#5b6470">([^<]*)</text>', svg)
    # five runs across the axis, the first and the newest (which has no commit) among them
    assert len(labels) == 5 and labels[0] == "2026-02-01 00ab&lt;&amp;&gt;"
    assert labels[-1] == "2026-02-10 -"
    title = re.search(r"<g><title>([^<]*)</title>", svg).group(1)
    assert title == (
        "step -5.0%, forth gap 1.31x -&gt; 1.245x (p 4e-05), after commit 19ab&lt;&amp;&gt;00000"
        " (2026-02-05) up to 20ab&lt;&amp;&gt;00000 (2026-02-06)"
    )
    assert "<&>" not in svg


def test_times_tick_without_decimals_and_no_parity_line():
    runs = history()
    svg = _chart([series("cuda", [80.6 + k * 0.9 for k in range(40)])], [], runs, "µs")
    assert re.findall(r'text-anchor="end">([0-9.]+)</text>', svg) == [
        "80",
        "90",
        "100",
        "110",
        "120",
    ]
    assert "parity" not in svg and "<g><title>" not in svg


def test_a_gap_far_from_parity_keeps_its_own_range():
    svg = _chart([series("warpforth", [2.38, 2.39, 2.40, 2.39])], [], history(4), "gap")
    ticks = [float(t) for t in re.findall(r'text-anchor="end">([0-9.]+)x</text>', svg)]
    assert ticks[0] <= 2.38 and ticks[-1] >= 2.40 and ticks[-1] - ticks[0] < 0.1
    assert "parity" not in svg


def test_a_time_step_says_its_times_in_their_unit_and_marks_past_four_rows_keep_no_label():
    runs = history()
    cuda = series("cuda", [88.0] * 30 + [89.8] * 10)
    marks = [
        {"impl": f"impl{k}", "metric": "time", "kind": "step", "run": 30, "from": 29,
         "relative": 0.02, "p": 1e-7, "before": 88e-6, "after": 89.8e-6}
        for k in range(6)
    ]  # fmt: skip
    svg = _chart([cuda], marks, runs, "µs")
    titles = re.findall(r"<g><title>([^<]*)</title>", svg)
    assert len(titles) == 6 and "impl0 time 88.00 us -&gt; 89.80 us (p 1e-07)" in titles[0]
    assert len(re.findall(r"&#9650;\+2.0% impl", svg)) == 4  # the other two: line and title only
    height = int(re.search(r'<svg viewBox="0 0 \d+ (\d+)"', svg).group(1))
    assert height < 230 + 14 * 6


def test_run_labels_never_overlap_and_a_value_that_is_not_finite_is_not_drawn():
    runs = history(101)
    values = [1.2, 1.21, float("inf")] + [None] * 97 + [1.25]
    line = {"name": "forth", "color": "#0072b2", "run": [0, 1, 2, *range(3, 100), 100]}
    svg = _chart([(line, values)], [], runs, "gap")
    xs = [
        float(x) for x in re.findall(r'<text x="([0-9.]+)" y="[0-9.]+" text-anchor="\w+" fill', svg)
    ]
    assert xs[0] == 64.0 and xs[-1] == 1020.0  # the first run and the newest
    assert all(b - a >= 130 for a, b in itertools.pairwise(xs))
    assert "inf" not in svg.lower() and "nan" not in svg.lower()


def test_a_chart_is_named_and_scales_to_the_width():
    svg = _chart([series("forth", [1.2, 1.3])], [], history(2), "gap", "axpy, cold-mean: gap")
    assert re.search(
        r'<svg viewBox="0 0 1100 \d+" width="1100" role="img" class="history" '
        r'aria-label="axpy, cold-mean: gap"><title>axpy, cold-mean: gap</title>',
        svg,
    )
