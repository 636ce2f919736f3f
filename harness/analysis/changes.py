"""Change points in a history series: steps hidden in run-to-run noise. Pure functions, no database.

Three separate pieces, as in asv and in Hunter (Fleming et al., "Hunter: Using Change Point
Detection to Hunt for Performance Regressions", ICPE 2023, the method of Apache Otava):
- detection (`candidates`): ruptures' kernel change point detection (`KernelCPD`, linear kernel,
  i.e. the least-squares cost of a shift in mean, searched exactly by PELT in C) on log values,
  so a change is relative and the noise is alike at every level. It runs on overlapping windows
  of `ChangePolicy.window` points, so its cost grows linearly with the history's length, with a
  liberal penalty: it proposes, it does not decide;
- significance (`_test`): a two-sided Mann-Whitney U test between the points on either side of a
  candidate, up to its neighbours and at most `window` points each way (scipy.stats.mannwhitneyu's
  "auto" p-value computed without scipy, `protocol.statistics.u_test`; for large levels its
  asymptotic form, `u_test_asymptotic`), and the relative change of their medians;
- policy (`ChangePolicy`, `steps`): Hunter's merge step: the weakest candidate (largest p, else
  the smallest change) is dropped and its neighbours re-tested, until every one left has
  p < alpha and |change| >= min_effect. A level that lasts fewer than `min_level` points between
  two changes of opposite direction is a transient (a few slow runs), not a change: both go.

The p-value is that of the test at the place the search chose, not corrected for the search;
`alpha` (1e-4 by default) is set low to allow for it (measured in benchmarks/perf/RESULTS.md).
Callers pass only stable points: unstable ones never take part, so they can never alert.
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from protocol.statistics import middle, u_test, u_test_asymptotic

__all__ = [
    "ChangePolicy",
    "Step",
    "candidates",
    "pelt_linear",
    "robust_sigma",
    "steps",
]

# sigma of log values below this is taken as this (a series of identical values still gets a
# finite penalty): 1e-6 is far below any timing noise
SIGMA_FLOOR = 1e-6
NORMAL_MAD = 1.4826  # MAD x this estimates a normal distribution's standard deviation
QUIET_CUSUM = 1.0  # windows whose normalized CUSUM stays under this are not searched
EXACT_U_PRODUCT = 400  # n1 x n2 up to which Mann-Whitney U's "auto" p-value is computed


@dataclass(frozen=True)
class ChangePolicy:
    """When a proposed change point is kept.

    min_size: fewest points on either side of a change, so a lone outlier never makes one and a
      step is found only once min_size points after it exist (the newest-point rule of
      `harness regressions` covers the newest runs).
    penalty: PELT's penalty per change point, in units of sigma^2 ln(n) (sigma estimated from the
      window's first differences, robustly); 2 is the classic BIC-like choice.
    window: points per detection window; windows overlap by half.
    alpha: a Mann-Whitney U p-value below this is significant.
    min_effect: the smallest relative change of the median reported (0.01 = 1%).
    min_level: a level shorter than this between two opposite changes is a transient.
    """

    min_size: int = 5
    penalty: float = 2.0
    window: int = 200
    alpha: float = 1e-4
    min_effect: float = 0.01
    min_level: int = 10

    def __post_init__(self):
        for name in ("min_size", "window", "min_level"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 2:
                raise ValueError(f"ChangePolicy.{name} must be an int >= 2 (got {value!r})")
        if self.window < 4 * self.min_size:
            raise ValueError(
                f"ChangePolicy.window must be at least 4 x min_size ({4 * self.min_size}); "
                f"got {self.window}"
            )
        for name, low, high in (("penalty", 0, math.inf), ("alpha", 0, 1), ("min_effect", 0, 1)):
            value = getattr(self, name)
            number = isinstance(value, int | float) and not isinstance(value, bool)
            if not (number and (low < value < high or (name == "min_effect" and value == 0))):
                raise ValueError(
                    f"ChangePolicy.{name} must be a number in ({low}, {high}) (got {value!r})"
                )


@dataclass(frozen=True)
class Step:
    """A change point: values[index:] differ from values[:index] (up to the neighbouring changes).

    before, after: medians of the points between the previous change and this one, and between
    this one and the next (at most ChangePolicy.window of each, the nearest); relative = after / before - 1; p_value: two-sided Mann-Whitney U of
    those two groups; points_before, points_after: their sizes.
    """

    index: int
    before: float
    after: float
    relative: float
    p_value: float
    points_before: int
    points_after: int


def robust_sigma(y: np.ndarray) -> np.ndarray | float:
    """Standard deviation of iid noise estimated from first differences: MAD(diff) x 1.4826 / sqrt 2
    (a step or an outlier moves only one or two differences, so neither inflates it). For a 2-D
    array, one per row."""
    if y.shape[-1] < 3:
        return SIGMA_FLOOR if y.ndim == 1 else np.full(y.shape[0], SIGMA_FLOOR)
    d = np.diff(y, axis=-1)
    mad = np.median(np.abs(d - np.median(d, axis=-1, keepdims=True)), axis=-1)
    sigma = np.maximum(mad * NORMAL_MAD / math.sqrt(2), SIGMA_FLOOR)
    return float(sigma) if y.ndim == 1 else sigma


def _window_starts(n: int, size: int) -> np.ndarray:
    """Starts of windows of `size` overlapping by half, the last one ending at n: every point
    lies in the middle half of some window (or n <= size: one window, the whole series)."""
    if n <= size:
        return np.zeros(1, dtype=np.int64)
    starts = list(range(0, n - size + 1, size // 2))
    if starts[-1] != n - size:
        starts.append(n - size)
    return np.array(starts, dtype=np.int64)


def candidates(y: np.ndarray, policy: ChangePolicy = ChangePolicy()) -> list[int]:
    """Proposed change points of the series `y` (log values), sorted: each is the index of the
    first point of a new segment. PELT on windows of policy.window points overlapping by half;
    proposals closer than min_size to an earlier one are dropped."""
    n = int(y.size)
    if n < 2 * policy.min_size:
        return []
    size = min(n, policy.window)
    starts = _window_starts(n, size)
    parts = y[starts[:, None] + np.arange(size)]  # one row per window
    sigma = robust_sigma(parts)
    # A window without any shift in level is skipped unsearched: its normalized CUSUM
    # max |sum(y - mean)| / (sigma sqrt n) follows the Kolmogorov distribution, above QUIET_CUSUM
    # in about 1 window of 4; any step the test below could accept is well above it in the
    # window that holds it in its middle half.
    centred = parts - parts.mean(axis=1, keepdims=True)
    cusum = np.abs(np.cumsum(centred, axis=1)).max(axis=1) / (sigma * math.sqrt(size))
    found: set[int] = set()
    for w in np.flatnonzero(cusum >= QUIET_CUSUM):
        pen = policy.penalty * float(sigma[w]) ** 2 * math.log(size)
        found.update(int(starts[w]) + b for b in pelt_linear(parts[w], pen, policy.min_size))
    kept: list[int] = []
    for index in sorted(found):
        if policy.min_size <= index <= n - policy.min_size and (
            not kept or index - kept[-1] >= policy.min_size
        ):
            kept.append(index)
    return kept


def pelt_linear(signal: np.ndarray, pen: float, min_size: int) -> list[int]:
    """The change points (each the index of a new segment's first value) of
    ruptures.KernelCPD(kernel="linear", min_size=min_size).fit(signal).predict(pen=pen), less
    the end it appends: the same compiled PELT (ekcpd_pelt_L2) and the same walk back along
    its path. Called directly: `import ruptures` imports scipy.stats and scipy.signal for its
    other methods, most of a dashboard build's start (benchmarks/perf/RESULTS.md)."""
    path = _ekcpd().ekcpd_pelt_L2(signal.astype(np.double).reshape(-1, 1), pen, max(min_size, 1))
    found, index = [], signal.shape[0]
    while index > 0:
        index = int(path[index])
        found.append(index)
    return found[-2::-1]


@functools.cache
def _ekcpd():
    """ruptures' compiled kernel change point module, loaded from its file without importing
    the ruptures package (whose __init__ imports every method); the package's own import where
    the file is not where ruptures keeps it."""
    import importlib.machinery
    import importlib.util

    spec = importlib.util.find_spec("ruptures")
    if spec is None:  # the [harness] extra is missing: the same error `import ruptures` gives
        raise ModuleNotFoundError("No module named 'ruptures'", name="ruptures")
    folder = Path(spec.submodule_search_locations[0]) / "detection" / "_detection"
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        if (folder / f"ekcpd{suffix}").is_file():
            name = "ruptures.detection._detection.ekcpd"  # its own name, as the package gives it
            module_spec = importlib.util.spec_from_file_location(name, folder / f"ekcpd{suffix}")
            module = importlib.util.module_from_spec(module_spec)
            module_spec.loader.exec_module(module)
            return module
    from ruptures.detection._detection import ekcpd

    return ekcpd


def _test(values: np.ndarray, start: int, index: int, stop: int, reach: int) -> Step:
    left = values[max(start, index - reach) : index]
    right = values[index : min(stop, index + reach)]
    before, after = middle(left), middle(right)
    # scipy's exact distribution costs O(n1 n2 min(n1, n2)): the normal approximation (with
    # its tie and continuity corrections) is as good beyond a few dozen points a side
    if left.size * right.size <= EXACT_U_PRODUCT:
        p = u_test(left, right)
    else:
        p = u_test_asymptotic(left, right)
    return Step(index, before, after, after / before - 1, p, int(left.size), int(right.size))


def _merge(values: np.ndarray, proposed: list[int], policy: ChangePolicy) -> list[Step]:
    """Hunter's merge: drop the weakest until all are significant and large enough."""
    points = list(proposed)

    def tested(i: int) -> Step:  # candidate i against its neighbours (or the series' ends)
        start = points[i - 1] if i else 0
        stop = points[i + 1] if i + 1 < len(points) else values.size
        return _test(values, start, points[i], stop, policy.window)

    found = [tested(i) for i in range(len(points))]
    while found:
        weakest = max(range(len(found)), key=lambda i: found[i].p_value)
        if found[weakest].p_value < policy.alpha:
            weakest = min(range(len(found)), key=lambda i: abs(found[i].relative))
            if abs(found[weakest].relative) >= policy.min_effect:
                return found
        del points[weakest], found[weakest]
        for i in (weakest - 1, weakest):  # the neighbours' segments just grew
            if 0 <= i < len(points):
                found[i] = tested(i)
    return found


def steps(values, policy: ChangePolicy = ChangePolicy()) -> list[Step]:
    """The change points of a series of positive values (oldest first), as Steps, oldest first."""
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 1 or not np.all(np.isfinite(values)) or np.any(values <= 0):
        raise ValueError("steps: expected a flat sequence of finite values > 0")
    if values.size == 0 or values.max() < values.min() * (1 + policy.min_effect):
        return []  # every level's median lies within [min, max]: no step of min_effect fits
    proposed = candidates(np.log(values), policy)
    while True:
        found = _merge(values, proposed, policy)
        transient = set()
        for a, b in itertools.pairwise(found):
            if b.index - a.index < policy.min_level and (a.relative > 0) != (b.relative > 0):
                transient.update((a.index, b.index))
        if not transient:
            return found
        proposed = [s.index for s in found if s.index not in transient]
