"""Clocks per sample: the SM clock and the clocks-event (throttle) reasons read through NVML
around every timed sample, the time NVML's violation counters accumulated during it, and what
they say about the samples.

A sample is flagged when, before or after it, NVML reported a power or thermal slowdown, when
NVML's accumulated violation counters (power, thermal, board limit, reliability: nanoseconds
the clock was held down) grew while it ran, so a throttle that came and went inside a 50 ms
sample is seen too, or when its SM clock was below the run's maximum on the same GPU.
A case whose samples are mostly flagged (more than half of them, over all implementations)
is unstable for that reason: kept and shown, left out of aggregates and alerts, like noise.
"""

from __future__ import annotations

__all__ = [
    "SLOWDOWN_BITS",
    "NvmlMonitor",
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
MOSTLY = 0.5  # a case with more than this fraction of its samples flagged is unstable
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


BELOW_RUN_MAX = "SM clock below the run's maximum"


THROTTLED_INSIDE = "throttled inside the sample (NVML violation counters)"


def _reasons(clock: list[int], run_max: int | None) -> list[tuple[str, str]]:
    """(reason, its words for this sample) of one [before MHz, after MHz, reason bits] or
    [before MHz, after MHz, reason bits, violation ns accumulated during the sample]."""
    before, after, bits = clock[:3]
    found = [(name, name) for bit, name in SLOWDOWN_BITS.items() if bits & bit]
    if len(clock) > 3 and clock[3] > 0:
        found.append((THROTTLED_INSIDE, f"{THROTTLED_INSIDE}: {clock[3] / 1e3:.0f} us held down"))
    low = min(before, after)
    if run_max is not None and low < run_max:
        found.append((BELOW_RUN_MAX, f"SM clock {low} MHz below the run's {run_max} MHz"))
    return found


def sample_flags(clocks: list[list[int]], run_max: int | None) -> list[str | None]:
    """Per sample: None, or why it is flagged ([before MHz, after MHz, reason bits] each)."""
    return ["; ".join(words for _, words in _reasons(c, run_max)) or None for c in clocks]


def run_max_mhz(timings) -> int | None:
    """The highest SM clock read around any sample in `timings` (dicts with "clocks")."""
    seen = [max(c[0], c[1]) for t in timings for c in (t.get("clocks") or [])]
    return max(seen) if seen else None


def clock_report(timings: dict[str, dict], run_max: int | None) -> dict:
    """The case's verdict from its implementations' clocks: how many samples were flagged, the
    commonest reasons, and `unstable` with the reason when they are mostly flagged."""
    flagged = total = 0
    reasons: dict[str, int] = {}
    for timing in timings.values():
        for clock in timing.get("clocks") or []:
            found = _reasons(clock, run_max)
            total += 1
            flagged += bool(found)
            for reason, _ in found:
                reasons[reason] = reasons.get(reason, 0) + 1
    unstable = total > 0 and flagged > MOSTLY * total
    report = {
        "run_max_sm_mhz": run_max,
        "samples": total,
        "flagged": flagged,
        "reasons": dict(sorted(reasons.items(), key=lambda kv: -kv[1])),
        "unstable": unstable,
    }
    if unstable:
        top = ", ".join(report["reasons"])
        report["note"] = (
            f"unstable: {flagged} of {total} samples were taken while throttled ({top})"
        )
    return report
