"""runner bench over a swept case, on the CPU: the build runs once per case, each point gets its
own worker job (its point, its timing), the budget covers the whole sweep and points past it are
skipped with the reason, --case/--point select, and the document is one case block with points.

The build and the worker are stood in (runner.execution.suite.build_case and run_worker);
everything between them is the real run_one, run_points and document assembly.
"""

from __future__ import annotations

import copy
import time
from pathlib import Path
from types import SimpleNamespace

import orjson
import pytest

from protocol.validation import validate
from runner.definition import manifest
from runner.document import curve
from runner.errors import ManifestError
from runner.execution import suite as case_job
from runner.execution import suite as suite_module
from runner.execution import sweep_run as point_timing
from runner.execution.suite import BenchOptions, run_suite

ROOT = Path(__file__).resolve().parents[3]
SUITE = ROOT / "benchmarks/cases.toml"
RECORDED = orjson.loads((ROOT / "tests/fixtures/result-1.0.0-h200-axpy.json").read_bytes())
BUILD = RECORDED["cases"][0]["implementations"]["cuda"]["build"]  # a recorded build block


@pytest.fixture
def jobs(monkeypatch) -> dict:
    """Stand-ins for the probe, the build and the worker; returns what they saw."""
    seen = {"builds": [], "jobs": []}
    env = copy.deepcopy(RECORDED["environment"])
    env["sensors"] = env.pop("sensors_start")
    monkeypatch.setattr(suite_module, "probe_environment", lambda options: copy.deepcopy(env))
    monkeypatch.setattr(suite_module.environment, "nvml_sensors", lambda *a, **k: None)
    monkeypatch.setattr(suite_module.cupti, "unavailable_reason", lambda: None)

    def build(case, arch, case_doc, say, bundle=None, revisions=None):
        seen["builds"].append(case.id)
        for impl in case_doc["implementations"].values():
            impl["build"] = copy.deepcopy(BUILD)
        return {i.name: f"// {i.name}" for i in case.impls}

    def worker(job, timeout_s, on_event=None, echo_stderr=True):
        seen["jobs"].append(job)
        time.sleep(seen.get("sleep_s", 0.0))
        record = {"status": "failed", "error": {"phase": "timing", "message": "stand-in"}}
        return SimpleNamespace(
            record=record,
            timed_out=False,
            wall_s=0.01,
            start_s=None,
            exit_s=None,
            last_phase="timing",
            returncode=0,
            stderr_tail=[],
        )

    monkeypatch.setattr(case_job, "build_case", build)
    monkeypatch.setattr(case_job, "run_worker", worker)
    return seen


def run(**options):
    return run_suite(SUITE, BenchOptions(quiet=True, static=False, **options))


def test_a_sweep_builds_once_and_sends_each_point_to_a_worker(jobs):
    doc, status = run(case_ids=("axpy_f64",))
    validate(doc, "result", "sweep run")
    assert jobs["builds"] == ["axpy_f64"] and status == 1
    points = [j["point"] for j in jobs["jobs"]]
    assert points[0] == "n=2^27" and sorted(points) == sorted(
        p.id for p in manifest.load(SUITE).case("axpy_f64").sweep.points
    )  # the headline first, then every other point
    headline, other = jobs["jobs"][0]["timing"], jobs["jobs"][1]["timing"]
    assert headline["samples"] == 30 and "precision" not in headline  # the case's own settings
    assert other["samples"] == point_timing.POINT_ROUNDS and other["max_samples"] == 30
    assert other["precision"] == point_timing.POINT_PRECISION
    assert other["target_sample_s"] == point_timing.POINT_SAMPLE_MS / 1000
    (case,) = doc["cases"]
    assert (case["id"], case["point"], case["axes"]) == ("axpy_f64", "n=2^27", ["n"])
    assert case["dims"] == {"n": 1 << 27, "blocks": 4224}
    listed = [p["point"] for p in case["points"]]
    assert listed[0] == "n=2^11" and listed[-1] == "n=2^27"  # declared order
    small = case["points"][0]
    assert small["dims"] == {"n": 2048, "blocks": 4224} and small["check_dims"] == small["dims"]
    assert small["launch"]["grid"] == [8, 1, 1] and "id" not in small
    assert case["points"][-1] == {"point": "n=2^27", "headline": True, "dims": case["dims"]}


def test_the_budget_covers_the_sweep_and_skips_the_points_past_it(jobs):
    jobs["sleep_s"] = 0.2
    doc, _ = run(case_ids=("scale_i64", "axpy_f64"), budget_s=0.5)
    validate(doc, "result", "budget sweep")
    scale, axpy = doc["cases"]
    assert len(jobs["jobs"]) == 3  # started at 0, 0.2 and 0.4 s; the 4th at 0.6 s is past it
    measured = [p for p in scale["points"] if p.get("status") == "failed"]
    skipped = [p for p in scale["points"] if p.get("status") == "skipped"]
    # scale_i64: 9 sizes and 2 option points (clang's -O level for llvm)
    assert len(measured) == 2 and len(skipped) == 8 and scale["status"] == "failed"
    assert skipped[0]["error"] == {
        "phase": "timeout",
        "message": "not run: the suite's time budget (--budget-s 0.5) was spent after 3 of the "
        "case's 11 point(s)",
    }
    assert axpy["status"] == "skipped" and all(p.get("status") != "failed" for p in axpy["points"])
    assert doc["summary"]["points"] == {
        "cases": 2,
        "points": 20,
        "ok": 0,
        "failed": 3,
        "skipped": 17,
    }


def test_point_and_case_patterns_select(jobs):
    doc, _ = run(point_ids=("axpy_f64[n=2^1*]",))
    assert [j["point"] for j in jobs["jobs"]] == ["n=2^11", "n=2^13", "n=2^15", "n=2^17", "n=2^19"]
    (case,) = doc["cases"]
    assert (
        case["status"] == "skipped"
        and "headline point n=2^27 was not selected" in (case["error"]["message"])
    )
    suite = manifest.load(SUITE)
    cases, points = suite_module.select(suite, ("matmul*",), ("n=2^6",))
    assert [c.id for c in cases] == ["matmul_f64_naive", "matmul_f64_tiled"]
    assert points == {"matmul_f64_naive": ("n=2^6",), "matmul_f64_tiled": ("n=2^6",)}
    cases, points = suite_module.select(suite, ("transpose_f32[rows=2^5,cols=2^5]",))
    assert [c.id for c in cases] == ["transpose_f32"] and points["transpose_f32"] == (
        "rows=2^5,cols=2^5",
    )
    cases, points = suite_module.select(suite, ("axpy_f64",))
    assert [c.id for c in cases] == ["axpy_f64"] and points == {}


@pytest.mark.parametrize(
    ("cases", "points", "expected"),
    [
        (("nope*",), (), "--case: no case with id 'nope*', and no point or glob matches it"),
        ((), ("n=3",), "--point n=3: no point matches (points look like scale_i64[n=2^11]"),
        (("axpy_f64",), ("seq=2^6",), "no point is selected by both"),
    ],
)
def test_a_selection_of_nothing_is_bad_input(cases, points, expected):
    with pytest.raises(
        ManifestError,
        match=expected.replace("*", r"\*")
        .replace("^", r"\^")
        .replace("(", r"\(")
        .replace("[", r"\["),
    ):
        suite_module.select(manifest.load(SUITE), cases, points)


def block(gaps: dict[str, float], status: str = "ok") -> dict:
    impls = {"cuda": {"role": "baseline"}}
    impls.update(
        {n: {"role": "candidate", "gap": {"ratio_of_medians": g}} for n, g in gaps.items()}
    )
    return {"status": status, "implementations": impls}


def test_curve_gives_min_max_and_where_the_gap_stays_near_parity():
    found = curve(
        [
            ("n=2^10", block({"wf": 2.0, "llvm": 1.05})),
            ("n=2^12", block({"wf": 1.2, "llvm": 1.0})),
            ("n=2^14", block({"wf": 1.08}, status="failed")),  # no gap: not on the curve
            ("n=2^16", block({"wf": 1.09, "llvm": 0.95})),
            ("n=2^18", block({"wf": 1.02, "llvm": 1.2})),
        ]
    )
    assert found["wf"] == {
        "min_gap": 1.02,
        "min_at": "n=2^18",
        "max_gap": 2.0,
        "max_at": "n=2^10",
        "points": 4,
        "near_parity_from": "n=2^16",
    }
    assert found["llvm"]["near_parity_from"] is None  # the last point leaves 1.1x
    assert curve([("n=2^10", block({"wf": 0.95}))])["wf"]["near_parity_from"] == "n=2^10"


def test_an_option_point_is_built_its_own_way_and_the_sizes_once(jobs, monkeypatch):
    # issue 54: scale_i64 sweeps clang's -O level for llvm beside its sizes
    flags, stand_in = [], case_job.build_case

    def build(case, arch, case_doc, say, bundle=None, revisions=None):
        flags.append(case.impl("llvm").flags)
        return stand_in(case, arch, case_doc, say, bundle, revisions)

    monkeypatch.setattr(case_job, "build_case", build)
    doc, _ = run(case_ids=("scale_i64",))
    validate(doc, "result", "option sweep")
    assert flags == [(), ("-O2",), ("-O1",)]  # the sizes' build once, then one per option
    assert [j["point"] for j in jobs["jobs"]][-2:] == ["clang_O=O2", "clang_O=O1"]
    (case,) = doc["cases"]
    assert case["axes"] == ["n", "clang_O"] and case["options"]["headline"] == "O3"
    assert case["options"]["values"]["O1"] == {"flags": ["-O1"]}
