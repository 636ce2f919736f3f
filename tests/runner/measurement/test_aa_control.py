"""runner.measurement.aa_control's term, worked by hand: the load sd pooled from the spread of
the per-load medians and the control's offset from the baseline's own load, and a gap's term
counting the baseline's and the candidate's loads alike."""

from __future__ import annotations

import math

import numpy as np
import pytest

from protocol import statistics
from runner.measurement import aa_control, stats

LOADS = aa_control.CONTROL_LOADS
ROUNDS = LOADS * aa_control.MIN_PER_LOAD  # three samples a load


def control_of(centres: np.ndarray, step: float) -> np.ndarray:
    """Control times against a baseline of ones: load g's three samples, in the order they are
    taken, read centres[g], centres[g] + step, centres[g] (their median is centres[g]; each
    pair of consecutive samples differs by step)."""
    loads = aa_control.loads_of_samples(ROUNDS)
    seen = np.zeros(LOADS, dtype=int)
    x = np.empty(ROUNDS)
    for k, g in enumerate(loads):
        x[k] = centres[g] + (step if seen[g] == 1 else 0.0)
        seen[g] += 1
    return np.exp(x)


def within_of(step: float) -> float:
    """The rounds' noise in a median of three: pairs all |step| apart (none clipped) give
    sigma^2 = step^2 / (2 E[min(|Z|, 3 x 0.6745)^2]), times Var(median of 3) = 1.346 / 3."""
    return step**2 / (2 * statistics._CLIPPED_SECOND_MOMENT) * 1.346 / 3


def test_load_sd_where_both_readings_agree_is_their_common_value():
    """The spread of the medians reads sd^2 + w on 7 df, their mean squared reads
    sd^2 (1 + 1/8) + w / 8 on 1 df: centres built so both give sd = 1e-3 make that the
    maximum-likelihood answer."""
    step, sd2 = 2e-3, 1e-6
    w = within_of(step)
    spread = sd2 + w  # the medians' variance (ddof 1)
    offset = math.sqrt(sd2 * (1 + 1 / LOADS) + w / LOADS)
    signs = np.array([1.0, -1.0] * (LOADS // 2))
    centres = offset + signs * math.sqrt(spread * (LOADS - 1) / LOADS)
    control = control_of(centres, step)
    sd = aa_control.load_sd(np.ones(ROUNDS), control, aa_control.loads_of_samples(ROUNDS))
    assert sd[0] == pytest.approx(1e-3, rel=1e-5)


def test_loads_that_read_alike_and_no_offset_read_no_spread():
    control = control_of(np.zeros(LOADS), 2e-3)
    sd = aa_control.load_sd(np.ones(ROUNDS), control, aa_control.loads_of_samples(ROUNDS))
    assert sd[0] == 0.0
    found = aa_control.term_of(
        [1.0] * ROUNDS, list(control), list(aa_control.loads_of_samples(ROUNDS)), 1
    )
    assert found[0] == stats.INSTANCE_SD  # the term is never below the documented floor


def test_an_offset_of_the_control_alone_reads_as_a_spread():
    """All eight loads alike but 0.3% off the baseline: the medians' spread reads nothing, the
    offset (the baseline's own load against the control's) reads sd^2 (9/8) + w/8 = 9e-6 on
    one degree of freedom. Pooled with the spread's 7 df the answer lies between 0 and that
    piece's own (9e-6 - w/8) / (9/8); the score is zero there."""
    step, offset = 2e-3, 3e-3
    w = within_of(step)
    control = control_of(np.full(LOADS, offset), step)
    sd = aa_control.load_sd(np.ones(ROUNDS), control, aa_control.loads_of_samples(ROUNDS))
    v = float(sd[0]) ** 2
    alone = (offset**2 - w / LOADS) / (1 + 1 / LOADS)
    assert 0 < v < alone
    s1, s2 = v + w, v * (1 + 1 / LOADS) + w / LOADS
    score = (LOADS - 1) * (0.0 - s1) / s1**2 + (1 + 1 / LOADS) * (offset**2 - s2) / s2**2
    assert abs(score) * v < 1e-6


def test_cold_groups_count_the_baseline_side_by_its_loads():
    """Cold, the sd is a group's; the baseline's side of 32 loads carries group / 32 of a
    group's variance: with a group of 32 the offset piece's coefficient stays 1 + 1/8, with a
    group of 1 against 32 loads a side it is 1/32 + 1/8, so one offset reads a larger sd."""
    step, offset = 2e-3, 3e-3
    control = control_of(np.full(LOADS, offset), step)
    loads = aa_control.loads_of_samples(ROUNDS)
    grouped = aa_control.load_sd(np.ones(ROUNDS), control, loads, per_side_loads=32, group=32)
    hot = aa_control.load_sd(np.ones(ROUNDS), control, loads)
    single = aa_control.load_sd(np.ones(ROUNDS), control, loads, per_side_loads=32, group=1)
    assert grouped[0] == pytest.approx(hot[0], rel=1e-6)
    assert single[0] > hot[0]


def test_the_term_covers_the_candidates_load_as_well_as_the_baselines():
    """Hot, loads dominate (0.5% a load, 0.05% a sample): the baseline and the candidate each
    have a load of their own, so the gap moves by sqrt(2) x sd. The term, sqrt(2) x sd x t(7) /
    z, holds 1.0 in about 95% of A/A gaps; a term for the baseline's load alone (sd x t(7) / z)
    misses far more."""
    rng = np.random.default_rng(11)
    runs, n, load, noise = 400, 30, 5e-3, 5e-4
    loads = aa_control.loads_of_samples(n)
    base = rng.normal(0, noise, (runs, n)) + rng.normal(0, load, (runs, 1))
    cand = rng.normal(0, noise, (runs, n)) + rng.normal(0, load, (runs, 1))
    offsets = rng.normal(0, load, (runs, LOADS))
    control = rng.normal(0, noise, (runs, n)) + offsets[:, loads]
    sd = aa_control.load_sd(np.exp(base), np.exp(control), loads)
    term = np.array([aa_control.gap_term(float(s)) for s in sd])
    rows = statistics.bootstrap_rows(np.exp(base), np.exp(cand), 1000, 0.95, rng)
    ratio = np.median(np.exp(cand), axis=1) / np.median(np.exp(base), axis=1)

    def coverage(t):
        lo, hi = statistics.widen(ratio, rows["ci_low"], rows["ci_high"], t)
        return float(np.mean((lo <= 1.0) & (hi >= 1.0)))

    both, baseline_only = coverage(term), coverage(term / math.sqrt(2))
    assert both >= 0.93, both
    assert baseline_only < 0.90, baseline_only


def test_a_control_with_too_few_samples_a_load_reads_its_term_from_groups_of_loads():
    """runner.bench hot: 30 samples over 16 graph instances (1-2 each, fewer than MIN_PER_LOAD):
    the instances merge two at a time into 8 groups of 3-4 samples, and the block says so; with
    the instances read alike the control sits at parity. Too few samples for even 3 groups:
    no block."""
    from runner.measurement.timing.base import copy_turn

    rng = np.random.default_rng(11)
    labels = [copy_turn(k, 16) for k in range(30)]
    assert not aa_control.decided(labels)
    merged, g = aa_control.coarsened(labels)
    assert g == 2 and np.unique(merged).size == 8 and aa_control.decided(merged)
    baseline = 1e-3 * np.exp(rng.normal(0, 0.002, 30))
    control = 1e-3 * np.exp(rng.normal(0, 0.002, 30))
    block = aa_control.document_block(list(baseline), list(control), labels, 16)
    assert block["loads"] == 8 and block["loads_per_group"] == 2 and block["per_side_loads"] == 16
    assert block["degrees_of_freedom"] == 7 and block["sample_loads"] == [int(v) for v in merged]
    assert block["ci_low"] <= 1.0 <= block["ci_high"] and block["systematic"] >= stats.INSTANCE_SD
    assert "8 x 2 more times" in block["method"]
    assert aa_control.coarsened(labels[:8]) is None
    assert aa_control.document_block(list(baseline[:8]), list(control[:8]), labels[:8], 16) is None
