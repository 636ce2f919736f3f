"""A swept case end to end on a real GPU: `runner bench` over a few points of axpy_f64 and
matmul_f64_naive (small ones gated at themselves, large ones at check_dims and cross-checked),
then checks on the document: every point gated and timed, the headline at the case's settings,
the other points by the shorter rule, the curve and the point counts.

Run on the GPU box with `pytest -m gpu`; skipped (with the reason) where no GPU is usable.
"""

from __future__ import annotations

import pytest

from protocol.validation import validate
from runner.execution import sweep_run as point_timing
from tests.support.gpu_bench import bundle_args, run_bench

pytestmark = pytest.mark.gpu
POINTS = (
    "axpy_f64[n=2^11]",
    "axpy_f64[n=2^19]",
    "axpy_f64[n=2^27]",
    "matmul_f64_naive[n=2^6]",
    "matmul_f64_naive[n=2^10]",
)


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep") / "sweep-points.json"
    cases = (a for p in POINTS for a in ("--case", p))
    return run_bench("benchmarks/cases.toml", out, *bundle_args("clang"), *cases)


def _points(case: dict) -> dict[str, dict]:
    return {p["point"]: (case if p.get("headline") else p) for p in case["points"]}


def test_every_point_is_gated_and_timed(swept):
    doc, done = swept
    validate(doc, "result", "sweep run")
    assert done.returncode == 0, done.stderr[-3000:]
    axpy, naive = doc["cases"]
    assert [p["point"] for p in axpy["points"]] == ["n=2^11", "n=2^19", "n=2^27"]
    assert [p["point"] for p in naive["points"]] == ["n=2^6", "n=2^10"]
    for case in (axpy, naive):
        for pid, block in _points(case).items():
            assert block["status"] == "ok", (case["id"], pid, block.get("error"))
            for name, impl in block["implementations"].items():
                if impl.get("status") == "skipped":
                    continue
                assert impl["check"]["status"] == "passed", (case["id"], pid, name)
                if impl["role"] == "candidate":
                    assert impl["gap"]["ratio_of_medians"] > 0
    assert doc["summary"]["points"] == {"cases": 2, "points": 5, "ok": 5, "failed": 0, "skipped": 0}


def test_small_points_are_gated_at_themselves_and_the_headline_at_check_dims(swept):
    doc, _ = swept
    axpy = _points(doc["cases"][0])
    assert axpy["n=2^11"]["check_dims"] == axpy["n=2^11"]["dims"]
    assert axpy["n=2^19"]["check_dims"] == {"n": 100003, "blocks": 13}
    assert axpy["n=2^27"]["check_dims"] == {"n": 100003, "blocks": 13}
    against = axpy["n=2^19"]["implementations"]["llvm"]["check"]["against"]
    assert any(a.get("size") == "timed" for a in against)  # the cross-check at the point's size


def test_the_headline_keeps_its_settings_and_other_points_stop_early_where_precise(swept):
    doc, _ = swept
    axpy = doc["cases"][0]
    assert axpy["settings"]["samples"] == 30 and "precision" not in axpy["settings"]
    small = _points(axpy)["n=2^11"]
    assert small["settings"]["samples"] == point_timing.POINT_ROUNDS
    assert small["precision"]["target"] == point_timing.POINT_PRECISION
    assert point_timing.POINT_ROUNDS <= small["precision"]["samples"] <= 30
    assert set(axpy["curve"]) >= {"llvm"} and axpy["curve"]["llvm"]["points"] == 3
