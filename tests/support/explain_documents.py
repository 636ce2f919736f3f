"""Result documents for the explain tests, made on the CPU by `runner bench` itself: the GPU parts
stand in (the environment probe returns a recorded H200's; the case worker returns samples in
which WarpForth is 1.6x the baseline, as measured on the H200), while the build, the static
analysis (real ptxas and cuobjdump) and, with `profile`, the profiling step (a stand-in ncu on
PATH that prints a recorded ncu CSV) run for real."""

from __future__ import annotations

import copy
import os
import stat
import sys
from pathlib import Path

import numpy as np
import orjson

from runner.execution import suite as case_job
from runner.execution import suite as suite_module
from runner.execution.isolation import WorkerOutcome
from runner.execution.suite import BenchOptions, run_suite
from runner.explain import static

ROOT = Path(__file__).resolve().parents[2]
RECORDED = orjson.loads((ROOT / "tests/fixtures/result-1.2.0-h200-warpforth.json").read_bytes())
MEDIAN_S = {"cuda": 850e-6, "llvm": 832e-6, "warpforth": 1351e-6}
NCU_SAMPLES = ROOT / "tests" / "fixtures" / "ncu"


def _record(names: list[str]) -> dict:
    rng = np.random.default_rng(7)
    passed = {"status": "passed", "problems": [], "against": []}
    return {
        "status": "ok",
        "impls": {n: {"load_s": 0.01, "check": dict(passed)} for n in names},
        "phases_s": {"check_s": 0.1, "inputs_s": 0.01},
        "measurement": {
            "mode": "hot",
            "warmup": 10,
            "wall_s": 3.0,
            "orders": [names if r % 2 == 0 else names[::-1] for r in range(30)],
            "impls": {
                n: {
                    "name": n,
                    "samples_s": [
                        float(x) for x in MEDIAN_S[n] * (1 + 0.001 * rng.standard_normal(30))
                    ],
                    "batch": 60,
                    "calibration_s": 0.05,
                    "method": "cuda-graph",
                }
                for n in names
            },
        },
    }


def fake_ncu(folder: Path) -> Path:
    """An `ncu` that writes the recorded sample of the implementation being profiled (from the
    job file the runner hands its driver) to its --log-file."""
    folder.mkdir(parents=True, exist_ok=True)
    program = folder / "ncu"
    program.write_text(
        f"#!{sys.executable}\n"
        "import json, sys\n"
        "if sys.argv[1:] == ['--version']:\n"
        "    print('Version 2025.3.1.0 (build 36398880) (public-release)'); sys.exit(0)\n"
        "args = sys.argv[1:]\n"
        "job = json.load(open(args[-1]))\n"
        "impl = 'cuda' if job['impl'] == 'cuda' else 'warpforth'\n"
        f"sample = open({str(NCU_SAMPLES)!r} + f'/polynomial_f64-{{impl}}.csv').read()\n"
        "open(args[args.index('--log-file') + 1], 'w').write(sample)\n"
    )
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    return program


def bench_document(monkeypatch, tmp_path: Path, case_ids: tuple[str, ...], profile: bool) -> dict:
    """`runner bench --case ... [--profile]` with the GPU parts standing in (module doc)."""
    env = copy.deepcopy(RECORDED["environment"])
    env["sensors"] = env.pop("sensors_start")
    monkeypatch.setattr(suite_module, "probe_environment", lambda options: copy.deepcopy(env))
    monkeypatch.setattr(suite_module.environment, "nvml_sensors", lambda *a, **k: None)

    def worker(job, timeout_s, on_event=None, echo_stderr=True):
        return WorkerOutcome(record=_record(list(job["ptx"])), wall_s=1.0)

    monkeypatch.setattr(case_job, "run_worker", worker)
    if profile:
        bin_dir = tmp_path / "bin"
        fake_ncu(bin_dir)
        monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
        finder = static._pathfinder  # only ncu must come from PATH: the stand-in
        monkeypatch.setattr(
            static, "_pathfinder", lambda name: None if name == "ncu" else finder(name)
        )
        static.find.cache_clear()
    try:
        doc, _ = run_suite(
            ROOT / "benchmarks/cases.toml",
            BenchOptions(case_ids=case_ids, quiet=True, profile=profile),
        )
    finally:
        static.find.cache_clear()
    return doc
