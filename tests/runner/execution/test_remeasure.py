"""run_suite measures an unstable case a second time (a cool-down, shorter hot samples), on the
CPU: the worker is a stand-in that returns a recorded H200 case, unstable the first time."""

from __future__ import annotations

import copy
from pathlib import Path

import orjson
import pytest

from protocol.validation import validate
from runner.definition import manifest
from runner.execution import suite as suite_module
from runner.execution.result import case_skeleton, record_failure
from runner.execution.suite import BenchOptions, run_suite
from tests.runner.execution.test_budget import headlines

ROOT = Path(__file__).resolve().parents[3]
RECORDED = orjson.loads((ROOT / "tests/fixtures/result-1.2.0-h200-warpforth.json").read_bytes())
CASES = {c["id"]: c for c in RECORDED["cases"]}


def unstable(case_doc: dict, name: str) -> dict:
    doc = copy.deepcopy(case_doc)
    doc["implementations"][name]["gap"]["stable"] = False
    doc["implementations"][name]["timing"]["stats"]["noise"] = 0.05
    return doc


def stand_ins(monkeypatch, second_of) -> dict:
    """The worker returns the recorded case; polynomial_f64 is unstable the first time and
    `second_of(case_doc)` the second. Returns what was seen: calls and cool-downs."""
    seen = {"calls": [], "cooldowns": []}
    env = copy.deepcopy(RECORDED["environment"])
    env["sensors"] = env.pop("sensors_start")
    monkeypatch.setattr(suite_module, "probe_environment", lambda options: copy.deepcopy(env))
    monkeypatch.setattr(suite_module.environment, "nvml_sensors", lambda *a, **k: None)
    monkeypatch.setattr(
        suite_module, "cool_down", lambda *a, **k: seen["cooldowns"].append(a) or 3.25
    )

    def one_case(suite, case, arch, options, peaks, say, bundle=None, budget_left_s=None, **kw):
        seen["calls"].append((case.id, options.target_sample_ms))
        doc = copy.deepcopy(CASES[case.id])
        if case.id != "polynomial_f64":
            return doc
        if sum(c == case.id for c, _ in seen["calls"]) == 1:
            return unstable(doc, "warpforth")
        return second_of(doc)

    monkeypatch.setattr(suite_module, "run_one", one_case)
    return seen


def run(monkeypatch, second_of):
    seen = stand_ins(monkeypatch, second_of)
    options = BenchOptions(quiet=True, case_ids=headlines(*CASES))  # each case at its one size
    doc, _ = run_suite(ROOT / "benchmarks/cases.toml", options)
    validate(doc, "result", "remeasure run")
    return doc, seen


def test_an_unstable_case_is_measured_again_after_a_cool_down_with_shorter_samples(monkeypatch):
    doc, seen = run(monkeypatch, lambda doc: doc)
    assert [c for c, _ in seen["calls"]].count("polynomial_f64") == 2
    assert seen["cooldowns"] == [(0, RECORDED["environment"]["device"].get("uuid"))]
    second = [t for c, t in seen["calls"] if c == "polynomial_f64"][1]
    suite = manifest.load(ROOT / "benchmarks/cases.toml")
    case_ms = next(c for c in suite.cases if c.id == "polynomial_f64").settings.target_sample_ms
    assert second == pytest.approx(case_ms * suite_module.SHORTER)  # the case's own, halved
    case = next(c for c in doc["cases"] if c["id"] == "polynomial_f64")
    assert case["remeasured"]["improved"] is True
    assert case["remeasured"]["cooldown_s"] == 3.25  # what the cool-down waited
    assert case["remeasured"]["first_noise"]["warpforth"] == 0.05
    assert "warpforth" in case["remeasured"]["reason"]
    assert case["implementations"]["warpforth"]["gap"]["stable"] is True
    headline = doc["summary"]["geomean_gap"]["warpforth"]
    assert headline["remeasured"] == ["polynomial_f64"]
    assert headline["cases"] == headline["of"] == len(CASES) and headline["unstable"] == []
    others = [c for c in doc["cases"] if c["id"] != "polynomial_f64"]
    assert not any("remeasured" in c for c in others)


def test_a_case_unstable_twice_stays_in_the_headline_marked(monkeypatch):
    doc, _ = run(monkeypatch, lambda doc: unstable(doc, "warpforth"))
    case = next(c for c in doc["cases"] if c["id"] == "polynomial_f64")
    assert case["remeasured"]["improved"] is False
    headline = doc["summary"]["geomean_gap"]["warpforth"]
    assert headline["unstable"] == ["polynomial_f64"] and headline["cases"] == len(CASES)


def test_a_second_measurement_that_fails_keeps_the_first(monkeypatch):
    def fails(doc):
        failed = case_skeleton(
            suite_module.manifest.load(ROOT / "benchmarks/cases.toml").case(doc["id"])
        )
        record_failure(failed, "launch", "stand-in fault")
        return failed

    doc, _ = run(monkeypatch, fails)
    case = next(c for c in doc["cases"] if c["id"] == "polynomial_f64")
    assert case["status"] == "ok" and case["remeasured"]["improved"] is False
    assert case["implementations"]["warpforth"]["gap"]["stable"] is False


def test_needs_remeasure_only_for_a_completed_case_with_an_unstable_gap():
    case = copy.deepcopy(CASES["axpy_f64"])
    assert suite_module.needs_remeasure(case) is None
    noisy = unstable(case, "llvm")
    assert "llvm" in suite_module.needs_remeasure(noisy)
    noisy["remeasured"] = {"reason": "x", "cooldown_s": 10.0}
    assert suite_module.needs_remeasure(noisy) is None  # once only
    noisy.pop("remeasured")
    noisy["status"] = "failed"
    assert suite_module.needs_remeasure(noisy) is None


class Board:
    """NVML as the cool-down reads it (what cannot exist here: a GPU's power sensor): a draw
    in mW per poll and the clock-event reasons."""

    def __init__(self, draws, reasons=0):
        self.draws, self.reasons = list(draws), reasons

    def power_mw(self):
        return (self.draws.pop(0) if len(self.draws) > 1 else self.draws[0]), 700_000

    def read(self):
        return 1980, self.reasons


def test_the_cool_down_ends_when_the_board_settles_and_waits_the_longest_where_it_never_does(
    monkeypatch,
):
    now = [0.0]
    monkeypatch.setattr(suite_module.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(suite_module.time, "sleep", lambda s: now.__setitem__(0, now[0] + s))
    settling = Board([690_000, 400_000, 150_000])  # at the cap, then falling to idle
    monkeypatch.setattr(suite_module.clocks, "open_monitor", lambda *a: (settling, "nvml"))
    waited = suite_module.cool_down(0, "GPU-x")
    assert suite_module.MIN_COOLDOWN_S <= waited < suite_module.COOLDOWN_S
    assert waited == pytest.approx(suite_module.MIN_COOLDOWN_S + 2 * suite_module.POLL_S)
    capped = Board([650_000], reasons=0x4)  # drawing little but still held at the power cap
    monkeypatch.setattr(suite_module.clocks, "open_monitor", lambda *a: (capped, "nvml"))
    assert suite_module.cool_down(0, None) >= suite_module.COOLDOWN_S
    monkeypatch.setattr(suite_module.clocks, "open_monitor", lambda *a: (None, "unavailable"))
    assert suite_module.cool_down(0, None, longest_s=4.0) == 4.0
    assert suite_module.settled(Board([100_000])) and not suite_module.settled(
        Board([100_000], 0x20)
    )


def test_the_reason_names_the_clocks_when_they_made_the_gap_unstable():
    doc = unstable(CASES["polynomial_f64"], "warpforth")
    assert "noise above 3%" in suite_module.needs_remeasure(doc)
    doc["implementations"]["warpforth"]["timing"]["stats"]["noise"] = 0.004
    doc["clocks"] = {"source": "nvml", "unstable": True}
    assert "clocks held down in most samples" in suite_module.needs_remeasure(doc)
