"""Clocks per sample: the SM clock and the clocks-event (throttle) reasons read through NVML
around every timed sample, the time NVML's violation counters accumulated during it, and what
they say about the samples.

Flags explain, they do not exclude. A case is judged against its own usual state (case_state):
its usual SM clock (the median of its samples') and the slowdowns it shows in most samples (a
case at its power limit in every sample is power-limited, and that is how it is measured and
tracked: `usual_sm_mhz` and `own_state` beside it). A sample is flagged when it departs from
that: its SM clock more than CLOCK_SLACK below the case's usual, a slowdown the case does not
usually show (NVML's reasons before or after it), or, where the case is not usually held
down, NVML's violation counters (power, thermal, board limit, reliability) growing while it
ran, so a throttle inside a 50 ms sample is seen too. A case whose samples depart in more than
DEPARTED of them is unstable for that reason: kept and shown, left out of aggregates and
alerts, like noise. A usual clock below the run's maximum is said in a note, not flagged.
"""

from __future__ import annotations

__all__ = [
    "SLOWDOWN_BITS",
    "NvmlMonitor",
    "case_state",
    "clock_report",
    "open_monitor",
    "run_max_mhz",
    "sample_flags",
]

# NVML's clocks-event reason bits (nvml.h, nvmlClocksEventReason*): the ones that mean the
# clock was held down by power or heat. Idle (0x1), application clocks (0x2), sync boost
# (0x10) and display clocks (0x100) are left out: they do not slow a running kernel.
SLOWDOWN_BITS = {
    0x4: "power cap (SwPowerCap)",
    0x8: "hardware slowdown (HwSlowdown)",
    0x20: "thermal (SwThermalSlowdown)",
    0x40: "thermal (HwThermalSlowdown)",
    0x80: "power brake (HwPowerBrakeSlowdown)",
}
MOSTLY = 0.5  # a slowdown in more than this fraction of a case's samples is its own state
DEPARTED = 0.25  # a case with more than this fraction of its samples flagged is unstable
CLOCK_SLACK = 0.02  # a clock within 2% of the case's usual (a step or two) is the usual
# nvmlPerfPolicyType_t values whose violation time means the clock was held down while work ran
# (sync boost, low utilisation and the app/base clock totals are left out: they grow when idle)
VIOLATION_POLICIES = {0: "power", 1: "thermal", 3: "board limit", 5: "reliability"}


class NvmlMonitor:
    """timing.base.Monitor over NVML for one device."""

    def __init__(self, nvml, handle):
        self.nvml, self.handle = nvml, handle
        getter = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
        self._reasons = getter or nvml.nvmlDeviceGetCurrentClocksThrottleReasons
        self.source = "nvml"
        self.read()  # fail here, not in the middle of a measurement

    def read(self) -> tuple[int, int]:
        mhz = int(self.nvml.nvmlDeviceGetClockInfo(self.handle, self.nvml.NVML_CLOCK_SM))
        return mhz, int(self._reasons(self.handle))

    def power_mw(self) -> tuple[int, int]:
        """(the board's power draw, its enforced power limit), in milliwatts."""
        draw = int(self.nvml.nvmlDeviceGetPowerUsage(self.handle))
        return draw, int(self.nvml.nvmlDeviceGetEnforcedPowerLimit(self.handle))

    def violation_ns(self) -> int | None:
        """The sum of NVML's accumulated violation times (VIOLATION_POLICIES) in ns, or None
        where this GPU or driver does not keep them."""
        total = 0
        try:
            for policy in VIOLATION_POLICIES:
                total += int(
                    self.nvml.nvmlDeviceGetViolationStatus(self.handle, policy).violationTime
                )
        except Exception:  # NVML_ERROR_NOT_SUPPORTED on some boards: the edges' reasons remain
            return None
        return total


def open_monitor(index: int = 0, uuid: str | None = None) -> tuple[NvmlMonitor | None, str]:
    """(monitor, "nvml"), or (None, why not) where NVML cannot be read."""
    try:
        import pynvml as nvml

        nvml.nvmlInit()
        handle = None
        if uuid:
            try:
                handle = nvml.nvmlDeviceGetHandleByUUID(uuid)
            except Exception:
                handle = None
        if handle is None:
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
        return NvmlMonitor(nvml, handle), "nvml"
    except Exception as exc:  # not installed, no driver, a query this GPU does not support
        return None, f"unavailable: {type(exc).__name__}: {exc}"


BELOW_USUAL = "SM clock below the case's usual"


THROTTLED_INSIDE = "throttled inside the sample (NVML violation counters)"


def _reasons(clock: list[int], usual: int | None, own=()) -> list[tuple[str, str]]:
    """(reason, its words for this sample) of one [before MHz, after MHz, reason bits] or
    [before MHz, after MHz, reason bits, violation ns accumulated during the sample], against
    the case's usual clock and the slowdowns it usually shows (`own`)."""
    before, after, bits = clock[:3]
    found = [(n, n) for bit, n in SLOWDOWN_BITS.items() if bits & bit and n not in own]
    if len(clock) > 3 and clock[3] > 0 and THROTTLED_INSIDE not in own:
        found.append((THROTTLED_INSIDE, f"{THROTTLED_INSIDE}: {clock[3] / 1e3:.0f} us held down"))
    low = min(before, after)
    if usual is not None and low < usual * (1 - CLOCK_SLACK):
        found.append((BELOW_USUAL, f"SM clock {low} MHz below the case's usual {usual} MHz"))
    return found


def _all_reasons(clock: list[int]) -> set[str]:
    """Every slowdown one sample shows, whatever the case's state."""
    found = {n for bit, n in SLOWDOWN_BITS.items() if clock[2] & bit}
    return found | ({THROTTLED_INSIDE} if len(clock) > 3 and clock[3] > 0 else set())


def case_state(timings: dict[str, dict]) -> tuple[int | None, tuple[str, ...]]:
    """The case's usual state over its implementations' samples: its usual SM clock (the median
    of each sample's lower reading) and the slowdowns shown in more than MOSTLY of them."""
    readings = [c for t in timings.values() for c in (t.get("clocks") or [])]
    if not readings:
        return None, ()
    lows = sorted(min(c[0], c[1]) for c in readings)
    usual = lows[len(lows) // 2]
    counts: dict[str, int] = {}
    for clock in readings:
        for reason in _all_reasons(clock):
            counts[reason] = counts.get(reason, 0) + 1
    own = tuple(sorted(r for r, n in counts.items() if n > MOSTLY * len(readings)))
    return usual, own


def sample_flags(clocks: list[list[int]], usual: int | None, own=()) -> list[str | None]:
    """Per sample: None, or how it departs from the case's usual state ([before MHz, after MHz,
    reason bits] each; case_state gives `usual` and `own`)."""
    return ["; ".join(words for _, words in _reasons(c, usual, own)) or None for c in clocks]


def run_max_mhz(timings) -> int | None:
    """The highest SM clock read around any sample in `timings` (dicts with "clocks")."""
    seen = [max(c[0], c[1]) for t in timings for c in (t.get("clocks") or [])]
    return max(seen) if seen else None


def clock_report(timings: dict[str, dict], run_max: int | None) -> dict:
    """The case's clocks: its usual state (usual_sm_mhz, own_state), how many samples departed
    from it, the commonest departures, and `unstable` with the reason when more than DEPARTED
    of them did; a note where its usual clock sits below the run's maximum."""
    usual, own = case_state(timings)
    flagged = total = 0
    reasons: dict[str, int] = {}
    for timing in timings.values():
        for clock in timing.get("clocks") or []:
            found = _reasons(clock, usual, own)
            total += 1
            flagged += bool(found)
            for reason, _ in found:
                reasons[reason] = reasons.get(reason, 0) + 1
    unstable = total > 0 and flagged > DEPARTED * total
    report = {
        "run_max_sm_mhz": run_max,
        "usual_sm_mhz": usual,
        "own_state": list(own),
        "samples": total,
        "flagged": flagged,
        "reasons": dict(sorted(reasons.items(), key=lambda kv: -kv[1])),
        "unstable": unstable,
    }
    if unstable:
        top = ", ".join(report["reasons"])
        report["note"] = (
            f"unstable: {flagged} of {total} samples departed from the case's usual clocks ({top})"
        )
    elif usual and run_max and usual < run_max * (1 - CLOCK_SLACK):
        held = f" ({', '.join(own)})" if own else ""
        report["note"] = (
            f"measured at its usual {usual} MHz{held}, below the run's {run_max} MHz: "
            "tracked as its own state, not flagged"
        )
    return report
