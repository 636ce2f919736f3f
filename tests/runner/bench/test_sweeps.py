"""runner.bench with `sweep = True`: a workload's rows are written as the points of one case per
op and dtype, the structure `runner bench` writes for a swept suite case (runner.document.sweep_block),
so the harness reads both alike; without it each row stays a case of its own."""

from __future__ import annotations

import numpy as np

from protocol.points import as_rows
from runner import bench
from tests.runner.bench.test_api import FAST, Matmul
from tests.support.fake_callable_device import FakeCallableDevice


class SweptMatmul(Matmul):
    name = "mm_swept"
    rows = (bench.Row("tiny", n=8), bench.Row("small", n=16), bench.Row("mid", n=24))
    dtypes = ("float64",)
    sweep = True
    headline = "small"


def run_rows(workload) -> dict:
    session = bench.reset(bench.Session(device=FakeCallableDevice(), options=FAST))
    try:
        for case in bench.cases(workload):
            bench.Runner(np.matmul, case).compare({"B": np.dot})
        return session.document()  # validated against the result schema
    finally:
        bench.reset()


def test_rows_of_a_swept_workload_are_points_of_one_case():
    doc = run_rows(SweptMatmul())
    (case,) = doc["cases"]
    assert case["id"] == "mm_swept/float64/matmul" and case["point"] == "row=small"
    assert case["axes"] == ["row"] and case["dims"] == {"n": 16}
    assert [p["point"] for p in case["points"]] == ["row=tiny", "row=small", "row=mid"]
    assert case["points"][1] == {"point": "row=small", "headline": True, "dims": {"n": 16}}
    tiny = case["points"][0]
    assert tiny["frontend"] == "python" and tiny["implementations"]["B"]["gap"]
    assert "sweep" not in case and "sweep" not in tiny
    assert case["curve"]["B"]["points"] == 3
    ids = [c["id"] for c in as_rows(doc)["cases"]]
    assert ids == [
        "mm_swept/float64/matmul",
        "mm_swept/float64/matmul[row=tiny]",
        "mm_swept/float64/matmul[row=mid]",
    ]
    assert doc["summary"]["geomean_gap"]["B"]["of"] == 1  # the headline row only


def test_without_sweep_each_row_is_a_case():
    class Plain(SweptMatmul):
        name = "mm_plain"
        sweep = False

    doc = run_rows(Plain())
    assert [c["id"] for c in doc["cases"]] == [
        "mm_plain/tiny-float64/matmul",
        "mm_plain/small-float64/matmul",
        "mm_plain/mid-float64/matmul",
    ]
    assert not any("points" in c for c in doc["cases"])
