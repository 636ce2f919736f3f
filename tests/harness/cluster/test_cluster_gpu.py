"""`harness run --cluster local:0` on a GPU box: the engine's local cluster, one GPU worker, the
real runner (no stand-in)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from protocol.validation import load_result
from tests.conftest import ROOT
from tests.support.gpu_bench import bundle_args


@pytest.mark.gpu
def test_a_local_cluster_of_one_gpu_worker_runs_a_case_with_the_real_runner(tmp_path):
    bundle = bundle_args("warpforthc")
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "harness", "run", "benchmarks/cases.toml", "--cluster", "local:0",
         "--out", str(out), *bundle, "--", "--case", "scale_i64[n=2^27]"],
        cwd=ROOT, capture_output=True, text=True, timeout=540,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    (path,) = done.stdout.split()
    load_result(Path(path).read_bytes(), path)  # valid
    document = orjson.loads(Path(path).read_bytes())
    (worker,) = document["environment"]["workers"]
    (case,) = document["cases"]
    assert case["id"] == "scale_i64" and case["status"] == "ok"
    assert case["device"]["uuid"] == worker["uuid"] == document["environment"]["device"]["uuid"]
    assert case["device"]["worker"] == "gpu0" and case["device"]["index"] == 0
    assert "GPU 0: " + worker["gpu"] in done.stderr  # listed before anything ran
    (kept,) = (p for p in out.glob("*-cluster/*.json"))
    assert orjson.loads(kept.read_bytes())["cases"][0]["id"] == "scale_i64"


@pytest.mark.gpu
def test_a_local_cluster_deals_a_sweep_per_point_and_merges_it_into_one_case(tmp_path):
    """Two points of scale_i64 (its headline and its smallest size), one task each on the one
    GPU worker, merged back into one case block as one run of those points writes it."""
    bundle = bundle_args("warpforthc")
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "harness", "run", "benchmarks/cases.toml", "--cluster", "local:0",
         "--deal", "point", "--out", str(out), *bundle, "--",
         "--case", "scale_i64[n=2^27]", "--case", "scale_i64[n=2^11]"],
        cwd=ROOT, capture_output=True, text=True, timeout=540,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "dealing per point (point): 2 task(s) from 1 case(s), 1 swept" in done.stderr
    (path,) = done.stdout.split()
    load_result(Path(path).read_bytes(), path)  # valid
    document = orjson.loads(Path(path).read_bytes())
    assert document["options"]["deal"] == "point"
    (case,) = document["cases"]
    assert case["id"] == "scale_i64" and case["point"] == "n=2^27" and case["status"] == "ok"
    (small,) = (p for p in case["points"] if p["point"] == "n=2^11")
    assert small["status"] == "ok" and small["device"]["worker"] == "gpu0"
    assert [p["point"] for p in case["points"]] == ["n=2^11", "n=2^27"]  # declared order
    kept = sorted(p.name for p in out.glob("*-cluster/*.json"))
    assert kept == ["scale_i64[n=2^11].json", "scale_i64[n=2^27].json"]
