"""Cold mode on a fake device: reset, poison, flush and launch; batches of launches; where a
launch falls in the launch sequence and the order the sides take."""

from __future__ import annotations

import statistics

import numpy as np
import pytest

from protocol import statistics as pstats
from runner.measurement.timing import ColdMode, TimingSettings, base, cold, measure
from runner.measurement.timing.base import load_order, round_order
from tests.support.fake_device import FakeBackend, timed_names

# --- the order of rounds and loads ---------------------------------------------------------


def test_cold_loads_are_made_in_the_rounds_order():
    order = load_order(["A", "B"], 4)
    assert order == ["A", "B", "B", "A", "B", "A", "A", "B"]
    three = load_order(["A", "B", "C"], 32)
    assert [three.count(n) for n in "ABC"] == [32, 32, 32]
    assert three[:12] == list("ABCCBABCAACB")


def places(count: int, batch: int, period: int, rounds: int) -> dict[int, list[int]]:
    """Where each of `count` sides' samples start, mod `period`, in `rounds` rounds."""
    found: dict[int, list[int]] = {i: [] for i in range(count)}
    launched = 0
    for r in range(rounds):
        for name in round_order(list(range(count)), r):
            found[name].append(launched % period)
            launched += batch
    return found


@pytest.mark.parametrize("count", range(2, 10))
@pytest.mark.parametrize("batch", [1, 3, 8, 17])
@pytest.mark.parametrize("period", [2, 4, 8, 16])
def test_every_side_starts_its_samples_at_every_place_of_a_period_alike(count, batch, period):
    """Over 16 cycles of round_order (32 N rounds) each side's samples start on the places of a
    period of 2 to 16 launches as often as every other side's, for 2 to 9 sides (A B / B A
    repeated with one launch a sample puts A's on places 0 and 3 of 4 only, and B's on 1 and 2)."""
    found = places(count, batch, period, 32 * count)
    assert all(sorted(found[i]) == sorted(found[0]) for i in found), (count, batch, period)
    repeated = [(2 * r + ["A", "B"][:: 1 if r % 2 == 0 else -1].index("A")) % 4 for r in range(32)]
    assert set(repeated) == {0, 3}


@pytest.mark.parametrize("count", [4, 8])
def test_four_or_eight_sides_no_longer_sit_on_disjoint_places(count):
    """Reversing rounds alone (the Thue-Morse order of rounds before the Latin square) kept a
    side of 4 or 8 on its slot or the mirror one: with one launch a sample A sat on places 0
    and 3 of 4 only, B on 1 and 2. The rotation puts every side on every place; for a multiple
    of 4 the balance holds to periods of 4 N launches, not beyond."""
    found = places(count, 1, 4, 32 * count)
    assert all(sorted(found[i]) == sorted(found[0]) for i in found)
    assert set(found[0]) == {0, 1, 2, 3}
    old = {i: [] for i in range(count)}
    launched = 0
    for r in range(64):  # rounds forward or reversed by the Thue-Morse bit, never rotated
        for name in list(range(count))[:: -1 if base.thue_morse(r) else 1]:
            old[name].append(launched % 4)
            launched += 1
    assert set(old[0]) == {0, 3} and set(old[1]) == {1, 2}
    beyond = places(count, 1, 8 * count, 32 * count)
    assert any(sorted(beyond[i]) != sorted(beyond[0]) for i in beyond)


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


def test_cold_launches_get_drawn_poisons_and_random_launches_are_verified():
    """The poison and the verified launches come from the run's secret, not from the place of
    a launch: both sides of a round get the same poison at the same (sample, launch) and the
    same launches are verified, and two runs choose differently (tests/runner/measurement/timing/test_launch_audit.py)."""
    chosen = []
    for _ in range(2):
        backend = FakeBackend({"A": 1e-6, "B": 1e-6})
        patterns, verified = [], []
        backend.poison_outputs = patterns.append

        def verify(name, backend=backend, verified=verified):  # the launches of `name` so far
            verified.append((name, backend.calls.count(("timed_cold", name))))
            return "stale"

        backend.verify_outputs = verify
        m = measure(backend, ["A", "B"], TimingSettings(mode="cold", samples=6, warmup=0))
        assert {t.batch for t in m.impls.values()} == {16}  # 1.5 us a launch
        assert len(patterns) == 2 * cold.PROBES + 2 * 6 * 16
        assert all(1 <= p <= 255 for p in patterns) and len(set(patterns)) > 20
        timed = patterns[2 * cold.PROBES :]
        # rounds A B, B A, B A, A B, ...: sample 0 of A then of B got the same poisons
        assert timed[:16] == timed[16:32]
        audit = m.impls["A"].audit
        assert audit["audited"] == m.impls["B"].audit["audited"] and audit["launches"] == 96
        assert audit["seed"] != "" and audit["compared_with"].startswith("the backend's")
        assert len(audit["audited"]) == len(m.impls["A"].problems) > 0
        k, j = audit["audited"][0]
        assert m.impls["A"].problems[0] == f"cold sample {k} (launch {j}): stale"
        # verified right after the audited launch ran (after its probes and earlier launches)
        assert [n for name, n in verified if name == "A"] == [
            cold.PROBES + k * 16 + j + 1 for k, j in audit["audited"]
        ]
        chosen.append(audit["audited"])
    assert chosen[0] != chosen[1]


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
        return pstats.gap(m.impls["A"].samples_s, m.impls["B"].samples_s, resamples=2000)

    single, batched = gap(1), gap(16)
    assert single["ratio_of_medians"] == pytest.approx(1.0)
    assert batched["ratio_of_medians"] == pytest.approx(1.01, abs=0.003)
    assert batched["ci_low"] <= 1.01 <= batched["ci_high"]


@pytest.mark.parametrize("copies", [1, 2, 8, 16, 32])
@pytest.mark.parametrize("batch", [1, 8, 16, 24, 32])
def test_copy_turn_takes_every_copy_once_a_cycle_and_on_every_place(copies, batch):
    turns = [base.copy_turn(t, copies) for t in range(copies * copies * batch)]
    for c in range(0, len(turns), copies):  # each cycle: every copy once
        assert sorted(turns[c : c + copies]) == list(range(copies))
    # over `copies` cycles a copy falls on every place modulo `copies`: so on every place of a
    # batch that divides the count (taken plainly in turn, on one place of it only)
    for modulus in (copies, batch) if copies % batch == 0 else (copies,):
        places = [{t % modulus for t, x in enumerate(turns) if x == k} for k in range(copies)]
        assert all(p == set(range(modulus)) for p in places), (modulus, places)


class Copies(FakeBackend):
    """Cold launches that take several copies of each side (loads of its PTX) by `turn`, as
    CudaBackend's do: a launch's time swings by +-4% with its place in the launch sequence
    (every 4th, as on the H200), by an amount of the copy's own (`amplitude[name][copy]`)."""

    SWING = (-0.04, 0.03, -0.02, 0.03)

    def __init__(self, amplitude, turn):
        super().__init__({n: 1.3e-6 for n in amplitude})
        self.amplitude, self.turn, self.turns, self.launched = amplitude, turn, {}, 0

    def timed_cold(self, name):
        t = self.turns[name] = self.turns.get(name, -1) + 1
        copy = self.turn(t, len(self.amplitude[name]))
        swing = self.SWING[self.launched % 4] * self.amplitude[name][copy]
        self.launched += 1
        return super().timed_cold(name) * (1 + swing)


@pytest.mark.parametrize("batch", [8, 16])
def test_copies_pinned_to_a_place_bias_a_cold_gap_and_copy_turn_does_not(batch):
    """Taken plainly in turn with a batch that divides the count, each copy always falls on
    the same place of the launch sequence; the sides then differ by how their own copies
    react to those places (H200: the two halves of one side's loads 0.54% apart, an A/A of
    x1.0027). copy_turn moves each copy one place on every cycle."""
    rng = np.random.default_rng(3)
    amplitude = {n: list(rng.uniform(0.2, 1.8, 16)) for n in ("A", "A2")}
    settings = TimingSettings(mode="cold", samples=128, warmup=0, cold_launches=batch)

    def aa(turn):
        m = measure(Copies(amplitude, turn), ["A", "A2"], settings)
        a, b = (statistics.fmean(m.impls[n].samples_s) for n in ("A", "A2"))
        return b / a

    assert aa(base.copy_turn) == pytest.approx(1.0, abs=2e-4)
    assert abs(aa(lambda t, copies: t % copies) - 1) > 1e-3
