"""Timing strategies behind one `measure()` interface: hot (graph replay) and cold (L2 flushed)."""

from runner.timing.base import (
    SCHEDULES,
    Backend,
    ImplTiming,
    Measurement,
    TimingSettings,
    round_order,
    sample_plan,
)
from runner.timing.cold import ColdMode
from runner.timing.hot import HotMode

MODES = {"hot": HotMode, "cold": ColdMode}


def measure(backend: Backend, names: list[str], settings: TimingSettings) -> Measurement:
    """Time `names` on `backend` with the strategy `settings.mode` names."""
    return MODES[settings.mode]().measure(backend, names, settings)


__all__ = [
    "MODES",
    "SCHEDULES",
    "Backend",
    "ColdMode",
    "HotMode",
    "ImplTiming",
    "Measurement",
    "TimingSettings",
    "measure",
    "round_order",
    "sample_plan",
]
