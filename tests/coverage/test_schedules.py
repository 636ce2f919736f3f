"""A/A coverage of the gap's interval, simulated on the CPU: the same implementation against
itself, sampled in each schedule's real order (timing.sample_plan) under independent noise,
a linear drift, and AR(0.8) noise, for 2 to 9 sides. A 95% interval must contain 1.0 in at
least 93% of the simulated runs. The intervals come from statistics.bootstrap_rows, the code
statistics.gap runs, vectorised over the simulated runs.
"""

from __future__ import annotations

import numpy as np
import pytest

from protocol import autocorrelation, statistics
from runner.measurement.timing import SCHEDULES, TimingSettings, sample_plan

ROUNDS = 30  # TimingSettings' default samples
RESAMPLES = 250
GAPS = 500  # simulated A/A gaps per (schedule, sides, noise)
SIGMA = 0.01  # 1% log-normal noise a sample
MODELS = ("independent", "drift", "ar0.8_device", "ar0.8_side")


def sample_places(sides: int, schedule: str) -> np.ndarray:
    """(sides, ROUNDS): the place in the sequence of samples of each side's r-th sample."""
    names = list(range(sides))
    places = np.zeros((sides, ROUNDS), dtype=np.int64)
    taken = [0] * sides
    t = 0
    for block in sample_plan(names, TimingSettings(samples=ROUNDS, schedule=schedule)):
        for name, count in block:
            for _ in range(count):
                places[name, taken[name]] = t
                taken[name] += 1
                t += 1
    assert taken == [ROUNDS] * sides
    return places


def ar1(rng, shape, rho: float) -> np.ndarray:
    """Stationary AR(1) series along the last axis, innovations of SD SIGMA."""
    e = rng.normal(0.0, SIGMA, shape)
    x = np.empty(shape)
    x[..., 0] = e[..., 0] / np.sqrt(1 - rho**2)
    for t in range(1, shape[-1]):
        x[..., t] = rho * x[..., t - 1] + e[..., t]
    return x


def log_times(model: str, runs: int, sides: int, places: np.ndarray, rng) -> np.ndarray:
    """(runs, sides, ROUNDS) log sample times of one implementation on every side."""
    length = sides * ROUNDS
    if model == "independent":
        sequence = rng.normal(0.0, SIGMA, (runs, length))
    elif model == "drift":  # up to +-10 SIGMA over the run, plus the noise
        slope = rng.uniform(-1, 1, (runs, 1)) * 10 * SIGMA
        sequence = rng.normal(0.0, SIGMA, (runs, length)) + slope * np.linspace(0, 1, length)
    elif model == "ar0.8_device":  # one slow state of the device that every launch feels
        sequence = ar1(rng, (runs, length), 0.8)
    elif model == "ar0.8_side":  # a slow state of each side's own (its buffers, its module)
        return ar1(rng, (runs, sides, ROUNDS), 0.8)
    else:
        raise ValueError(model)
    return sequence[:, places]


def coverage(schedule: str, sides: int, model: str, seed: int, plain: bool = False) -> float:
    """Fraction of simulated A/A gaps (every side against side 0) whose 95% interval holds
    1.0; `plain`: the single-round bootstrap alone, as before autocorrelation was tested."""
    rng = np.random.default_rng(seed)
    runs = -(-GAPS // (sides - 1))
    times = np.exp(log_times(model, runs, sides, sample_places(sides, schedule), rng))
    baseline = np.repeat(times[:, :1], sides - 1, axis=1).reshape(-1, ROUNDS)
    candidate = times[:, 1:].reshape(-1, ROUNDS)
    if plain:
        idx = rng.integers(0, ROUNDS, size=(baseline.shape[0], RESAMPLES, ROUNDS))
        lo, hi = statistics._percentile_interval(baseline, candidate, idx, 0.95)
    else:
        rows = statistics.bootstrap_rows(baseline, candidate, RESAMPLES, 0.95, rng)
        lo, hi = rows["ci_low"], rows["ci_high"]
    return float(np.mean((lo <= 1.0) & (hi >= 1.0)))


@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("model", MODELS)
def test_aa_intervals_cover_one_for_every_schedule_and_2_to_9_sides(schedule, model):
    found = {
        sides: coverage(schedule, sides, model, seed=sides * 101 + MODELS.index(model))
        for sides in range(2, 10)
    }
    assert min(found.values()) >= 0.93, found


def test_the_plain_bootstrap_undercovers_autocorrelated_rounds():
    """What the autocorrelation test is for: with each side's own AR(0.8) state the
    single-round bootstrap covers far less than 95% (the issue measured 0.57); the gap's
    interval, in blocks and widened, does not."""
    plain = coverage("rounds", 2, "ar0.8_side", seed=7, plain=True)
    assert plain < 0.75, plain
    assert coverage("rounds", 2, "ar0.8_side", seed=7) >= 0.93


def test_independent_rounds_keep_the_single_round_bootstrap():
    """Few false alarms: independent rounds are flagged about 6% of the time (a one-sided 10%
    test of a correlation whose estimate leans negative), strongly correlated ones nearly
    always."""
    rng = np.random.default_rng(3)
    x = rng.normal(0, SIGMA, (4000, ROUNDS))
    flagged = autocorrelation.dependent(autocorrelation.lag1_autocorrelation(x), ROUNDS)
    assert 0.03 < flagged.mean() < 0.1
    correlated = autocorrelation.dependent(
        autocorrelation.lag1_autocorrelation(ar1(rng, (4000, ROUNDS), 0.8)), ROUNDS
    )
    assert correlated.mean() > 0.9


def test_gap_records_which_bootstrap_it_used():
    rng = np.random.default_rng(11)
    baseline = np.exp(rng.normal(0, SIGMA, 60)) * 1e-3
    independent = statistics.gap(baseline, np.exp(rng.normal(0, SIGMA, 60)) * 1e-3, resamples=2000)
    assert independent["bootstrap"] == "rounds" and "block_rounds" not in independent
    assert -1 <= independent["lag1_autocorrelation"] < 0.3
    slow = np.exp(ar1(rng, (60,), 0.9)) * 1e-3
    blocked = statistics.gap(baseline, slow, resamples=2000)
    assert blocked["bootstrap"] == "circular_blocks" and blocked["block_rounds"] >= 2
    plain_idx = np.random.default_rng(0).integers(0, 60, size=(1, 2000, 60))
    lo, hi = statistics._percentile_interval(baseline[None], slow[None], plain_idx, 0.95)
    assert blocked["ci_high"] - blocked["ci_low"] > 1.5 * float(hi[0] - lo[0])
    too_few = statistics.gap(baseline[:8], slow[:8], resamples=200)  # under MIN_ROUNDS: no test
    assert too_few["bootstrap"] == "rounds"


@pytest.mark.parametrize("df", [2, 2.5, 3, 5, 10, 30, 100])
@pytest.mark.parametrize("p", [0.9, 0.975, 0.995])
def test_student_t_quantile_matches_scipy(df, p):
    scipy_stats = pytest.importorskip("scipy.stats")
    exact = float(scipy_stats.t.ppf(p, df))
    tolerance = 0.045 if p == 0.995 and df < 3 else 0.01
    assert autocorrelation.student_t_quantile(p, df) == pytest.approx(exact, rel=tolerance)


def test_block_length_and_widening_grow_with_the_correlation():
    n = 30
    blocks = autocorrelation.block_rounds(n, np.array([0.1, 0.5, 0.8, 0.95]))
    assert list(blocks) == sorted(blocks) and blocks[0] == 2 and blocks[-1] == n // 2
    assert autocorrelation.widening(n, 0.0, 0.95) == 1.0
    assert 2.5 < autocorrelation.widening(n, 0.8, 0.95) < 6
    assert autocorrelation.corrected_rho(np.array([0.65]), n)[0] == pytest.approx(0.850, abs=1e-3)
    with pytest.raises(ValueError, match="df >= 2"):
        autocorrelation.student_t_quantile(0.975, 1)
