"""The counters that differ between two builds or runs of one implementation, most telling first,
each said in words ("head spills 16 bytes per thread where base spilled none").

Static counters carry no noise, so every difference is reported; a profiled counter
(`ncu/...`) is reported when it moved by at least PROFILE_MIN_CHANGE, since ncu's sampled
figures (stalls, hit rates) wander a little from run to run. The order is a judgement of what
most plausibly moves a time: spills and local memory first, then occupancy and registers,
instructions inside loops, barriers, the profiled counts of work done, the whole function's
instruction mix, and the rest.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from harness.history.counters import CLASS_LABELS, profiled, unit, value

__all__ = [
    "PROFILE_MIN_CHANGE",
    "CounterChange",
    "differences",
    "label",
    "sentence",
    "static_changed",
]

PROFILE_MIN_CHANGE = 0.05  # relative; the static ones count at any size
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

    @property
    def delta(self) -> float | None:
        if self.before is None or self.after is None:
            return None
        return self.after - self.before

    def to_dict(self) -> dict:
        return {**asdict(self), "words": sentence(self)}


# resources whose fall rarely costs time: a build that frees registers ranks below its loops
FALLS_LOWER = ("static/registers", "static/spill_", "static/stack_bytes")


def _weight(c: CounterChange) -> float:
    weight = next((w for prefix, w in WEIGHTS if c.name.startswith(prefix)), 0.5)
    if c.delta is not None and c.delta < 0 and c.name.startswith(FALLS_LOWER):
        weight /= 3
    return weight


def _differs(name: str, before, after) -> bool:
    if before == after:
        return False
    if before is None or after is None or not profiled(name):
        return True
    base = max(abs(before), abs(after))
    return abs(after - before) / base >= PROFILE_MIN_CHANGE


def differences(before: dict[str, list], after: dict[str, list]) -> list[CounterChange]:
    """The counters of two {name: [value, unit]} maps that differ, most telling first (a
    counter recorded on one side only is listed too: a profile on one side, a new class)."""
    found = []
    for name in sorted(set(before) | set(after)):
        b, a = value(before, name), value(after, name)
        if _differs(name, b, a):
            found.append(
                CounterChange(name, b, a, unit(name, after) or unit(name, before), profiled(name))
            )

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
        return f"{words} {c.after / c.before:.2f}x {shown}"
    return f"{words} {'up' if delta > 0 else 'down'} {shown}"
