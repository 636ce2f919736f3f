"""Tests for runner.measurement.stats; expected values are worked out by hand in the comments."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from protocol import statistics
from protocol.statistics import (
    UNSTABLE_NOISE,
    gap,
    geometric_mean,
    mad,
    median,
    percentile,
    summarize,
)
from runner.measurement import stats


def test_median_odd_and_even():
    # sorted [1, 2, 3] -> middle is 2
    assert median([3.0, 1.0, 2.0]) == 2.0
    # sorted [1, 2, 3, 4] -> (2 + 3) / 2
    assert median((4.0, 1.0, 3.0, 2.0)) == 2.5
    assert median(np.array([7.0])) == 7.0


def test_percentile_type7():
    values = list(range(1, 21))
    # h = (20 - 1) * 0.95 = 18.05 -> x[18] + 0.05 * (x[19] - x[18]) = 19 + 0.05 * 1
    assert percentile(values, 95) == pytest.approx(19.05, rel=1e-12)
    # h = 19 * 0.5 = 9.5 -> 10 + 0.5 * (11 - 10)
    assert percentile(values, 50) == 10.5
    assert percentile(values, 0) == 1.0
    assert percentile(values, 100) == 20.0
    # [1, 2, 3, 4, 100]: h = 4 * 0.95 = 3.8 -> 4 + 0.8 * (100 - 4) = 80.8
    assert percentile([1, 2, 3, 4, 100], 95) == pytest.approx(80.8, rel=1e-12)


@pytest.mark.parametrize("q", [-1, 100.5, float("nan"), "95"])
def test_percentile_rejects_bad_q(q):
    with pytest.raises(ValueError, match=r"q must be a number in \[0, 100\]"):
        percentile([1.0, 2.0], q)


def test_mad_unscaled():
    # median 3; |x - 3| = [2, 1, 0, 1, 97] -> sorted [0, 1, 1, 2, 97] -> 1 (no 1.4826 factor)
    assert mad([1.0, 2.0, 3.0, 4.0, 100.0]) == 1.0
    # median 2.5; |x - 2.5| = [1.5, 0.5, 0.5, 1.5] -> (0.5 + 1.5) / 2 = 1
    assert mad([1.0, 2.0, 3.0, 4.0]) == 1.0


def test_summarize_keys_types_and_values():
    result = summarize([1.0, 2.0, 3.0, 4.0, 100.0])
    assert set(result) == {
        "median_s",
        "p10_s",
        "p90_s",
        "p95_s",
        "mad_s",
        "min_s",
        "max_s",
        "mean_s",
        "count",
        "noise",
        "stable",
    }
    # mean = 110 / 5 = 22; noise = MAD / median = 1 / 3
    assert result["median_s"] == 3.0
    assert result["p95_s"] == pytest.approx(80.8, rel=1e-12)
    # type 7: h = 4 q; p10 = x[0] + 0.4 (x[1] - x[0]) = 1.4, p90 = x[3] + 0.6 (x[4] - x[3]) = 61.6
    assert result["p10_s"] == pytest.approx(1.4, rel=1e-12)
    assert result["p90_s"] == pytest.approx(61.6, rel=1e-12)
    assert result["mad_s"] == 1.0
    assert (result["min_s"], result["max_s"], result["mean_s"]) == (1.0, 100.0, 22.0)
    assert result["count"] == 5
    assert result["noise"] == pytest.approx(1 / 3, rel=1e-12)
    assert result["stable"] is False
    for key in ("median_s", "p95_s", "mad_s", "min_s", "max_s", "mean_s", "noise"):
        assert type(result[key]) is float, key
    assert type(result["count"]) is int
    assert type(result["stable"]) is bool


def test_summarize_single_sample():
    result = summarize(np.array([0.005]))
    assert result["median_s"] == result["p95_s"] == result["min_s"] == result["max_s"] == 0.005
    assert result["mean_s"] == 0.005
    assert result["mad_s"] == 0.0
    assert result["noise"] == 0.0
    assert result["count"] == 1
    assert result["stable"] is True


def test_summarize_mad_zero_with_many_equal_values():
    # median 1.0; deviations [0 x 7, 0.5, 1.0] -> median deviation 0
    result = summarize([1.0] * 7 + [1.5, 2.0])
    assert result["median_s"] == 1.0
    assert result["mad_s"] == 0.0
    assert result["noise"] == 0.0
    assert result["stable"] is True
    assert result["max_s"] == 2.0


def test_summarize_unstable():
    # median 1.0; deviations [0, 0.1, 0.1, 0.2, 0.2] -> MAD 0.1; noise 0.1 > 0.03
    result = summarize([1.0, 1.1, 0.9, 1.2, 0.8])
    assert result["mad_s"] == pytest.approx(0.1, rel=1e-9)
    assert result["noise"] == pytest.approx(0.1, rel=1e-9)
    assert result["stable"] is False


def test_summarize_noise_at_threshold_is_stable():
    # median 100; deviations [0, 3, 3] -> MAD 3; noise 3 / 100 = 0.03, not above the threshold
    result = summarize([100.0, 103.0, 97.0])
    assert UNSTABLE_NOISE == 0.03
    assert result["noise"] == 0.03
    assert result["stable"] is True
    # median 100; deviations [0, 4, 4] -> noise 0.04
    assert summarize([100.0, 104.0, 96.0])["stable"] is False


def test_noise_with_zero_median():
    # all zeros: 0 / 0 is defined as no noise
    assert summarize([0.0, 0.0, 0.0])["noise"] == 0.0
    # non-negative samples cannot give median 0 with MAD > 0, so check the rule directly
    assert statistics._noise(1e-6, 0.0) == math.inf


@pytest.mark.parametrize(
    ("function", "args"),
    [
        (median, ()),
        (mad, ()),
        (summarize, ()),
        (percentile, (50,)),
        (geometric_mean, ()),
    ],
)
def test_rejects_bad_samples(function, args):
    with pytest.raises(ValueError, match="no samples"):
        function([], *args)
    with pytest.raises(ValueError, match=r"index 2 is nan; expected a finite number"):
        function([1.0, 2.0, float("nan"), 3.0], *args)
    with pytest.raises(ValueError, match=r"index 1 is inf; expected a finite number"):
        function(np.array([1.0, np.inf]), *args)
    with pytest.raises(ValueError, match=r"index 0 is -inf"):
        function((-np.inf, 1.0), *args)
    with pytest.raises(ValueError, match=r"index 3 is -0.5; times cannot be negative"):
        function([1.0, 2.0, 3.0, -0.5], *args)
    with pytest.raises(ValueError, match="flat sequence"):
        function([[1.0, 2.0], [3.0, 4.0]], *args)


def test_gap_hand_example_odd():
    baseline = [1.0, 2.0, 4.0]
    candidate = [3.0, 2.0, 8.0]
    result = gap(baseline, candidate, resamples=200)
    # medians: candidate 3, baseline 2 -> 1.5
    assert result["ratio_of_medians"] == 1.5
    # round ratios [3, 1, 2] -> median 2
    assert result["median_of_round_ratios"] == 2.0
    assert (result["rounds"], result["resamples"], result["confidence"]) == (3, 200, 0.95)
    assert result["ci_low"] <= result["ci_high"]


def test_gap_hand_example_even():
    # baseline median (2 + 3) / 2 = 2.5; candidate sorted [2, 2, 4, 9] -> (2 + 4) / 2 = 3
    # ratio of medians 3 / 2.5 = 1.2; round ratios [2, 1, 3, 1] -> sorted [1, 1, 2, 3] -> 1.5
    result = gap(np.array([1.0, 2.0, 3.0, 4.0]), (2.0, 2.0, 9.0, 4.0), resamples=100)
    assert result["ratio_of_medians"] == pytest.approx(1.2, rel=1e-12)
    assert result["median_of_round_ratios"] == 1.5


def _paired_two_x(rounds: int = 60) -> tuple[np.ndarray, np.ndarray]:
    """Candidate takes 2x the baseline, both riding one drift, each with ~0.5% own noise."""
    rng = np.random.default_rng(1234)
    drift = 1.0 + 0.05 * np.sin(np.linspace(0.0, 3.0, rounds))
    baseline = 1e-3 * drift * (1.0 + 0.005 * rng.standard_normal(rounds))
    candidate = 2e-3 * drift * (1.0 + 0.005 * rng.standard_normal(rounds))
    return baseline, candidate


def test_gap_ci_contains_true_ratio():
    baseline, candidate = _paired_two_x()
    result = gap(baseline, candidate)
    assert result["ci_low"] <= 2.0 <= result["ci_high"]
    assert result["ci_low"] <= result["ratio_of_medians"] <= result["ci_high"]
    # ~0.5% noise per side over 60 rounds: the interval is narrow, not merely wide enough
    assert result["ci_high"] - result["ci_low"] < 0.02
    assert result["median_of_round_ratios"] == pytest.approx(2.0, rel=0.01)
    # a lower confidence gives an interval nested inside the 95% one
    narrow = gap(baseline, candidate, confidence=0.5)
    assert result["ci_low"] <= narrow["ci_low"] <= narrow["ci_high"] <= result["ci_high"]
    assert narrow["ci_high"] - narrow["ci_low"] < result["ci_high"] - result["ci_low"]


def test_gap_ci_reproducible_with_seed():
    baseline, candidate = _paired_two_x()
    first = gap(baseline, candidate, seed=7)
    assert gap(list(baseline), list(candidate), seed=7) == first
    other = gap(baseline, candidate, seed=8)
    assert (other["ci_low"], other["ci_high"]) != (first["ci_low"], first["ci_high"])


def test_gap_a_a_identical_samples():
    samples = [1.0e-3, 1.1e-3, 0.9e-3, 1.3e-3, 1.0e-3, 0.95e-3]
    result = gap(samples, list(samples))
    # every resample divides a median by itself
    assert result["ratio_of_medians"] == result["median_of_round_ratios"] == 1.0
    assert result["ci_low"] == result["ci_high"] == 1.0


def test_gap_single_round_collapses_to_ratio():
    result = gap([2.0e-3], [3.0e-3])
    # 3 / 2 in every resample
    assert result["ratio_of_medians"] == result["median_of_round_ratios"] == 1.5
    assert result["ci_low"] == result["ci_high"] == 1.5
    assert result["rounds"] == 1


def test_gap_systematic_widens_each_side_in_quadrature():
    baseline, candidate = _paired_two_x()
    plain = gap(baseline, candidate)
    wide = gap(baseline, candidate, systematic=3e-4)
    assert plain["systematic"] == 0.0 and wide["systematic"] == 3e-4
    assert wide["ratio_of_medians"] == plain["ratio_of_medians"]
    r = plain["ratio_of_medians"]
    s = 1.959963984540054 * 3e-4 * r  # z of 95%
    assert r - wide["ci_low"] == pytest.approx(math.hypot(r - plain["ci_low"], s), rel=1e-9)
    assert wide["ci_high"] - r == pytest.approx(math.hypot(plain["ci_high"] - r, s), rel=1e-9)


def test_gap_systematic_opens_a_collapsed_interval_around_the_ratio():
    # identical samples: the bootstrap alone says [1, 1]; a run-fixed 0.03% says +-0.0588%
    samples = [1.0e-3, 1.1e-3, 0.9e-3, 1.3e-3, 1.0e-3, 0.95e-3]
    result = gap(samples, list(samples), systematic=3e-4)
    assert result["ci_low"] == pytest.approx(1 - 1.959963984540054 * 3e-4, rel=1e-12)
    assert result["ci_high"] == pytest.approx(1 + 1.959963984540054 * 3e-4, rel=1e-12)
    # a lower confidence adds less
    half = gap(samples, list(samples), systematic=3e-4, confidence=0.5)
    assert result["ci_low"] < half["ci_low"] < 1 < half["ci_high"] < result["ci_high"]


def test_systematic_adds_a_cold_launchs_placement_to_short_kernels_only():
    assert stats.systematic("hot", 1.3e-6) == stats.INSTANCE_SD  # hot: placement only
    short = stats.systematic("cold", 1.34e-6)  # axpy at 2^10, cold by CUPTI on the H200
    assert short == pytest.approx(math.hypot(stats.INSTANCE_SD, 5e-9 / 1.34e-6))
    # its 95% half-width covers the x1.0028 that run-fixed placement gave an A/A there
    assert 1.959963984540054 * short > 0.0028
    long = stats.systematic("cold", 95e-6)
    assert stats.INSTANCE_SD < long < 1.02 * stats.INSTANCE_SD  # a 95 us kernel: hardly any
    assert stats.systematic("cold", 1e-12) == statistics.MAX_SYSTEMATIC / 2  # capped, still valid
    assert stats.systematic("cold", 0.0) == stats.systematic("cold", None) == stats.INSTANCE_SD
    gap(
        list(np.full(10, 1e-12)), list(np.full(10, 1e-12)), systematic=statistics.MAX_SYSTEMATIC / 2
    )


def test_systematic_adds_the_per_call_term_of_graph_launched_rows():
    node = stats.TORCH_GRAPH_NODE_S
    hot = stats.systematic("hot", 1.2e-6, node)  # torch.add at 2^14 through runner.bench
    assert hot == pytest.approx(math.hypot(stats.INSTANCE_SD, node / 1.2e-6))
    assert 1.959963984540054 * hot > 0.0020  # covers the x0.9980 a fresh comparison read
    assert stats.systematic("hot", 48e-6, node) < 1.01 * stats.INSTANCE_SD  # 2^24: hardly any
    # cold: the graph-launched row's term joins the placement term in quadrature
    cold = stats.systematic("cold", 2.07e-6, stats.COLD_GRAPH_NODE_S)
    assert cold == pytest.approx(
        math.hypot(stats.INSTANCE_SD, 5e-9 / 2.07e-6, stats.COLD_GRAPH_NODE_S / 2.07e-6)
    )
    assert 1.959963984540054 * cold > 0.0098 + 0.0022  # x0.9902 [0.9886, 0.9930] at 2^18


def test_cold_gaps_of_a_short_kernel_get_the_placement_term_in_documents_and_the_stopping_rule():
    from runner import document as document_gaps
    from runner.measurement.timing import base, stopping

    samples = [1.3e-6, 1.31e-6, 1.29e-6, 1.3e-6] * 10
    for mode in ("hot", "cold"):
        timing = {"mode": mode, "stats": {"median_s": 1.3e-6}}
        block = document_gaps.gap_block(samples, samples, True, document_gaps.systematic_of(timing))
        assert block["systematic"] == stats.systematic(mode, 1.3e-6)
        timings = {n: base.ImplTiming(n, samples_s=list(samples)) for n in ("A", "B")}
        reached, worst = stopping.precision_reached(timings, "A", 0.002, mode)
        assert worst == pytest.approx(1.959963984540054 * block["systematic"], rel=1e-6)
        assert reached == (mode == "hot")  # cold: +-0.77% can never be +-0.2% here


def test_gap_rejections():
    with pytest.raises(ValueError, match="got 3 baseline and 2 candidate samples"):
        gap([1.0, 2.0, 3.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="baseline median is 0 s"):
        gap([0.0, 0.0, 1.0], [1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="baseline_s sample at index 1 is 0 s"):
        gap([1.0, 0.0, 1.0], [1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="baseline_s: no samples"):
        gap([], [])
    with pytest.raises(ValueError, match="candidate_s: sample at index 0 is nan"):
        gap([1.0], [float("nan")])
    with pytest.raises(ValueError, match="resamples must be a positive int"):
        gap([1.0], [1.0], resamples=0)
    with pytest.raises(ValueError, match=r"confidence must be a number in \(0, 1\)"):
        gap([1.0], [1.0], confidence=95)
    with pytest.raises(ValueError, match=r"systematic must be a fraction in \[0, 0.1\)"):
        gap([1.0], [1.0], systematic=-0.1)
    with pytest.raises(ValueError, match=r"systematic must be a fraction in \[0, 0.1\)"):
        gap([1.0], [1.0], systematic=0.6)  # z * 0.6 > 1: the interval would reach 0


def test_row_medians_odd_and_even():
    # rows sorted: [1, 2, 3] -> 2 and [4, 5, 9] -> 5; then [1, 2, 3, 4] -> 2.5 and [0, 0, 1, 7] -> 0.5
    odd = statistics._row_medians(np.array([[3.0, 1.0, 2.0], [9.0, 5.0, 4.0]]))
    even = statistics._row_medians(np.array([[4.0, 1.0, 3.0, 2.0], [7.0, 0.0, 1.0, 0.0]]))
    assert odd.tolist() == [2.0, 5.0]
    assert even.tolist() == [2.5, 0.5]


def test_gap_bootstrap_is_vectorised():
    rng = np.random.default_rng(0)
    baseline = 1e-3 * (1.0 + 0.01 * rng.random(200))
    candidate = 1.5e-3 * (1.0 + 0.01 * rng.random(200))
    gap(baseline, candidate)  # warm numpy up
    start_s = time.perf_counter()
    gap(baseline, candidate, resamples=10000)
    # well under 100 ms on a workstation; the loose bound only catches a per-resample loop
    assert time.perf_counter() - start_s < 0.5


def test_geometric_mean_hand_values():
    # sqrt(2 * 8) = 4
    assert geometric_mean([2.0, 8.0]) == pytest.approx(4.0, rel=1e-12)
    # cbrt(1 * 10 * 100) = 10
    assert geometric_mean((1.0, 10.0, 100.0)) == pytest.approx(10.0, rel=1e-12)
    # sqrt(0.5 * 2) = 1
    assert geometric_mean(np.array([0.5, 2.0])) == pytest.approx(1.0, rel=1e-12)
    assert geometric_mean([3.0]) == pytest.approx(3.0, rel=1e-12)


def test_geometric_mean_rejects_non_positive():
    with pytest.raises(ValueError, match=r"index 1 is 0.0; expected a positive number"):
        geometric_mean([1.0, 0.0])
    with pytest.raises(ValueError, match=r"index 0 is -2.0; times cannot be negative"):
        geometric_mean([-2.0, 1.0])
    with pytest.raises(ValueError, match="no samples"):
        geometric_mean([])


def test_middle_is_numpys_median_to_the_last_bit():
    """statistics.middle (the analyses' quick median) gives np.median's float bit for bit:
    odd and even sizes, ties, lists and arrays, signed zeros, a NaN, an empty input."""
    import warnings

    rng = np.random.default_rng(7)
    for k in range(6000):
        n = 0 if k % 500 == 0 else int(rng.integers(1, 90))
        values = rng.standard_normal(n) * 10.0 ** float(rng.integers(-8, 8))
        if k % 3 == 0:
            values = np.round(values, 1)  # ties, and -0.0 beside 0.0
        if k % 97 == 1:
            values[int(rng.integers(0, n))] = np.nan
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # numpy's warning for an empty input
            expected = np.float64(np.median(values)).tobytes()
            found = statistics.middle(values if k % 2 else values.tolist())
        assert np.float64(found).tobytes() == expected
