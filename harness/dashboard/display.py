"""What the dashboard's charts show of a series: which points, at what precision, and how a new
series key is named.

What is drawn is trimmed for display only (the store keeps every point): a series of more than
max_points points shows every k-th point, k = ceil(n / (max_points - TAIL_POINTS)) counted back
from the newest, plus the newest TAIL_POINTS, every unstable point and both sides of every step
(a change of more than STEP_FRACTION from the previous point in the median time or the gap).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["MAX_POINTS", "STEP_FRACTION", "TAIL_POINTS", "display_indices", "key_change", "rounded"]

MAX_POINTS = 300  # per drawn series; enough to see a trend across a 1400 px wide chart
TAIL_POINTS = 30  # the newest points are always drawn: they are the ones people check
STEP_FRACTION = 0.05  # the regression rule's minimum effect; a step this big is always drawn
CHANGE_WORDS = {  # key field -> how a change of it is named in a legend
    "gpu": lambda v: f"GPU {v}",
    "mode": lambda v: f"mode {v}",
    "suite_version": lambda v: f"suite v{v}",
    "case_version": lambda v: f"case v{v}",
    "source_sha256": lambda v: "source changed",
    "baseline_source_sha256": lambda v: "baseline source changed",
}


def display_indices(
    n: int,
    unstable: np.ndarray,
    values: tuple[np.ndarray, ...] = (),
    max_points: int = MAX_POINTS,
    tail: int = TAIL_POINTS,
) -> np.ndarray:
    """Indices (ascending) of the points of an n-point series that are drawn (module doc)."""
    if n <= max_points:
        return np.arange(n)
    keep = np.zeros(n, dtype=bool)
    stride = math.ceil(n / max(1, max_points - tail))
    keep[(n - 1) % stride :: stride] = True
    keep[0] = True
    keep[-tail:] = True
    keep |= unstable
    for v in values:
        with np.errstate(divide="ignore", invalid="ignore"):
            step = np.abs(v[1:] / v[:-1] - 1.0) > STEP_FRACTION  # NaN compares False
        keep[1:] |= step
        keep[:-1] |= step
    return np.flatnonzero(keep)


def rounded(values: np.ndarray, digits: int = 6) -> list:
    """`values` to `digits` significant digits as a list (NaN -> None): a smaller data.js."""
    a = np.asarray(values, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        magnitude = np.floor(np.log10(np.abs(a)))
    scale = 10.0 ** (digits - 1 - np.where(np.isfinite(magnitude), magnitude, 0))
    out = np.round(a * scale) / scale
    return [None if math.isnan(x) else x for x in out.tolist()]


def key_change(previous: dict | None, key: dict) -> str:
    """What differs in `key` from the implementation's previous key, in words ('' if first)."""
    if previous is None:
        return ""
    words = [
        describe(key[name])
        for name, describe in CHANGE_WORDS.items()
        if name in key
        and key[name] != previous[name]
        # A baseline's own source hash is also its baseline source hash: say it once.
        and not (name == "baseline_source_sha256" and key.get("role") == "baseline")
    ]
    return ", ".join(words) or "key changed"
