"""harness explain: from a result document that `runner bench` recorded (static from the real
tools, profile from a stand-in ncu printing recorded CSV), from a bundle (runner build), and from
old documents without either block. The numbers in the report must be the recorded ones."""

from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from harness.explain import report, sources
from protocol.validation import validate
from protocol.version import RESULT_SCHEMA_VERSION
from runner.definition import manifest
from runner.definition.bundle import write_bundle
from runner.explain import static
from tests.support.explain_documents import bench_document

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures"


def need_tools() -> None:
    if static.find("ptxas") is None or static.find("cuobjdump") is None:
        pytest.skip("ptxas or cuobjdump is not installed (pip install -e '.[test]')")


@pytest.fixture(scope="module")
def document(tmp_path_factory) -> dict:
    need_tools()
    mp = pytest.MonkeyPatch()
    try:
        doc = bench_document(
            mp,
            tmp_path_factory.mktemp("bench"),
            ("polynomial_f64", "attention_f32_naive"),
            profile=True,
        )
    finally:
        mp.undo()
    impls = doc["cases"][0]["implementations"]
    if impls["warpforth"].get("status") == "skipped":
        pytest.skip(f"warpforth: {impls['warpforth']['skip_reason']}")
    return doc


def explain(path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "harness", "explain", str(path), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_bench_records_static_and_a_flagged_profile_apart_from_timing(document):
    validate(document, "result", "bench document")
    assert (
        document["schema_version"] == RESULT_SCHEMA_VERSION
        and document["options"]["profile"] is True
    )
    for impl in document["cases"][0]["implementations"].values():
        assert impl["static"]["status"] == "ok" and impl["static"]["arch"] == "sm_90"
        assert impl["profile"]["status"] == "ok" and impl["profile"]["profiled"] is True
        assert "timing" in impl and "profile" not in impl["timing"]


def test_the_report_leads_with_what_explains_the_polynomial_gap(document, tmp_path):
    path = tmp_path / "result.json"
    path.write_bytes(orjson.dumps(document))
    done = explain(path, "--case", "polynomial_f64")
    assert done.returncode == 0, done.stderr
    text = done.stdout
    head, rest = text.split("**Resources (ptxas -v)**", 1)
    assert "### polynomial_f64: warpforth vs cuda (baseline)" in head
    assert re.search(r"gap 1\.5\d\dx \[", head)
    first = head.split("Most plausible differences:\n", 1)[1].splitlines()[0]
    assert first.startswith("1. no DFMA: multiplies and adds are separate")
    static = document["cases"][0]["implementations"]
    mul = static["warpforth"]["static"]["instructions"]["in_loops"]["fp64_mul"]
    fma = static["cuda"]["static"]["instructions"]["in_loops"]["fp64_fma"]
    assert f"{mul} DMUL" in first and f"{fma} DFMA" in first
    assert "generic loads and stores (1 LD.E.64, 1 ST.E.64)" in head and "LDG.E.64.CONSTANT" in head
    assert "1.3x the instructions executed (1.076e+09 vs 8.095e+08 warp instructions, ncu)" in head
    row = next(line for line in rest.splitlines() if line.startswith("| f64 FMA (DFMA)"))
    assert re.fullmatch(rf"\| f64 FMA \(DFMA\)\s+\|\s+{fma} \|\s+0 \|\s+0\.00x \|", row)
    assert "| warp instructions executed" in rest and "1.33x" in rest
    assert "65536 registers, 2048 threads, 32 blocks, 228 KiB shared memory" in rest
    assert "profiled data, not a timing" in rest


def test_attention_names_unrolling_and_the_read_only_path(document):
    source = sources.from_result(document, "doc")
    text = report.render(source, ("attention_f32_naive",), markdown=False)
    assert "attention_f32_naive: warpforth vs cuda (baseline)" in text
    assert "loops not unrolled: the baseline's biggest inner loop does" in text
    assert "generic loads and stores" in text and "read-only (non-coherent)" in text
    assert "no DFMA: multiplies and adds are separate in loops" in text
    assert "No profile" in text  # the stand-in ncu has polynomial_f64's kernel only


def test_candidate_option_and_text_format(document):
    source = sources.from_result(document, "doc")
    text = report.render(source, ("polynomial_f64",), ("llvm",), markdown=False)
    assert "polynomial_f64: llvm vs cuda (baseline)" in text and "warpforth vs" not in text
    assert "| " not in text and "---------" in text  # aligned columns, no markdown


def test_a_bundle_explains_without_timings(tmp_path):
    need_tools()
    suite = manifest.load(ROOT / "benchmarks/cases.toml")
    small = dataclasses.replace(suite, cases=(suite.case("polynomial_f64"),))
    write_bundle(small, "sm_90", tmp_path / "bundle")
    done = explain(tmp_path / "bundle")
    assert done.returncode == 0, done.stderr
    if shutil.which("warpforthc") is None:  # the primary is not built here: explain says why
        assert "warpforth" in done.stdout and "implementation skipped" in done.stdout
        return
    assert "bundle" in done.stdout and "no gap here (a bundle has no timings)" in done.stdout
    if "warpforth vs cuda" in done.stdout:  # the suite's primary only, by default
        assert "no DFMA" in done.stdout and "llvm vs" not in done.stdout


def test_a_result_document_takes_static_from_a_bundle_of_the_same_ptx(tmp_path):
    need_tools()
    suite = manifest.load(ROOT / "benchmarks/cases.toml")
    small = dataclasses.replace(suite, cases=(suite.case("polynomial_f64"),))
    bundle = write_bundle(small, "sm_90", tmp_path / "bundle")
    doc = orjson.loads((FIXTURES / "result-1.2.0-h200-warpforth.json").read_bytes())
    source = sources.from_result(doc, "fixture")
    given = sources.attach_bundle(source, sources.load(tmp_path / "bundle"))
    shas = {e["impl"]: e["build"]["ptx_sha256"] for e in bundle["implementations"]}
    recorded = {
        n: i["build"]["ptx_sha256"]
        for c in doc["cases"]
        if c["id"] == "polynomial_f64"
        for n, i in c["implementations"].items()
    }
    assert given == sum(shas.get(n) == sha for n, sha in recorded.items())  # same PTX only
    case = next(c for c in source.cases if c.id == "polynomial_f64")
    for name, impl in case.impls.items():
        assert (impl.static is not None) == (shas.get(name) == recorded[name])


@pytest.mark.parametrize(
    "fixture", ["result-1.0.0-h200-axpy.json", "result-1.2.0-h200-warpforth.json"]
)
def test_old_documents_say_how_to_get_the_static_analysis(fixture):
    done = explain(FIXTURES / fixture, "--format", "text")
    assert done.returncode == 0, done.stderr
    assert (
        "No static analysis (not recorded): record it with `python -m runner bench`" in done.stdout
    )
    assert "runner build CASES.toml --out bundle/" in done.stdout


def test_bad_input_is_exit_2_with_the_reason(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    assert explain(bad).returncode == 2
    done = explain(FIXTURES / "result-1.2.0-h200-warpforth.json", "--case", "nope")
    assert done.returncode == 2 and "no case nope" in done.stderr
