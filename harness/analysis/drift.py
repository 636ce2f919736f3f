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

from protocol.statistics import middle, normal_cdf, z_of

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
    if abs(_theil_sen_slope(x, y) * (y.size - 1) / middle(y)) < policy.min_total * SCREEN:
        return None  # far too small a trend to report, whatever its p-value: no scipy calls
    p = kendall_p(y)
    if not p < policy.alpha:  # NaN (ties everywhere) is no evidence either
        return None
    slope, first, low, high = theil_sen(y)
    median = middle(y)
    total = slope * (y.size - 1) / median
    if not abs(total) >= policy.min_total or not math.isfinite(total):
        return None
    return Drift(
        points=int(y.size),
        slope=float(slope / median),
        slope_low=float(low / median),
        slope_high=float(high / median),
        total=float(total),
        first=float(first),
        last=float(first + slope * (y.size - 1)),
        p_value=p,
    )


def kendall_p(y: np.ndarray) -> float:
    """The two-sided p-value of scipy.stats.kendalltau(order, y) (tau-b, method "auto"),
    computed as scipy computes it where the order has no ties: exact (Kendall, "Rank
    Correlation Methods", 1970) without ties in y and with n <= 33 or at most one discordant
    (or concordant) pair, else asymptotic with y's tie correction. Here, not through scipy:
    scipy.stats takes most of a second to import, scipy.special a third of it."""
    n = int(y.size)
    total = n * (n - 1) // 2
    discordant = int(np.count_nonzero(np.triu(y[:, np.newaxis] > y, k=1)))
    counts = np.unique(y, return_counts=True)[1].astype(np.int64)
    counts = counts[counts > 1]
    ties = int((counts * (counts - 1) // 2).sum())
    if ties == total:
        return math.nan
    if ties == 0 and (n <= 33 or min(discordant, total - discordant) <= 1):
        return _kendall_p_exact(n, total - discordant)
    spread = int((counts * (counts - 1.0) * (2 * counts + 5)).sum())
    m = n * (n - 1.0)
    z = (total - ties - 2 * discordant) / np.sqrt((m * (2 * n + 5) - spread) / 18)
    return 2 * normal_cdf(-abs(float(z)))


def _kendall_p_exact(n: int, concordant: int) -> float:
    """scipy.stats._mstats_basic._kendall_p_exact(n, concordant), two-sided: twice the left
    tail of the number of permutations with at most c inversions."""
    c = min(concordant, n * (n - 1) // 2 - concordant)
    if n <= 2 or 4 * c == n * (n - 1):
        return 1.0
    if c == 0:
        return 2.0 / math.factorial(n) if n < 171 else 0.0
    if c == 1:
        return 2.0 / math.factorial(n - 1) if n < 172 else 0.0
    counts = np.zeros(c + 1)  # n <= 33 here: the exact path's other cases have c <= 1
    counts[0:2] = 1.0
    for j in range(3, n + 1):
        counts = np.cumsum(counts)
        if j <= c:
            counts[j:] -= counts[: c + 1 - j]
    return float(np.clip(2.0 * np.sum(counts) / math.factorial(n), 0, 1))


def theil_sen(y: np.ndarray) -> tuple[float, float, float, float]:
    """(slope, intercept, low, high) of scipy.stats.theilslopes(y, order, alpha=0.95), computed
    as it does (Sen 1968: the 95% interval from the sorted pairwise slopes, with y's ties)."""
    x = np.arange(y.size, dtype=np.float64)
    slopes = _pairwise_slopes(x, y)
    slopes.sort()
    slope = np.median(slopes)
    intercept = np.median(y) - slope * np.median(x)
    z = -z_of(0.95)  # scipy.stats.norm.ppf(alpha / 2)
    counts = np.unique(y, return_counts=True)[1]
    ny = y.size
    sigsq = (
        1
        / 18.0
        * (
            ny * (ny - 1) * (2 * ny + 5)
            - sum(k * (k - 1) * (2 * k + 5) for k in counts[counts > 1])
        )
    )
    sigma = np.sqrt(sigsq)
    upper = min(int(np.round((slopes.size - z * sigma) / 2.0)), slopes.size - 1)
    lower = max(int(np.round((slopes.size + z * sigma) / 2.0)) - 1, 0)
    return slope, intercept, slopes[lower], slopes[upper]


def _theil_sen_slope(x: np.ndarray, y: np.ndarray) -> float:
    """The median of the pairwise slopes (scipy.stats.theilslopes' slope, computed the same way)."""
    return middle(_pairwise_slopes(x, y))


def _pairwise_slopes(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """(y_j - y_i) / (x_j - x_i) for every pair with x_j > x_i, as scipy.stats.theilslopes."""
    dx = x[:, np.newaxis] - x
    dy = y[:, np.newaxis] - y
    return dy[dx > 0] / dx[dx > 0]
