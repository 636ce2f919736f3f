"""A swept case in `runner bench`: built once, then gated, calibrated and timed point by point.

The headline point runs first (it is the case's single number: when the budget is short it is
the one to have), then the others in declared order, each in a worker of its own as a case is
(a fault at one point costs that point). A point not started before the suite's --budget-s is
spent is recorded as skipped, saying so; so is a point the build never reached.
"""

from __future__ import annotations

from collections.abc import Callable

from runner.definition import sweep
from runner.document import sweep_block
from runner.execution.case_job import Built, case_skeleton

__all__ = ["run_points"]


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
    built, docs = Built(), {}
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
        docs[point.id] = measure(point.id, built)
    if headline not in docs:
        docs[headline] = _skipped(
            case,
            headline,
            "setup",
            f"not run: the headline point {headline} was not selected "
            f"(--case/--point chose {', '.join(selected or ())})",
        )
    listed = [p for p in case.sweep.points if p.id in docs]
    return sweep_block(
        headline,
        docs[headline],
        list(case.sweep.axes),
        [(p.id, p.dims, docs[p.id]) for p in listed],
    )
