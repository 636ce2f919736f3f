"""When sampling stops: the gaps' intervals as the result will show them, judged after each
block of rounds. Two rules share them:

- sequential (runner bench's default): the first `first_samples` rounds, then stop as soon as
  every gap's 95% interval, the A/A control's included, has a relative half-width within
  `sequential_target` (or only the run-fixed term keeps it wider: the floor), else
  SEQUENTIAL_STEP rounds more, up to `samples`. A case whose gaps are already that precise
  stops early; a noisy one takes the rounds it always took.
  tests/coverage/test_sequential.py checks A/A coverage under it.
- precision (`--precision`): after `samples`, go on until the half-width is the target, up to
  `max_samples` or `precision_max_s`.

Both widen the intervals by the run-fixed term the document will use (run_systematic): the
in-run A/A control's once each of its loads has samples enough (aa_control.decided), and
neither stops before that where a control is timed; the documented default without one.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from protocol import statistics
from runner.measurement import stats

__all__ = [
    "SEQUENTIAL_STEP",
    "SEQUENTIAL_TARGET",
    "ControlTerm",
    "half_widths",
    "precision_more",
    "precision_reached",
    "run_systematic",
    "sequential_more",
    "unreachable",
]

SEQUENTIAL_TARGET = 0.0025
"""The sequential rule's half-width (0.25% of the gap): wider than a steady hot case's intervals
at 24 rounds, narrower than a cold or noisy one's (docs/method/intervals-and-headline.md)."""

SEQUENTIAL_STEP = 4  # rounds added at a time: whole AB/BA pairs of the balanced order

ControlTerm = Callable[[dict], "float | None"]


def default_systematic(baseline, mode: str) -> float:
    """The documented default run-fixed term of every gap against `baseline` (an ImplTiming;
    stats.systematic)."""
    return stats.systematic(mode, statistics.median(baseline.samples_s))


def run_systematic(
    timings: dict, baseline: str, mode: str, control_term: ControlTerm | None
) -> tuple[float, str]:
    """The run-fixed term a rule widens gaps by, and its source: the in-run A/A control's
    ("control"; `control_term`, runner.measurement.aa_control.running_term) once every load has
    samples enough; the documented default ("default", stats.systematic) where no control is
    timed, or, "pending", while the control's term is not yet read (the rule goes on)."""
    term = control_term(timings) if control_term is not None else None
    if term is None:
        return default_systematic(timings[baseline], mode), "default"
    if math.isnan(term):
        return default_systematic(timings[baseline], mode), "pending"
    return term, "control"


def half_widths(timings: dict, baseline: str, systematic: float) -> tuple[float, float]:
    """The widest relative half-width of every other side's gap interval (an A/A control's
    included): (as the result shows it, widened by `systematic`; the rounds' bootstrap alone).
    A bootstrap of 2,000 resamples is enough to decide. (0, 0) with no other side."""
    widened = rounds = 0.0
    base = timings[baseline].samples_s
    for name, timing in timings.items():
        if name == baseline:
            continue
        g = statistics.gap(base, timing.samples_s, resamples=2000, systematic=0.0)
        ratio = g["ratio_of_medians"]
        lo, hi = statistics.widen(ratio, g["ci_low"], g["ci_high"], systematic)
        widened = max(widened, float((hi - lo) / 2 / ratio))
        rounds = max(rounds, float((g["ci_high"] - g["ci_low"]) / 2 / ratio))
    return widened, rounds


def precision_reached(
    timings: dict,
    baseline: str,
    target: float,
    mode: str = "hot",
    systematic: float | None = None,
) -> tuple[bool, float]:
    """Whether every other side's gap interval (half_widths) has a half-width <= target x its
    gap; and the largest relative half-width (with no other side: True, 0). The interval is
    the result's: widened by `systematic` (run_systematic: the control's term, or the
    documented default)."""
    if systematic is None:
        systematic = default_systematic(timings[baseline], mode)
    worst = half_widths(timings, baseline, systematic)[0]
    return worst <= target, worst


def unreachable(systematic: float, target: float) -> bool:
    """Whether the run-fixed term alone (the control's, or a cold short kernel's placement)
    makes every gap's interval wider than `target`."""
    return stats.floor_half_width(systematic=systematic) >= target


def _judged(timings: dict, baseline: str, settings, control_term, target: float) -> dict:
    """What both rules decide on: the run-fixed term and its source, the widest interval as
    the result shows it, and whether only that term keeps the intervals above `target` (the
    rounds' own part within it: no round narrows the rest)."""
    systematic, source = run_systematic(timings, baseline, settings.mode, control_term)
    widened, rounds = half_widths(timings, baseline, systematic)
    return {
        "target": target,
        "half_width": widened,
        "samples": len(timings[baseline].samples_s),
        "systematic": systematic,
        "systematic_source": source,
        "floor": rounds <= target and unreachable(systematic, target) and source != "pending",
    }


def sequential_more(
    timings: dict, baseline: str, settings, control_term: ControlTerm | None
) -> tuple[int, dict]:
    """The sequential rule after a block of rounds: (rounds more to take, 0 to stop; its
    outcome so far: first rounds, target, half-width, samples, what stopped it). It stops at
    the target; or at the floor, where the rounds' part of every interval is within the
    target and the run-fixed term alone keeps it wider (no round narrows that: the A/A
    control's spread between loads); or at `samples`."""
    judged = _judged(timings, baseline, settings, control_term, settings.sequential_target)
    floor = judged.pop("floor")
    more = min(SEQUENTIAL_STEP, settings.samples - judged["samples"])
    if judged["half_width"] <= judged["target"] and judged["systematic_source"] != "pending":
        stopped_by = "target"
    else:
        stopped_by = "floor" if floor else "samples" if more <= 0 else None
    return (0 if stopped_by else more), {
        "first": settings.first_samples,
        **judged,
        "stopped_by": stopped_by,
    }


def precision_more(
    timings: dict, baseline: str, settings, control_term: ControlTerm | None, spent_s: float
) -> tuple[int, dict]:
    """The precision rule after a block of rounds: (rounds more, 0 to stop; its outcome). It
    stops converged, at `max_samples`, at the floor (the run-fixed term alone above the
    target) or when `precision_max_s` leaves no time; more rounds grow the count by half."""
    judged = _judged(timings, baseline, settings, control_term, settings.precision)
    judged.pop("floor")
    done = judged["samples"]
    pending = judged["systematic_source"] == "pending"
    converged = judged["half_width"] <= settings.precision and not pending
    more = min(settings.max_samples, math.ceil(done * 1.5)) - done
    stopped_by = "precision" if converged else "max_samples" if more < 2 else None
    if stopped_by is None and not pending and unreachable(judged["systematic"], settings.precision):
        stopped_by = "floor"  # no sample can narrow the run-fixed term: stop now
    left_s = settings.precision_max_s - spent_s
    if stopped_by is None:  # no more than the time left allows
        more = min(more, int(left_s * done / spent_s)) if left_s > 0 else 0
    more -= more % 2  # whole AB/BA pairs (and whole passes)
    if stopped_by is None and more <= 0:
        stopped_by = "precision_max_s"
    outcome = {**judged, "converged": converged, "stopped_by": stopped_by, "spent_s": spent_s}
    return (0 if stopped_by else more), outcome
