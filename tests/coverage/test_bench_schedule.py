"""The Python API's schedule keeps statistics.gap's pairing true: an A/A comparison's 95% interval
covers 1.0 about 95% of the time under drift and correlated noise (simulated on the CPU)."""

from __future__ import annotations

import numpy as np
import pytest

from protocol import statistics
from runner.bench.options import SCHEDULE
from runner.measurement import timing
from tests.support.fake_device import FakeBackend

TRIALS = 200
ROUNDS = 30


class DriftingBackend(FakeBackend):
    """FakeBackend whose noise is correlated in time: an AR(1) factor over the sequence of timed
    calls (`rho` from one call to the next), on top of FakeBackend's linear drift and white
    noise. A slow wander like a clock or a temperature that both sides of a round share."""

    def __init__(self, per_launch_s, rho: float, wander: float, **kwargs):
        super().__init__(per_launch_s, overhead_s=0.0, **kwargs)
        self.rho, self.wander, self.state = rho, wander, 0.0

    def _factor(self) -> float:
        innovation = float(self.rng.standard_normal()) * self.wander * np.sqrt(1 - self.rho**2)
        self.state = self.rho * self.state + innovation
        return super()._factor() * (1 + self.state)


def coverage(schedule: str, *, drift: float, rho: float, wander: float) -> float:
    """The fraction of TRIALS A/A measurements whose 95% gap interval holds 1.0."""
    settings = timing.TimingSettings(
        mode="hot",
        warmup=0,
        samples=ROUNDS,
        target_sample_s=1e-3,
        graph_launches=100,
        max_batch=100,
        schedule=schedule,
    )
    covered = 0
    for trial in range(TRIALS):
        backend = DriftingBackend(
            {"A": 1e-5, "B": 1e-5},
            rho=rho,
            wander=wander,
            noise=0.002,
            seed=trial,
            drift_per_call=drift,
        )
        m = timing.measure(backend, ["A", "B"], settings)
        g = statistics.gap(
            m.impls["A"].samples_s, m.impls["B"].samples_s, resamples=1000, seed=trial
        )
        covered += g["ci_low"] <= 1.0 <= g["ci_high"]
    return covered / TRIALS


@pytest.mark.parametrize(
    ("drift", "rho", "wander"),
    [
        (2e-4, 0.0, 0.0),  # a slow linear drift: 1.2% over the measurement
        (0.0, 0.98, 0.01),  # noise correlated over about 50 samples
        (1e-4, 0.95, 0.005),  # both
    ],
)
def test_the_api_schedule_covers_an_a_a_gap_at_its_confidence(drift, rho, wander):
    assert SCHEDULE == "rounds"
    assert coverage(SCHEDULE, drift=drift, rho=rho, wander=wander) >= 0.93


def test_two_passes_break_the_pairing_the_interval_assumes():
    """The schedule the API used before (A..A B..B | B..B A..A) under the same correlated noise:
    sample r of each side is not one round, and the interval misses far more often than with
    rounds (statistics.gap's autocorrelation widening recovers some of it, not the pairing)."""
    passes = coverage("passes", drift=0.0, rho=0.98, wander=0.01)
    rounds = coverage("rounds", drift=0.0, rho=0.98, wander=0.01)
    assert passes < 0.93 <= rounds and rounds - passes >= 0.05, (passes, rounds)


def test_rows_of_about_one_speed_share_the_smallest_batch_and_slower_ones_keep_theirs():
    from runner.measurement.timing.hot import shared_batches

    # an A/A calibrated to 300 and 200 calls from noisy first batches: one batch for both
    assert shared_batches({"A": 300, "A again": 200}) == {"A": 200, "A again": 200}
    # 2x the work shares too (its samples last twice as long); 50x slower keeps its own
    assert shared_batches({"op": 1000, "twice": 500, "fp64": 20, "fp64 again": 30}) == {
        "op": 500,
        "twice": 500,
        "fp64": 20,
        "fp64 again": 20,
    }
    assert shared_batches({"only": 7}) == {"only": 7}
