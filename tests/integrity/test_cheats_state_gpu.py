"""GPU: the cheats of issue 30, classes 1 and 2 (tests/cheats/cases.toml, the cases after the
"Issue 30" comment), through `runner bench` hot and cold: state kept across launches in
__device__ arrays (a content cache, work on every 8th launch) and a kernel that tells the timing
poison from real data; each is caught with a message naming it, or does the whole work, and the
honest kernels with .global state (a launch counter, a lookup table) pass at parity.

Run on the GPU box: `pytest -m gpu tests/integrity/test_cheats_state_gpu.py` (two runner bench runs of
about a minute each). The verdict table goes to stderr and, with $KERNELGAP_TEST_ARTIFACTS, to
cheats-state.md there with both result documents.
"""

from __future__ import annotations

import pytest

from tests.conftest import ROOT
from tests.integrity.test_cheats_gpu import (
    assert_honest_untouched,
    bench_cheats,
    caught_at_the_timed_size,
    ptx_verdict,
    record,
)

pytestmark = pytest.mark.gpu

SUITE = ROOT / "tests" / "cheats" / "cases.toml"
CASES = ("state_content_cache", "state_every_kth", "poison_sniffer", "state_honest")


def bench(tmp_path_factory, mode: str, cases: tuple[str, ...]) -> dict:
    selected = [arg for c in cases for arg in ("--case", c)]
    folder = tmp_path_factory.mktemp(f"state-{mode}")
    doc, done = bench_cheats(folder, f"cheats-state-{mode}", *selected, "--mode", mode)
    assert done.returncode == 1, "the cheats must make the run exit 1"
    return {c["id"]: c for c in doc["cases"]}


@pytest.fixture(scope="module")
def hot_run(tmp_path_factory):
    return bench(tmp_path_factory, "hot", CASES)


@pytest.fixture(scope="module")
def cold_run(tmp_path_factory):
    return bench(tmp_path_factory, "cold", (*CASES, "honest_aa"))


def caught(case: dict, name: str, mode: str, where: str) -> str:
    """Assert `name` failed the case in the timing phase, named, with an audited launch's
    element, expected and got; the honest copies untouched. Returns the message."""
    if message := caught_at_the_timed_size(case, name):
        return message
    impl = case["implementations"][name]
    assert case["status"] == "failed" and case["error"]["phase"] == "timing", case.get("error")
    message = case["error"]["message"]
    assert f"{name}: " in message, message
    problems = impl["timing"]["problems"]
    audited = [p for p in problems if f"implementation {name}, {where}" in p]
    assert audited, problems
    assert "(audited at random)" in audited[0] and "expected" in audited[0] and "got" in audited[0]
    assert "against baseline cuda's" in audited[0] and "did not do the work" in audited[0]
    audit = impl["timing"]["audit"]
    assert audit["seed"] and audit["audited"], audit
    assert_honest_untouched(case)
    assert case["implementations"]["cuda_again"]["timing"].get("problems", []) == []
    return message


def does_the_work(case: dict, name: str) -> float:
    """Assert the case passed and `name` is not faster than the baseline; its gap."""
    assert case["status"] == "ok", case.get("error")
    gap = case["implementations"][name]["gap"]
    assert gap["ratio_of_medians"] >= 0.95, gap
    assert case["implementations"][name]["timing"].get("problems", []) == []
    return gap["ratio_of_medians"]


def module_state(case: dict, name: str) -> dict:
    return case["implementations"][name]["timing"]["audit"]["module_state"]


# -- class 1a: a result cache keyed by the inputs' content ------------------------------------


def test_hot_a_content_cache_is_caught_by_the_audits_over_rotating_inputs(hot_run):
    case = hot_run["state_content_cache"]
    assert set(case["implementations"]["cache"]["ptx"]["globals"]) == {
        "slot_key",
        "next_slot",
        "cached",
    }
    message = caught(case, "cache", "hot", "hot launch ")
    assert case["implementations"]["cache"]["timing"]["audit"]["input_sets"] == 3
    record("content cache in __device__ arrays (1a)", "PTX hot", ptx_verdict(case), message)


def test_cold_a_content_cache_always_misses_and_does_the_work(cold_run):
    """Its arrays are restored before every cold launch and every launch has fresh inputs, so
    the cache never hits: the launch computes (and fills the cache too)."""
    case = cold_run["state_content_cache"]
    state = module_state(case, "cache")
    assert state["restored"] is True and state["globals"]["cached"] == 4 * (1 << 18) * 8
    gap = does_the_work(case, "cache")
    record("content cache in __device__ arrays (1a)", "PTX cold", "ok (no hit)", f"gap x{gap:.3f}")


# -- class 1b: work on every k-th launch --------------------------------------------------------


def test_hot_work_on_every_8th_launch_is_caught_by_the_audits(hot_run):
    case = hot_run["state_every_kth"]
    message = caught(case, "kth", "hot", "hot launch ")
    record("work on every 8th launch (1b)", "PTX hot", ptx_verdict(case), message)


def test_cold_work_on_every_8th_launch_is_caught_by_the_audits(cold_run):
    case = cold_run["state_every_kth"]
    if "timing" in case["implementations"]["kth"]:  # past the gate: its state restored per launch
        assert module_state(case, "kth")["restored"] is True
    message = caught(case, "kth", "cold", "cold launch ")
    record("work on every 8th launch (1b)", "PTX cold", ptx_verdict(case), message)


# -- class 2: telling the timing poison from real data -----------------------------------------


def test_hot_a_poison_sniffer_is_caught_or_does_the_work(hot_run):
    """The timed size's check poisons each launch's outputs with a byte of its own: a sniffer of
    memset patterns skips there and is caught; one that got past it does the work hot (real
    data in the output)."""
    case = hot_run["poison_sniffer"]
    if message := caught_at_the_timed_size(case, "sniffer"):
        record("skips where it sees a timing poison (2)", "PTX hot", ptx_verdict(case), message)
        return
    gap = does_the_work(case, "sniffer")
    record("skips where it sees a timing poison (2)", "PTX hot", "ok (works)", f"gap x{gap:.3f}")


def test_cold_a_poison_sniffer_is_caught_by_random_poisons_and_audits(cold_run):
    case = cold_run["poison_sniffer"]
    if "timing" in case["implementations"]["sniffer"]:  # past the gate: the cold audits
        audit = case["implementations"]["sniffer"]["timing"]["audit"]
        assert audit["poison"].startswith("a byte drawn per (k, j)")
    message = caught(case, "sniffer", "cold", "cold launch ")
    record("skips where it sees a timing poison (2)", "PTX cold", ptx_verdict(case), message)


# -- honest kernels with .global state -----------------------------------------------------------


@pytest.mark.parametrize("mode", ["hot", "cold"])
def test_honest_kernels_with_global_state_pass_at_parity(mode, hot_run, cold_run):
    case = (hot_run if mode == "hot" else cold_run)["state_honest"]
    assert case["status"] == "ok", case.get("error")
    assert_honest_untouched(case, ("cuda", "counter", "table"))
    assert case["implementations"]["counter"]["ptx"]["globals"] == {"launched": 8}
    assert case["implementations"]["table"]["ptx"]["globals"] == {"factors": 32}
    assert "globals" not in case["implementations"]["cuda"]["ptx"]
    gaps = {}
    # Cold, the table's kernel waits on a DRAM read of the flushed table before its first
    # multiply (a few hundred ns on a ~3 us launch): its true cold gap is above 1 (x1.10 on the
    # H200), which is no refusal; hot it finds the table in L2 and is at parity.
    bound = 1.1 if mode == "hot" else 1.3
    for name in ("counter", "table"):
        impl = case["implementations"][name]
        assert impl["timing"].get("problems", []) == [] and impl["timing"]["audit"]["audited"]
        assert module_state(case, name)["restored"] is True
        gaps[name] = impl["gap"]["ratio_of_medians"]
        assert 0.9 <= gaps[name] <= bound, (name, impl["gap"])
    record(
        "none (honest .global state: counter, lookup table)",
        f"PTX {mode}",
        "ok",
        ", ".join(f"{n} x{g:.3f}" for n, g in gaps.items()),
    )


def test_cold_honest_copies_stay_at_parity_with_audits_and_fresh_inputs(cold_run):
    """Fresh inputs before every cold launch and random read-backs are the same for both
    sides: the cold A/A (64 MiB a buffer) stays at parity."""
    case = cold_run["honest_aa"]
    assert case["status"] == "ok", case.get("error")
    assert_honest_untouched(case)
    gap = case["implementations"]["cuda_again"]["gap"]
    # 30 cold samples of two placements (42.0 and 42.8 us on an H100) put the medians up to 1%
    # apart: honest is an interval that holds 1, and a point within that spread
    assert gap["ci_low"] <= 1.0 <= gap["ci_high"] and abs(gap["ratio_of_medians"] - 1) < 0.015, gap
    audit = case["implementations"]["cuda_again"]["timing"]["audit"]
    assert audit["inputs"].startswith("generated from a seed drawn per (k, j)")
    assert audit["audited"] == case["implementations"]["cuda"]["timing"]["audit"]["audited"]
    record(
        "none (honest A/A, cold, audited)", "PTX cold", "ok", f"gap x{gap['ratio_of_medians']:.4f}"
    )
