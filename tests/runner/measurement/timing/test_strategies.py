"""The timing strategies (hot, cold) driven by a fake device: calibration, ordering, drift."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from protocol import statistics
from runner.measurement.timing import MODES, ColdMode, HotMode, TimingSettings, base, measure
from runner.measurement.timing.base import copy_turn, quantize_batch, round_order
from runner.measurement.timing.hot import calibrate
from tests.support.fake_device import TIMED, FakeBackend, timed_names


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
    [("AB", ["AB", "BA", "BA", "AB", "BA"]), ("ABC", ["ABC", "CBA", "BCA", "ACB", "CAB"])],
)
def test_hot_rounds_run_in_the_latin_square_order(names, rounds):
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
    assert round_order([], 3) == []
    # 2 sides: the Thue-Morse order 0 1 1 0 1 0 0 1; every pair (2s, 2s + 1) runs both orders
    firsts = "".join(round_order(["A", "B"], r)[0] for r in range(16))
    assert firsts == "ABBABAABBAABABBA"
    assert all(firsts[i] != firsts[i + 1] for i in range(0, 16, 2))


@pytest.mark.parametrize("count", range(2, 10))
def test_round_order_is_a_latin_square_for_any_number_of_sides(count):
    """Over every cycle of 2 N rounds each side takes every place of a round exactly twice;
    every pair of rounds is one order and its reverse (linear drift cancels pair by pair); and
    every two sides meet in both orders equally often."""
    names = [f"s{i}" for i in range(count)]
    for cycle in range(3):
        rounds = [round_order(names, 2 * count * cycle + r) for r in range(2 * count)]
        assert all(sorted(r) == names for r in rounds)
        for name in names:
            assert sorted(r.index(name) for r in rounds) == sorted(2 * list(range(count)))
        assert all(rounds[i + 1] == rounds[i][::-1] for i in range(0, 2 * count, 2))
        for a, b in itertools.combinations(names, 2):
            before = sum(r.index(a) < r.index(b) for r in rounds)
            assert before == count, (a, b)
        for pair in range(0, 2 * count, 2):  # the mean place within a pair is the same for all
            means = {n: rounds[pair].index(n) + count + rounds[pair + 1].index(n) for n in names}
            assert len(set(means.values())) == 1


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


# --- drift and gaps ------------------------------------------------------------------------


def drifting_gap(candidate_factor: float, mode: str, drift: float = 0.01) -> dict:
    backend = FakeBackend(
        {"base": 1e-4, "cand": 1e-4 * candidate_factor}, drift_per_call=drift, overhead_s=0.0
    )
    m = measure(backend, ["base", "cand"], TimingSettings(mode=mode, samples=30))
    return statistics.gap(m.impls["base"].samples_s, m.impls["cand"].samples_s)


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
    g = statistics.gap(m.impls["base"].samples_s, m.impls["cand"].samples_s)
    assert g["ratio_of_medians"] == pytest.approx(2.0, rel=0.02)
    assert g["ci_low"] < g["ratio_of_medians"] < g["ci_high"]
    assert statistics.summarize(m.impls["cand"].samples_s)["stable"]


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
    ratio = statistics.median(m.impls["B"].samples_s) / statistics.median(m.impls["A"].samples_s)
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
    from runner.measurement.gate import output_dependence

    found = output_dependence.check(PoisonBackend(10e-6, 10.3e-6, 50e-6), ["k"], measured(10e-6))
    assert found["k"]["output_dependent"] is False
    assert found["k"]["ratio"] == pytest.approx(1.03, rel=1e-6)


def test_a_kernel_that_skips_work_on_settled_outputs_is_flagged():
    from runner.measurement.gate import output_dependence

    found = output_dependence.check(PoisonBackend(2e-6, 40e-6, 5e-6), ["k"], measured(2e-6))
    assert found["k"]["output_dependent"] is True
    assert found["k"]["ratio"] == pytest.approx(20.0, rel=1e-6)
    assert found["k"]["limit"] == pytest.approx(1.05, abs=0.01)


class DisturbingBackend(PoisonBackend):
    """A PoisonBackend with the control of the same traffic aimed elsewhere: the kernel takes
    `disturbed` seconds a launch there, its outputs still holding the answer."""

    def __init__(self, plain: float, computing: float, poison: float, disturbed: float):
        super().__init__(plain, computing, poison)
        self.disturbed, self.controls = disturbed, 0

    def timed_disturbed(self, name, batch):
        self.controls += 1
        return batch * (self.poison + self.disturbed)


def test_a_kernel_slowed_by_any_traffic_alike_is_not_output_dependent():
    """The L2 case: poisoned x1.85 of plain, as slow after the same traffic elsewhere."""
    from runner.execution.result import dependence
    from runner.measurement.gate import output_dependence

    backend = DisturbingBackend(7.4e-6, 13.6e-6, 3e-6, 13.4e-6)
    found = output_dependence.check(backend, ["k"], measured(7.4e-6))["k"]
    assert found["ratio"] == pytest.approx(13.6 / 7.4) and found["output_dependent"] is False
    assert found["ratio_disturbed"] == pytest.approx(13.6 / 13.4) and backend.controls == 3
    assert "13.40 us after the same traffic with the answer left in place" in dependence(found)


def test_a_kernel_faster_only_with_its_answer_in_place_is_still_flagged():
    from runner.measurement.gate import output_dependence

    backend = DisturbingBackend(2e-6, 40e-6, 5e-6, 2.1e-6)
    found = output_dependence.check(backend, ["k"], measured(2e-6))["k"]
    assert found["output_dependent"] is True and found["ratio_disturbed"] > 18


def test_the_control_runs_only_for_a_slow_poisoned_launch():
    from runner.measurement.gate import output_dependence

    backend = DisturbingBackend(10e-6, 10.3e-6, 50e-6, 10e-6)
    found = output_dependence.check(backend, ["k"], measured(10e-6))["k"]
    assert backend.controls == 0 and "disturbed_s" not in found
    assert found["output_dependent"] is False


class KernelsBackend:
    """Per kernel (plain, computing, disturbed) seconds a launch, and `poison` a launch."""

    def __init__(self, kernels: dict[str, tuple[float, float, float]], poison: float = 3e-6):
        self.kernels, self.poison, self.controls = kernels, poison, []

    def reset(self, name):
        pass

    def timed_poisoned(self, name, batch, with_kernel):
        return batch * (self.poison + (self.kernels[name][1] if with_kernel else 0.0))

    def timed_disturbed(self, name, batch):
        self.controls.append(name)
        return batch * (self.poison + self.kernels[name][2])


def measured_kernels(kernels: dict[str, tuple[float, float, float]]):
    from runner.measurement.timing.base import ImplTiming, Measurement

    timings = {
        n: ImplTiming(n, samples_s=[k[0] * (1 + 0.001 * (i % 3 - 1)) for i in range(30)], batch=100)
        for n, k in kernels.items()
    }
    return Measurement("hot", timings, [list(kernels)], 10, 1.0)


def test_the_l2_excuse_holds_where_the_baseline_is_slowed_alike():
    """axpy_f64 at 2^21 (session 33): every row x1.85 after any traffic; the baseline's own
    control is measured, and the candidate's slowdown is the baseline's."""
    from runner.execution.result import dependence
    from runner.measurement.gate import output_dependence

    kernels = {"cuda": (7.4e-6, 13.6e-6, 13.4e-6), "forth": (7.5e-6, 13.7e-6, 13.6e-6)}
    backend = KernelsBackend(kernels)
    found = output_dependence.check(backend, list(kernels), measured_kernels(kernels), None, "cuda")
    assert not found["cuda"]["output_dependent"] and not found["forth"]["output_dependent"]
    assert found["forth"]["disturbed_vs_baseline"] == pytest.approx(1.0, abs=0.02)
    assert "the baseline's time beyond its plain gap" in dependence(found["forth"])


def test_a_kernel_slower_than_the_baseline_under_the_same_traffic_is_flagged():
    """Fast only in plain replay, and under the traffic slower than the baseline is (it checks
    its answer, then redoes the work): its own control excuses it, the baseline's does not, so
    it is flagged; its gap is kept with the flag beside it (runner.execution.result)."""
    from runner.measurement.gate import output_dependence

    kernels = {"cuda": (10e-6, 10.3e-6, 10.1e-6), "sly": (2e-6, 14.2e-6, 14.1e-6)}
    backend = KernelsBackend(kernels)
    found = output_dependence.check(backend, list(kernels), measured_kernels(kernels), None, "cuda")
    assert found["sly"]["ratio_disturbed"] < found["sly"]["limit"]  # its own control: excused
    assert found["sly"]["disturbed_vs_baseline"] > 1.3 and not found["sly"]["output_dependent"]
    assert found["sly"]["flag"].startswith("fast only in plain hot replay: under the same traffic")
    assert "cuda" in backend.controls and found["cuda"]["output_dependent"] is False


# axpy_f64 at 2^11 on an H100 (session 42): (plain, poisoned, disturbed) seconds a launch
SMALL_CASE = {
    "cuda": (1.13e-6, 1.21e-6, 1.13e-6),
    "llvm": (1.02e-6, 1.10e-6, 1.02e-6),
    "warpforth": (1.01e-6, 1.10e-6, 1.02e-6),
}


def checked(kernels: dict, baseline: str = "cuda") -> dict:
    from runner.measurement.gate import output_dependence

    backend = KernelsBackend(kernels)
    return output_dependence.check(
        backend, list(kernels), measured_kernels(kernels), None, baseline
    )


def test_a_poison_that_slows_every_row_of_a_small_case_alike_flags_none():
    """Every row about 1.1 us a launch, x1.06-1.08 poisoned, and as fast as plain under the
    disturbed control (the traffic elsewhere costs nothing): the method's bias, since every row
    pays it, not a skipped store."""
    from runner.execution.result import dependence

    found = checked(SMALL_CASE)
    assert not any(f["output_dependent"] for f in found.values()), found
    assert found["cuda"]["method_bias"] == pytest.approx(1.10 / 1.02, rel=1e-3)
    assert "judged over that" in dependence(found["cuda"])


def test_a_row_that_skips_work_is_flagged_beside_rows_the_poison_slows():
    """The same small case with a row that skips its work on settled outputs (x2): the others'
    bias (x1.07) excuses only that much of it."""
    found = checked({**SMALL_CASE, "skips": (0.60e-6, 1.22e-6, 0.61e-6)})
    assert found["skips"]["output_dependent"] is True
    assert not any(found[n]["output_dependent"] for n in SMALL_CASE), found


def test_a_row_alone_has_no_bias_to_lean_on():
    found = checked({"alone": SMALL_CASE["cuda"]}, "alone")
    assert found["alone"]["output_dependent"] is True and "method_bias" not in found["alone"]


@pytest.mark.parametrize("faster", [0.10, 0.20, 0.35])
def test_an_honest_candidate_faster_at_an_l2_resident_size_keeps_its_gap(faster):
    """Issue 50 item 10: both DRAM-bound once the L2 is disturbed (the same disturbed time),
    the candidate 10-35% faster in plain replay. Slowdowns compared reduced to 1 / gap and
    flagged it; the disturbed times compared directly do not."""
    from runner.measurement.gate import output_dependence

    plain_c = 7.4e-6 * (1 - faster)
    kernels = {"cuda": (7.4e-6, 13.6e-6, 13.4e-6), "fast": (plain_c, 13.5e-6, 13.4e-6)}
    found = output_dependence.check(
        KernelsBackend(kernels), list(kernels), measured_kernels(kernels), None, "cuda"
    )
    assert found["fast"]["output_dependent"] is False and "flag" not in found["fast"]
    assert found["fast"]["disturbed_vs_baseline"] == pytest.approx(1.0, abs=0.01)


def test_a_candidate_slower_everywhere_keeps_its_gap_under_the_traffic():
    from runner.measurement.gate import output_dependence

    kernels = {"cuda": (5e-6, 9e-6, 9e-6), "slow": (7e-6, 12.6e-6, 12.6e-6)}
    found = output_dependence.check(
        KernelsBackend(kernels), list(kernels), measured_kernels(kernels), None, "cuda"
    )
    assert found["slow"]["output_dependent"] is False
    assert found["slow"]["disturbed_vs_baseline"] == pytest.approx(1.0, abs=0.01)


def test_the_limit_is_the_samples_own_interval_and_the_replays_spread():
    from runner.measurement.gate import output_dependence

    quiet = [1e-5 * (1 + 0.001 * (i % 3 - 1)) for i in range(30)]
    noisy = [1e-5 * (1 + 0.08 * (i % 5 - 2)) for i in range(30)]
    assert output_dependence.limit_for(quiet, [1.0, 1.0, 1.0]) == pytest.approx(1.05)
    wide = output_dependence.limit_for(noisy, [1.0, 1.02, 0.99])
    assert 1.05 + 0.03 < wide < 1.5  # the spread of the replays (3%) and the median's interval


def test_a_control_read_faster_than_plain_replay_is_floored_at_plain():
    from runner.measurement.gate import output_dependence

    kernels = {"k": (2e-6, 40e-6, 0.0)}
    found = output_dependence.check(KernelsBackend(kernels), ["k"], measured_kernels(kernels))["k"]
    assert found["ratio_disturbed"] == pytest.approx(20.0, rel=1e-3) and found["output_dependent"]


class PinningBackend(FakeBackend):
    """A FakeBackend that pins the A/A control's samples to one of its loads each, as
    CudaBackend does, each load running at an offset of its own."""

    def __init__(self, per_launch_s, pinned: str, offsets: list[float]):
        super().__init__(per_launch_s)
        self.pinned, self.offsets, self.pin = pinned, offsets, 0  # calibration: load 0

    def pin_copy(self, name: str, sample: int) -> int | None:
        if name != self.pinned:
            return None
        self.pin = copy_turn(sample, len(self.offsets))
        return self.pin

    def timed_batch(self, name: str, batch: int) -> float:
        seconds = super().timed_batch(name, batch)
        return seconds * (1 + self.offsets[self.pin]) if name == self.pinned else seconds


def measured_with_control(settings: TimingSettings, offsets: list[float]):
    """a, b and the control a~aa (its loads at `offsets`) measured with the control's term."""
    from runner.measurement import aa_control

    backend = PinningBackend({"a": 1e-5, "b": 1e-5, "a~aa": 1e-5}, "a~aa", offsets)
    term = aa_control.running_term("a", "a~aa", 1)
    return measure(backend, ["a", "b", "a~aa"], settings, baseline="a", control_term=term)


@pytest.mark.parametrize("mode", ["hot", "cold"])
def test_the_control_s_samples_take_its_loads_in_turn_and_say_which(mode):
    offsets = [0.0, 0.01, -0.01, 0.02]
    backend = PinningBackend({"a": 1e-5, "b": 1e-5, "a~aa": 1e-5}, "a~aa", offsets)
    m = measure(backend, ["a", "b", "a~aa"], TimingSettings(mode=mode, samples=8))
    assert m.impls["a"].loads is None and m.impls["b"].loads is None
    assert m.impls["a~aa"].loads == [copy_turn(k, 4) for k in range(8)]
    if mode == "hot":  # each sample ran on the load it names
        ratios = np.array(m.impls["a~aa"].samples_s) / np.array(m.impls["a"].samples_s)
        got = ratios - 1 - np.array(offsets)[m.impls["a~aa"].loads]
        assert np.allclose(got, 0.0, atol=1e-3)


def test_the_stopping_rule_widens_by_the_control_s_term_once_it_has_loads():
    """runner bench's --precision: the term is the A/A control's (aa_control.running_term), the
    same the document then gives every gap; loads 1% apart put the floor above a 0.5% target,
    so the rule stops after the first samples, saying where its term came from."""
    from runner.measurement import aa_control

    offsets = [0.0, 0.01, -0.01, 0.02, -0.02, 0.0, 0.01, -0.01]
    m = measured_with_control(TimingSettings(samples=32, precision=0.005), offsets)
    p = m.precision
    assert p["systematic_source"] == "control" and p["stopped_by"] == "floor", p
    a, ctl = m.impls["a"], m.impls["a~aa"]
    expected = aa_control.term_of(a.samples_s, ctl.samples_s, ctl.loads, 1)[0]
    assert p["systematic"] == pytest.approx(expected) and expected > 0.005 / 1.96


@pytest.mark.parametrize(
    ("batch", "graph", "expected"),
    [
        (25_000, 1000, 256),
        (1000, 1000, 200),
        (1000, 100, 200),
        (3000, 100, 200),
        (1270, 1000, 254),
        (100, 1000, 64),
        (8, 1000, 8),
    ],
)
def test_poisoned_replays_take_a_fifth_of_a_sample_capped_in_whole_graphs(batch, graph, expected):
    from runner.measurement.gate import output_dependence

    assert output_dependence.check_batch(batch, graph) == expected


def test_the_output_dependence_check_replays_its_shorter_batch():
    from runner.measurement.gate import output_dependence

    seen = []

    class Recording(PoisonBackend):
        graph_launches = 1000

        def timed_poisoned(self, name, batch, with_kernel):
            seen.append(batch)
            return super().timed_poisoned(name, batch, with_kernel)

    backend = Recording(2e-6, 2e-6, 5e-6)
    found = output_dependence.check(backend, ["k"], measured(2e-6, batch=1_000))
    assert set(seen) == {200} and found["k"]["ratio"] == pytest.approx(1.0)
    assert "200 launches" in found["k"]["method"]
