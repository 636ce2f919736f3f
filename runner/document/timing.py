"""A timed row's `timing` block: its raw samples, how they were taken, and their statistics."""

from __future__ import annotations

from runner.measurement import stats
from runner.measurement.timing import cupti

__all__ = ["timing_block"]


def timing_block(timing: dict, measurement: dict) -> dict:
    """The block of one row from its raw timing ({samples_s, method, batch, calibration_s, timer,
    timer_reason, ...}) and the case's measurement settings ({mode, warmup})."""
    samples = timing["samples_s"]
    block = {
        "mode": measurement["mode"],
        "method": timing["method"],
        "timer": timing.get("timer", "events"),
        "batch": timing["batch"],
        "warmup": measurement["warmup"],
        "calibration_s": timing["calibration_s"],
        "samples_s": samples,
        "stats": stats.summarize(samples),
    }
    if timing.get("timer_reason"):  # why this timer (runner.measurement.timing.timer_choice)
        block["timer_reason"] = timing["timer_reason"]
    if block["timer"] == "cupti":
        block["cupti_span"] = cupti.SPAN
    if timing.get("clocks") is not None:
        block["clocks"] = timing["clocks"]
    if timing.get("problems"):
        block["problems"] = timing["problems"]
    if timing.get("audit"):
        block["audit"] = timing["audit"]
    return block
