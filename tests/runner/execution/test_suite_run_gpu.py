"""The runner end to end on a real GPU: one bench run of tests/gpu_suite, then checks on its document.

Run on the GPU box with `pytest -m gpu`; skipped (with the reason) where no GPU is usable.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from protocol.validation import validate
from runner.execution import suite
from runner.execution.case import COLD_LOADS
from runner.measurement.timing.cold import launches_for
from tests.conftest import ROOT

pytestmark = pytest.mark.gpu
SUITE = ROOT / "tests" / "gpu_suite" / "cases.toml"


def _bench(tmp_path_factory, *args) -> tuple[dict, subprocess.CompletedProcess]:
    out = tmp_path_factory.mktemp("bench") / "result.json"
    done = subprocess.run(
        [sys.executable, "-m", "runner", "bench", str(SUITE), "-o", str(out), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert out.exists(), f"no document written; stderr:\n{done.stderr}"
    keep = os.environ.get("KERNELGAP_TEST_ARTIFACTS")  # e.g. $OUT on the GPU box, for the notes
    if keep:
        shutil.copy(out, Path(keep) / f"gpu-suite{'-'.join(('', *args)).replace('--', '')}.json")
    return orjson.loads(out.read_bytes()), done


@pytest.fixture(scope="module")
def hot_run(tmp_path_factory):
    return _bench(tmp_path_factory)


@pytest.fixture(scope="module")
def cold_run(tmp_path_factory):
    return _bench(
        tmp_path_factory, "--mode", "cold", "--case", "scale_small", "--case", "scale_double_work"
    )


def _case(doc: dict, case_id: str) -> dict:
    return next(c for c in doc["cases"] if c["id"] == case_id)


def test_document_is_valid_and_exit_status_reports_failures(hot_run):
    doc, done = hot_run
    validate(doc, "result", "hot run")
    assert doc["complete"] is True
    assert done.returncode == 1, "planted faults must make the run exit 1"
    assert done.stdout == "", "with -o, stdout carries nothing"
    assert "[scale_aa] ok" in done.stderr  # progress goes to stderr
    env = doc["environment"]
    assert env["device"]["sm_count"] > 0 and env["device"]["arch"].startswith("sm_")
    assert env["toolchains"]["nvcc"]["version"]


def test_end_to_end_case_is_checked_timed_and_summarised(hot_run):
    case = _case(hot_run[0], "scale_aa")
    assert case["status"] == "ok", case.get("error")
    # the sequential rule: FIRST_SAMPLES rounds first (3 a control load), then on to 30 unless
    # every interval is precise
    rounds = case["sequential"]["samples"]
    assert (
        suite.FIRST_SAMPLES <= rounds <= 30 and case["sequential"]["first"] == suite.FIRST_SAMPLES
    )
    for impl in case["implementations"].values():
        assert impl["check"]["status"] == "passed"
        assert impl["check"]["unwritten_elements"] == 0
        assert impl["timing"]["stats"]["count"] == rounds
        assert len(impl["timing"]["samples_s"]) == rounds
        assert impl["timing"]["batch"] >= 1 and impl["timing"]["calibration_s"] > 0
        assert impl["load_s"] > 0 and impl["build"]["build_s"] > 0
        assert 0 < impl["throughput"]["fraction_of_peak_bandwidth"] < 1.2
    first, second = case["round_orders"]  # a rotation, then it reversed; the A/A control too
    assert sorted(first) == ["cuda", "cuda_again", "cuda~aa"] and second == first[::-1]


def test_a_a_gap_is_parity(hot_run):
    gap = _case(hot_run[0], "scale_aa")["implementations"]["cuda_again"]["gap"]
    assert gap["ci_low"] <= 1.0 <= gap["ci_high"], gap
    assert abs(gap["ratio_of_medians"] - 1.0) < 0.005, gap


def test_twice_the_work_gives_a_gap_near_two(hot_run):
    case = _case(hot_run[0], "scale_double_work")
    assert case["status"] == "ok", case.get("error")
    gap = case["implementations"]["twice"]["gap"]
    assert 1.8 < gap["ratio_of_medians"] < 2.2, gap
    assert gap["ci_low"] > 1.5


def test_out_of_bounds_kernel_is_a_structured_error(hot_run):
    case = _case(hot_run[0], "fault_oob")
    assert case["status"] == "failed"
    assert case["error"]["phase"] == "check"
    assert case["error"]["cuda_error"] == "CUDA_ERROR_ILLEGAL_ADDRESS"
    assert "oob" in case["error"]["message"]


def test_hanging_kernel_times_out_and_later_cases_still_run(hot_run):
    doc = hot_run[0]
    case = _case(doc, "fault_hang")
    assert case["status"] == "failed"
    assert case["error"]["phase"] == "timeout"
    assert "8 s" in case["error"]["message"]
    ids = [c["id"] for c in doc["cases"]]
    later = ids[ids.index("fault_hang") + 1 :]
    assert later and all(
        _case(doc, cid)["status"] == "failed" and _case(doc, cid)["error"]["phase"] == "check"
        for cid in later
    )
    assert _case(doc, "scale_small")["status"] == "ok"


def test_unwritten_output_fails_the_gate(hot_run):
    case = _case(hot_run[0], "bug_unwritten")
    assert case["status"] == "failed" and case["error"]["phase"] == "check"
    half = case["implementations"]["half"]["check"]
    assert half["status"] == "failed"
    assert half["unwritten_elements"] == 4099 // 2
    assert "timing" not in case["implementations"]["cuda"], (
        "a case is timed only after every implementation passed"
    )
    assert case["implementations"]["cuda"]["check"]["status"] == "passed"


def test_kernel_writing_its_input_is_caught(hot_run):
    case = _case(hot_run[0], "bug_writes_input")
    check = case["implementations"]["scribble"]["check"]
    assert check["status"] == "failed"
    assert check["inputs_modified"] == ["x"]
    assert any('role = "inout"' in p for p in check["problems"])


def test_cold_mode_flushes_l2(cold_run, hot_run):
    doc, done = cold_run
    validate(doc, "result", "cold run")
    assert done.returncode == 0, done.stderr
    cold = _case(doc, "scale_small")["implementations"]["cuda"]
    hot = _case(hot_run[0], "scale_small")["implementations"]["cuda"]
    assert cold["timing"]["mode"] == "cold"
    assert f"take {COLD_LOADS} loads of the PTX in turn" in cold["timing"]["method"]
    assert _case(doc, "scale_small")["phases_s"]["cold_loads_s"] > 0  # reported apart
    # a sample is the mean of the launches 20 us of kernel time takes (from probe launches)
    # (from the probes' fastest launch: within 25% of the samples' median)
    median, batch = cold["timing"]["stats"]["median_s"], cold["timing"]["batch"]
    assert launches_for(1.25 * median) <= batch <= launches_for(0.8 * median), (batch, median)
    # 16 MiB fits in the L2: hot replays hit it, a cold launch after the flush cannot.
    assert cold["timing"]["stats"]["median_s"] > 1.2 * hot["timing"]["stats"]["median_s"]
    gap = _case(doc, "scale_double_work")["implementations"]["twice"]["gap"]
    assert 1.6 < gap["ratio_of_medians"] < 2.4, gap


def test_kernel_printf_cannot_forge_worker_events(hot_run):
    doc, done = hot_run
    case = _case(doc, "printf_noise")
    assert case["status"] == "ok", case.get("error")
    assert case["implementations"]["printf"]["check"]["status"] == "passed"
    assert "forged by printf" in done.stderr  # the kernel's output is shown as log, not parsed


def test_a_write_past_the_end_of_a_buffer_fails_the_gate(hot_run):
    case = _case(hot_run[0], "bug_past_end")
    assert case["status"] == "failed" and case["error"]["phase"] == "check"
    check = case["implementations"]["past_end"]["check"]
    assert check["out_of_bounds_writes"] == {"out": {"bytes_before": 0, "bytes_after": 8}}
    assert case["implementations"]["cuda"]["check"]["out_of_bounds_writes"] == {}


def test_a_bug_that_shows_only_at_the_timed_size_fails_before_timing(hot_run):
    case = _case(hot_run[0], "bug_large_only")
    assert case["status"] == "failed" and case["error"]["phase"] == "check"
    assert "at the timed size" in case["error"]["message"]
    check = case["implementations"]["large_only"]["check"]
    timed = [a for a in check["against"] if a.get("size") == "timed"]
    assert timed and timed[0]["mismatches"] == 1
    assert "timing" not in case["implementations"]["cuda"]
