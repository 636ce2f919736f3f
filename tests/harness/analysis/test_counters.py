"""Counters without a compiler: what a static or profile block becomes, how two are told apart and
said, the counter words of --fail-on, and profiled counters kept in the history."""

from __future__ import annotations

import orjson
import pytest
from click.testing import CliRunner

from harness.analysis import fail_on
from harness.analysis.counter_diff import differences, is_share, sentence
from harness.cli import main
from harness.history.counter_series import counter_series
from harness.history.counters import from_impl, profile_counters, static_counters, value
from harness.history.store import Store
from tests.support.harness_docs import make_document, samples

STATIC = {
    "status": "ok",
    "resources": {"registers": 32, "spill_store_bytes": 0, "spill_load_bytes": 0, "stack_bytes": 0,
                  "barriers": 1, "shared_static_bytes": 2048},
    "occupancy": {"occupancy": 1.0},
    "instructions": {"classes": {"global_load": 2, "total": 10}, "in_loops": {"global_load": 2, "total": 6},
                     "loops": [{}]},
}  # fmt: skip


def profile(executed: float, stall: float = 1.0) -> dict:
    return {
        "status": "ok",
        "profiled": True,
        "tool": "ncu",
        "version": "2025.3",
        "stalls": [],
        "metrics": {
            "smsp__inst_executed.sum": {"value": executed, "unit": "inst"},
            "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio": {
                "value": stall,
                "unit": "",
            },
            "lts__t_sector_hit_rate.pct": {"value": None, "unit": "%"},
        },
    }


def test_a_static_block_becomes_named_counters_with_units():
    found = static_counters(STATIC)
    assert found["static/registers"] == [32, "registers/thread"]
    assert found["static/shared_static_bytes"] == [2048, "bytes/block"]
    assert found["static/occupancy"] == [1.0, "fraction"]
    assert found["static/in_loops/global_load"] == [2, "instructions"]
    assert found["static/loops"] == [1, "loops"]
    assert static_counters({"status": "unavailable", "reason": "no ptxas"}) == {}
    assert value(found, "static/instructions/fp64_fma") == 0  # a class the build lacks
    assert value({}, "static/instructions/fp64_fma") is None  # no mix at all


def test_profiled_counters_keep_ncu_names_and_units_and_skip_what_it_could_not_read():
    found = profile_counters(profile(1e6))
    assert found == {
        "ncu/smsp__inst_executed.sum": [1e6, "inst"],
        "ncu/smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio": [1.0, ""],
    }
    assert from_impl({"static": STATIC, "profile": profile(1e6)}).keys() >= found.keys()


def test_static_differences_count_at_any_size_profiled_ones_past_five_percent():
    base = {**static_counters(STATIC), **profile_counters(profile(1e6, 1.0))}
    head = {**static_counters({**STATIC, "resources": {**STATIC["resources"], "spill_store_bytes": 16}}),
            **profile_counters(profile(1.5e6, 1.02))}  # fmt: skip
    found = differences(base, head)
    assert [c.name for c in found] == ["static/spill_store_bytes", "ncu/smsp__inst_executed.sum"]
    assert sentence(found[0]) == "head spills 16 bytes/thread (stores) where base spilled none"
    assert (
        sentence(found[1])
        == "smsp__inst_executed.sum 1.50x (1000000 → 1500000 inst; noise floor 2.5%)"
    )
    assert found[1].profiled and not found[0].profiled
    assert differences(base, base) == []


def test_fail_on_takes_a_time_word_and_counter_words_with_thresholds():
    spec = fail_on.parse("slower,spills,registers:8,instructions:5%")
    assert spec.word == "slower"
    assert [str(r) for r in spec.counters] == ["spills", "registers:8", "instructions:5%"]
    rule = spec.counters[2]
    assert rule.trips({"static/instructions/total": 100}, {"static/instructions/total": 106})
    assert not rule.trips({"static/instructions/total": 100}, {"static/instructions/total": 105})
    assert not rule.trips({"static/instructions/total": None}, {"static/instructions/total": 900})
    assert fail_on.parse("any").word == "changed"
    for bad, message in (("spils", "unknown word 'spils'"), ("registers:x", "a number >= 0")):
        with pytest.raises(ValueError, match=message):
            fail_on.parse(bad)


def test_profiled_counters_are_kept_in_the_history_without_steps(tmp_path):
    with Store(tmp_path / "h.sqlite") as store:
        for k, executed in enumerate((1e6, 1.01e6, 2e6)):
            doc = make_document(
                {"c": {"cuda": samples(1e-3, seed=k), "forth": samples(1e-3, seed=9 + k)}},
                commit=f"{k:040x}",
                started_utc=f"2026-11-0{k + 1}T00:00:00Z",
            )
            doc["options"]["profile"] = True
            doc["cases"][0]["implementations"]["forth"]["profile"] = profile(executed)
            store.ingest(doc, trusted=True)
        sid = next(s["series_id"] for s in store.list_series() if s["impl"] == "forth")
        panel = counter_series(store, sid)["counters"]
    executed = panel["ncu/smsp__inst_executed.sum"]
    assert executed["profiled"] and executed["values"] == [1e6, 1.01e6, 2e6]
    assert executed["steps"] == [] and executed["unit"] == "inst"


def built(impl: dict, ptx_sha256: str) -> None:
    impl["build"] = {"toolchain": "nvcc", "version": "13.0", "command": ["nvcc"], "flags": [],
                     "source_sha256": "5" * 64, "build_s": 0.1, "ptx_sha256": ptx_sha256}  # fmt: skip


def test_pr_leaves_ncu_variation_between_identical_ptx_out_of_the_changes(tmp_path):
    """scale_double_work's base and head load the same PTX: the 12% its stall ratio moved is
    ncu's own variation, not a change (its cell says so; the headline gives the scale). scale_aa
    loads other PTX on each side: its profiled changes are listed."""
    from tests.runner.execution.test_pairs import pair_document

    doc = pair_document()
    sides = {"scale_aa": ("a" * 64, "b" * 64), "scale_double_work": ("c" * 64, "c" * 64)}
    for case in doc["cases"]:
        candidate = next(n for n in case["implementations"] if n.endswith("@base"))[:-5]
        for side, sha, stall in zip(("base", "head"), sides[case["id"]], (0.50, 0.56), strict=True):
            impl = case["implementations"][f"{candidate}@{side}"]
            built(impl, sha)
            impl["profile"] = profile(
                1e6 if case["id"] != "scale_aa" or side == "base" else 2e6, stall
            )
    path = tmp_path / "paired.json"
    path.write_bytes(orjson.dumps(doc))
    data = orjson.loads(CliRunner().invoke(main, ["pr", str(path), "--format", "json"]).stdout)
    rows = {r["case_id"]: r for r in data["rows"]}
    same, other = rows["scale_double_work"], rows["scale_aa"]
    assert same["counters"] == [] and not same["code_changed"]
    assert [c["name"] for c in same["profile_noise"]] == [
        "ncu/smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio"
    ]
    assert {c["name"] for c in other["counters"]} == {
        "ncu/smsp__inst_executed.sum",
        "ncu/smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",
    }
    assert other["profile_noise"] == []
    text = CliRunner().invoke(main, ["pr", str(path)]).stdout
    row = next(line for line in text.splitlines() if line.startswith("| scale_double_work"))
    assert row.endswith("| the same PTX |")
    assert (
        "Between base and head builds of the same PTX (1 profiled), ncu's own run-to-run "
        "variation moved smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio "
        "by 10.7% of its whole (scale_double_work / twice)"
    ) in text


STALL = "ncu/smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"


def test_a_share_of_a_whole_counts_by_its_fraction_of_the_whole():
    """A stall reason near zero that doubles beside a total of 20 moved by nothing that matters;
    one that moves by 2% of the total is listed, however small it was; DRAM reads and writes are
    shares of the traffic. A counter of no whole keeps its own 5%."""
    base = {
        STALL.format("long_scoreboard"): [20.0, ""],
        STALL.format("imc_miss"): [0.02, ""],
        STALL.format("math_pipe_throttle"): [0.44, ""],
        "ncu/dram__bytes_read.sum": [1e9, "byte"],
        "ncu/dram__bytes_write.sum": [262144.0, "byte"],
        "ncu/smsp__inst_executed.sum": [1e6, "inst"],
    }
    head = {**base, STALL.format("imc_miss"): [0.04, ""], STALL.format("math_pipe_throttle"): [0.99, ""],
            "ncu/dram__bytes_write.sum": [0.0, "byte"], "ncu/smsp__inst_executed.sum": [1.04e6, "inst"]}  # fmt: skip
    found = {c.name: c for c in differences(base, head)}
    assert set(found) == {STALL.format("math_pipe_throttle")}
    moved = found[STALL.format("math_pipe_throttle")]
    assert moved.scale == pytest.approx(20.0 + 0.04 + 0.99) and moved.moved > 0.02
    assert is_share(moved.name) and not is_share("ncu/smsp__inst_executed.sum")
    small = {
        "ncu/dram__bytes_read.sum": [1e6, "byte"],
        "ncu/dram__bytes_write.sum": [262144.0, "byte"],
    }
    # 1.25 MB of traffic: identical builds moved DRAM bytes by 24.7% there, so a 20.8% move is
    # within twice that noise floor (the family-wise margin), and a 51.5% one is not
    found = differences(small, {**small, "ncu/dram__bytes_write.sum": [0.0, "byte"]})
    assert found == []
    found = differences(small, {**small, "ncu/dram__bytes_write.sum": [1.6e6, "byte"]})
    assert [(c.name, round(c.moved, 3), c.floor) for c in found] == [
        ("ncu/dram__bytes_write.sum", 0.515, 0.247)
    ]
    assert "noise floor 24.7%" in sentence(found[0])
    found = differences(base, {**base, "ncu/smsp__inst_executed.sum": [1.06e6, "inst"]})
    assert [c.name for c in found] == ["ncu/smsp__inst_executed.sum"]
    nan = {**base, STALL.format("imc_miss"): [float("nan"), ""]}  # no size: not a move, no whole
    assert differences(base, nan) == []
    assert [c.name for c in differences(nan, head)] == [STALL.format("math_pipe_throttle")]
