"""Which timer reads a mode's samples, and why: the same rule for both front ends.

Cold mode is timed by CUPTI's kernel timestamps: CUDA events add their own overhead to one
short launch, which compresses cold gaps toward 1, so "auto" never falls back to events in cold
mode: without a usable cupti-python the run is refused, naming the fix. Events in cold mode
are only ever the user's explicit choice (`--timer events`, `timer="events"`,
`--bench-timer events`), and that choice is warned about, recorded in every row
(`timing.timer_reason`) and is a series of its own (harness.series: `cold-mean`, never
`cold-mean/cupti`). Hot mode's "auto" is events (graph replay between events), since CUPTI's
tracing costs every launch something. The figures: docs/method/timers.md.
"""

from __future__ import annotations

from runner.errors import TimerUnavailable

__all__ = ["TimerUnavailable", "choose_timer", "cold_events_warning"]

# How each front end spells the explicit choice of events (for messages)
EVENTS_CHOICE = (
    '`--timer events` (runner bench), `TimingOptions(timer="events")` (runner.bench) or '
    "`--bench-timer events` (pytest)"
)
COLD_EVENTS_COST = (
    "CUDA events add their own overhead to one short cold launch (3 times CUPTI's figure for a "
    "1 us kernel: docs/method/timers.md), which compresses cold gaps toward 1"
)


def choose_timer(timer: str, mode: str, cupti_reason: str | None) -> tuple[str, str]:
    """(timer, why) for a `mode` measurement asked to use `timer` (auto, events or cupti) where
    CUPTI is usable when `cupti_reason` is None (else it says why not).

    Raises TimerUnavailable for cupti, or auto in cold mode, without CUPTI, naming the fix."""
    if cupti_reason is not None and (timer == "cupti" or (timer == "auto" and mode == "cold")):
        needs = "cold mode is" if timer == "auto" else "timer cupti was asked for:"
        raise TimerUnavailable(
            f"{needs} timed by CUPTI's kernel timestamps, and CUPTI cannot be used here "
            f"({cupti_reason}). Install cupti-python (`pip install cupti-python`, the `cupti` "
            "extra; `harness run --install` installs it on the GPU box), or choose CUDA events "
            f"explicitly with {EVENTS_CHOICE}; in cold mode {COLD_EVENTS_COST}, and such "
            "results are a series of their own"
        )
    if timer != "auto":
        if mode == "cold" and timer == "events":
            return timer, f"chosen: events in cold mode, asked for explicitly; {COLD_EVENTS_COST}"
        return timer, f"chosen: {timer}, asked for explicitly"
    if mode == "cold":
        return "cupti", "auto: CUPTI's kernel timestamps in cold mode"
    return "events", "auto: CUDA events (graph replay between events) in hot mode"


def cold_events_warning(what: str) -> str:
    """The stderr warning for an explicit choice of events in cold mode (`what` is timed)."""
    return (
        f"WARNING: {what} cold by CUDA events, as asked: {COLD_EVENTS_COST}; recorded in every "
        "row (timing.timer_reason) and a series apart from CUPTI's"
    )
