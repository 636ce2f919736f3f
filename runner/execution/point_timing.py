"""How a sweep's points other than the headline are timed: shorter, stopping where precise.

A swept suite has about seventy points; at a case's settings (30 rounds of 50 ms samples for
three or four sides) each would take six seconds of samples alone, the suite over seven
minutes. The headline point keeps the case's settings (its series continues unchanged). Every
other point takes samples of POINT_SAMPLE_MS and POINT_ROUNDS rounds first, then the precision
stopping rule (timing.base.take_samples) adds rounds, half as many again each time, until every
gap's 95% interval is within POINT_PRECISION of the gap or the case's own rounds are spent: a
point whose interval is narrow after 10 rounds stops there, a noisy one gets what the headline
gets. Nothing of the gate, the audits or the A/A control is left out.
"""

from __future__ import annotations

__all__ = ["POINT_PRECISION", "POINT_ROUNDS", "POINT_SAMPLE_MS", "settings_for_point"]

POINT_ROUNDS = 10  # the rounds before the stopping rule first looks
POINT_SAMPLE_MS = 10.0  # hot: thousands of launches a sample even at a 1 us kernel
POINT_PRECISION = 0.01  # +-1% of the gap: finer than the steps a curve shows


def settings_for_point(settings: dict, options) -> dict:
    """The timing settings (case_job.timing_settings) of a non-headline point: what the command
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
