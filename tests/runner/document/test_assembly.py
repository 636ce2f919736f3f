"""Assembly of the result document from a worker's raw record: throughput, gaps, summary."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import numpy as np
import pytest

from protocol import statistics
from protocol.errors import DocumentError
from protocol.validation import validate
from runner import document as document_gaps
from runner import document as document_rates
from runner import document as document_run
from runner.definition.spec import Geometry
from runner.execution import result
from runner.measurement import aa_control, stats
from runner.measurement.timing import HotMode

FIXTURE = json.loads(
    (Path(__file__).parents[2] / "fixtures" / "result-1.0.0-h200-axpy.json").read_text()
)
PEAKS = FIXTURE["environment"]["peaks"]
N = 1 << 27
GEOMETRY = Geometry(
    dims={"n": N},
    lengths={"x": N, "y": N},
    grid=(4224, 1, 1),
    block=(256, 1, 1),
    shared_bytes=0,
    scalars={"n": N, "a": 2.0},
    bytes=24.0 * N,
    flops=2.0 * N,
)


# --- throughput ----------------------------------------------------------------------------


def test_throughput_against_measured_peak():
    peaks = {
        "measured_memory_bytes_per_s": 4e12,
        "nominal_memory_bytes_per_s": 5e12,
        "nominal_f64_flops_per_s": 3e13,
        "nominal_f32_flops_per_s": 6e13,
    }
    out = document_rates.throughput(2e9, 3e9, 1e-3, peaks, "f64")
    assert out == {
        "bytes": 2e9,
        "bytes_per_s": 2e12,
        "fraction_of_peak_bandwidth": 0.5,
        "peak_bandwidth_source": "measured",
        "flops": 3e9,
        "flops_per_s": 3e12,
        "fraction_of_peak_flops": pytest.approx(0.1),
        "peak_flops_source": "nominal f64",
    }
    f32 = document_rates.throughput(None, 3e9, 1e-3, peaks, "f32")
    assert "bytes_per_s" not in f32
    assert f32["fraction_of_peak_flops"] == pytest.approx(0.05)
    assert f32["peak_flops_source"] == "nominal f32"


def test_throughput_falls_back_to_nominal_peaks():
    peaks = {"measured_memory_bytes_per_s": None, "nominal_memory_bytes_per_s": 5e12}
    out = document_rates.throughput(2e9, 1e9, 1e-3, peaks, None)
    assert out["fraction_of_peak_bandwidth"] == pytest.approx(0.4)
    assert out["peak_bandwidth_source"] == "nominal"
    # no f64 peak known: the rate is given, the fraction is not
    assert out["flops_per_s"] == 1e12 and "fraction_of_peak_flops" not in out


def test_throughput_without_peaks_or_time():
    assert document_rates.throughput(2e9, None, 1e-3, {}, None) == {
        "bytes": 2e9,
        "bytes_per_s": 2e12,
    }
    assert document_rates.throughput(2e9, 1e9, 0.0, PEAKS, "f64") == {}


# --- finish_case ---------------------------------------------------------------------------


def samples(median_s: float, noise: float, seed: int, n: int = 30) -> list[float]:
    rng = np.random.default_rng(seed)
    return list(median_s * (1 + noise * rng.standard_normal(n)))


def skeleton(names: dict[str, str]) -> dict:
    """A case document as bench.case_skeleton leaves it; `names` maps name -> role."""
    return {
        "id": "axpy_f64",
        "version": 1,
        "description": "y = a*x + y",
        "status": "ok",
        "baseline": next(n for n, r in names.items() if r == "baseline"),
        "dims": {"n": N},
        "check_dims": {"n": 100003},
        "launch": {"grid": [4224, 1, 1], "block": [256, 1, 1], "shared_bytes": 0},
        "implementations": {
            n: {"role": r, "toolchain": "nvcc", "source": f"kernels/{n}.cu", "entry": "axpy_f64"}
            for n, r in names.items()
        },
        "settings": {"mode": "hot", "samples": 30, "warmup": 10, "target_sample_s": 0.05},
    }


def check(status: str = "passed") -> dict:
    if status != "passed":
        return {"status": status}
    return {
        "status": "passed",
        "tolerance": "|out - ref| <= 1e-15 + 1e-15 * |ref|",
        "against": [
            {
                "elements": 100003,
                "mismatches": 0,
                "max_abs_err": 0.0,
                "max_rel_err": 0.0,
                "nonfinite_errors": 0,
                "against": "reference",
                "buffer": "y",
                "poison": "0xFF",
            }
        ],
        "unwritten_elements": 0,
        "inputs_modified": [],
        "problems": [],
        "dims": {"n": 100003},
    }


def worker_record(timings: dict[str, list[float]], checks: dict[str, str]) -> dict:
    """The record runner.execution.case returns: per-implementation facts and the raw measurement."""
    names = list(timings)
    return {
        "status": "ok",
        "impls": {
            n: {
                "load_s": 0.01,
                "ptx": {"version": "9.0", "target": "sm_90", "address_size": 64, "entries": ["k"]},
                "check": check(checks[n]),
            }
            for n in names
        },
        "phases_s": {"check_s": 0.02, "inputs_s": 0.001},
        "measurement": {
            "mode": "hot",
            "warmup": 10,
            "wall_s": 3.2,
            "orders": [names if r % 2 == 0 else names[::-1] for r in range(30)],
            "impls": {
                n: {
                    "name": n,
                    "samples_s": s,
                    "batch": 64,
                    "calibration_s": 0.05,
                    "method": HotMode.method,
                }
                for n, s in timings.items()
            },
        },
    }


def finished(
    base_s: list[float], cand_s: list[float], cand_check: str = "passed", base_check: str = "passed"
) -> dict:
    doc = skeleton({"cuda": "baseline", "handptx": "candidate"})
    record = worker_record(
        {"cuda": base_s, "handptx": cand_s}, {"cuda": base_check, "handptx": cand_check}
    )
    return result.finish_case(doc, record, GEOMETRY, "f64", PEAKS)


def test_finish_case_gives_a_stable_gap_of_one_and_a_half():
    base = samples(7.8e-4, 0.002, seed=1)
    doc = finished(base, [1.5 * s for s in base])
    base_doc, cand = doc["implementations"]["cuda"], doc["implementations"]["handptx"]
    assert base_doc["load_s"] == 0.01 and cand["check"]["status"] == "passed"
    assert "gap" not in base_doc  # the baseline has no gap to itself
    gap = cand["gap"]
    assert gap["ratio_of_medians"] == pytest.approx(1.5)
    assert gap["median_of_round_ratios"] == pytest.approx(1.5)
    # exact copies: the bootstrap collapses to 1.5 and the interval is the run-fixed term alone
    half_width = 1.959963984540054 * stats.INSTANCE_SD * 1.5
    assert gap["systematic"] == stats.INSTANCE_SD
    assert gap["ci_low"] == pytest.approx(1.5 - half_width, rel=1e-9)
    assert gap["ci_high"] == pytest.approx(1.5 + half_width, rel=1e-9)
    assert gap["rounds"] == 30 and gap["stable"] is True
    for impl in (base_doc, cand):
        t = impl["timing"]
        assert t["mode"] == "hot" and t["batch"] == 64 and t["warmup"] == 10
        assert t["stats"]["count"] == 30 and t["stats"]["stable"] is True
        assert len(t["samples_s"]) == 30
        assert impl["throughput"]["bytes_per_s"] == pytest.approx(
            GEOMETRY.bytes / t["stats"]["median_s"]
        )
    assert cand["timing"]["stats"]["median_s"] == pytest.approx(
        1.5 * base_doc["timing"]["stats"]["median_s"]
    )
    assert doc["timing_wall_s"] == 3.2
    assert doc["round_orders"] == [["cuda", "handptx"], ["handptx", "cuda"]]
    assert doc["phases_s"] == {"check_s": 0.02, "inputs_s": 0.001}


def test_a_cold_case_stopped_at_the_floor_says_so_and_its_gap_adds_the_placement_term():
    base = samples(1.3e-6, 0.01, seed=4)
    doc = skeleton({"cuda": "baseline", "handptx": "candidate"})
    record = worker_record(
        {"cuda": base, "handptx": list(base)}, {"cuda": "passed", "handptx": "passed"}
    )
    record["measurement"]["mode"] = "cold"
    record["measurement"]["precision"] = {
        "target": 0.005,
        "half_width": 0.0076,
        "converged": False,
        "samples": 30,
        "stopped_by": "floor",
        "spent_s": 0.1,
    }
    result.finish_case(doc, record, GEOMETRY, "f64", {})  # no peaks: any rate is possible
    gap = doc["implementations"]["handptx"]["gap"]
    median = doc["implementations"]["cuda"]["timing"]["stats"]["median_s"]
    assert gap["systematic"] == pytest.approx(stats.systematic("cold", median))
    assert gap["systematic"] > 10 * stats.INSTANCE_SD  # 5 ns of a 1.3 us kernel
    (note,) = doc["notes"]
    assert "stopped by floor" in note and "below what stays fixed within the run" in note


def test_a_noisy_side_makes_the_gap_unstable():
    base, noisy = samples(1e-3, 0.002, seed=1), samples(1.5e-3, 0.2, seed=2)
    doc = finished(base, noisy)
    assert doc["implementations"]["handptx"]["timing"]["stats"]["stable"] is False
    assert doc["implementations"]["handptx"]["gap"]["stable"] is False
    doc = finished(noisy, base)  # an unstable baseline spoils every candidate's gap
    assert doc["implementations"]["cuda"]["timing"]["stats"]["stable"] is False
    assert doc["implementations"]["handptx"]["timing"]["stats"]["stable"] is True
    assert doc["implementations"]["handptx"]["gap"]["stable"] is False


def test_no_gap_for_an_unchecked_candidate():
    base = samples(1e-3, 0.002, seed=1)
    doc = finished(base, [1.5 * s for s in base], cand_check="not_checked")
    cand = doc["implementations"]["handptx"]
    assert "timing" in cand  # timed and shown, but not compared
    assert cand["gap"] is None and "not checked" in cand["gap_note"]


def test_failed_case_keeps_checks_and_gets_no_timing():
    base = samples(1e-3, 0.002, seed=1)
    doc = skeleton({"cuda": "baseline", "handptx": "candidate"})
    doc["status"] = "failed"
    doc["error"] = {"phase": "check", "message": "handptx: y: 3 elements were never written"}
    record = worker_record({"cuda": base, "handptx": base}, {"cuda": "passed", "handptx": "failed"})
    result.finish_case(doc, record, GEOMETRY, "f64", PEAKS)
    for impl in doc["implementations"].values():
        assert "check" in impl and "timing" not in impl and "gap" not in impl
    assert "timing_wall_s" not in doc


def test_finish_case_without_a_worker_record():
    doc = skeleton({"cuda": "baseline", "handptx": "candidate"})
    doc["status"] = "failed"
    doc["error"] = {"phase": "crash", "message": "the worker exited with status -11"}
    result.finish_case(doc, None, GEOMETRY, "f64", PEAKS)
    assert doc["phases_s"] == {}
    assert all(
        set(i) == {"role", "toolchain", "source", "entry"} for i in doc["implementations"].values()
    )


# --- summary and document ------------------------------------------------------------------


def case_with_gap(ratio: float, stable: bool = True, status: str = "ok", cid: str = "c") -> dict:
    gap = {"ratio_of_medians": ratio, "stable": stable, "ci_low": ratio / 1.02}
    gap.update(ci_high=ratio * 1.02, confidence=0.95)
    return {
        "id": cid,
        "status": status,
        "implementations": {"cuda": {"role": "baseline"}, "handptx": {"gap": gap}},
    }


def test_summary_geomean_is_over_the_fixed_case_set_with_an_interval():
    """Every case the candidate is in counts: unstable ones in the mean (marked), cases without
    a gap listed as missing, so the headline says 'over 4 of 5' instead of changing its set."""
    cases = [
        case_with_gap(2.0, cid="a"),
        case_with_gap(0.5, cid="b"),
        case_with_gap(4.0, cid="c"),
        case_with_gap(100.0, stable=False, cid="d"),  # unstable: in the mean, marked
        {
            "id": "e",
            "status": "ok",
            "implementations": {"handptx": {"gap": None, "gap_note": "not checked"}},
        },
        {"id": "f", "status": "failed", "implementations": {}},
        {"id": "g", "status": "skipped", "implementations": {}},
    ]
    s = document_run.summary(cases)
    assert (s["cases"], s["ok"], s["failed"], s["skipped"], s["unstable"]) == (7, 5, 1, 1, 1)
    headline = s["geomean_gap"]["handptx"]
    assert headline["value"] == pytest.approx((2.0 * 0.5 * 4.0 * 100.0) ** 0.25)
    assert (headline["cases"], headline["of"]) == (4, 5)
    assert headline["missing"] == ["e"] and headline["unstable"] == ["d"]
    # each case's interval is +-ln(1.02) in log space: se = ln(1.02) / 1.96; four of them
    half = 1.96 * math.sqrt(4 * (math.log(1.02) / 1.96) ** 2) / 4
    assert math.log(headline["ci_high"] / headline["value"]) == pytest.approx(half)
    assert math.log(headline["value"] / headline["ci_low"]) == pytest.approx(half)


def test_summary_of_nothing():
    s = document_run.summary([])
    assert s == {"cases": 0, "ok": 0, "failed": 0, "skipped": 0, "unstable": 0, "geomean_gap": {}}


def test_document_from_a_synthetic_case_validates():
    base = samples(7.8e-4, 0.002, seed=1)
    ok = finished(base, [1.5 * s for s in base])
    ok["worker_wall_s"] = 4.4
    unchecked = finished(base, samples(7.9e-4, 0.002, seed=5), cand_check="not_checked")
    failed = skeleton({"cuda": "baseline", "handptx": "candidate"})
    failed["status"] = "failed"
    failed["error"] = {"phase": "build", "message": "nvcc failed"}
    result.finish_case(failed, None, GEOMETRY, "f64", PEAKS)
    doc = document_run.document(
        copy.deepcopy(FIXTURE["suite"]),
        copy.deepcopy(FIXTURE["environment"]),
        copy.deepcopy(FIXTURE["options"]),
        [ok, unchecked, failed],
        "2026-11-29T12:01:04.517730Z",
        "2026-11-29T12:01:10.855029Z",
    )
    validate(doc, "result")
    assert doc["complete"] is True and doc["kind"] == "kernelgap.result"
    assert doc["summary"]["ok"] == 2 and doc["summary"]["failed"] == 1
    headline = doc["summary"]["geomean_gap"]["handptx"]
    assert headline["value"] == pytest.approx(1.5) and headline["cases"] == 1
    assert headline["of"] == 3 and headline["missing"] == ["axpy_f64", "axpy_f64"]
    assert headline["ci_low"] < 1.5 < headline["ci_high"]
    partial = document_run.document(
        doc["suite"], doc["environment"], {}, [ok], doc["started_utc"], None
    )
    validate(partial, "result")
    assert partial["complete"] is False

    broken = copy.deepcopy(doc)
    del broken["cases"][0]["implementations"]["handptx"]["gap"]["rounds"]
    with pytest.raises(DocumentError, match="rounds"):
        validate(broken, "result")


def test_the_frozen_fixture_is_recomputed_from_its_raw_samples():
    validate(FIXTURE, "result")
    recomputed = document_run.summary(
        FIXTURE["cases"]
    )  # newer than the fixture: the interval, of n
    for name, headline in FIXTURE["summary"]["geomean_gap"].items():
        assert {k: recomputed["geomean_gap"][name][k] for k in headline} == headline
        assert recomputed["geomean_gap"][name]["of"] == headline["cases"]
    recomputed.pop("geomean_gap")
    assert recomputed == {k: v for k, v in FIXTURE["summary"].items() if k != "geomean_gap"}
    impls = FIXTURE["cases"][0]["implementations"]
    base, cand = impls["cuda"]["timing"], impls["handptx"]["timing"]
    for t in (base, cand):
        recomputed = statistics.summarize(t["samples_s"])  # 1.1.0 added p10_s and p90_s
        assert {k: recomputed[k] for k in t["stats"]} == pytest.approx(t["stats"])
        assert recomputed["p10_s"] <= recomputed["median_s"] <= recomputed["p90_s"]
    # 1.0.0 added nothing for what stays fixed within a run (gap.systematic, since 1.6.0)
    recomputed = document_gaps.gap_block(base["samples_s"], cand["samples_s"], True, systematic=0.0)
    assert recomputed.pop("systematic") == 0.0
    assert recomputed.pop("systematic_source") == "default"  # newer than the fixture (1.9.0)
    # bootstrap and lag1_autocorrelation are newer than the fixture; its rounds are independent
    assert recomputed.pop("bootstrap") == "rounds"
    assert -1 <= recomputed.pop("lag1_autocorrelation") <= 1
    assert recomputed == pytest.approx(impls["handptx"]["gap"])


# --- physically impossible timings (issue 13) ----------------------------------------------


def test_a_time_above_the_devices_bandwidth_fails_the_case_naming_both_figures():
    doc = skeleton({"cuda": "baseline", "handptx": "candidate"})
    honest = samples(GEOMETRY.bytes / PEAKS["measured_memory_bytes_per_s"] * 1.02, 0.001, 1)
    cheat = samples(GEOMETRY.bytes / PEAKS["measured_memory_bytes_per_s"] / 3, 0.001, 2)
    record = worker_record(
        {"cuda": honest, "handptx": cheat}, {"cuda": "passed", "handptx": "passed"}
    )
    big = 10 * GEOMETRY.bytes  # a DRAM-sized working set
    peaks = {**PEAKS, "l2_bytes": 50 * 2**20}
    result.finish_case(doc, record, GEOMETRY, "f64", peaks, big)
    assert doc["status"] == "failed" and doc["error"]["phase"] == "timing"
    message = doc["error"]["message"]
    assert message.startswith("physically impossible timing") and "handptx: " in message
    measured = PEAKS["measured_memory_bytes_per_s"] / 1e9
    assert f"is above the device's measured (cuMemcpyDtoD copy) {measured:.0f} GB/s" in message
    assert "cuda:" not in message
    bound = doc["implementations"]["handptx"]["throughput"]["bound"]
    # every access to the resident share of the footprint (runner.measurement.environment.l2_allowance)
    allowed = GEOMETRY.bytes * min(1.0, 50 * 2**20 / big)
    assert bound["exceeded"] and bound["l2_allowance_bytes"] == pytest.approx(allowed)
    assert doc["implementations"]["cuda"]["throughput"]["bound"]["exceeded"] is False
    assert doc["implementations"]["handptx"]["gap"] is None
    assert len(doc["implementations"]["handptx"]["timing"]["samples_s"]) == 30  # nothing lost


def test_only_the_row_above_the_bound_loses_its_gap_and_honest_rows_keep_theirs():
    """The row over the device's ceiling is flagged with both figures; the case is failed (the
    run says so), but an honest candidate of the same case keeps its gap: one impossible row
    does not take the comparison down with it."""
    doc = skeleton({"cuda": "baseline", "handptx": "candidate", "llvm": "candidate"})
    honest = samples(GEOMETRY.bytes / PEAKS["measured_memory_bytes_per_s"] * 1.02, 0.001, 1)
    cheat = samples(GEOMETRY.bytes / PEAKS["measured_memory_bytes_per_s"] / 3, 0.001, 2)
    also = samples(GEOMETRY.bytes / PEAKS["measured_memory_bytes_per_s"] * 1.05, 0.001, 4)
    record = worker_record(
        {"cuda": honest, "handptx": cheat, "llvm": also},
        {"cuda": "passed", "handptx": "passed", "llvm": "passed"},
    )
    peaks = {**PEAKS, "l2_bytes": 50 * 2**20}
    result.finish_case(doc, record, GEOMETRY, "f64", peaks, 10 * GEOMETRY.bytes)
    impls = doc["implementations"]
    assert doc["status"] == "failed" and "handptx: " in doc["error"]["message"]
    assert impls["handptx"]["gap"] is None
    assert "handptx cannot be trusted" in impls["handptx"]["gap_note"]
    assert "GB/s" in impls["handptx"]["gap_note"]
    assert impls["llvm"]["gap"]["ratio_of_medians"] == pytest.approx(1.05 / 1.02, rel=0.01)


def test_an_l2_resident_case_is_not_judged_against_dram_bandwidth():
    doc = skeleton({"cuda": "baseline", "handptx": "candidate"})
    fast = samples(GEOMETRY.bytes / PEAKS["measured_memory_bytes_per_s"] / 3, 0.001, 3)
    record = worker_record({"cuda": fast, "handptx": fast}, {"cuda": "passed", "handptx": "passed"})
    result.finish_case(doc, record, GEOMETRY, "f64", {**PEAKS, "l2_bytes": 50 * 2**20}, 24 * 2**20)
    assert doc["status"] == "ok" and doc["implementations"]["handptx"]["gap"] is not None


def test_a_flop_rate_above_the_nominal_peak_is_impossible():
    peaks = {"nominal_f64_flops_per_s": 6.7e13}
    possible = document_rates.throughput(None, 1e11, 1e-2, peaks, "f64")  # 1e13 FLOP/s
    assert document_rates.impossible(possible, peaks, None) is None
    too_fast = document_rates.throughput(None, 1e12, 1e-2, peaks, "f64")  # 1e14 FLOP/s
    assert document_rates.impossible(too_fast, peaks, None) == (
        "100.00 TFLOP/s is above the device's nominal f64 67.00 TFLOP/s (x1.05 allowed)"
    )


def with_control(record: dict, control_s: list[float], per_side_loads: int = 1) -> dict:
    """`record` with the hidden A/A control timed beside its sides (runner.execution.case)."""
    name = aa_control.control_name("cuda")
    loads = [int(v) for v in aa_control.loads_of_samples(len(control_s))]
    record["measurement"]["impls"][name] = {
        "name": name,
        "samples_s": control_s,
        "batch": 64,
        "calibration_s": 0.05,
        "method": HotMode.method,
        "loads": loads,
    }
    record["measurement"]["control"] = {"name": name, "per_side_loads": per_side_loads}
    return record


def test_the_aa_control_sets_every_gaps_systematic_term_and_is_never_a_row():
    base = samples(7.8e-4, 0.0005, seed=1)
    offsets = np.array([0.0, 4e-4, -3e-4, 2e-4, -5e-4, 1e-4, 3e-4, -2e-4])
    loads = aa_control.loads_of_samples(30)
    control = list(np.array(base) * np.exp(offsets[loads]))
    doc = skeleton({"cuda": "baseline", "handptx": "candidate"})
    record = worker_record(
        {"cuda": base, "handptx": [1.5 * s for s in base]}, {"cuda": "passed", "handptx": "passed"}
    )
    result.finish_case(doc, with_control(record, control), GEOMETRY, "f64", PEAKS)
    aa = doc["aa_control"]
    assert set(doc["implementations"]) == {"cuda", "handptx"}  # hidden: no row, no geomean
    assert aa["loads"] == 8 and aa["degrees_of_freedom"] == 7 and aa["per_side_loads"] == 1
    # no rounds' noise in log(control / baseline) and the offsets' mean 0: the spread reads
    # var(offsets) on 7 df, the control's offset 0 on 1; pooled, 7 / 8 of that variance
    spread = float(np.var(offsets, ddof=1))
    assert aa["load_sd"] == pytest.approx(np.sqrt(7 / 8 * spread), rel=0.05)
    assert aa["systematic"] == pytest.approx(aa_control.gap_term(aa["load_sd"]))
    assert aa["ci_low"] <= 1.0 <= aa["ci_high"] and aa["sample_loads"] == list(loads)
    gap = doc["implementations"]["handptx"]["gap"]
    assert gap["systematic"] == aa["systematic"] and gap["systematic_source"] == "control"
    half = (gap["ci_high"] - gap["ci_low"]) / 2 / gap["ratio_of_medians"]
    assert half >= 1.959963984540054 * aa["systematic"] * 0.999
    full = document_run.document(
        copy.deepcopy(FIXTURE["suite"]),
        copy.deepcopy(FIXTURE["environment"]),
        {},
        [doc],
        "2026-11-29T12:01:04.517730Z",
        "2026-11-29T12:01:10.855029Z",
    )
    validate(full, "result")


def test_without_a_control_the_gaps_say_their_term_is_the_default():
    base = samples(7.8e-4, 0.002, seed=1)
    doc = finished(base, [1.5 * s for s in base])
    assert "aa_control" not in doc
    gap = doc["implementations"]["handptx"]["gap"]
    assert gap["systematic_source"] == "default" and gap["systematic"] == stats.INSTANCE_SD


def test_a_hot_row_flagged_against_the_baseline_keeps_its_gap_with_the_flag():
    """Issue 50 item 10: the output-dependence check's relative flag is said beside the gap,
    not a reason to withhold it (a row flagged output-dependent still fails the case)."""
    doc = skeleton({"cuda": "baseline", "handptx": "candidate"})
    record = worker_record(
        {"cuda": samples(1e-3, 0.001, 1), "handptx": samples(0.8e-3, 0.001, 2)},
        {"cuda": "passed", "handptx": "passed"},
    )
    flag = "fast only in plain hot replay: under the same traffic x1.40 the baseline's time"
    record["impls"]["handptx"]["integrity"] = {"output_dependent": False, "flag": flag}
    result.finish_case(doc, record, GEOMETRY, "f64", PEAKS)
    impl = doc["implementations"]["handptx"]
    assert doc["status"] == "ok" and impl["gap"]["ratio_of_medians"] == pytest.approx(0.8, 0.01)
    assert impl["gap_note"] == f"flagged: {flag}"
    assert "gap_note" not in doc["implementations"]["cuda"]
