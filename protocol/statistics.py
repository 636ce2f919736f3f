"""The one statistics and verdict core: runner and harness both import it (a leaf: numpy and the
standard library only), so a run's intervals and a comparison's verdicts come from the same code.

Location and spread use order statistics (median, MAD) because kernel timings have a long
right tail (clock dips, interrupts) that would drag a mean. Gaps between implementations
come from paired rounds: `gap()` bootstraps the ratio of medians by resampling whole
rounds, so the pairing that cancels drift is kept inside every resample.

A change between two runs becomes a verdict in three separate pieces (as in asv and pyperf):
detection (`detect`, `detect_gap`: a ratio with a bootstrap interval), significance
(`significance`: a Mann-Whitney U test) and policy (`Policy`); `verdict()` is the one function
that names the outcome, in one vocabulary (VERDICTS).
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from protocol import autocorrelation

__all__ = [
    "MAD_SIGMA",
    "MAX_SYSTEMATIC",
    "UNSTABLE_NOISE",
    "VERDICTS",
    "Bootstrap",
    "Change",
    "Policy",
    "bootstrap_rows",
    "decide",
    "detect",
    "detect_gap",
    "gap",
    "geometric_mean",
    "mad",
    "median",
    "median_variance",
    "middle",
    "pair_variance",
    "percentile",
    "sigma_mad",
    "significance",
    "summarize",
    "variance_component",
    "widen",
    "z_of",
]

UNSTABLE_NOISE = 0.03
"""A result whose noise (RAW MAD / median) is above this is marked unstable: about 4.4% in sigma
terms (x MAD_SIGMA)."""


MAX_SYSTEMATIC = 0.1  # above it z * systematic nears 1 and an interval could reach 0


def z_of(confidence: float) -> float:
    """The two-sided normal quantile of `confidence` (1.96 at 95%)."""
    return statistics.NormalDist().inv_cdf((1 + confidence) / 2)


def normal_cdf(x: float) -> float:
    """The standard normal CDF (scipy.special.ndtr, within a few ulp) as 0.5 erfc(-x / sqrt 2):
    the rank tests' p-values need no scipy, whose import is a third of a second. Not
    NormalDist().cdf, whose 1 + erf form loses the lower tail (7e-9 relative at x = -5.8)."""
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


Samples = Sequence[float] | np.ndarray


def _as_samples(values: Samples, what: str = "samples") -> np.ndarray:
    """Return `values` as a 1-D float64 array of finite, non-negative numbers, or raise."""
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1:
        raise ValueError(f"{what}: expected a flat sequence of numbers, got shape {array.shape}")
    if array.size == 0:
        raise ValueError(f"{what}: no samples (expected at least one timing in seconds)")
    bad = np.flatnonzero(~np.isfinite(array))
    if bad.size:
        i = int(bad[0])
        raise ValueError(
            f"{what}: sample at index {i} is {float(array[i])!r}; expected a finite number"
        )
    negative = np.flatnonzero(array < 0)
    if negative.size:
        i = int(negative[0])
        raise ValueError(
            f"{what}: sample at index {i} is {float(array[i])!r}; times cannot be negative"
        )
    return array


def percentile(values: Samples, q: float) -> float:
    """q-th percentile (q in [0, 100]) by linear interpolation between order statistics.

    Hyndman & Fan (1996) type 7, numpy's default: with sorted x[0..n-1], h = (n - 1) q / 100,
    the result is x[floor(h)] + (h - floor(h)) (x[floor(h) + 1] - x[floor(h)]).
    """
    if not (isinstance(q, int | float) and math.isfinite(q) and 0 <= q <= 100):
        raise ValueError(f"percentile: q must be a number in [0, 100], got {q!r}")
    return float(np.percentile(_as_samples(values), q, method="linear"))


def median(values: Samples) -> float:
    """Sample median: the middle order statistic, or the mean of the two middle ones for even n."""
    return middle(_as_samples(values))


def middle(values) -> float:
    """float(np.median(values)) of a flat sequence, to the last bit, without np.median's
    per-call overhead (about 10 us; an analysis of a history takes thousands of medians of a few
    dozen values): the middle order statistic, or the two middle ones' sum halved, as numpy's
    mean of them is. Empty, with a NaN, or a zero (whose sign depends on which of equal values
    lands in the middle): np.median's own answer."""
    ordered = np.sort(np.asarray(values, dtype=np.float64), axis=None)
    n = ordered.size
    if not n or math.isnan(ordered[-1]):
        return float(np.median(values))
    found = ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2
    return float(found) if found else float(np.median(values))


def mad(values: Samples) -> float:
    """Median absolute deviation from the median: median(|x_i - median(x)|).

    UNSCALED: no 1.4826 consistency factor is applied, so this is not an estimate of the
    standard deviation; noise = MAD / median uses it as is.
    """
    array = _as_samples(values)
    return middle(np.abs(array - middle(array)))


MAD_SIGMA = 1.4826
"""Consistency factor: 1.4826 x MAD estimates a normal's standard deviation (1 / Phi^-1(0.75))."""

# Var(median of n normal samples) x n / sigma^2, n = 1..12 (order statistics; beyond, pi / 2)
_MEDIAN_VARIANCE = (1.0, 1.0, 1.346, 1.191, 1.436, 1.29, 1.471, 1.344, 1.499, 1.384, 1.509, 1.407)


def median_variance(n):
    """Var(median of n normal samples) / sigma^2, per count n >= 1 (numbers or arrays): the
    exact factor for n <= 12 (order statistics), pi / (2 n) beyond."""
    table = np.array(_MEDIAN_VARIANCE)
    n = np.asarray(n)
    factor = np.where(n <= table.size, table[np.minimum(n, table.size) - 1], math.pi / 2)
    return factor / n


_CLIP = 3.0  # pair differences beyond 3 x their median count as that much (stray rounds)
_CLIP_Z = _CLIP * statistics.NormalDist().inv_cdf(0.75)  # the clip in a difference's sds
_CLIP_TAIL = 1 - statistics.NormalDist().cdf(_CLIP_Z)
_CLIPPED_SECOND_MOMENT = (
    1 - 2 * _CLIP_Z * statistics.NormalDist().pdf(_CLIP_Z) - 2 * _CLIP_TAIL
) + 2 * _CLIP_Z**2 * _CLIP_TAIL  # E[min(|Z|, c)^2], Z standard normal


def pair_variance(differences: np.ndarray) -> np.ndarray:
    """Per row (last axis), the variance sigma^2 of single values from differences of pairs
    that share a mean: the mean square of |d| clipped at 3 x its median (one stray value
    spoils only its own pairs), over 2 x what the clip leaves of a normal's second moment."""
    d = np.abs(np.asarray(differences, dtype=np.float64))
    clipped = np.minimum(d, _CLIP * np.median(d, axis=-1, keepdims=True))
    return np.mean(clipped**2, axis=-1) / (2 * _CLIPPED_SECOND_MOMENT)


_COMPONENT_GRID = 129  # points of the likelihood's first scan; a golden section refines the best
_GOLDEN = (math.sqrt(5) - 1) / 2


def variance_component(mean_squares, dfs, coefficients, noise) -> np.ndarray:
    """The maximum-likelihood variance component v >= 0, per row, from independent mean squares
    m_i ~ (c_i v + e_i) chi^2(df_i) / df_i (the last axis holds the pieces i; `dfs` and
    `coefficients` c_i > 0 broadcast against it, `noise` e_i >= 0 is the part the rounds'
    noise puts in each): the v that maximises -sum df_i / 2 (log(c_i v + e_i) + m_i / (c_i v +
    e_i)) (Searle, Casella & McCulloch, Variance Components, 1992, ch. 6). With one piece it
    is max((m - e) / c, 0), the method of moments; with pieces of one c and e, their
    df-weighted mean less e, over c. The maximum lies between the pieces' own estimates, so a
    scan of [0, largest] and a golden section around its best point find it."""
    m = np.atleast_2d(np.asarray(mean_squares, dtype=np.float64))
    df, c, e = (
        np.broadcast_to(np.asarray(a, dtype=np.float64), m.shape)
        for a in (dfs, coefficients, noise)
    )
    upper = np.max(np.maximum(m - e, 0.0) / c, axis=-1)

    def loglik(v):  # v: (rows, points)
        scale = c[:, None, :] * v[..., None] + e[:, None, :]
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = df[:, None, :] * (np.log(scale) + m[:, None, :] / scale)
        return -0.5 * np.nan_to_num(terms, nan=np.inf).sum(axis=-1)

    grid = upper[:, None] * np.linspace(0.0, 1.0, _COMPONENT_GRID)[None, :]
    best = np.argmax(loglik(grid), axis=1)
    step = upper / (_COMPONENT_GRID - 1)
    lo = np.maximum(grid[np.arange(grid.shape[0]), best] - step, 0.0)
    hi = np.minimum(lo + 2 * step, upper)
    for _ in range(40):
        a = hi - _GOLDEN * (hi - lo)
        b = lo + _GOLDEN * (hi - lo)
        f = loglik(np.stack([a, b], axis=1))
        left = f[:, 0] >= f[:, 1]
        hi = np.where(left, b, hi)
        lo = np.where(left, lo, a)
    found = (lo + hi) / 2
    at_zero = loglik(np.zeros((grid.shape[0], 1)))[:, 0] >= loglik(found[:, None])[:, 0]
    return np.where((upper > 0) & ~at_zero, found, 0.0)


def sigma_mad(values: Samples) -> float:
    """The SIGMA-SCALED relative spread MAD_SIGMA x MAD / median: the standard deviation a
    normal sample with this MAD would have, over the median (0 when the median is 0)."""
    array = _as_samples(values)
    centre = middle(array)
    spread = MAD_SIGMA * middle(np.abs(array - centre))
    return spread / centre if centre else 0.0


def _noise(mad_s: float, median_s: float) -> float:
    """Relative spread MAD / median; 0 when both are 0, infinite when only the median is 0."""
    if median_s == 0:
        return 0.0 if mad_s == 0 else math.inf
    return mad_s / median_s


def summarize(samples_s: Samples) -> dict:
    """Summary of one implementation's samples.

    Keys: median_s, p10_s, p90_s, p95_s (type-7 percentiles), mad_s (RAW, unscaled MAD), min_s, max_s, mean_s
    (arithmetic mean), count, noise = mad_s / median_s (a RAW MAD: x MAD_SIGMA for sigma terms;
    0.0 when both are 0, inf when only the median is 0) and stable = noise <= UNSTABLE_NOISE.
    """
    array = _as_samples(samples_s, "samples_s")
    median_s = float(np.median(array))
    mad_s = float(np.median(np.abs(array - median_s)))
    noise = _noise(mad_s, median_s)
    return {
        "median_s": median_s,
        "p10_s": float(np.percentile(array, 10, method="linear")),
        "p90_s": float(np.percentile(array, 90, method="linear")),
        "p95_s": float(np.percentile(array, 95, method="linear")),
        "mad_s": mad_s,
        "min_s": float(array.min()),
        "max_s": float(array.max()),
        "mean_s": float(array.mean()),
        "count": int(array.size),
        "noise": noise,
        "stable": bool(noise <= UNSTABLE_NOISE),
    }


def gap(
    baseline_s: Samples,
    candidate_s: Samples,
    *,
    resamples: int = 10000,
    confidence: float = 0.95,
    seed: int = 0,
    systematic: float = 0.0,
) -> dict:
    """Gap of a candidate over a baseline from paired rounds (sample r of each from round r).

    - ratio_of_medians = median(candidate) / median(baseline); 1.0 is parity, lower is better.
    - median_of_round_ratios = median over r of candidate[r] / baseline[r].
    - ci_low, ci_high: percentile bootstrap (Efron) of the ratio of medians: `resamples` times,
      draw n round indices with replacement (pairs stay together), recompute the ratio of
      medians, and take the (1 - confidence) / 2 and (1 + confidence) / 2 type-7 percentiles
      of those ratios. Indices come from numpy's PCG64 seeded with `seed`, so the interval is
      reproducible. With one round every resample is that round, so the bootstrap interval is the
      ratio (and the whole interval is the systematic term alone). When the per-round log
      ratios are significantly autocorrelated the rounds are resampled in circular blocks and
      the interval widened for the correlation (bootstrap_rows); `bootstrap` says which
      ("rounds" or "circular_blocks", with block_rounds), lag1_autocorrelation what was seen.
    - systematic (a relative standard uncertainty, e.g. INSTANCE_SD): what the resampling cannot
      see. Each side of the interval is widened in quadrature: its distance d from the ratio
      becomes sqrt(d^2 + (z s ratio)^2), z the normal quantile of `confidence` (1.96 at 95%).
      0 leaves the bootstrap interval as it is.

    Every baseline sample must be positive, since each round's ratio divides by it.
    """
    baseline = _as_samples(baseline_s, "baseline_s")
    candidate = _as_samples(candidate_s, "candidate_s")
    if baseline.size != candidate.size:
        raise ValueError(
            f"gap: paired samples need one baseline and one candidate sample per round, got "
            f"{baseline.size} baseline and {candidate.size} candidate samples"
        )
    if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 1:
        raise ValueError(f"gap: resamples must be a positive int, got {resamples!r}")
    if not (isinstance(confidence, int | float) and 0 < confidence < 1):
        raise ValueError(f"gap: confidence must be a number in (0, 1), got {confidence!r}")
    baseline_median_s = float(np.median(baseline))
    if baseline_median_s == 0:
        raise ValueError("gap: baseline median is 0 s; a ratio needs a positive baseline time")
    zero = np.flatnonzero(baseline == 0)
    if zero.size:
        raise ValueError(
            f"gap: baseline_s sample at index {int(zero[0])} is 0 s; each round's ratio "
            f"divides by its baseline time, so every baseline sample must be positive"
        )

    rounds = int(baseline.size)
    rng = np.random.Generator(np.random.PCG64(seed))
    rows = bootstrap_rows(baseline[None, :], candidate[None, :], resamples, confidence, rng)
    ci_low, ci_high = float(rows["ci_low"][0]), float(rows["ci_high"][0])
    ratio = float(np.median(candidate)) / baseline_median_s
    if not (isinstance(systematic, int | float) and 0 <= systematic < MAX_SYSTEMATIC):
        raise ValueError(
            f"gap: systematic must be a fraction in [0, {MAX_SYSTEMATIC}), got {systematic!r}"
        )
    if systematic > 0:
        ci_low, ci_high = (float(v) for v in widen(ratio, ci_low, ci_high, systematic, confidence))
    result = {
        "ratio_of_medians": ratio,
        "median_of_round_ratios": float(np.median(candidate / baseline)),
        "ci_low": ci_low,
        "ci_high": ci_high,
        "confidence": float(confidence),
        "resamples": resamples,
        "rounds": rounds,
        "systematic": float(systematic),
        "bootstrap": "circular_blocks" if rows["block"][0] > 1 else "rounds",
    }
    if rows["block"][0] > 1:
        result["block_rounds"] = int(rows["block"][0])
    if np.isfinite(rows["lag1"][0]):
        result["lag1_autocorrelation"] = float(rows["lag1"][0])
    return result


def widen(ratio, ci_low, ci_high, systematic, confidence: float = 0.95):
    """An interval (ci_low, ci_high) around `ratio` with each side's distance d from the ratio
    widened in quadrature to sqrt(d^2 + (z s ratio)^2), s = `systematic`; elementwise over
    arrays (the coverage simulations) as over numbers (gap)."""
    s = z_of(confidence) * np.asarray(systematic) * ratio
    low = np.minimum(ci_low, ratio - np.hypot(np.maximum(ratio - ci_low, 0.0), s))
    high = np.maximum(ci_high, ratio + np.hypot(np.maximum(ci_high - ratio, 0.0), s))
    return low, high


def bootstrap_rows(
    baseline: np.ndarray,
    candidate: np.ndarray,
    resamples: int,
    confidence: float,
    rng: np.random.Generator,
) -> dict[str, np.ndarray]:
    """The bootstrap interval of the ratio of medians for each row of paired rounds (shapes
    (rows, n), baseline positive), vectorised over rows so gap() and the coverage simulations
    (tests/coverage/test_schedules.py) run the same code. Returns arrays per row: ci_low, ci_high,
    lag1 (the lag-1 autocorrelation of the per-round log ratios, NaN where not computed),
    block (1: single rounds resampled).

    Rounds are resampled singly unless their log ratios are significantly autocorrelated
    (autocorrelation.dependent): then by a circular block bootstrap (blocks of
    autocorrelation.block_rounds), and each side of the interval is at least the single-round
    bootstrap's widened for the correlation (autocorrelation.widening), since at a few dozen
    rounds blocks alone still undercover."""
    n_rows, n = baseline.shape
    idx = rng.integers(0, n, size=(n_rows, resamples, n))
    lo, hi = _percentile_interval(baseline, candidate, idx, confidence)
    lag1 = np.full(n_rows, np.nan)
    block = np.ones(n_rows, dtype=np.int64)
    positive = (candidate > 0).all(axis=1)
    if n < 2 or not positive.any():
        return {"ci_low": lo, "ci_high": hi, "lag1": lag1, "block": block}
    lag1[positive] = autocorrelation.lag1_autocorrelation(
        np.log(candidate[positive] / baseline[positive])
    )
    flagged = positive & autocorrelation.dependent(np.nan_to_num(lag1), n)
    if flagged.any():
        rho = autocorrelation.corrected_rho(lag1[flagged], n)
        block[flagged] = autocorrelation.block_rounds(n, rho)
        b_idx = autocorrelation.circular_block_indices(
            rng, int(flagged.sum()), resamples, n, block[flagged]
        )
        b_lo, b_hi = _percentile_interval(baseline[flagged], candidate[flagged], b_idx, confidence)
        ratio = _row_medians(candidate[flagged]) / _row_medians(baseline[flagged])
        f = np.array([autocorrelation.widening(n, float(r), confidence) for r in rho])
        lo[flagged] = np.minimum(b_lo, ratio - np.maximum(ratio - lo[flagged], 0.0) * f)
        hi[flagged] = np.maximum(b_hi, ratio + np.maximum(hi[flagged] - ratio, 0.0) * f)
    return {"ci_low": lo, "ci_high": hi, "lag1": lag1, "block": block}


def _percentile_interval(baseline, candidate, idx, confidence) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval, per row, of the ratio of medians over resamples `idx` (rows,
    resamples, n): one index matrix indexes both sides, so each pair stays together."""
    rows = np.arange(baseline.shape[0])[:, None, None]
    boot = _row_medians(candidate[rows, idx]) / _row_medians(baseline[rows, idx])
    tail = (1 - confidence) / 2 * 100
    lo, hi = np.percentile(boot, [tail, 100 - tail], axis=-1, method="linear")
    return lo, hi


def _row_medians(matrix: np.ndarray) -> np.ndarray:
    """Median along the last axis: mean of the two middle order statistics (one when n is odd)."""
    # A full sort is several times faster here than np.median's two-kth partition.
    ordered = np.sort(matrix, axis=-1)
    n = matrix.shape[-1]
    return (ordered[..., (n - 1) // 2] + ordered[..., n // 2]) / 2


def geometric_mean(values: Samples) -> float:
    """Geometric mean exp(mean(ln x_i)), for aggregating gaps (ratios); every value must be > 0."""
    array = _as_samples(values, "values")
    nonpositive = np.flatnonzero(array <= 0)
    if nonpositive.size:
        i = int(nonpositive[0])
        raise ValueError(
            f"geometric_mean: value at index {i} is {float(array[i])!r}; expected a positive number"
        )
    return float(np.exp(np.mean(np.log(array))))


# --- comparing two runs -------------------------------------------------------------------

VERDICTS = ("faster", "slower", "same", "unstable", "failed", "untimed", "not run")
"""The one verdict vocabulary. `decide` gives the first four from numbers; the last three say
why there are none: a side failed, the row has counters but no time, or the case did not run."""

# Cap on resampled values held at once (doubles), so long sample arrays do not blow up memory.
_BLOCK_VALUES = 1 << 21


@dataclass(frozen=True)
class Policy:
    """Thresholds that turn a detected change into a verdict (each caller's policy is one of these).

    min_effect: smallest relative change of the median, |ratio - 1|, that counts (0.02 = 2%).
    alpha: a Mann-Whitney U p-value below this counts as significant; None: no U test is asked.
    interval: whether the change's interval must also exclude 1.
    """

    min_effect: float = 0.02
    alpha: float | None = 0.05
    interval: bool = False

    def __post_init__(self):
        if not _number_in(self.min_effect, 0, math.inf, low_open=False):
            raise ValueError(f"Policy.min_effect must be a number >= 0 (got {self.min_effect!r})")
        if self.alpha is not None and not _number_in(self.alpha, 0, 1):
            raise ValueError(f"Policy.alpha must be a number in (0, 1) (got {self.alpha!r})")


@dataclass(frozen=True)
class Bootstrap:
    """Settings of the percentile bootstrap interval (numpy PCG64 seeded with `seed`)."""

    resamples: int = 10000
    confidence: float = 0.95
    seed: int = 0

    def __post_init__(self):
        if isinstance(self.resamples, bool) or not isinstance(self.resamples, int):
            raise ValueError(f"Bootstrap.resamples must be an int (got {self.resamples!r})")
        if self.resamples < 1:
            raise ValueError(f"Bootstrap.resamples must be >= 1 (got {self.resamples})")
        if not _number_in(self.confidence, 0, 1):
            raise ValueError(f"Bootstrap.confidence must be in (0, 1) (got {self.confidence!r})")


def _number_in(value, low: float, high: float, *, low_open: bool = True) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        return False
    return (low < value if low_open else low <= value) and value < high


@dataclass(frozen=True)
class Change:
    """ratio = statistic(head) / statistic(base) with its bootstrap interval [ci_low, ci_high]."""

    ratio: float
    ci_low: float
    ci_high: float

    @property
    def percent(self) -> float:
        """Relative change in percent: (ratio - 1) * 100; positive means head takes longer."""
        return (self.ratio - 1) * 100


# --- detection ---------------------------------------------------------------------------


def _resampled(columns: tuple[np.ndarray, ...], rng, resamples: int) -> list[np.ndarray]:
    """Row medians of `resamples` draws of n indices with replacement, shared by all `columns`.

    Columns of one side share the indices, so paired samples (one per round) stay paired.
    """
    n = columns[0].size
    block = max(1, _BLOCK_VALUES // n)
    out = [np.empty(resamples) for _ in columns]
    for start in range(0, resamples, block):
        stop = min(resamples, start + block)
        idx = rng.integers(0, n, size=(stop - start, n))
        for column, medians in zip(columns, out, strict=True):
            medians[start:stop] = _row_medians(column[idx])
    return out


def _interval(boot: np.ndarray, confidence: float) -> tuple[float, float]:
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(boot, [tail, 100 - tail], method="linear")
    return float(low), float(high)


def _samples(values, what: str) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1 or array.size == 0 or not np.all(np.isfinite(array)):
        raise ValueError(f"{what}: expected a non-empty flat sequence of finite times in seconds")
    median_s = float(np.median(array))
    if median_s <= 0:
        raise ValueError(f"{what}: the median time is {median_s!r} s; expected > 0")
    return array


def detect(base_s, head_s, bootstrap: Bootstrap = Bootstrap()) -> Change:
    """Change of the median time: ratio = median(head) / median(base).

    Interval: percentile bootstrap (Efron) with the two sides resampled independently (they
    come from different runs, so nothing pairs them): `resamples` times draw n_base and n_head
    samples with replacement, take the ratio of their medians, and report the (1 - confidence) / 2
    and (1 + confidence) / 2 type-7 percentiles of those ratios.
    """
    base = _samples(base_s, "base samples")
    head = _samples(head_s, "head samples")
    rng = np.random.Generator(np.random.PCG64(bootstrap.seed))
    (base_boot,) = _resampled((base,), rng, bootstrap.resamples)
    (head_boot,) = _resampled((head,), rng, bootstrap.resamples)
    ratio = float(np.median(head)) / float(np.median(base))
    return Change(ratio, *_interval(head_boot / base_boot, bootstrap.confidence))


def detect_gap(base_pair: tuple, head_pair: tuple, bootstrap: Bootstrap = Bootstrap()) -> Change:
    """Change of a gap: ratio = gap(head) / gap(base), gap = median(candidate) / median(baseline).

    Each pair is (baseline samples, candidate samples) from paired rounds. Each bootstrap draw
    resamples whole rounds within a side (pairs kept, as the runner's own gap interval does) and
    the two sides independently; the interval is the percentile interval of the gap ratios.
    """
    sides = []
    for label, (baseline_s, candidate_s) in (("base", base_pair), ("head", head_pair)):
        baseline = _samples(baseline_s, f"{label} baseline samples")
        candidate = _samples(candidate_s, f"{label} candidate samples")
        if baseline.size != candidate.size:
            raise ValueError(
                f"{label}: baseline has {baseline.size} samples and candidate {candidate.size}; "
                "a gap needs one sample of each per round"
            )
        sides.append((baseline, candidate))
    rng = np.random.Generator(np.random.PCG64(bootstrap.seed))
    boot = []
    for baseline, candidate in sides:
        base_med, cand_med = _resampled((baseline, candidate), rng, bootstrap.resamples)
        boot.append(cand_med / base_med)
    (b_base, c_base), (b_head, c_head) = sides
    ratio = (np.median(c_head) / np.median(b_head)) / (np.median(c_base) / np.median(b_base))
    return Change(float(ratio), *_interval(boot[1] / boot[0], bootstrap.confidence))


# --- significance ------------------------------------------------------------------------


def significance(base_s, head_s) -> float:
    """Two-sided Mann-Whitney U test p-value of base vs head (u_test: scipy.stats.mannwhitneyu's
    default "auto" method, without scipy).

    Rank-based, so it needs no normality and one outlier moves it little. Identical samples
    give 1.0; a degenerate input (a NaN, an empty side) gives 1.0, i.e. no evidence.
    """
    base, head = np.asarray(base_s, dtype=np.float64), np.asarray(head_s, dtype=np.float64)
    if not (base.size and head.size and np.isfinite(base).all() and np.isfinite(head).all()):
        return 1.0
    return u_test(base, head)


def u_test(left: np.ndarray, right: np.ndarray) -> float:
    """The two-sided p-value of scipy.stats.mannwhitneyu(left, right, method="auto"), computed
    as it does (exact where one side has at most 8 points and no value repeats, else
    asymptotic), without its per-call wrapper: ~2 ms a call, a fifth of a dashboard build."""
    n1, n2 = left.size, right.size
    both = np.concatenate((left, right))
    if (n1 > 8 and n2 > 8) or np.unique(both).size < both.size:
        return u_test_asymptotic(left, right)
    ranks = np.empty(both.size)
    ranks[np.argsort(both, kind="stable")] = np.arange(1, both.size + 1)
    u1 = float(ranks[:n1].sum()) - n1 * (n1 + 1) / 2
    u = int(max(u1, n1 * n2 - u1))
    # scipy's _MWU.sf for U >= n1 n2 / 2: the CDF at its complement, summed from the left
    # divided by C(n1 + n2, n1) exactly, where scipy's binom rounds (a few ulp)
    pmf = _u_counts(min(n1, n2), max(n1, n2))[: n1 * n2 - u + 1] / float(math.comb(n1 + n2, n1))
    return float(np.clip(2 * np.cumsum(pmf)[-1], 0.0, 1.0))


@functools.cache
def _u_counts(m: int, n: int) -> np.ndarray:
    """How many orderings of m and n distinct values give each U = 0 .. m n (exact integers,
    as float64): U(m, n) counts come from U(m - 1, n) shifted by n and U(m, n - 1)."""
    if m == 0 or n == 0:
        return np.ones(1)
    counts = [0] * (m * n + 1)
    for u, c in enumerate(_u_counts(m - 1, n).tolist()):
        counts[u + n] += int(c)
    for u, c in enumerate(_u_counts(m, n - 1).tolist()):
        counts[u] += int(c)
    return np.array(counts, dtype=np.float64)


def u_test_asymptotic(left: np.ndarray, right: np.ndarray) -> float:
    """The two-sided p-value of scipy.stats.mannwhitneyu(left, right, method="asymptotic")
    (average ranks, tie and continuity corrections; the same formula, equal to 1e-12 in the
    tests), without its per-call array-API and signature handling, which cost ~2 ms a call: a
    dashboard build tests thousands of proposed steps (benchmarks/perf/RESULTS.md)."""
    n1, n2 = left.size, right.size
    n = n1 + n2
    _, inverse, counts = np.unique(
        np.concatenate((left, right)), return_inverse=True, return_counts=True
    )
    average_rank = np.cumsum(counts) - (counts - 1) / 2.0  # 1-based, ties share the mean
    u1 = float(np.sum(average_rank[inverse.ravel()[:n1]])) - n1 * (n1 + 1) / 2
    u = max(u1, n1 * n2 - u1)
    tie_term = float(np.sum(counts.astype(np.float64) ** 3 - counts))
    s = math.sqrt(n1 * n2 / 12 * ((n + 1) - tie_term / (n * (n - 1))))
    if s == 0:
        return 1.0  # every value the same: no evidence of a shift
    z = (u - n1 * n2 / 2 - 0.5) / s
    return float(min(1.0, max(0.0, 2 * normal_cdf(-z))))


# --- policy ------------------------------------------------------------------------------


def decide(
    change: Change, p_value: float | None = None, stable: bool = True, policy: Policy = Policy()
) -> str:
    """The verdict of a change, for every caller (compare, pull_request, regressions): unstable
    if a side is unstable; else slower / faster (the sign of ratio - 1) when |ratio - 1| >=
    min_effect AND p_value < alpha (when the policy asks a U test) AND the interval excludes 1
    (when the policy asks that); else same."""
    if not stable:
        return "unstable"
    if abs(change.ratio - 1) < policy.min_effect:
        return "same"
    if policy.alpha is not None and not (p_value is not None and p_value < policy.alpha):
        return "same"
    if policy.interval and change.ci_low <= 1.0 <= change.ci_high:
        return "same"
    return "slower" if change.ratio > 1 else "faster"
