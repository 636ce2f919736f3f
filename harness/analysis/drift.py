"""Slow drift in a history series: a trend over the newest points that no single step explains.

A change point search looks for a level that jumps; a kernel that gets 0.5% slower every run for
20 runs has no such jump. The drift rule looks at the newest `DriftPolicy.window` stable points:
- detection: the Theil-Sen slope (scipy.stats.theilslopes: the median of all pairwise slopes,
  robust to a few outliers) of the values against their order, as a fraction of their median;
- significance: Kendall's tau between order and value (scipy.stats.kendalltau; the Mann-Kendall
  trend test), two-sided;
- policy: reported when p < alpha and the total change over the window, slope x (n - 1) /
  median, is at least min_total.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["Drift", "DriftPolicy", "drift"]

SCREEN = 0.999
"""drift() skips its tests when the Theil-Sen total is below min_total x this: the figure the
full path computes again (theilslopes: the median of the pairwise slopes), with a margin for
its rounding, so the screen never drops a drift the tests would report. Most series have no
trend: the screen costs ~30 us where Kendall's and Theil-Sen's calls cost ~2 ms."""


@dataclass(frozen=True)
class DriftPolicy:
    """window: newest stable points looked at; alpha: Kendall p-value below which the trend is
    significant; min_total: smallest |total change| over the window reported (0.05 = 5%)."""

    window: int = 20
    alpha: float = 0.01
    min_total: float = 0.05

    def __post_init__(self):
        if isinstance(self.window, bool) or not isinstance(self.window, int) or self.window < 5:
            raise ValueError(f"DriftPolicy.window must be an int >= 5 (got {self.window!r})")
        for name in ("alpha", "min_total"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
                raise ValueError(f"DriftPolicy.{name} must be a number in (0, 1) (got {value!r})")


@dataclass(frozen=True)
class Drift:
    """A trend over the last `points` values. slope: per point, relative to their median, with
    its 95% interval [slope_low, slope_high] (Theil-Sen); total = slope x (points - 1);
    first, last: the fitted line's values at the window's ends; p_value: Kendall's tau test."""

    points: int
    slope: float
    slope_low: float
    slope_high: float
    total: float
    first: float
    last: float
    p_value: float


def drift(values, policy: DriftPolicy = DriftPolicy()) -> Drift | None:
    """The drift over the newest policy.window of `values` (positive, oldest first), or None when
    there are fewer points, or the trend is not significant or smaller than policy.min_total."""
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 1 or not np.all(np.isfinite(values)) or np.any(values <= 0):
        raise ValueError("drift: expected a flat sequence of finite values > 0")
    if values.size < policy.window:
        return None
    y = values[-policy.window :]
    x = np.arange(y.size, dtype=np.float64)
    if np.all(y == y[0]):
        return None  # Kendall's tau is undefined for a constant series: no trend
    if abs(_theil_sen_slope(x, y) * (y.size - 1) / np.median(y)) < policy.min_total * SCREEN:
        return None  # far too small a trend to report, whatever its p-value: no scipy calls
    from scipy.stats import kendalltau, theilslopes  # imported when used: scipy.stats is slow

    p = float(kendalltau(x, y).pvalue)
    if not p < policy.alpha:  # NaN (ties everywhere) is no evidence either
        return None
    fit = theilslopes(y, x, alpha=0.95)
    median = float(np.median(y))
    total = fit.slope * (y.size - 1) / median
    if not abs(total) >= policy.min_total or not math.isfinite(total):
        return None
    first = fit.intercept
    return Drift(
        points=int(y.size),
        slope=float(fit.slope / median),
        slope_low=float(fit.low_slope / median),
        slope_high=float(fit.high_slope / median),
        total=float(total),
        first=float(first),
        last=float(first + fit.slope * (y.size - 1)),
        p_value=p,
    )


def _theil_sen_slope(x: np.ndarray, y: np.ndarray) -> float:
    """The median of the pairwise slopes (scipy.stats.theilslopes' slope, computed the same way)."""
    dx = x[:, np.newaxis] - x
    dy = y[:, np.newaxis] - y
    return float(np.median(dy[dx > 0] / dx[dx > 0]))
