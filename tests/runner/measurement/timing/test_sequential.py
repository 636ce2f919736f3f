"""runner bench's sequential rule on the CPU (runner.measurement.timing.stopping): a case whose
gaps are already precise stops after its first rounds, a noisy one takes every round, the
rounds keep the balanced order, and the suite asks for it by default (not with --precision)."""

from __future__ import annotations

import pytest

from runner.definition import manifest
from runner.execution import sweep_run as point_timing
from runner.execution.suite import FIRST_SAMPLES, BenchOptions, timing_settings
from runner.measurement.timing import TimingSettings, base, measure, stopping
from tests.runner.measurement.timing.test_strategies import measured_with_control
from tests.support.fake_device import FakeBackend

CASES = "benchmarks/cases.toml"


def sequential(noise: float, seed: int = 1):
    backend = FakeBackend({"base": 1e-4, "cand": 1.3e-4}, noise=noise, seed=seed, overhead_s=0)
    settings = TimingSettings(samples=30, first_samples=FIRST_SAMPLES)
    return measure(backend, ["base", "cand"], settings, baseline="base")


def test_precise_gaps_stop_after_the_first_rounds():
    m = sequential(0.0005)
    s = m.sequential
    assert s["stopped_by"] == "target" and s["samples"] == FIRST_SAMPLES == 24, s
    assert s["half_width"] <= stopping.SEQUENTIAL_TARGET == s["target"]
    assert len(m.impls["cand"].samples_s) == 24 and m.precision is None
    assert m.orders == [base.round_order(["base", "cand"], r) for r in range(24)]


def test_noisy_gaps_take_every_round_in_the_balanced_order():
    m = sequential(0.05)
    s = m.sequential
    assert s["stopped_by"] == "samples" and s["samples"] == 30 and s["half_width"] > 0.0025, s
    assert m.orders == [base.round_order(["base", "cand"], r) for r in range(30)]


def test_a_control_term_above_the_target_stops_at_the_floor():
    """Loads 0.2% apart: the rounds' part of every interval is precise, but the control's term
    alone puts every interval above +-0.25%, which no round narrows: the rule goes on until
    every load has MIN_PER_LOAD samples (16 rounds leave it pending), then stops at the floor
    and says where its term came from."""
    offsets = [0.0, 0.002, -0.002, 0.003, -0.003, 0.0, 0.001, -0.001]
    m = measured_with_control(TimingSettings(samples=30, first_samples=16), offsets)
    s = m.sequential
    assert s["stopped_by"] == "floor" and s["systematic_source"] == "control", s
    assert len(m.impls["a~aa"].loads) == s["samples"] == 24 and s["half_width"] > 0.0025


@pytest.mark.parametrize(
    ("kwargs", "first"),
    [({}, FIRST_SAMPLES), ({"min_samples": 20}, 20), ({"min_samples": 30}, None)],
)
def test_runner_bench_asks_for_the_rule_by_default(kwargs, first):
    case = manifest.load(CASES).cases[0]
    settings, _ = timing_settings(case, BenchOptions(**kwargs), None)
    assert settings.get("first_samples") == first and settings["samples"] == 30
    with_precision, _ = timing_settings(case, BenchOptions(precision=0.005, **kwargs), None)
    assert "first_samples" not in with_precision


@pytest.mark.parametrize(
    "kwargs", [{"first_samples": 1}, {"first_samples": 40}, {"sequential_target": 0.0}]
)
def test_sequential_settings_are_checked(kwargs):
    with pytest.raises(ValueError, match=r"TimingSettings\.(first_samples|sequential_target)"):
        TimingSettings(samples=30, **kwargs)
    with pytest.raises(ValueError, match="schedule 'rounds'"):
        TimingSettings(samples=30, first_samples=16, schedule="passes")


@pytest.mark.parametrize("kwargs", [{}, {"min_samples": 20}, {"samples": 12}])
def test_a_sweep_points_settings_take_the_precision_rule_not_the_sequential_one(kwargs):
    """A non-headline point takes POINT_ROUNDS rounds and the precision rule
    (runner.execution.sweep_run); the sequential rule's first rounds (16 by default) must
    not outlive it: on the H200 every point failed constructing its TimingSettings."""
    case = manifest.load(CASES).cases[0]
    options = BenchOptions(**kwargs)
    settings, _ = timing_settings(case, options, None)
    point = point_timing.settings_for_point(settings, options)
    made = TimingSettings(**point)
    assert made.precision == point_timing.POINT_PRECISION and made.first_samples is None
    assert made.samples <= settings["samples"]
