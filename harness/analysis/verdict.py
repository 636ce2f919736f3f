"""How a change between two runs becomes a verdict, in three separate pieces (as in asv and
pyperf):
- detection: the ratio of medians head / base with a percentile bootstrap interval (`detect`,
  and `detect_gap` for a gap's change);
- significance: a two-sided Mann-Whitney U test on the raw samples (`significance`);
- policy: the thresholds that turn both into faster / slower / same (`Policy`, `decide`).
A side whose statistics the runner marked unstable gives `unstable` whatever the numbers say.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = [
    "VERDICTS",
    "Bootstrap",
    "Change",
    "Policy",
    "decide",
    "detect",
    "detect_gap",
    "significance",
]

VERDICTS = ("faster", "slower", "same", "unstable")

# Cap on resampled values held at once (doubles), so long sample arrays do not blow up memory.
_BLOCK_VALUES = 1 << 21


@dataclass(frozen=True)
class Policy:
    """Thresholds that turn a detected change into a verdict.

    min_effect: smallest relative change of the median, |ratio - 1|, that counts (0.02 = 2%).
    alpha: a Mann-Whitney U p-value below this counts as significant.
    """

    min_effect: float = 0.02
    alpha: float = 0.05

    def __post_init__(self):
        if not _number_in(self.min_effect, 0, math.inf, low_open=False):
            raise ValueError(f"Policy.min_effect must be a number >= 0 (got {self.min_effect!r})")
        if not _number_in(self.alpha, 0, 1):
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


def _row_medians(matrix: np.ndarray) -> np.ndarray:
    """Median of each row: mean of the two middle order statistics (one when n is odd)."""
    ordered = np.sort(matrix, axis=1)
    n = matrix.shape[1]
    return (ordered[:, (n - 1) // 2] + ordered[:, n // 2]) / 2


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
    """Two-sided Mann-Whitney U test (scipy.stats.mannwhitneyu) p-value of base vs head.

    Rank-based, so it needs no normality and one outlier moves it little. Identical samples
    give 1.0; a NaN p-value (degenerate input) is reported as 1.0, i.e. no evidence.
    """
    # Imported here: scipy.stats takes about 0.9 s to import, most of `harness compare`'s start,
    # and no other command needs it.
    from scipy.stats import mannwhitneyu

    p_value = float(mannwhitneyu(base_s, head_s, alternative="two-sided").pvalue)
    return 1.0 if math.isnan(p_value) else p_value


# --- policy ------------------------------------------------------------------------------


def decide(change: Change, p_value: float, stable: bool, policy: Policy = Policy()) -> str:
    """unstable if a side is unstable; else slower / faster when p < alpha AND |ratio - 1| >=
    min_effect (the sign of ratio - 1 says which); else same."""
    if not stable:
        return "unstable"
    if p_value < policy.alpha and abs(change.ratio - 1) >= policy.min_effect:
        return "slower" if change.ratio > 1 else "faster"
    return "same"
