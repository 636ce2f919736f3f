"""Axis ticks for the dashboard's SVG charts (the sweep charts, the case pages): ticks at
multiples of a round step (1, 2, 2.5 or 5 times a power of ten) from an anchor (parity, 1.0x,
for gaps), each labelled with as many decimals as the spacing needs, so that no two ticks read
alike and a tick labelled 1.0x sits on parity.
"""

from __future__ import annotations

import math

__all__ = ["label", "nice_step", "spaced"]


def nice_step(rough: float) -> float:
    """The round step nearest above `rough`, at least 0.0001 (labels carry four decimals at
    most: finer ticks would repeat a label)."""
    if rough <= 0:
        return 1.0
    rough = max(rough, 1e-4)
    power = 10 ** math.floor(math.log10(rough))
    return next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= rough * (1 - 1e-9))


def label(v: float, step: float, suffix: str = "", least: int = 1) -> str:
    """A tick's label, with the decimals the spacing needs and at least `least` (0.998x, 0.999x;
    not 1x three times; 80, 90 for times)."""
    decimals = min(4, max(least, math.ceil(-math.log10(step) - 1e-9))) if step > 0 else 3
    if decimals < 4 and abs(round(step, decimals) - step) > 1e-12:
        decimals += 1  # a step of 0.025 needs 3 decimals
    return f"{v:.{decimals}f}{suffix}"


def spaced(y0: float, y1: float, anchor: float = 0.0, steps: int = 4) -> tuple[float, list[float]]:
    """(step, ticks): [y0, y1] widened to the multiples of a round step from `anchor` around it,
    the step about a `steps`-th of the range; the first and last tick bound the axis."""
    if y1 - y0 < 1e-12:
        y0, y1 = y0 - max(abs(y0) * 0.01, 1e-4), y1 + max(abs(y1) * 0.01, 1e-4)
    step = nice_step((y1 - y0) / steps)
    first = math.floor((y0 - anchor) / step + 1e-9)
    last = math.ceil((y1 - anchor) / step - 1e-9)
    return step, [anchor + i * step for i in range(first, last + 1)]
