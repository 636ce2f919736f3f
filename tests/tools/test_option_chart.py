"""tools/option_chart.py: the suite copy pinned to the lent card, the option cases it runs, and a
clear stop where there is no GPU to pin."""

from __future__ import annotations

import sys

from runner.definition.manifest import load
from tests.conftest import ROOT
from tests.support.perf_script import run_tool

sys.path.insert(0, str(ROOT / "tools"))
import option_chart

H100 = "NVIDIA H100 80GB HBM3"


def test_the_copy_is_pinned_to_the_card_and_otherwise_the_suite(tmp_path):
    manifest = option_chart.pinned_copy(ROOT / "benchmarks", H100, tmp_path / "suite")
    pinned, canonical = load(manifest), load(ROOT / "benchmarks" / "cases.toml")
    assert pinned.gpu == H100 and canonical.gpu != H100
    assert [c.id for c in pinned.cases] == [c.id for c in canonical.cases]
    original = (ROOT / "benchmarks" / "cases.toml").read_text().splitlines()
    changed = [
        (a, b) for a, b in zip(original, manifest.read_text().splitlines(), strict=True) if a != b
    ]
    assert len(changed) == 1 and changed[0][1].startswith(f'gpu = "{H100}"'), changed
    assert (tmp_path / "suite" / "kernels" / "scale_i64.cu").is_file()
    assert not (tmp_path / "suite" / "perf").exists()


def test_the_option_cases_are_the_suites_cases_with_an_option_axis():
    found = option_chart.option_cases(ROOT / "benchmarks" / "cases.toml")
    assert "scale_i64" in found
    assert "axpy_f64" not in found  # a size sweep, not an option axis


def test_measure_without_a_gpu_stops_naming_what_is_missing(tmp_path):
    done = run_tool(ROOT / "tools" / "option_chart.py", "measure", "--out", str(tmp_path))
    assert done.returncode != 0
    assert "runner info` found no GPU to pin" in done.stderr, done.stderr[-2000:]


def test_chart_ingests_a_run_of_the_pinned_copy_and_draws_its_option_case(tmp_path):
    """The recorded H200 run with scale_i64 swept by clang's -O level (test_option_tables), as a
    run of the copy pinned to its card would come back: trusted against that copy, drawn."""
    import argparse

    import orjson

    from tests.support.sweep_documents import option_document

    doc = option_document()
    manifest = option_chart.pinned_copy(
        ROOT / "benchmarks", doc["environment"]["device"]["name"], tmp_path / "run" / "suite"
    )
    doc["suite"]["sha256"] = load(manifest).sha256  # as the runner records the copy it ran
    (tmp_path / "run" / "option.json").write_bytes(orjson.dumps(doc))
    site = tmp_path / "site"
    args = argparse.Namespace(dir=tmp_path / "run", out=site, shots=None)
    assert option_chart.chart(args) == 0
    pages = [p for p in (site / "cases").glob("scale_i64-*.html")]
    assert len(pages) == 1
    page = pages[0].read_text()
    assert "by option" in page and "clang_O" in page
