"""State kept across launches and kernels that recognise the poison (issue 30, classes 1 and 2),
on the CPU: the random draws of cold launches, the side-by-side comparison of audited launches,
hot audit replays, and cheating fake devices that both modes must catch while honest ones pass."""

from __future__ import annotations

import numpy as np
import pytest

from runner.measurement.gate import elements
from runner.measurement.gate.launch_audit import (
    AUDIT_FRACTION,
    POISON_CHOICES,
    LaunchDraws,
    SideBySide,
    distinct_poisons,
)
from runner.measurement.timing import TimingSettings, cold, hot, measure
from tests.support.fake_device import FakeBackend

# --- the draws -------------------------------------------------------------------------------


def test_a_launch_plan_depends_on_the_secret_and_its_key_only():
    draws = LaunchDraws(b"s" * 16)
    assert draws.plan(3, 7) == LaunchDraws(b"s" * 16).plan(3, 7)
    other = LaunchDraws(b"t" * 16)
    plans = [draws.plan(k, j) for k in range(50) for j in range(20)]
    assert plans != [other.plan(k, j) for k in range(50) for j in range(20)]
    assert all(p.poison in POISON_CHOICES for p in plans)  # never 0, never NaN
    assert len({p.poison for p in plans}) > 200 and len({p.inputs_seed for p in plans}) == 1000
    assert not any(draws.plan(-1, j).audited for j in range(200))  # probes are not audited


def test_a_poison_is_never_zero_nan_or_infinite_in_any_float_dtype():
    """Zeros are a plausible answer, and NaN compares equal to an expected NaN (by class)."""
    assert 0x00 not in POISON_CHOICES and 0xFF not in POISON_CHOICES
    assert len(POISON_CHOICES) == 254
    for byte in POISON_CHOICES:
        for dtype in (np.float32, np.float64):
            value = np.frombuffer(bytes([byte]) * np.dtype(dtype).itemsize, dtype)[0]
            assert np.isfinite(value) and value != 0, (byte, dtype)


def test_each_launch_of_a_check_gets_a_poison_of_its_own():
    poisons = distinct_poisons(40)
    assert len(set(poisons)) == 40 and set(poisons) <= set(POISON_CHOICES)
    draws = [tuple(distinct_poisons(3)) for _ in range(30)]
    assert len(set(draws)) > 20  # drawn per run, not fixed by the suite
    with pytest.raises(ValueError):
        distinct_poisons(len(POISON_CHOICES) + 1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_an_untouched_output_where_nan_is_expected_fails_under_a_drawn_poison(dtype):
    """The timed-size check's hole: the baseline writes NaN (sqrt of a negative), a candidate
    skips those elements. Under one all-ones poison for every launch the leftover NaN matched
    the expected NaN by class; under poisons of their own it holds a finite value and fails."""
    expected = np.array([1.0, np.nan, 2.0, np.nan], dtype)
    tol = elements.Tolerance(1e-6, 0.0, False)

    def skipped(byte):
        out = expected.copy()
        out[np.isnan(expected)] = np.frombuffer(bytes([byte]) * out.itemsize, dtype)[0]
        return out

    assert elements.compare(skipped(0xFF), expected, tol)["mismatches"] == 0  # the old poison
    for byte in distinct_poisons(16):
        found = elements.compare(skipped(byte), expected, tol)
        assert found["mismatches"] == 2 and found["first_mismatch"]["index"] == 1, byte


def test_the_audited_fraction_is_kept_and_follows_no_stride():
    draws = LaunchDraws(b"x" * 16)
    audited = [j for j in range(20000) if draws.plan(0, j).audited]
    # binomial(20000, 0.1): 2000 +- 42 (sd); 5 sd either side
    assert abs(len(audited) - 20000 * AUDIT_FRACTION) < 5 * 42
    gaps = set(np.diff(audited).tolist())
    assert len(gaps) > 20 and 1 in gaps  # no fixed stride a kernel could line up with
    residues = {j % 10 for j in audited}
    assert residues == set(range(10))


def test_a_fresh_secret_every_run():
    assert LaunchDraws().secret != LaunchDraws().secret
    with pytest.raises(ValueError, match=r"LaunchDraws.fraction must be in \(0, 1\]"):
        LaunchDraws(fraction=0)


# --- side by side ----------------------------------------------------------------------------


def differ(got, expected):
    for b, want in expected.items():
        bad = np.flatnonzero(got[b] != want)
        if bad.size:
            i = int(bad[0])
            return f"{b} differs at element {i}: expected {want[i]}, got {got[b][i]}"
    return None


def test_a_candidate_is_compared_with_the_baseline_whichever_ran_first():
    sides = SideBySide(["base", "cand", "other"], "base", differ)
    right, wrong = {"out": np.arange(4.0)}, {"out": np.array([0.0, 1.0, 9.0, 3.0])}
    assert sides.add((0, 3), "cand", wrong) == []  # held until the baseline's launch is read
    (found,) = sides.add((0, 3), "base", right)
    assert found == (
        "cand",
        "implementation cand, cold launch 3 of sample 0 (audited at random): out differs at "
        "element 2: expected 2.0, got 9.0, against baseline base's launch on the same inputs: "
        "the launch did not do the work",
    )
    assert sides.add((0, 3), "other", right) == [] and sides.held == {}  # all sides: dropped
    assert sides.audited == {"base": [[0, 3]], "cand": [[0, 3]], "other": [[0, 3]]}


# --- cold mode against cheating fake devices --------------------------------------------------


class Outputs(FakeBackend):
    """A fake device whose kernels leave an output: f(inputs seed) when a launch does the work,
    else what was there (the poison it was just filled with). `works(name, launch)` says
    whether the `launch`-th launch of `name` (probes included) does the work; `state[name]` is
    a launch counter the backend resets on every reset when `restores` (module state)."""

    def __init__(self, names, works, restores=True):
        super().__init__({n: 1.5e-6 for n in names})
        self.works, self.restores = works, restores
        self.seed, self.out, self.state = 0, None, dict.fromkeys(names, 0)
        self.launches = dict.fromkeys(names, 0)

    def reset(self, name):
        super().reset(name)
        if self.restores:
            self.state[name] = 0

    def reseed_inputs(self, seed):
        self.seed = seed

    def poison_outputs(self, byte):
        self.poison = byte
        self.out = np.full(4, float(byte))

    def timed_cold(self, name):
        if self.works(self, name):
            self.out = np.full(4, float(self.seed % 1000) + 0.5)
        self.state[name] += 1
        self.launches[name] += 1
        return super().timed_cold(name)

    def read_outputs(self, name):
        return {"out": self.out.copy()}

    def outputs_differ(self, got, expected):
        return differ(got, expected)

    def module_state(self, name):
        return {"globals": {"counter": 4}, "restored": self.restores}


def cold_run(works, restores=True, samples=6):
    backend = Outputs(["base", "cand"], works, restores)
    settings = TimingSettings(mode="cold", samples=samples, warmup=0, cold_launches=8)
    return measure(backend, ["base", "cand"], settings, baseline="base")


def honest(backend, name):
    return True


def test_honest_kernels_pass_cold_audits_and_the_document_says_what_was_checked():
    # 30 x 8 launches: none audited at 1 in 10 has a chance of 0.9^240 (6 x 8 left 0.6%,
    # which a CI run met)
    m = cold_run(honest, samples=30)
    for name in ("base", "cand"):
        audit = m.impls[name].audit
        assert m.impls[name].problems == []
        assert audit["launches"] == 30 * 8 and len(audit["audited"]) > 0
        assert audit["compared_with"] == "baseline base, its launch at the same (k, j)"
        assert audit["module_state"] == {"globals": {"counter": 4}, "restored": True}
        assert audit["inputs"].startswith("generated from a seed drawn per (k, j)")
    assert m.impls["base"].audit["audited"] == m.impls["cand"].audit["audited"]


def test_work_on_every_kth_launch_by_a_counter_is_caught_cold():
    """1b: a counter in module state; with the state restored before every launch the kernel
    sees 0 every time (and never works); without the restore, every 4th launch works and the
    random audits still find a launch that did not."""
    every_4th = lambda b, name: name == "base" or b.state[name] % 4 == 3  # noqa: E731
    for restores in (True, False):
        m = cold_run(every_4th, restores, samples=20)
        problems = m.impls["cand"].problems
        assert problems and m.impls["base"].problems == [], restores
        assert problems[0].startswith("implementation cand, cold launch ")
        assert "against baseline base's launch on the same inputs" in problems[0]
        assert "expected" in problems[0] and "got" in problems[0]


def test_a_result_cached_by_input_content_misses_every_cold_launch():
    """1a: the cache (module state) keyed by the inputs: fresh inputs every launch and the
    state restored, so it never holds this launch's answer; a cheat that trusts it is caught."""

    def cached(b, name):
        if name == "base":
            return True
        hit = b.state.get("key") == b.seed  # what a cache kept across launches would say
        b.state["key"] = b.seed
        return not hit

    m = cold_run(cached, restores=False, samples=10)
    assert m.impls["cand"].problems == []  # every launch missed, so every launch did the work


def test_a_kernel_that_skips_unless_it_sees_the_old_poison_cycle_is_caught_cold():
    """2: the old cold mode poisoned with 0xFF, 0x7F, 0xA5, 0x5A in turn and read back launches
    0, 10, 20, ...; a kernel that worked only under the poison those launches got passed. Drawn
    poisons and audits leave it no pattern to follow."""
    works = lambda b, name: name == "base" or b.poison == 0xFF  # noqa: E731
    m = cold_run(works, samples=20)
    assert m.impls["cand"].problems and m.impls["base"].problems == []
    assert "did not do the work" in m.impls["cand"].problems[0]


# --- hot audits --------------------------------------------------------------------------------


class Replays(FakeBackend):
    """audit_batch(name, batch, position): the outputs of launch `position` of an untimed
    replay, wrong where `skips(name, position)`."""

    def __init__(self, names, skips):
        super().__init__({n: 1e-6 for n in names})
        self.skips, self.audits = skips, []

    def audit_batch(self, name, batch, position):
        self.calls.append(("audit", name, batch, position))
        self.audits.append((name, position))
        return (
            "out differs at element 0: expected 1.0, got 2.0"
            if self.skips(name, position)
            else None
        )

    def input_sets(self, name):
        return 3


def test_hot_audits_come_before_random_samples_and_leave_the_samples_alone():
    names = ["base", "cand"]
    settings = TimingSettings(mode="hot", samples=30, warmup=0, target_sample_s=0.01)
    plain = measure(FakeBackend({n: 1e-6 for n in names}), names, settings, baseline="base")
    backend = Replays(names, lambda name, position: False)
    m = measure(backend, names, settings, baseline="base")
    for n in names:
        assert m.impls[n].samples_s == plain.impls[n].samples_s  # noise 0: exactly the same
        audit = m.impls[n].audit
        assert len(audit["audited"]) == hot.HOT_AUDITS and audit["input_sets"] == 3
        assert all(0 <= p < m.impls[n].batch for _, p in audit["audited"])
        assert audit["launches"] == 30 * m.impls[n].batch and m.impls[n].problems == []
    # an audit replay runs right before the sample it was drawn for, after a reset
    calls = backend.calls
    for i, call in enumerate(calls):
        if call[0] == "audit":
            assert calls[i - 1] == ("reset", call[1]) and calls[i + 1] == ("reset", call[1])
            assert calls[i + 2][:2] == ("timed_batch", call[1])
    chosen = [tuple(k for k, _ in m.impls[n].audit["audited"]) for n in names]
    again = measure(Replays(names, lambda name, position: False), names, settings)
    assert chosen != [tuple(k for k, _ in again.impls[n].audit["audited"]) for n in names]


def test_a_hot_kernel_that_works_on_every_kth_launch_is_caught_by_the_audits():
    names = ["base", "cand"]
    settings = TimingSettings(mode="hot", samples=30, warmup=0, target_sample_s=0.01)
    m = measure(
        Replays(names, lambda name, p: name == "cand" and p % 8 != 7),
        names,
        settings,
        baseline="base",
    )
    (first, *_) = m.impls["cand"].problems
    assert first.startswith("implementation cand, hot launch ")
    assert "audited at random): out differs at element 0: expected 1.0, got 2.0" in first
    assert "against baseline base's outputs on the same inputs" in first
    assert m.impls["base"].problems == []


def test_cold_mode_without_read_backs_verifies_the_drawn_launches():
    """A backend with verify_outputs only (no read-backs to compare) is verified at the drawn
    launches; one with neither is timed without audits."""
    backend = FakeBackend({"A": 1e-6})
    m = measure(backend, ["A"], TimingSettings(mode="cold", samples=4, warmup=0, cold_launches=8))
    audit = m.impls["A"].audit
    assert audit["audited"] == [] and audit["launches"] == 32
    assert audit["compared_with"] == "nothing: the backend reads no outputs back"
    assert cold.ColdMode.method.endswith("launches audited at random (timing.audit)")


# --- the document ------------------------------------------------------------------------------


def test_an_audit_finding_fails_the_case_names_the_implementation_and_validates():
    """A problem found by an audit fails the case (not the run) with no gap; the `audit` block
    and the module's `.global` variables go into the document, which validates."""
    import copy

    from protocol.validation import validate
    from runner import document as document_run
    from runner.execution import result
    from tests.runner.document.test_assembly import FIXTURE, GEOMETRY, PEAKS, samples, skeleton
    from tests.runner.document.test_assembly import worker_record as raw_record

    base = samples(7.8e-4, 0.002, seed=1)
    record = raw_record({"cuda": base, "kth": base}, {"cuda": "passed", "kth": "passed"})
    m = cold_run(lambda b, name: name == "base" or b.state[name] % 4 == 3, samples=20)
    for ours, theirs in (("base", "cuda"), ("cand", "kth")):
        timing = record["measurement"]["impls"][theirs]
        timing["audit"] = m.impls[ours].audit
        timing["problems"] = [p.replace("cand", "kth") for p in m.impls[ours].problems]
    record["impls"]["kth"]["ptx"]["globals"] = {"launches": 16896}
    doc = skeleton({"cuda": "baseline", "kth": "candidate"})
    case = result.finish_case(doc, record, GEOMETRY, "f64", PEAKS)
    assert case["status"] == "failed" and case["error"]["phase"] == "timing"
    assert "kth: implementation kth, cold launch " in case["error"]["message"]
    kth = case["implementations"]["kth"]
    assert kth["gap"] is None and kth["timing"]["audit"]["module_state"]["restored"] is True
    assert kth["ptx"]["globals"] == {"launches": 16896}
    validate(
        document_run.document(
            copy.deepcopy(FIXTURE["suite"]),
            copy.deepcopy(FIXTURE["environment"]),
            copy.deepcopy(FIXTURE["options"]),
            [case],
            "2026-12-03T08:00:00Z",
            "2026-12-03T08:01:00Z",
        ),
        "result",
    )


def test_a_ptx_case_names_the_buffer_element_expected_and_got():
    from runner.definition import manifest
    from runner.execution.case import CaseRun
    from tests.conftest import ROOT

    run = CaseRun.__new__(CaseRun)
    run.case = manifest.load(ROOT / "tests" / "cheats" / "cases.toml").case("state_every_kth")
    right = {"out": np.array([1.5, -3.0, 2.25])}
    assert run.outputs_differ({"out": right["out"].copy()}, right) is None
    poisoned = np.array([1.5, -3.0, 2.25])
    poisoned[1:] = np.frombuffer(bytes([0x3C]) * 16, dtype=np.float64)
    assert run.outputs_differ({"out": poisoned}, right) == (
        f"out differs in 2 of 3 elements, first at element 1: expected -3.0, got {float(poisoned[1])!r}"
    )
