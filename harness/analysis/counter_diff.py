"""The counters that differ between two builds or runs of one implementation, most telling first,
each said in words ("head spills 16 bytes per thread where base spilled none").

Static counters carry no noise, so every difference is reported; a profiled counter
(`ncu/...`) is reported when it moved by at least FAMILY_MARGIN times its noise floor (the
largest move between builds of the same PTX: a family-wise bound over a kernel's counters), and
the move names that floor, since ncu's sampled figures (stalls, hit rates) wander from run to run. A counter that is one share
of a whole (a stall reason of the stall total, as ncu's warp-state chart stacks them; DRAM bytes
read or written of the traffic) counts by its move as a fraction of the whole (WHOLES gives
each its threshold): a stall reason near zero that doubles (0.02 -> 0.04 cycles an issue beside a
total of 20) moved by nothing that matters, and the whole is steadier than its small parts.

The order is a judgement of what most plausibly moves a time: spills and local memory first,
then occupancy and registers, instructions inside loops, barriers, the profiled counts of work
done, the whole function's instruction mix, and the rest.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, replace

from harness.history.counters import CLASS_LABELS, profiled, unit, value

__all__ = [
    "FAMILY_MARGIN",
    "PROFILE_MIN_CHANGE",
    "CounterChange",
    "differences",
    "is_share",
    "label",
    "sentence",
    "static_changed",
]

FAMILY_MARGIN = 2.0
"""A profiled counter's threshold is this many times its noise floor (the largest move between
builds of the same PTX): over a kernel's ~50 profiled counters, a family-wise 5% needs the
1 - 0.05 / 50 normal quantile (3.29 sd), and the largest of 16 same-PTX pairs is about 1.77 sd."""

PROFILE_NOISE_FLOOR = 0.025
"""The noise floor of a profiled counter with no same-PTX figures of its own (threshold 5%)."""
PROFILE_MIN_CHANGE = FAMILY_MARGIN * PROFILE_NOISE_FLOOR  # relative; static ones count at any size

DRAM_SMALL_TRAFFIC = 16 * 2**20  # bytes: under it DRAM shares wander more (24.7% at 1 MiB)
# Profiled counters that are shares of one whole, each with its noise floor as a fraction of the
# whole's sum (under DRAM_SMALL_TRAFFIC, the second). Between builds of the same PTX on two
# H200s (16 profiled pairs each, benchmarks/perf/RESULTS.md, session 37), stall reasons moved by
# at most 0.9% of the stall total (floor 1%); DRAM bytes by up to 5.9% of the traffic (a tiled matmul's
# reads), and by 24.7% where the traffic was 1 MiB.
WHOLES = (
    (
        re.compile(r"ncu/smsp__average_warps_issue_stalled_\w+_per_issue_active\.ratio"),
        0.01,
        0.01,
    ),
    (re.compile(r"ncu/dram__bytes_(read|write)\.sum"), 0.059, 0.247),
)
WEIGHTS = (  # (name prefix, weight): the first prefix that matches
    ("static/spill_", 10.0),
    ("static/in_loops/local_", 9.0),
    ("static/stack_bytes", 8.0),
    ("static/occupancy", 7.0),
    ("static/registers", 6.0),
    ("static/in_loops/total", 5.5),
    ("static/in_loops/", 5.0),
    ("ncu/smsp__inst_executed", 4.5),
    ("ncu/dram__bytes", 4.5),
    ("static/loops", 4.0),
    ("static/barriers", 4.0),
    ("static/instructions/local_", 3.5),
    ("ncu/", 3.0),
    ("static/instructions/total", 2.5),
    ("static/instructions/", 2.0),
    ("static/", 1.0),
)


@dataclass(frozen=True)
class CounterChange:
    """One counter that differs: its value on each side (None: the side lacks it) and unit."""

    name: str
    before: float | None
    after: float | None
    unit: str
    profiled: bool
    scale: float | None = None  # what a profiled move is a fraction of (its whole, or itself)
    floor: float | None = None  # a profiled counter's noise floor, as a fraction of its scale

    @property
    def delta(self) -> float | None:
        if self.before is None or self.after is None:
            return None
        return self.after - self.before

    @property
    def moved(self) -> float | None:
        """A profiled counter's move as a fraction of its scale (None for a static one)."""
        if self.delta is None or not self.scale:
            return None
        return abs(self.delta) / self.scale

    def to_dict(self) -> dict:
        return {**asdict(self), "words": sentence(self)}


# resources whose fall rarely costs time: a build that frees registers ranks below its loops
FALLS_LOWER = ("static/registers", "static/spill_", "static/stack_bytes")


def _weight(c: CounterChange) -> float:
    weight = next((w for prefix, w in WEIGHTS if c.name.startswith(prefix)), 0.5)
    if c.delta is not None and c.delta < 0 and c.name.startswith(FALLS_LOWER):
        weight /= 3
    return weight


def is_share(name: str) -> bool:
    """Whether the counter is one share of a whole (WHOLES)."""
    return any(whole.fullmatch(name) for whole, *_ in WHOLES)


def _scales(
    before: dict[str, list], after: dict[str, list], names: set[str]
) -> dict[str, tuple[float, float]]:
    """{name: (the sum of its whole on the larger side, its noise floor)} for the shares among
    `names` (the counters of either side)."""
    scales = {}
    for whole, floor, small_floor in WHOLES:
        shares = [n for n in names if whole.fullmatch(n)]
        total = max(sum(_finite(value(side, n)) for n in shares) for side in (before, after))
        small = "dram__bytes" in whole.pattern and total < DRAM_SMALL_TRAFFIC
        scales.update(dict.fromkeys(shares, (total, small_floor if small else floor)))
    return scales


def _finite(v: float | None) -> float:
    """|v| where it is a number a whole can add up (a NaN or an infinity adds nothing)."""
    return abs(v) if v is not None and math.isfinite(v) else 0.0


def differences(before: dict[str, list], after: dict[str, list]) -> list[CounterChange]:
    """The counters of two {name: [value, unit]} maps that differ, most telling first (a
    counter recorded on one side only is listed too: a profile on one side, a new class)."""
    found = []
    names = set(before) | set(after)
    scales = _scales(before, after, names)
    for name in sorted(names):
        b, a = value(before, name), value(after, name)
        if b == a:
            continue
        change = CounterChange(name, b, a, unit(name, after) or unit(name, before), profiled(name))
        if change.profiled and change.delta is not None:
            if not math.isfinite(change.delta):
                continue  # a NaN or an infinity: no size to judge a move by
            whole, floor = scales.get(name, (0.0, PROFILE_NOISE_FLOOR))
            change = replace(change, scale=whole or max(abs(b), abs(a)), floor=floor)
            if change.moved < FAMILY_MARGIN * floor:
                continue
        found.append(change)

    def rank(c: CounterChange) -> tuple:
        size = abs(c.delta) / max(abs(c.before or 0), 1) if c.delta is not None else 1.0
        return (-_weight(c), -size, c.name)

    return sorted(found, key=rank)


def static_changed(changes: list[CounterChange]) -> bool:
    return any(not c.profiled for c in changes)


def label(name: str) -> str:
    """A counter's name in words: 'registers', 'global loads (LDG) in loops'."""
    parts = name.split("/")
    if parts[0] == "ncu":
        return name[4:]
    if len(parts) == 3:
        what = CLASS_LABELS.get(parts[2], parts[2])
        return f"{what} in loops" if parts[1] == "in_loops" else what
    return parts[-1].replace("_", " ")


def _number(v: float | None, unit_: str) -> str:
    if v is None:
        return "none"
    if unit_ == "fraction":
        return f"{100 * v:.0f}%"
    return f"{v:.4g}" if isinstance(v, float) and not v.is_integer() else f"{int(v)}"


def sentence(c: CounterChange, sides: tuple[str, str] = ("base", "head")) -> str:
    """The change in words, e.g. 'head spills 16 bytes/thread where base spilled none' or
    '2 more global loads (LDG) in loops (5 -> 7)'."""
    old, new = sides
    if c.name.startswith("static/spill_") and not c.before:
        kind = "stores" if "store" in c.name else "loads"
        return f"{new} spills {_number(c.after, c.unit)} {c.unit} ({kind}) where {old} spilled none"
    words = label(c.name)
    if c.before is None:
        return f"{words}: {_number(c.after, c.unit)} {c.unit} in {new}, not recorded in {old}"
    if c.after is None:
        return f"{words}: {_number(c.before, c.unit)} {c.unit} in {old}, not recorded in {new}"
    shown_unit = "" if c.unit == "fraction" else f" {c.unit}"
    shown = f"({_number(c.before, c.unit)} → {_number(c.after, c.unit)}{shown_unit})"
    delta = c.after - c.before
    if c.unit == "instructions" and float(delta).is_integer():
        more = "more" if delta > 0 else "fewer"
        if abs(delta) == 1 and words.startswith("instructions"):
            words = "instruction" + words[len("instructions") :]
        return f"{abs(int(delta))} {more} {words} {shown}"
    if c.profiled and c.before:
        floor = f"; noise floor {c.floor:.1%}" if c.floor else ""
        return f"{words} {c.after / c.before:.2f}x {shown[:-1]}{floor})"
    return f"{words} {'up' if delta > 0 else 'down'} {shown}"
