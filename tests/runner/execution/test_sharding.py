"""runner bench --gpus on the CPU (issue 15): the dealing, the no-split rule, the merge and one
GPU failing, with fake devices (each GPU a stand-in worker that takes a fixed time per case)."""

from __future__ import annotations

import copy
import re
import threading
import time
from pathlib import Path

import orjson
import pytest

from harness.errors import GpuMismatchError
from harness.history.store import Store
from protocol.validation import validate
from runner.errors import ManifestError
from runner.execution import suite as suite_module
from runner.execution.result import case_skeleton, record_failure
from runner.execution.suite import BenchOptions, run_suite

ROOT = Path(__file__).resolve().parents[3]
RECORDED = orjson.loads((ROOT / "tests/fixtures/result-1.0.0-h200-axpy.json").read_bytes())
SUITE = ROOT / "benchmarks/cases.toml"


class Case:
    def __init__(self, cid):
        self.id = cid


# -- the pieces --------------------------------------------------------------------------


def test_gpus_are_all_or_distinct_ordinals():
    assert suite_module.parse_gpus("all", 4) == [0, 1, 2, 3]
    assert suite_module.parse_gpus("1, 0", 2) == [1, 0]
    for bad, expected in [
        ("all", "no CUDA device"),
        ("0,x", "expected 'all' or CUDA ordinals"),
        ("0,0", "distinct ordinals"),
        ("-1", "distinct ordinals"),
        ("2", "this host has 2 CUDA device(s), 0 to 1"),
    ]:
        with pytest.raises(ValueError, match=re.escape(expected)):
            suite_module.parse_gpus(bad, None if bad == "all" else 2)


def test_cases_are_dealt_longest_expected_first_and_the_rest_in_suite_order():
    cases = [Case(c) for c in ("a", "b", "c", "d", "e")]
    previous = {"cases": [{"id": "b", "worker_wall_s": 3.0}, {"id": "d", "worker_wall_s": 9.0}]}
    order = suite_module.deal_order(cases, suite_module.previous_durations(previous))
    assert [c.id for c in order] == ["d", "b", "a", "c", "e"]
    assert [c.id for c in suite_module.deal_order(cases, {})] == ["a", "b", "c", "d", "e"]


def fake_gpus(seconds: dict[str, float], fail_on: dict[int, str] | None = None):
    """run(case, device) as a GPU would: a case takes seconds[case.id]; each implementation of
    the case records the device it ran on; device d fails (its worker dies) on case fail_on[d]
    ("*": on whichever case it takes)."""
    ran: list[tuple[str, int]] = []
    lock = threading.Lock()

    def run(case, device):
        time.sleep(seconds.get(case.id, 0.01))
        with lock:
            ran.append((case.id, device))
        if (fail_on or {}).get(device) in (case.id, "*"):
            return {"id": case.id, "status": "failed", "error": {"phase": "crash"}}
        impls = {name: {"device": device} for name in ("cuda", "llvm", "warpforth")}
        return {"id": case.id, "status": "ok", "implementations": impls}

    return run, ran


def test_both_gpus_work_and_a_case_never_splits():
    seconds = {c: 0.05 for c in "abcdef"}
    run, ran = fake_gpus(seconds)
    done = []
    suite_module.run_sharded([Case(c) for c in "abcdef"], [0, 1], run, done.append, None, print)
    assert sorted(c for c, _ in ran) == list("abcdef")  # every case once
    assert {d for _, d in ran} == {0, 1}  # both GPUs took cases
    for doc in done:  # the implementations of a case share one device
        assert len({i["device"] for i in doc["implementations"].values()}) == 1


def test_a_gpu_that_fails_loses_only_its_case_and_the_others_finish_the_suite():
    run, ran = fake_gpus({c: 0.02 for c in "abcdefg"}, fail_on={1: "*"})
    done, said = [], []
    suite_module.run_sharded(
        [Case(c) for c in "abcdefg"], [0, 1], run, done.append, None, said.append
    )
    assert sorted(d["id"] for d in done) == list("abcdefg")
    on_1 = [c for c, d in ran if d == 1]
    assert len(on_1) == 1  # GPU 1 took nothing after it failed
    assert [d["id"] for d in done if d["status"] == "failed"] == on_1
    assert f"kernelgap: GPU 1 failed during {on_1[0]} (crash); it takes no more cases" in said


def test_when_every_gpu_fails_the_cases_left_are_not_run_saying_why():
    run, _ = fake_gpus({}, fail_on={0: "*", 1: "*"})
    done = []

    def not_run(case, why):
        return {"id": case.id, "status": "skipped", "why": why}

    suite_module.run_sharded([Case(c) for c in "abcd"], [0, 1], run, done.append, not_run, print)
    skipped = sorted(d["id"] for d in done if d["status"] == "skipped")
    assert skipped == ["c", "d"]
    assert all("every GPU of the run failed" in d["why"] for d in done if d["status"] == "skipped")


# -- the merge: runner bench --gpus with stand-in workers -------------------------------------


def stand_ins(monkeypatch, names: dict[int, str]):
    env = copy.deepcopy(RECORDED["environment"])
    env["sensors"] = env.pop("sensors_start")

    def probe(options):
        probed = copy.deepcopy(env)
        probed["device"]["name"] = names[options.device]
        probed["device"]["uuid"] = f"GPU-{options.device:08d}-0000-0000-0000-000000000000"
        return {**probed, "device_count": len(names)}

    monkeypatch.setattr(suite_module, "probe_environment", probe)
    monkeypatch.setattr(suite_module.environment, "nvml_sensors", lambda *a, **k: None)
    devices = []

    def one_case(suite, case, arch, options, *args, **kwargs):
        devices.append((case.id, options.device, kwargs["environment_device"]["uuid"]))
        time.sleep(0.02)
        doc = case_skeleton(case)
        record_failure(doc, "timing", f"case {case.id}: stand-in worker")
        return doc

    monkeypatch.setattr(suite_module, "run_one", one_case)
    return devices


def test_the_merged_document_names_each_cases_gpu_in_suite_order(monkeypatch):
    devices = stand_ins(monkeypatch, {0: "NVIDIA H200", 1: "NVIDIA H200"})
    doc, _ = run_suite(SUITE, BenchOptions(gpus="all", quiet=True))
    validate(doc, "result", "sharded run")
    ids = [c.id for c in suite_module.manifest.load(SUITE).cases]
    assert [c["id"] for c in doc["cases"]] == ids
    assert doc["options"]["gpus"] == [0, 1]
    assert [d["index"] for d in doc["environment"]["devices"]] == [0, 1]
    for case in doc["cases"]:
        ran = next(d for d in devices if d[0] == case["id"])
        assert case["device"] == {"index": ran[1], "uuid": ran[2], "name": "NVIDIA H200"}
    assert {d for _, d, _ in devices} == {0, 1}


def test_bad_gpus_are_refused_before_any_case_runs(monkeypatch):
    devices = stand_ins(monkeypatch, {0: "NVIDIA H200"})
    with pytest.raises(ManifestError, match=r"this host has 1 CUDA device"):
        run_suite(SUITE, BenchOptions(gpus="0,1", quiet=True))
    assert devices == []


def test_a_run_over_two_gpu_models_is_refused_for_the_canonical_history(monkeypatch, tmp_path):
    stand_ins(monkeypatch, {0: "NVIDIA H200", 1: "NVIDIA H100 80GB HBM3"})
    doc, _ = run_suite(
        SUITE, BenchOptions(gpus="0,1", case_ids=("axpy_f64", "scale_i64"), quiet=True)
    )
    validate(doc, "result", "mixed run")
    with (
        Store(tmp_path / "h.sqlite") as store,
        pytest.raises(GpuMismatchError, match="different GPU models"),
    ):
        store.ingest(doc, trusted=True)


def test_a_malformed_gpus_or_previous_is_refused_before_the_gpu_is_probed(monkeypatch, tmp_path):
    probed = []
    monkeypatch.setattr(suite_module, "probe_environment", lambda options: probed.append(1))
    with pytest.raises(ManifestError, match="expected 'all' or CUDA ordinals"):
        run_suite(SUITE, BenchOptions(gpus="0,one", quiet=True))
    bad = tmp_path / "previous.json"
    bad.write_text("{not json")
    with pytest.raises(ManifestError, match=r"--previous .*previous\.json"):
        run_suite(SUITE, BenchOptions(gpus="all", previous=bad, quiet=True))
    assert probed == []
