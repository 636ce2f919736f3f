"""The in-run A/A control: the baseline loaded again as a hidden side, and the systematic term
every gap's interval takes from it instead of fixed constants.

What one load of a module adds to a side (where its code lands, its own graph instance) stays
fixed for the run, so no resampling of rounds can see it. The control is the baseline's PTX
loaded CONTROL_LOADS more times, timed in the same interleaved rounds as every side; sample k of
the control takes load copy_turn(k, CONTROL_LOADS), so its per-round log ratios to the baseline
fall into one cluster per load.
The per-load variance sd^2 is a variance component (load_sd, read once every load has
MIN_PER_LOAD samples): the spread of the cluster medians and the control's offset from the
baseline's own load, each less what the rounds' own noise puts in it, pooled by maximum
likelihood. A side made of L loads (hot: one; cold: COLD_LOADS, its launches taking them in
turn) carries sd / sqrt(L), and a gap two sides, the baseline's loads and the candidate's
alike: sqrt(2 / L) sd. That is scaled from the
normal to Student's t quantile on CONTROL_LOADS - 1 degrees of freedom, since sd comes from
that many loads only; tests/coverage/test_schedules.py checks A/A coverage with it and that
without it intervals undercover (docs/method/aa-control.md).
"""

from __future__ import annotations

import math
import statistics as normal

import numpy as np

from protocol import autocorrelation, statistics
from runner.measurement import stats
from runner.measurement.timing.base import copy_turn

__all__ = [
    "CONTROL_LOADS",
    "CONTROL_SUFFIX",
    "MIN_PER_LOAD",
    "PENDING",
    "control_name",
    "decided",
    "document_block",
    "gap_term",
    "load_sd",
    "loads_of_samples",
    "running_term",
]

CONTROL_LOADS = 8
"""Loads of the baseline's PTX that make the control: 7 degrees of freedom for the per-load
sd (t = 2.36 at 95%, 20% over the normal quantile), for one more side's samples."""

CONTROL_SUFFIX = "~aa"


def control_name(baseline: str) -> str:
    """The hidden side's name: never a suite implementation's (`~` is not allowed there)."""
    return baseline + CONTROL_SUFFIX


def loads_of_samples(samples: int, loads: int = CONTROL_LOADS) -> np.ndarray:
    """Which load the control's sample k took (timing.base.copy_turn, as the backend pins it)."""
    return np.array([copy_turn(k, loads) for k in range(samples)], dtype=np.int64)


MIN_PER_LOAD = 3
"""Samples every load needs before its centre is read: a median of 3 sets one stray round
aside, where a median of 2 is their mean (docs/method/aa-control.md)."""


def load_sd(
    baseline: np.ndarray,
    control: np.ndarray,
    loads: np.ndarray,
    per_side_loads: int = 1,
    group: int = 1,
    offset: bool = True,
) -> np.ndarray:
    """Per row of paired rounds (shapes (rows, n), or (n,)), the relative sd one load adds, as a
    variance component of the per-round log ratios x = log(control / baseline), loads labelled
    by `loads` (n labels). Two independent readings of it, pooled by maximum likelihood
    (statistics.variance_component):
    - the variance of the L per-load medians of x (L - 1 degrees of freedom): sd^2 plus what
      the rounds' noise puts in each median, w = sigma_w^2 x Var(median of n_g) / sigma^2
      (sigma_w^2 from the differences of a load's consecutive samples,
      statistics.pair_variance);
    - the square of their mean (1 degree of freedom): the control's L loads against the
      baseline's own, sd^2 (group / per_side_loads + 1 / L) plus w / L.
    Medians and clipped pairs keep one stray round from making a load look different.
    NaN where fewer than two loads were sampled or a load has fewer than MIN_PER_LOAD samples
    (a median of two is their mean). `per_side_loads`, `group`: as gap_term's. `offset`
    False: the spread alone (document_block judges with it whether the control reads apart,
    an offset that spread does not describe)."""
    x = np.log(np.atleast_2d(control) / np.atleast_2d(baseline))
    labels, counts = np.unique(loads, return_counts=True)
    if labels.size < 2 or counts.min() < MIN_PER_LOAD:
        return np.full(x.shape[0], np.nan)
    centres = np.stack([np.median(x[:, loads == g], axis=1) for g in labels], axis=1)
    # each load's consecutive samples: a drift over the run stays out of the rounds' noise
    first = np.concatenate([np.flatnonzero(loads == g)[:-1] for g in labels])
    second = np.concatenate([np.flatnonzero(loads == g)[1:] for g in labels])
    sigma_w2 = statistics.pair_variance(x[:, first] - x[:, second])
    within = sigma_w2 * float(np.mean(statistics.median_variance(counts)))
    count = labels.size
    spread = centres.var(axis=1, ddof=1)
    if not offset:
        return np.sqrt(np.maximum(spread - within, 0.0))
    pieces = np.stack([spread, centres.mean(axis=1) ** 2], axis=1)
    noise = np.stack([within, within / count], axis=1)
    share = group / per_side_loads + 1 / count
    return np.sqrt(statistics.variance_component(pieces, [count - 1, 1], [1.0, share], noise))


def gap_term(
    sd: float,
    loads: int = CONTROL_LOADS,
    per_side_loads: int = 1,
    confidence: float = 0.95,
    group: int = 1,
) -> float:
    """The relative standard uncertainty (statistics.gap's `systematic`) a gap adds for two sides of
    `per_side_loads` loads each, from the sd of `loads` control loads (or groups of `group`
    loads each: a per-load sd of sd x sqrt(group)): sqrt(2 group / L) sd x t(loads - 1) / z, at
    most MAX_SYSTEMATIC / 2."""
    if not math.isfinite(sd) or sd < 0:
        raise ValueError(f"aa_control.gap_term: sd must be a finite number >= 0 (got {sd!r})")
    if loads < 3:
        raise ValueError(f"aa_control.gap_term: needs at least 3 loads (got {loads})")
    p = (1 + confidence) / 2
    t_over_z = autocorrelation.student_t_quantile(p, loads - 1) / normal.NormalDist().inv_cdf(p)
    term = math.sqrt(2 * group / per_side_loads) * sd * t_over_z
    return min(term, statistics.MAX_SYSTEMATIC / 2)


def with_offset(term: float, ratio: float, ci_low: float, ci_high: float) -> float:
    """`term`, or the control's own offset |log(ratio)| where the control's interval excludes
    1: an A/A control that reads apart shows a difference between loads of one PTX that the
    per-load sd does not describe, so every gap of the case is at least that uncertain."""
    if ci_low <= 1.0 <= ci_high:
        return term
    return min(max(term, abs(math.log(ratio))), statistics.MAX_SYSTEMATIC / 2)


METHOD = (
    "the baseline's PTX loaded {loads} more times as a hidden side, timed in the same rounds; "
    "sample k on load copy_turn(k, {loads}); systematic = sqrt(2 / {per_side}) x sd between "
    "loads (the variance of the per-load medians of log(control / baseline) and the square of "
    "their mean, each less the rounds' noise in it, pooled by maximum likelihood) x t({df}) / z "
    "(runner.measurement.aa_control)"
)
METHOD_GROUPS = (
    "the baseline's PTX loaded {loads} x {group} more times as a hidden side, timed in the same "
    "rounds; sample k on group copy_turn(k, {loads}), its launches taking the group's {group} "
    "loads in turn; systematic = sqrt(2 x {group} / {per_side}) x sd between groups (the "
    "variance of the per-group medians of log(control / baseline) and the square of their "
    "mean, each less the rounds' noise in it, pooled by maximum likelihood) x t({df}) / z "
    "(runner.measurement.aa_control)"
)
APART = (
    "; the control's interval excludes 1, so the term is at least its offset |log(ratio)| "
    "(aa_control.with_offset)"
)


def term_of(
    baseline_s: list[float],
    control_s: list[float],
    sample_loads: list[int],
    per_side_loads: int,
    group: int = 1,
    offset: bool = True,
) -> tuple[float, float, int] | None:
    """(systematic term, per-load sd, loads) the control's samples give, the term at least
    stats.INSTANCE_SD (what many hot A/A runs put between loads: one run's 8 loads cannot read
    a spread that small against the rounds' noise), or None when they span
    fewer than 3 loads, a load has fewer than MIN_PER_LOAD samples, or the two sides differ in
    samples. `group`: loads in each of the control's groups (cold: as many as a side's cold
    loads; a sample's label names a group). `offset`: whether the control's offset from the
    baseline's own load is read too (load_sd; not where the labels are places in the run,
    which every side's samples span alike)."""
    loads = np.asarray(sample_loads, dtype=np.int64)
    if len(control_s) != len(baseline_s) or len(loads) != len(control_s) or not decided(loads):
        return None
    baseline, control = np.asarray(baseline_s), np.asarray(control_s)
    sd = float(load_sd(baseline, control, loads, per_side_loads, group, offset)[0])
    count = int(np.unique(loads).size)
    return max(gap_term(sd, count, per_side_loads, group=group), stats.INSTANCE_SD), sd, count


def decided(loads) -> bool:
    """Whether the control's samples, on these loads, are enough to read its term: 3 loads or
    more, each with MIN_PER_LOAD samples."""
    _, counts = np.unique(np.asarray(loads, dtype=np.int64), return_counts=True)
    return counts.size >= 3 and int(counts.min()) >= MIN_PER_LOAD


PENDING = math.nan
"""running_term's answer while the control is timed but not yet decided: the stopping rule
goes on (timing.stopping.run_systematic)."""


def running_term(baseline: str, control: str, per_side_loads: int, group: int = 1):
    """For the stopping rule (timing.base.take_samples' `control_term`): a function of the
    timings so far giving the control's term (term_of); PENDING while the control's loads have
    too few samples each (the rule then never stops on a term not yet read); None where no
    control is timed (the rule takes the documented default, stats.systematic)."""

    def term(timings: dict) -> float | None:
        base, ctl = timings.get(baseline), timings.get(control)
        if base is None or ctl is None or not ctl.loads:
            return None
        n = min(len(base.samples_s), len(ctl.samples_s), len(ctl.loads))
        found = term_of(base.samples_s[:n], ctl.samples_s[:n], ctl.loads[:n], per_side_loads, group)
        return PENDING if found is None else found[0]

    return term


def coarsened(sample_loads: list[int]) -> tuple[np.ndarray, int] | None:
    """The control's sample labels (0..L-1) merged g at a time, label % (L / g), for the
    smallest g that leaves 3 or more groups of MIN_PER_LOAD samples each (decided), with g (1,
    the labels as they are, where they already are); None where no merge does. A run that ends
    before each load has MIN_PER_LOAD samples (runner.bench's 30 samples over 16 graph
    instances) still reads a term, from fewer groups and with fewer degrees of freedom, instead
    of none."""
    loads = np.asarray(sample_loads, dtype=np.int64)
    labels = int(loads.max()) + 1 if loads.size else 0
    for g in range(1, labels + 1):
        if labels % g or labels // g < 3:
            continue
        merged = loads % (labels // g)
        if decided(merged):
            return merged, g
    return None


def document_block(
    baseline_s: list[float],
    control_s: list[float],
    sample_loads: list[int],
    per_side_loads: int,
    group: int = 1,
    method: str | None = None,
    offset: bool = True,
) -> dict | None:
    """The result document's `aa_control` of a case: the control's samples and loads, its own
    gap against the baseline (a gap block's keys, widened by the term the loads' spread alone
    sets: an interval that then excludes 1 reads `apart`, an offset that spread does not
    describe), the per-load sd and the term every gap of the case takes (systematic, the
    spread and the offset pooled, at least the offset where apart; systematic_source
    "control"). Where a load has fewer than MIN_PER_LOAD samples, loads are merged into groups
    (coarsened); None when no grouping leaves 3 with enough samples.
    `group`: loads in each of the control's groups (term_of). `method` says what a load is (by
    default a PTX load, alone or in groups; runner.bench: a graph instance or a place in the
    run; its places: `offset` False, as term_of's)."""
    loads = np.asarray(sample_loads, dtype=np.int64)
    if (merged := coarsened(loads)) is not None:  # g = 1: the loads as they are
        loads, group = merged[0], group * merged[1]
    found = term_of(baseline_s, control_s, loads, per_side_loads, group, offset)
    if found is None:
        return None
    term, sd, count = found
    spread_sd = float(
        load_sd(np.asarray(baseline_s), np.asarray(control_s), loads, offset=False)[0]
    )
    spread = max(gap_term(spread_sd, count, per_side_loads, group=group), stats.INSTANCE_SD)
    g = statistics.gap(baseline_s, control_s, systematic=spread)
    ratio, low, high = g["ratio_of_medians"], g["ci_low"], g["ci_high"]
    apart = not low <= 1.0 <= high
    text = method or (METHOD_GROUPS if group > 1 else METHOD)
    return {
        **{k: g[k] for k in ("ratio_of_medians", "ci_low", "ci_high", "confidence")},
        "loads": count,
        "loads_per_group": group,
        "per_side_loads": per_side_loads,
        "load_sd": sd,
        "degrees_of_freedom": count - 1,
        "apart": apart,
        "systematic": with_offset(term, ratio, low, high),
        "systematic_source": "control",
        "method": text.format(loads=count, group=group, per_side=per_side_loads, df=count - 1)
        + (APART if apart else ""),
        "samples_s": list(control_s),
        "sample_loads": [int(v) for v in loads],
    }
