"""Timing modes: every name a history series can carry for one, and how each is shown.

A document's mode is "hot" or "cold" (schemas/result.schema.json); the history keys a series by
a finer name (harness.history.series): "cold-mean" for cold samples that are means of a batch
(result schema 1.7.0 on), and "/cupti" or "/cupti-span" after the mode where CUPTI's timestamps
read the samples. `describe()` says what any such name is: its family (hot or cold: the symbol
and colour every page uses), its symbol and a tooltip, so no page tests for a name by equality.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

__all__ = ["COLD", "COLD_MEAN", "HOT", "TIMERS", "ModeInfo", "describe", "series_mode"]

HOT, COLD, COLD_MEAN = "hot", "cold", "cold-mean"


@dataclass(frozen=True)
class ModeInfo:
    """How a mode name is shown: its family ("hot", "cold" or "other"), symbol and tooltip."""

    name: str
    family: str
    symbol: str
    title: str

    def as_dict(self) -> dict:
        return asdict(self)


BASES = {  # the base of a series' mode name -> (family, symbol, what a sample is)
    HOT: (HOT, "▲", "steady state: graph replay, warm L2"),
    COLD: (COLD, "◆", "cold: one launch after an L2 flush"),
    COLD_MEAN: (
        COLD,
        "◆",
        "cold: each sample the mean of a batch of launches, each after an L2 flush",
    ),
}
TIMERS = {  # the timer after "/" in a mode name; events (no suffix) is the default
    "events": "",
    "auto": "",
    "cupti": "; read by CUPTI's timestamps",
    "cupti-span": "; read by CUPTI's span (first start to last end)",
}


def series_mode(mode: str, cold_mean: bool, timer: str | None) -> str:
    """The series name of a document's `mode` read by `timer`: "cold" becomes "cold-mean" when
    its samples are batch means; a timer other than events is added after "/"."""
    name = COLD_MEAN if mode == COLD and cold_mean else mode
    timer = timer or "events"
    return name if timer in ("events", "auto") else f"{name}/{timer}"


def describe(name: str | None) -> ModeInfo:
    """What a mode name (as series_mode() makes it) is; a name this version does not know is
    shown as itself, family "other", rather than taken for hot."""
    base, _, timer = (name or "").partition("/")
    if base in BASES and (timer or "events") in TIMERS:
        family, symbol, title = BASES[base]
        return ModeInfo(name or "", family, symbol, title + TIMERS[timer or "events"])
    return ModeInfo(name or "", "other", "●", f"mode {name or '?'}: not known to this kernelgap")
