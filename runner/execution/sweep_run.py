"""A swept case in `runner bench`: built once, then gated, calibrated and timed point by point.

The headline point runs first (it is the case's single number: when the budget is short it is
the one to have), then the others in declared order, each in a worker of its own as a case is
(a fault at one point costs that point). A point not started before the suite's --budget-s is
spent is recorded as skipped, saying so; so is a point the build never reached.

The points other than the headline are timed shorter, stopping where precise (settings_for_point):
each takes samples of POINT_SAMPLE_MS and POINT_ROUNDS rounds first, then the precision stopping
rule (timing.base.take_samples) adds rounds, half as many again each time, until every gap's 95%
interval is within POINT_PRECISION of the gap or the case's own rounds are spent; the headline
keeps the case's settings (its series continues unchanged). Nothing of the gate, the audits or
the A/A control is left out (docs/method.md, sweeps).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from runner.definition import sweep
from runner.document import curve, sweep_block
from runner.execution.result import case_skeleton

__all__ = [
    "POINT_PRECISION",
    "POINT_ROUNDS",
    "POINT_SAMPLE_MS",
    "Built",
    "run_points",
    "settings_for_point",
]


POINT_ROUNDS = 10  # the rounds before the stopping rule first looks
POINT_SAMPLE_MS = 10.0  # hot: thousands of launches a sample even at a 1 us kernel
POINT_PRECISION = 0.01  # +-1% of the gap: finer than the steps a curve shows


def settings_for_point(settings: dict, options) -> dict:
    """The timing settings (suite.timing_settings) of a non-headline point: what the command
    line asked for explicitly (--samples, --target-sample-ms, --precision) stays as asked."""
    out = dict(settings)
    if options.target_sample_ms is None:
        out["target_sample_s"] = POINT_SAMPLE_MS / 1000.0
    if options.precision is None:
        cap = settings["samples"]
        out["samples"] = cap if options.samples is not None else min(POINT_ROUNDS, cap)
        out["precision"] = POINT_PRECISION
        out["first_samples"] = None  # the precision rule decides, not the sequential one
        out["max_samples"] = cap
        out["precision_max_s"] = 60.0
    return out


@dataclass
class Built:
    """A case's build, kept for its other points (a sweep builds once): the implementations'
    document blocks after build and static analysis, the PTX by name and the host's seconds."""

    implementations: dict | None = None
    ptx: dict | None = None
    failed: dict | None = None  # the case document of a build that failed
    phases_s: dict = field(default_factory=dict)


def _skipped(case, pid: str, phase: str, message: str) -> dict:
    doc = case_skeleton(sweep.at_point(case, pid))
    doc["status"] = "skipped"
    doc["error"] = {"phase": phase, "message": message}
    return doc


def run_points(
    case,
    selected: tuple[str, ...] | None,
    measure: Callable[[str, Built], dict],
    left_s: Callable[[], float | None],
    budget_s: float | None,
    say,
) -> dict:
    """The case block of `case` measured at its `selected` points (None: all), each by
    `measure(point id, the case's build)`; `left_s()` is what is left of the budget."""
    points = [p for p in case.sweep.points if selected is None or p.id in selected]
    headline = case.sweep.headline
    order = sorted(points, key=lambda p: p.id != headline)  # the headline first
    builds, docs = {}, {}  # one build for the sizes, one per option value (built its own way)
    for done, point in enumerate(order):
        left = left_s()
        if left is not None and left <= 0:
            docs[point.id] = _skipped(
                case,
                point.id,
                "timeout",
                f"not run: the suite's time budget (--budget-s {budget_s:g}) was spent after "
                f"{done} of the case's {len(order)} point(s)",
            )
            say(f"[{case.id}[{point.id}]] not run: the budget was spent")
            continue
        docs[point.id] = measure(point.id, builds.setdefault(point.option, Built()))
    if headline not in docs:
        docs[headline] = _skipped(
            case,
            headline,
            "setup",
            f"not run: the headline point {headline} was not selected "
            f"(--case/--point chose {', '.join(selected or ())})",
        )
    listed = [p for p in case.sweep.points if p.id in docs]
    block = sweep_block(
        headline,
        docs[headline],
        list(case.sweep.axes),
        [(p.id, p.dims, docs[p.id]) for p in listed],
    )
    if case.sweep.options is not None:  # the size curve is drawn over sizes alone
        block["options"] = case.sweep.options.block()
        block["curve"] = curve([(p.id, docs[p.id]) for p in listed if p.option is None])
    return block
