"""The timing strategies (hot, cold) driven by a fake device: calibration, ordering, drift."""

from __future__ import annotations

import itertools
import math
import statistics

import pytest
from fake_device import FakeBackend

from runner.measurement import stats
from runner.measurement.timing import MODES, ColdMode, HotMode, TimingSettings, base, cold, measure
from runner.measurement.timing.base import load_order, quantize_batch, round_order
from runner.measurement.timing.hot import calibrate

TIMED = ("timed_batch", "timed_cold")


def timed_names(calls: list[tuple]) -> list[str]:
    return [c[1] for c in calls if c[0] in TIMED]


def batch_of(per_launch_s: float, settings: TimingSettings, overhead_s: float = 5e-6) -> int:
    backend = FakeBackend({"k": per_launch_s}, overhead_s=overhead_s)
    return calibrate(lambda b: backend.timed_batch("k", b), settings)


# --- calibration ---------------------------------------------------------------------------


@pytest.mark.parametrize("per_launch_s", [1e-6, 3e-6, 1e-5, 1e-4, 1e-3, 7e-3, 2e-2])
@pytest.mark.parametrize("target_s", [0.05, 0.01])
def test_calibration_reaches_the_target_sample_time(per_launch_s, target_s):
    settings = TimingSettings(target_sample_s=target_s)
    batch = batch_of(per_launch_s, settings)
    if per_launch_s > 1.5 * target_s:  # one launch already overshoots: the smallest batch
        assert batch == 1
        return
    assert 0.5 * target_s <= batch * per_launch_s <= 1.5 * target_s, batch
    if batch > settings.graph_launches:
        assert batch % settings.graph_launches == 0


def test_a_kernel_longer_than_the_target_runs_once_per_sample():
    assert batch_of(0.2, TimingSettings()) == 1
    assert batch_of(0.08, TimingSettings()) == 1  # 1.6 x target: one launch is the closest


def test_calibration_stops_at_max_batch():
    settings = TimingSettings(max_batch=20_000, graph_launches=1000)
    assert batch_of(1e-8, settings) == 20_000
    assert batch_of(1e-8, TimingSettings()) == TimingSettings().max_batch


def test_max_batch_holds_when_not_a_multiple_of_graph_launches():
    assert batch_of(1e-8, TimingSettings(max_batch=1500, graph_launches=1000)) <= 1500


def test_quantize_batch():
    assert quantize_batch(999, 1000) == 999
    assert quantize_batch(1000, 1000) == 1000
    assert quantize_batch(1001, 1000) == 2000
    assert quantize_batch(7, 1) == 7


# --- hot mode ------------------------------------------------------------------------------


def run_hot(per_launch_s: dict, **settings) -> tuple[FakeBackend, object]:
    backend = FakeBackend(per_launch_s)
    return backend, HotMode().measure(backend, list(per_launch_s), TimingSettings(**settings))


def test_hot_samples_are_per_launch_times():
    per = {"A": 2e-6, "B": 4e-4}
    backend, m = run_hot(per, samples=12)
    assert m.mode == "hot" and set(m.impls) == {"A", "B"}
    for name, t in m.impls.items():
        assert len(t.samples_s) == 12
        assert t.batch >= 1 and t.method == HotMode.method and t.calibration_s >= 0
        # elapsed / batch, with the fake's fixed replay overhead spread over the batch
        expected = (backend.overhead_s + t.batch * per[name]) / t.batch
        assert t.samples_s == pytest.approx([expected] * 12, rel=1e-12)
        assert t.samples_s[0] == pytest.approx(per[name], rel=0.01)
    sample_calls = [c for c in backend.calls if c[0] == "timed_batch"][-24:]
    assert all(c[2] == m.impls[c[1]].batch for c in sample_calls)


def test_hot_warmup_comes_first_and_uses_the_setting():
    backend, _ = run_hot({"A": 1e-5, "B": 2e-5, "C": 3e-5}, warmup=7, samples=4)
    warmups = [c for c in backend.calls if c[0] == "warmup"]
    assert warmups == [("warmup", n, 7) for n in "ABC"]
    first_timed = min(i for i, c in enumerate(backend.calls) if c[0] in TIMED)
    last_warmup = max(i for i, c in enumerate(backend.calls) if c[0] == "warmup")
    assert last_warmup < first_timed


@pytest.mark.parametrize(
    ("names", "rounds"),
    [("AB", ["AB", "BA", "BA", "AB", "BA"]), ("ABC", ["ABC", "CBA", "CBA", "ABC"])],
)
def test_hot_rounds_run_forward_and_reverse_in_thue_morse_order(names, rounds):
    backend, m = run_hot({n: 1e-4 for n in names}, samples=len(rounds))
    assert m.orders == [list(r) for r in rounds]
    sample_calls = timed_names(backend.calls)[-len(names) * len(rounds) :]
    assert "".join(sample_calls) == "".join(rounds)
    for t in m.impls.values():
        assert len(t.samples_s) == len(rounds)


def test_round_order():
    assert round_order(["A", "B", "C"], 0) == ["A", "B", "C"]
    assert round_order(["A", "B", "C"], 1) == ["C", "B", "A"]
    assert round_order(["A"], 5) == ["A"]
    # Thue-Morse: 0 1 1 0 1 0 0 1; every pair of rounds (2s, 2s + 1) runs both orders
    firsts = "".join(round_order(["A", "B"], r)[0] for r in range(16))
    assert firsts == "ABBABAABBAABABBA"
    assert all(firsts[i] != firsts[i + 1] for i in range(0, 16, 2))


def test_cold_loads_are_made_in_the_rounds_order():
    order = load_order(["A", "B"], 4)
    assert order == ["A", "B", "B", "A", "B", "A", "A", "B"]
    three = load_order(["A", "B", "C"], 32)
    assert [three.count(n) for n in "ABC"] == [32, 32, 32]
    assert three[:6] == ["A", "B", "C", "C", "B", "A"]


@pytest.mark.parametrize("period", [2, 4, 8, 16])
def test_every_side_starts_its_samples_at_every_place_of_a_period_alike(period):
    """Two sides, one launch a sample: over 32 rounds (64 launches), each side's samples fall
    on every place of a period of 2 to 16 launches equally often (A B B A repeated puts A's
    on places 0 and 3 of 4 only, and B's on 1 and 2)."""
    places = {"A": [], "B": []}
    for r in range(32):
        for slot, name in enumerate(round_order(["A", "B"], r)):
            places[name].append((2 * r + slot) % period)
    for name in places:
        assert sorted(places[name]) == sorted(list(range(period)) * (32 // period)), name
    repeated = [(2 * r + ["A", "B"][:: 1 if r % 2 == 0 else -1].index("A")) % 4 for r in range(32)]
    assert set(repeated) == {0, 3}


def test_hot_resets_before_every_timed_call():
    backend, _ = run_hot({"A": 1e-5, "B": 1e-3}, samples=6)
    calls = backend.calls
    samples_start = len(calls) - 2 * 6 * 2  # each sample is one reset and one timed call
    for i, c in enumerate(calls):
        if c[0] != "timed_batch":
            continue
        # the latest reset before this call is of the same implementation, with nothing of
        # another implementation in between
        j = max(k for k in range(i) if calls[k][0] == "reset")
        assert calls[j] == ("reset", c[1])
        assert all(x[1] == c[1] for x in calls[j:i])
        if i >= samples_start:
            assert calls[i - 1] == ("reset", c[1])


# --- cold mode -----------------------------------------------------------------------------


def test_cold_sample_is_reset_flush_launch():
    backend = FakeBackend({"A": 1e-4, "B": 3e-4}, cold_factor=1.5)
    m = ColdMode().measure(backend, ["A", "B"], TimingSettings(mode="cold", samples=5, warmup=3))
    assert m.mode == "cold" and m.warmup == 3
    assert not [c for c in backend.calls if c[0] == "timed_batch"]
    assert [c for c in backend.calls if c[0] == "warmup"] == [
        ("warmup", "A", 3),
        ("warmup", "B", 3),
    ]
    timed = [i for i, c in enumerate(backend.calls) if c[0] == "timed_cold"]
    batch = 1  # 150 us and more: one launch per sample
    # the probes that choose the batch, then the samples
    assert len(timed) == 2 * cold.PROBES + 10 * batch
    for i in timed:
        name = backend.calls[i][1]
        assert backend.calls[i - 2 : i] == [("reset", name), ("flush",)]
    rounds = "".join(n * batch for n in "ABBABAABBA")  # Thue-Morse rounds
    assert "".join(timed_names(backend.calls)) == "AAABBB" + rounds
    for name, t in m.impls.items():
        assert t.batch == batch and len(t.samples_s) == 5 and t.method == ColdMode.method
        assert t.samples_s == pytest.approx([backend.per_launch_s[name] * 1.5] * 5)


@pytest.mark.parametrize(
    ("launch_s", "launches"),
    [
        (1e-6, 24),
        (1.3e-6, 16),
        (2.5e-6, 8),
        (0.5e-6, 32),
        (1e-7, 32),
        (7e-6, 8),
        (1.5e-5, 8),
        (2e-5, 1),
        (1e-3, 1),
    ],
)
def test_cold_launches_per_sample(launch_s, launches):
    # 20 us of kernel time in whole multiples of COLD_PHASE launches, at most 32; from 20 us one
    assert cold.launches_for(launch_s) == launches
    assert launches == 1 or launches % cold.COLD_PHASE == 0
    assert cold.launches_for(0.0) == cold.MAX_COLD_LAUNCHES  # nothing measured: the most


def test_a_cold_sample_is_the_mean_of_its_launches_for_the_fastest_implementation():
    # A 1.5 us cold launch needs 14 launches per sample, 16 in whole periods of the launch
    # sequence; B, slower, gets the same batch
    backend = FakeBackend({"A": 1e-6, "B": 4e-5}, noise=0.05, seed=1)
    m = measure(backend, ["A", "B"], TimingSettings(mode="cold", samples=4, warmup=0))
    assert {t.batch for t in m.impls.values()} == {16}
    timed = timed_names(backend.calls)[2 * cold.PROBES :]
    assert timed == ["A"] * 16 + ["B"] * 32 + ["A"] * 16 + ["B"] * 16 + ["A"] * 32 + ["B"] * 16
    assert m.impls["A"].samples_s == pytest.approx([1.5e-6] * 4, rel=0.05)  # 5% / sqrt(16)
    fixed = measure(
        FakeBackend({"A": 1e-6}), ["A"], TimingSettings(mode="cold", samples=2, cold_launches=3)
    )
    assert fixed.impls["A"].batch == 3


def test_every_cold_launch_gets_the_next_poison_and_every_tenth_launch_is_verified():
    backend = FakeBackend({"A": 1e-6, "B": 1e-6})
    patterns, verified = [], []
    backend.poison_outputs = patterns.append

    def verify(name):  # how many launches of `name` ran when it was verified
        verified.append((name, backend.calls.count(("timed_cold", name))))
        return "stale"

    backend.verify_outputs = verify
    m = measure(backend, ["A", "B"], TimingSettings(mode="cold", samples=6, warmup=0))
    assert {t.batch for t in m.impls.values()} == {16}  # 1.5 us a launch
    # probes included, no launch of either implementation gets the pattern the one before got
    assert len(patterns) == 2 * cold.PROBES + 2 * 6 * 16
    assert all(a != b for a, b in itertools.pairwise(patterns))
    # each implementation's timed launches 0, 10, 20, ... are verified right after they ran
    first = cold.PROBES  # its probes ran before
    assert [n for name, n in verified if name == "A"] == [first + i + 1 for i in range(0, 96, 10)]
    assert m.impls["A"].problems[:2] == [
        "cold sample 0 (launch 0): stale",
        "cold sample 0 (launch 10): stale",
    ]


def test_a_backend_that_reads_its_launches_afterwards_gets_a_sample_at_a_time():
    """cold_batch: the sample's launches run inside it, each with its poison and verification,
    and the sample is the mean of the seconds it returns, not of what timed_cold said."""
    backend = FakeBackend({"A": 1e-6, "B": 1e-6})
    batches, patterns = [], []
    backend.poison_outputs = patterns.append

    def cold_batch(name, batch, launches):
        before = backend.calls.count(("timed_cold", name))
        launches()
        assert backend.calls.count(("timed_cold", name)) == before + batch
        batches.append((name, batch))
        return [2e-6 * (i + 1) for i in range(batch)]  # 2, 4, ... us: the mean is (batch+1) us

    backend.cold_batch = cold_batch
    m = measure(backend, ["A", "B"], TimingSettings(mode="cold", samples=4, warmup=0))
    # one call a sample, in the rounds' order (the probes are single launches, not batched)
    assert [n for n, _ in batches] == ["A", "B", "B", "A", "B", "A", "A", "B"]
    assert {b for _, b in batches} == {16}
    assert m.impls["A"].samples_s == pytest.approx([17e-6] * 4)
    assert len(patterns) == 2 * cold.PROBES + 2 * 4 * 16


class Phased(FakeBackend):
    """A cold launch 8% slower on some places of the launch sequence: `slow(i)` of the i-th."""

    def __init__(self, per_launch_s, slow):
        super().__init__(per_launch_s)
        self.slow, self.launched = slow, 0

    def timed_cold(self, name):
        slow = self.slow(self.launched)
        self.launched += 1
        return super().timed_cold(name) * (1.08 if slow else 1.0)


def phased_aa(slow, launches, monkeypatch=None) -> tuple[float, int]:
    """The same kernel against itself, cold, 64 rounds: ratio of the sides' mean samples; with
    `monkeypatch`, in rounds A B / B A repeated instead of the Thue-Morse order."""
    if monkeypatch is not None:
        repeated = lambda names, r: list(names) if r % 2 == 0 else list(reversed(names))  # noqa: E731
        monkeypatch.setattr(base, "round_order", repeated)
    backend = Phased({"A": 1.3e-6, "A2": 1.3e-6}, slow)
    settings = TimingSettings(mode="cold", samples=64, warmup=0, cold_launches=launches)
    m = measure(backend, ["A", "A2"], settings)
    means = {n: statistics.fmean(m.impls[n].samples_s) for n in ("A", "A2")}
    return means["A2"] / means["A"], m.impls["A"].batch


@pytest.mark.parametrize(
    ("slow", "launches"),
    [
        (lambda i: i % 4 == 3, 17),  # every 4th launch, an odd batch
        (lambda i: (i // 16) % 4 == 1, 16),  # 16 launches in every 64, a batch of 16
    ],
)
def test_a_cold_launchs_place_in_the_launch_sequence_cannot_bias_a_gap(slow, launches, monkeypatch):
    """On the H200 a cold launch's time depends on its place in the process's sequence of cold
    launches (cold.py: -4% to +4% repeating every 4 launches, and slower patterns). Rounds
    A B / B A repeated start one side's samples on other places than the other's, and the same
    kernel reads apart; in the Thue-Morse order both sides' samples start on every place
    alike, whatever the batch."""
    assert phased_aa(slow, launches) == (pytest.approx(1.0, abs=1e-12), launches)
    biased, _ = phased_aa(slow, launches, monkeypatch)
    assert abs(biased - 1) > 0.001, biased


def test_the_cold_batch_is_whole_periods_of_the_launch_sequence():
    """launches_for's batch is a multiple of COLD_PHASE: each sample averages whole periods of
    a short pattern, so its samples do not differ by where they started either."""
    ratio, batch = phased_aa(lambda i: i % 4 == 3, None)
    assert batch % cold.COLD_PHASE == 0 and batch == cold.launches_for(1.95e-6) == 16
    assert ratio == pytest.approx(1.0, abs=1e-12)
    backend = Phased({"A": 1.3e-6}, lambda i: i % 4 == 3)
    m = measure(backend, ["A"], TimingSettings(mode="cold", samples=8, warmup=0))
    assert len(set(m.impls["A"].samples_s)) == 1  # every sample alike


def test_single_cold_launches_in_ticks_cannot_see_a_one_percent_gap_and_batches_can():
    """The defect batches fix: +-6% launch to launch, read in 32 ns ticks (a 1.3 us kernel,
    as CUPTI reads it on the H200). Medians of single launches sit on a tick: a candidate 1%
    slower reads 1.0. Medians of 16-launch means see the 1% (their grid is 2 ns)."""

    class Ticks(FakeBackend):
        def timed_cold(self, name):
            return round(super().timed_cold(name) / 32e-9) * 32e-9

    def gap(launches):
        backend = Ticks({"A": 0.87e-6, "B": 0.87e-6 * 1.01}, noise=0.06, seed=1)
        settings = TimingSettings(mode="cold", samples=500, warmup=0, cold_launches=launches)
        m = measure(backend, ["A", "B"], settings)
        return stats.gap(m.impls["A"].samples_s, m.impls["B"].samples_s, resamples=2000)

    single, batched = gap(1), gap(16)
    assert single["ratio_of_medians"] == pytest.approx(1.0)
    assert batched["ratio_of_medians"] == pytest.approx(1.01, abs=0.003)
    assert batched["ci_low"] <= 1.01 <= batched["ci_high"]


# --- drift and gaps ------------------------------------------------------------------------


def drifting_gap(candidate_factor: float, mode: str, drift: float = 0.01) -> dict:
    backend = FakeBackend(
        {"base": 1e-4, "cand": 1e-4 * candidate_factor}, drift_per_call=drift, overhead_s=0.0
    )
    m = measure(backend, ["base", "cand"], TimingSettings(mode=mode, samples=30))
    return stats.gap(m.impls["base"].samples_s, m.impls["cand"].samples_s)


@pytest.mark.parametrize("mode", ["hot", "cold"])
def test_linear_drift_cancels_in_paired_rounds(mode):
    g = drifting_gap(1.0, mode)
    assert g["ratio_of_medians"] == pytest.approx(1.0, rel=0.005)
    assert g["ci_low"] <= 1.0 <= g["ci_high"]


def test_drift_would_bias_a_fixed_order(monkeypatch):
    # The same drift with A B every round: the later side looks ~1 % slower per call of lag.
    monkeypatch.setattr(base, "round_order", lambda names, r: list(names))
    g = drifting_gap(1.0, "hot")
    assert g["ratio_of_medians"] > 1.005


@pytest.mark.parametrize("mode", ["hot", "cold"])
def test_a_twice_slower_candidate_has_gap_two(mode):
    g = drifting_gap(2.0, mode, drift=0.002)
    assert g["ratio_of_medians"] == pytest.approx(2.0, rel=0.01)
    assert g["ci_low"] <= 2.0 <= g["ci_high"] and g["ci_high"] - g["ci_low"] < 0.1


def test_noisy_candidate_gap():
    backend = FakeBackend({"base": 1e-5, "cand": 2e-5}, noise=0.01, seed=3)
    m = measure(backend, ["base", "cand"], TimingSettings(samples=40))
    g = stats.gap(m.impls["base"].samples_s, m.impls["cand"].samples_s)
    assert g["ratio_of_medians"] == pytest.approx(2.0, rel=0.02)
    assert g["ci_low"] < g["ratio_of_medians"] < g["ci_high"]
    assert stats.summarize(m.impls["cand"].samples_s)["stable"]


# --- settings and dispatch -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "label"),
    [
        ({"mode": "warm"}, "TimingSettings.mode"),
        ({"samples": 0}, "samples >= 1"),
        ({"warmup": -1}, "warmup >= 0"),
        ({"target_sample_s": 0.0}, "TimingSettings.target_sample_s"),
        ({"target_sample_s": -1.0}, "TimingSettings.target_sample_s"),
        ({"target_sample_s": math.nan}, "TimingSettings.target_sample_s"),
        ({"cold_launches": 0}, "cold_launches must be None or an integer"),
        ({"cold_launches": 2.0}, "cold_launches must be None or an integer"),
    ],
)
def test_settings_reject_bad_values(kwargs, label):
    with pytest.raises(ValueError, match=label):
        TimingSettings(**kwargs)


def test_settings_defaults_follow_the_design():
    s = TimingSettings()
    assert (s.mode, s.warmup, s.samples, s.target_sample_s) == ("hot", 10, 30, 0.050)


def test_measure_dispatches_by_mode():
    assert {"hot": HotMode, "cold": ColdMode} == MODES
    for mode, timed in (("hot", "timed_batch"), ("cold", "timed_cold")):
        backend = FakeBackend({"A": 1e-4})
        m = measure(backend, ["A"], TimingSettings(mode=mode, samples=3))
        assert m.mode == mode
        assert {c[0] for c in backend.calls if c[0] in TIMED} == {timed}
        assert len(m.impls["A"].samples_s) == 3


def _timed_names(calls, kind):
    return [c[1] for c in calls if c[0] == kind]


@pytest.mark.parametrize("mode", ["cold", "hot"])
def test_passes_schedule_runs_a_b_c_c_b_a_with_samples_split(mode):
    backend = FakeBackend({"A": 1e-5, "B": 2e-5, "C": 3e-5})
    settings = TimingSettings(mode=mode, samples=8, warmup=1, schedule="passes", cold_launches=1)
    m = measure(backend, ["A", "B", "C"], settings)
    kind = "timed_cold" if mode == "cold" else "timed_batch"
    timed = _timed_names(backend.calls, kind)
    if mode == "hot":  # calibration batches come first, implementation by implementation
        timed = timed[-24:]
    assert timed == ["A"] * 4 + ["B"] * 4 + ["C"] * 8 + ["B"] * 4 + ["A"] * 4
    assert m.orders == [["A", "B", "C"], ["C", "B", "A"]]
    assert all(len(t.samples_s) == 8 for t in m.impls.values())


def test_passes_schedule_cancels_linear_drift():
    backend = FakeBackend({"A": 1e-5, "B": 1e-5}, drift_per_call=1e-3)
    m = measure(backend, ["A", "B"], TimingSettings(mode="cold", samples=30, schedule="passes"))
    ratio = stats.median(m.impls["B"].samples_s) / stats.median(m.impls["A"].samples_s)
    assert ratio == pytest.approx(1.0, abs=2e-3)


def test_schedule_settings_are_checked():
    with pytest.raises(ValueError, match="schedule must be one of rounds, passes"):
        TimingSettings(schedule="zigzag")
    with pytest.raises(ValueError, match="samples must be even"):
        TimingSettings(schedule="passes", samples=7)


# ---- output dependence (issue 13): a kernel faster when its answer is already there -----------


class PoisonBackend:
    """Per-launch kernel seconds `plain` on settled outputs and `computing` on poisoned ones,
    plus `poison` seconds a launch for the poison itself."""

    def __init__(self, plain: float, computing: float, poison: float):
        self.plain, self.computing, self.poison = plain, computing, poison
        self.resets = 0

    def reset(self, name):
        self.resets += 1

    def timed_poisoned(self, name, batch, with_kernel):
        return batch * (self.poison + (self.computing if with_kernel else 0.0))


def measured(plain_s: float, batch: int = 100):
    from runner.measurement.timing.base import ImplTiming, Measurement

    timing = ImplTiming(
        "k", samples_s=[plain_s * (1 + 0.001 * (i % 3 - 1)) for i in range(30)], batch=batch
    )
    return Measurement("hot", {"k": timing}, [["k"]], 10, 1.0)


def test_an_honest_kernel_is_not_output_dependent():
    from runner.measurement.timing import output_dependence

    found = output_dependence.check(PoisonBackend(10e-6, 10.3e-6, 50e-6), ["k"], measured(10e-6))
    assert found["k"]["output_dependent"] is False
    assert found["k"]["ratio"] == pytest.approx(1.03, rel=1e-6)


def test_a_kernel_that_skips_work_on_settled_outputs_is_flagged():
    from runner.measurement.timing import output_dependence

    found = output_dependence.check(PoisonBackend(2e-6, 40e-6, 5e-6), ["k"], measured(2e-6))
    assert found["k"]["output_dependent"] is True
    assert found["k"]["ratio"] == pytest.approx(20.0, rel=1e-6) and found["k"]["limit"] == 1.1
