"""Base and head of a compiler in one run on a real GPU (runner bench --bundle base= --bundle head=).

tests/support/revision_bundles.py builds two bundles of tests/gpu_suite's scale_aa and
scale_double_work with nvcc: in the head bundle scale_aa's candidate does twice the work and
scale_double_work's candidate is the same PTX as in base. So head/base must read about 2 on
scale_aa and 1.000 within its interval on scale_double_work. Run on the GPU box with

    python -m pytest -m gpu tests/runner/execution/test_pairs_gpu.py -s

(-s shows the pull-request markdown; with KERNELGAP_TEST_ARTIFACTS=DIR the document and the
markdown are also kept there).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from protocol.validation import validate
from tests.conftest import ROOT
from tests.support.revision_bundles import build_pair

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("pairs")
    cases, base, head = build_pair(out)
    document = out / "result.json"
    bench = subprocess.run(
        [
            *(sys.executable, "-m", "runner", "bench", str(cases), "-o", str(document)),
            *("--bundle", f"base={base}", "--bundle", f"head={head}"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert document.exists(), f"no document written; stderr:\n{bench.stderr}"
    pr = subprocess.run(
        [sys.executable, "-m", "harness", "pr", str(document), "--fail-on", "slower"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    print(pr.stdout)
    keep = os.environ.get("KERNELGAP_TEST_ARTIFACTS")
    if keep:
        shutil.copy(document, Path(keep) / "pairs-result.json")
        (Path(keep) / "pairs-pr.md").write_text(pr.stdout)
    return orjson.loads(document.read_bytes()), bench, pr


def _pair(doc: dict, case_id: str) -> dict:
    case = next(c for c in doc["cases"] if c["id"] == case_id)
    assert case["status"] == "ok", case.get("error")
    (pair,) = case["pairs"]
    return pair


def test_the_run_is_valid_and_both_revisions_passed_the_gate(run):
    doc, bench, _ = run
    assert bench.returncode == 0, bench.stderr[-3000:]
    validate(doc, "result", "base/head run")
    for case in doc["cases"]:
        impls = case["implementations"]
        assert [n for n in impls if "@" in n] and all(
            "@" not in n or impls[n]["revision"] in ("base", "head") for n in impls
        )
        assert all(i["check"]["status"] == "passed" for i in impls.values())


def test_head_equal_to_base_reads_one_within_its_interval(run):
    pair = _pair(run[0], "scale_double_work")
    assert pair["head"] == "twice@head" and pair["base"] == "twice@base"
    assert pair["ci_low"] <= 1.0 <= pair["ci_high"], pair
    assert abs(pair["ratio_of_medians"] - 1) < 0.01


def test_head_doing_twice_the_work_reads_about_two(run):
    pair = _pair(run[0], "scale_aa")
    assert 1.8 < pair["ratio_of_medians"] < 2.2, pair
    assert pair["ci_low"] > 1.5


def test_the_pull_request_markdown_says_slower_and_same_and_gates(run):
    _, _, pr = run
    assert pr.returncode == 1, pr.stderr  # --fail-on slower: scale_aa's head is slower
    rows = {
        line.split(" | ")[0][2:]: line
        for line in pr.stdout.splitlines()
        if line.startswith("| scale")
    }
    assert "**slower**" in rows["scale_aa"]
    # the verdict column, before the counters one (harness pr: what changed in the code)
    assert "| same |" in rows["scale_double_work"] and "**" not in rows["scale_double_work"]
