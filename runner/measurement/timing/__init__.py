"""Timing strategies behind one `measure()` interface: hot (graph replay) and cold (L2 flushed)."""

from runner.measurement.timing.base import (
    SCHEDULES,
    Backend,
    ImplTiming,
    Measurement,
    Monitor,
    TimingSettings,
    copy_turn,
    load_order,
    round_order,
    sample_plan,
)
from runner.measurement.timing.cold import ColdMode
from runner.measurement.timing.hot import HotMode

MODES = {"hot": HotMode, "cold": ColdMode}


def measure(
    backend: Backend,
    names: list[str],
    settings: TimingSettings,
    monitor: Monitor | None = None,
    baseline: str | None = None,
    control_term=None,
) -> Measurement:
    """Time `names` on `backend` with the strategy `settings.mode` names; `monitor` reads the
    clocks around every sample; `baseline` is what the precision rule's gaps divide by (the
    first name when not given); `control_term` gives the stopping rule the in-run A/A
    control's systematic term (runner.measurement.aa_control.running_term)."""
    return MODES[settings.mode]().measure(backend, names, settings, monitor, baseline, control_term)


__all__ = [
    "MODES",
    "SCHEDULES",
    "Backend",
    "ColdMode",
    "HotMode",
    "ImplTiming",
    "Measurement",
    "Monitor",
    "TimingSettings",
    "copy_turn",
    "load_order",
    "measure",
    "round_order",
    "sample_plan",
]
