"""What runner bench reports about a run: options.mode is the mode it used, also when it came
from the manifest (older documents that recorded null there read as their cases' mode), and its
progress says which case of how many it is on and about how long is left."""

from __future__ import annotations

import copy
import shutil

import orjson
import pytest

from harness.dashboard.build import gab_key
from harness.history.series import run_mode
from protocol.validation import validate
from runner.execution.suite import BenchOptions, run_suite
from tests.runner.execution.test_budget import ROOT, headlines, stand_ins

OLD = orjson.loads((ROOT / "tests/fixtures/result-1.2.0-h200-warpforth.json").read_bytes())


@pytest.mark.parametrize(("mode", "expected"), [(None, "hot"), ("hot", "hot"), ("cold", "cold")])
def test_the_document_records_the_effective_mode(monkeypatch, mode, expected):
    stand_ins(monkeypatch)
    options = BenchOptions(case_ids=("axpy_f64",), mode=mode, quiet=True)
    doc, _ = run_suite(ROOT / "benchmarks/cases.toml", options)
    validate(doc, "result", "mode run")
    assert doc["options"]["mode"] == expected


def test_cases_of_several_modes_are_named_together(monkeypatch, tmp_path):
    stand_ins(monkeypatch)
    text = (ROOT / "benchmarks" / "cases.toml").read_text()
    marker = 'id = "axpy_f64"\n'
    assert marker in text
    suite = tmp_path / "cases.toml"
    suite.write_text(text.replace(marker, marker + 'settings = { mode = "cold" }\n', 1))
    shutil.copytree(ROOT / "benchmarks" / "kernels", tmp_path / "kernels")
    shutil.copy(ROOT / "benchmarks" / "reference.py", tmp_path)
    doc, _ = run_suite(suite, BenchOptions(case_ids=("axpy_f64", "scale_i64"), quiet=True))
    assert doc["options"]["mode"] == "cold+hot"
    doc, _ = run_suite(suite, BenchOptions(case_ids=("axpy_f64",), quiet=True))
    assert doc["options"]["mode"] == "cold"
    doc, _ = run_suite(
        suite, BenchOptions(case_ids=("axpy_f64", "scale_i64"), mode="hot", quiet=True)
    )
    assert doc["options"]["mode"] == "hot"  # --mode overrides every case's own


def test_an_old_document_with_a_null_mode_reads_as_its_cases_mode_and_shares_the_key():
    assert OLD["options"]["mode"] is None
    assert run_mode(OLD) == "hot"
    explicit = copy.deepcopy(OLD)
    explicit["options"]["mode"] = "hot"
    assert gab_key(OLD) == gab_key(explicit) == "kernelgap NVIDIA H200 hot suite v1"
    nothing = copy.deepcopy(OLD)
    for case in nothing["cases"]:
        case.pop("settings", None)
        for impl in case["implementations"].values():
            impl.pop("timing", None)
    assert run_mode(nothing) is None and "mode unknown" in gab_key(nothing)


def test_bench_progress_says_where_it_is_and_how_long_is_left(monkeypatch, capsys):
    from runner.execution.suite import position

    assert position(0, 8, 0.0) == "[1/8]"
    assert position(2, 8, 90.0) == "[3/8] 1m30s so far, about 4m30s left"
    assert position(7, 8, 3 * 3600.0) == "[8/8] 3h00m so far, about 25m43s left"
    stand_ins(monkeypatch)
    cases = headlines("axpy_f64", "scale_i64")  # each case at one point, as before sweeps
    run_suite(ROOT / "benchmarks/cases.toml", BenchOptions(case_ids=cases))
    err = capsys.readouterr().err
    assert "kernelgap: [1/2]: axpy_f64" in err
    assert "kernelgap: [2/2] 0s so far, about 0s left: scale_i64" in err
