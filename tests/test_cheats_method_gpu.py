"""GPU: the method (issue 37) on the cheats suite's honest kernel. Four copies of one kernel timed
cold, where a short launch's time depends on its place in the launch sequence: with the Latin
square order no copy reads apart from the others (reversing rounds alone put 4 sides on disjoint
places: +-0.5% to +-4%). The same case timed hot is robust against cold (harness robust), and
the headline covers the fixed set of cases run. Rows go to the cheats verdict table
(tests/test_cheats_gpu.record).

Run on the GPU box: `pytest -m gpu tests/test_cheats_method_gpu.py` (two `runner bench` runs of
one case, about a minute).
"""

from __future__ import annotations

import pytest

from harness.analysis.robust import robust_gaps
from tests.conftest import ROOT
from tests.test_cheats_gpu import bench_cheats, record, verdict_table  # noqa: F401

pytestmark = pytest.mark.gpu

SUITE = ROOT / "tests" / "cheats" / "cases.toml"
CASE = "aa_four_sides_cold"
SIDES = ("cuda", "cuda_2", "cuda_3", "cuda_4")
AA_LIMIT = 0.005  # the position effects the old order exposed: +-0.5% (cold) and up


def bench(tmp_path_factory, mode: str) -> dict:
    folder = tmp_path_factory.mktemp(f"method-{mode}")
    doc, done = bench_cheats(folder, f"method-{mode}", "--case", CASE, "--mode", mode)
    assert done.returncode == 0, done.stderr[-3000:]
    return doc


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, dict]:
    return {mode: bench(tmp_path_factory, mode) for mode in ("cold", "hot")}


def case_of(doc: dict) -> dict:
    (case,) = doc["cases"]
    assert case["id"] == CASE and case["status"] == "ok", case.get("error")
    return case


def test_four_copies_timed_cold_read_alike(runs):
    case = case_of(runs["cold"])
    orders = case["round_orders"]  # the hidden A/A control is one more side of every round
    assert sorted(orders[0]) == sorted([*SIDES, "cuda~aa"]) and orders[1] == orders[0][::-1]
    gaps = {name: case["implementations"][name]["gap"] for name in SIDES[1:]}
    text = ", ".join(
        f"{n} x{g['ratio_of_medians']:.4f} [{g['ci_low']:.4f}, {g['ci_high']:.4f}] "
        f"({g.get('bootstrap', '?')})"
        for n, g in gaps.items()
    )
    far = {
        n: g["ratio_of_medians"]
        for n, g in gaps.items()
        if abs(g["ratio_of_medians"] - 1) > AA_LIMIT
    }
    record("none (A/A/A/A cold, Latin square order)", "PTX", "ok" if not far else "apart", text)
    assert not far, text
    for name, gap in gaps.items():
        assert gap["bootstrap"] in ("rounds", "circular_blocks"), name
        assert gap["ci_low"] <= gap["ci_high"]


def test_hot_and_cold_agree_on_the_a_a_gaps(runs):
    found = robust_gaps([runs["hot"], runs["cold"]])
    assert {r.candidate for r in found} == set(SIDES[1:])
    text = "; ".join(f"{r.candidate}: {r.describe()}" for r in found)
    record(
        "none (A/A hot vs cold, robust verdict)",
        "PTX",
        "robust" if all(r.robust for r in found) else "not robust",
        text,
    )
    # an honest A/A reads about 1.0 in both modes; a disagreement here is a method defect
    assert all(r.robust for r in found), text


def test_the_headline_is_over_the_fixed_set(runs):
    for mode, doc in runs.items():
        headline = doc["summary"]["geomean_gap"]
        assert set(headline) == set(SIDES[1:]), mode
        for name, found in headline.items():
            assert (found["cases"], found["of"], found["missing"]) == (1, 1, []), (mode, name)
            assert found["ci_low"] <= found["value"] <= found["ci_high"]
            assert abs(found["value"] - 1) < AA_LIMIT, (mode, name, found)
