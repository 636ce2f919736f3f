"""runner bench --budget-s: the whole suite's time budget, on the CPU (the GPU parts stand in).

The environment probe and the per-case worker are replaced by stand-ins (the probe returns the
environment of a recorded H200 document; a case takes a fixed time), so what is tested is the
loop: the time left is handed to each case as its limit, cases past the budget are recorded as
skipped with the reason, the document stays valid and the exit status says not everything ran.
"""

from __future__ import annotations

import copy
import time
from pathlib import Path

import orjson

from protocol.validation import validate
from runner.definition import manifest
from runner.execution import suite as suite_module
from runner.execution.result import case_skeleton, record_failure
from runner.execution.suite import BenchOptions, run_suite

ROOT = Path(__file__).resolve().parents[3]
RECORDED = orjson.loads((ROOT / "tests/fixtures/result-1.0.0-h200-axpy.json").read_bytes())
CASE_S = 0.25


def stand_ins(monkeypatch) -> list[float | None]:
    limits: list[float | None] = []
    env = copy.deepcopy(RECORDED["environment"])
    env["sensors"] = env.pop("sensors_start")
    monkeypatch.setattr(suite_module, "probe_environment", lambda options: copy.deepcopy(env))
    monkeypatch.setattr(suite_module.environment, "nvml_sensors", lambda *a, **k: None)
    monkeypatch.setattr(suite_module.cupti, "unavailable_reason", lambda: None)  # as on the box

    def one_case(suite, case, arch, options, peaks, say, bundle=None, budget_left_s=None, **device):
        limits.append(budget_left_s)
        time.sleep(CASE_S)
        doc = case_skeleton(case)
        record_failure(doc, "timing", f"case {case.id}: stand-in worker")
        return doc

    monkeypatch.setattr(suite_module, "run_one", one_case)
    return limits


def headlines(*ids: str) -> tuple[str, ...]:
    """The --case patterns of the headline points of `ids` (every case without ids): each case
    at one point, its size before sweeps."""
    every = manifest.load(ROOT / "benchmarks/cases.toml").headline_selectors()
    by_case = {s.split("[")[0]: s for s in every}
    return tuple(by_case[i] for i in ids) if ids else every


def test_cases_past_the_budget_are_skipped_with_the_reason(monkeypatch):
    limits = stand_ins(monkeypatch)
    doc, status = run_suite(
        ROOT / "benchmarks/cases.toml",
        BenchOptions(case_ids=headlines(), budget_s=0.6, quiet=True),
    )
    validate(doc, "result", "budget run")
    ran = [c for c in doc["cases"] if c["status"] != "skipped"]
    skipped = [c for c in doc["cases"] if c["status"] == "skipped"]
    assert (
        len(ran) == len(limits) == 3
    )  # started at 0, 0.25 and 0.5 s; the 4th at 0.75 s is past it
    assert all(b is not None and 0 < b <= 0.6 for b in limits) and limits == sorted(
        limits, reverse=True
    )
    assert len(skipped) == len(doc["cases"]) - 3 and doc["summary"]["skipped"] == len(skipped)
    assert skipped[0]["error"] == {
        "phase": "timeout",
        "message": "not run: the suite's time budget (--budget-s 0.6) was spent after 0 of the "
        "case's 1 point(s)",
    }
    assert doc["options"]["budget_s"] == 0.6 and status == 1


def test_without_a_budget_every_case_runs_with_its_own_limit(monkeypatch):
    limits = stand_ins(monkeypatch)
    doc, _ = run_suite(
        ROOT / "benchmarks/cases.toml",
        BenchOptions(case_ids=headlines("axpy_f64", "scale_i64"), quiet=True),
    )
    assert limits == [None, None] and [c["status"] for c in doc["cases"]] == ["failed", "failed"]
