"""A second measurement of a case whose first one could not be used: after a cool-down, with
shorter samples.

A gap whose samples are noisier than stats.UNSTABLE_NOISE is usually the GPU, not the kernel: a
long hot sample at the power cap throttles in every sample (benchmarks/perf/RESULTS.md). The
headline keeps such a case in its fixed set either way (protocol.headline); measuring it again
first gives it a chance to be shown stable. The second measurement replaces
the first when it completed (ok), whatever its gap reads, so the choice never depends on the
gap's value; the case records that it was re-measured, why, and the first one's noise.
"""

from __future__ import annotations

import dataclasses
import time

from runner.measurement import stats
from runner.measurement.timing import clocks

__all__ = [
    "COOLDOWN_S",
    "SHORTER",
    "cool_down",
    "first_noise",
    "needs_remeasure",
    "remeasure_options",
    "settle",
]

COOLDOWN_S = 10.0
"""The longest idle pause before the second measurement (and the pause where NVML cannot say
when the board has settled)."""

MIN_COOLDOWN_S = 2.0
"""The shortest pause: a power limit is enforced over a moving average of the draw, which an
idle board clears within this."""

SETTLED_POWER = 0.3
"""The board has settled when it draws less than this fraction of its enforced power limit and
no power or thermal slowdown reason is set (an idle board draws well under it)."""

POLL_S = 0.25

SHORTER = 0.5
"""The second measurement's hot sample target, as a fraction of the first's (a shorter sample
spends less time at the cap; cold samples are single launches and keep their batch)."""


def needs_remeasure(case_doc: dict) -> str | None:
    """Why this case should be measured again, or None: it completed but a gap is unstable."""
    if case_doc.get("status") != "ok" or case_doc.get("remeasured"):
        return None
    noisy = [
        name
        for name, impl in case_doc.get("implementations", {}).items()
        if impl.get("gap") and not impl["gap"]["stable"]
    ]
    if not noisy:
        return None
    if case_doc.get("clocks", {}).get("unstable"):
        why = "clocks held down in most samples"
    else:
        why = f"noise above {stats.UNSTABLE_NOISE:.0%}"
    return f"unstable gap of {', '.join(noisy)} ({why})"


def remeasure_options(options, case_target_sample_ms: float):
    """`options` for the second measurement: the case's hot sample target times SHORTER."""
    target = options.target_sample_ms or case_target_sample_ms
    return dataclasses.replace(options, target_sample_ms=target * SHORTER)


def first_noise(case_doc: dict) -> dict[str, float]:
    """Per implementation with a timing, its noise (MAD / median) in this measurement."""
    return {
        name: impl["timing"]["stats"]["noise"]
        for name, impl in case_doc.get("implementations", {}).items()
        if "timing" in impl and impl["timing"]["stats"].get("noise") is not None
    }


def settle(first: dict, second: dict, reason: str, cooldown_s: float, target_ms: float) -> dict:
    """The case document to keep: the second when it completed (ok), else the first; either
    way with `remeasured` saying what happened."""
    record = {
        "reason": reason,
        "cooldown_s": cooldown_s,
        "target_sample_s": target_ms / 1000.0,
        "first_noise": first_noise(first),
        "improved": second.get("status") == "ok" and needs_remeasure(second) is None,
    }
    kept = second if second.get("status") == "ok" else first
    kept["remeasured"] = record
    return kept


def cool_down(index: int = 0, uuid: str | None = None, longest_s: float = COOLDOWN_S) -> float:
    """Leave the GPU idle (nothing of this process runs on it between cases) until NVML says it
    has settled (`settled`), at least MIN_COOLDOWN_S and at most `longest_s`; `longest_s` where
    NVML cannot be read. Returns the seconds waited."""
    monitor, _ = clocks.open_monitor(index, uuid)
    start = time.monotonic()
    if monitor is None:
        time.sleep(longest_s)
        return longest_s
    time.sleep(MIN_COOLDOWN_S)
    while (waited := time.monotonic() - start) < longest_s:
        if settled(monitor):
            return round(waited, 3)
        time.sleep(POLL_S)
    return round(time.monotonic() - start, 3)


def settled(monitor) -> bool:
    """Whether the board draws under SETTLED_POWER of its limit with no slowdown reason set;
    False where the power cannot be read."""
    try:
        drawn, limit = monitor.power_mw()
        _, reasons = monitor.read()
    except Exception:  # a board or driver without the power queries: wait the longest pause
        return False
    slowed = any(reasons & bit for bit in clocks.SLOWDOWN_BITS)
    return limit > 0 and drawn < SETTLED_POWER * limit and not slowed
