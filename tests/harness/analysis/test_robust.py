"""The robust verdict (harness.analysis.robust): a gap measured by several methods (hot and cold,
events and CUPTI) is robust when they agree within their intervals, else the verdict names
which differ and by how much; `harness robust` prints it and exits 1 when one is not."""

from __future__ import annotations

import copy

import orjson
import pytest
from click.testing import CliRunner

from harness.analysis.robust import robust_gaps
from harness.cli import main
from tests.support.harness_docs import make_document, samples


def run(mode: str, factor: float = 1.0, timer: str | None = None, seed: int = 0) -> dict:
    doc = make_document(
        {
            "axpy": {
                "cuda": samples(1e-3, seed=1 + seed),
                "ptx": samples(1.2e-3 * factor, seed=2 + seed),
            },
            "scale": {"cuda": samples(2e-3, seed=3 + seed), "ptx": samples(2.2e-3, seed=4 + seed)},
        },
        mode=mode,
        resamples=500,
    )
    if timer:
        for case in doc["cases"]:
            for impl in case["implementations"].values():
                impl["timing"]["timer"] = timer
    return doc


def test_methods_that_agree_make_a_robust_gap():
    found = robust_gaps([run("hot"), run("cold", seed=10)])
    assert [(r.case_id, r.robust) for r in found] == [("axpy", True), ("scale", True)]
    assert set(found[0].gaps) == {"hot", "cold"}
    assert found[0].describe().startswith("robust: hot 1.1999x, cold 1.1996x")


def test_a_method_that_differs_is_named_with_by_how_much():
    found = robust_gaps([run("hot"), run("cold", factor=1.03, timer="cupti")])
    axpy = next(r for r in found if r.case_id == "axpy")
    assert not axpy.robust
    (d,) = axpy.disagreements
    assert (d.first, d.second) == ("hot", "cold/cupti")
    assert d.relative == pytest.approx(0.03, abs=0.005) and d.sigmas > 1.96
    assert "cold/cupti +3" in axpy.describe()
    scale = next(r for r in found if r.case_id == "scale")
    assert scale.robust  # only axpy's candidate moved


def test_a_gap_measured_by_one_method_gets_no_verdict():
    assert robust_gaps([run("hot")]) == []
    other_suite = run("cold")
    other_suite["suite"]["version"] = 2  # another suite version: not the same gap
    assert robust_gaps([run("hot"), other_suite]) == []


def test_the_same_method_twice_is_compared_too():
    found = robust_gaps([run("hot"), run("hot", seed=5)])
    assert set(found[0].gaps) == {"hot", "hot #2"}


def test_cli_prints_the_verdicts_and_exits_1_when_one_is_not_robust(tmp_path):
    paths = []
    for name, doc in (("hot", run("hot")), ("cold", run("cold", factor=1.03))):
        path = tmp_path / f"{name}.json"
        path.write_bytes(orjson.dumps(doc))
        paths.append(str(path))
    runner = CliRunner()
    result = runner.invoke(main, ["robust", *paths])
    assert result.exit_code == 1, result.output
    assert "not robust: cold +3" in result.output and "1 of 2 gaps robust" in result.output
    as_json = runner.invoke(main, ["robust", "--format", "json", *paths])
    rows = orjson.loads(as_json.stdout)
    assert [r["robust"] for r in rows] == [False, True]
    agree = copy.deepcopy(paths)
    agree[1] = str(tmp_path / "cold2.json")
    (tmp_path / "cold2.json").write_bytes(orjson.dumps(run("cold", seed=3)))
    assert runner.invoke(main, ["robust", *agree]).exit_code == 0
    assert runner.invoke(main, ["robust", paths[0]]).exit_code == 2
