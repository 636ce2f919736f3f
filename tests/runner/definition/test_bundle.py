"""PTX bundles: built here with the real compilers, refused when they no longer match the sources."""

from __future__ import annotations

import shutil
import subprocess
import sys

import orjson
import pytest

from runner.definition import manifest
from runner.definition.bundle import Bundle, write_bundle
from runner.errors import BundleError
from runner.explain import static
from tests.conftest import ROOT

pytestmark = pytest.mark.skipif(static.find_program("nvcc") is None, reason="nvcc is not installed")


@pytest.fixture
def suite_copy(tmp_path):
    shutil.copytree(
        ROOT / "benchmarks",
        tmp_path / "benchmarks",
        ignore=shutil.ignore_patterns("perf", "__pycache__"),
    )
    return tmp_path / "benchmarks" / "cases.toml"


@pytest.fixture
def built(suite_copy, tmp_path):
    suite = manifest.load(suite_copy)
    out = tmp_path / "bundle"
    result = write_bundle(suite, "sm_90", out, static=False)  # the CLI test below covers static
    return suite, out, result


def test_bundle_holds_every_buildable_implementation_with_provenance(built):
    suite, out, result = built
    assert result["failures"] == 0
    names = {(e["case"], e["impl"]) for e in result["implementations"]}
    skipped = {(s["case"], s["impl"]) for s in result["skipped"]}
    assert names | skipped == {(c.id, i.name) for c in suite.cases for i in c.impls}
    assert ("axpy_f64", "cuda") in names and ("axpy_f64", "handptx") in names
    bundle = Bundle.load(out)
    case = suite.case("axpy_f64")
    ptx, provenance = bundle.lookup(case, case.impl("cuda"))
    assert (
        ".entry axpy_f64" in ptx
        and provenance["toolchain"] == "nvcc"
        and provenance["bundle_arch"] == "sm_90"
    )
    assert provenance["source_sha256"] == next(
        e["build"]["source_sha256"]
        for e in result["implementations"]
        if e["case"] == "axpy_f64" and e["impl"] == "cuda"
    )


def test_a_changed_source_makes_the_bundle_stale(built, suite_copy):
    _, out, _ = built
    kernel = suite_copy.parent / "kernels" / "axpy_f64.cu"
    kernel.write_text(kernel.read_text() + "\n// edited after the bundle was built\n")
    suite = manifest.load(suite_copy)
    case = suite.case("axpy_f64")
    with pytest.raises(BundleError, match="built from another source"):
        Bundle.load(out).lookup(case, case.impl("cuda"))
    assert Bundle.load(out).lookup(case, case.impl("handptx")) is not None, (
        "other implementations are unaffected"
    )


def test_a_tampered_ptx_file_is_refused(built):
    suite, out, _ = built
    (out / "axpy_f64" / "cuda.ptx").write_text("// not what was built\n")
    case = suite.case("axpy_f64")
    with pytest.raises(BundleError, match="does not match its recorded sha256"):
        Bundle.load(out).lookup(case, case.impl("cuda"))


def test_a_malformed_bundle_manifest_is_refused(built):
    _, out, _ = built
    doc = orjson.loads((out / "bundle.json").read_bytes())
    doc["implementations"][0]["surprise"] = 1
    (out / "bundle.json").write_bytes(orjson.dumps(doc))
    with pytest.raises(BundleError, match=r"bundle\.json"):
        Bundle.load(out)
    (out / "bundle.json").write_text("{")
    with pytest.raises(BundleError, match="malformed JSON"):
        Bundle.load(out)


def test_bench_refuses_a_missing_bundle_before_any_gpu_work(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "runner",
            "bench",
            "benchmarks/cases.toml",
            "--bundle",
            str(tmp_path / "nope"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "cannot read the bundle manifest" in done.stderr and "probing the GPU" not in done.stderr


def test_build_command_writes_a_bundle(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "runner",
            "build",
            "benchmarks/cases.toml",
            "--out",
            str(tmp_path / "b"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "" and "bundle.json" in done.stderr
    bundle = Bundle.load(tmp_path / "b").manifest
    assert bundle["arch"] == "sm_90" and bundle["schema_version"] == "1.3.0"
    # every implementation carries its static analysis (or why there is none) and its role
    for entry in bundle["implementations"]:
        assert entry["role"] in ("baseline", "candidate")
        assert entry["static"]["status"] in ("ok", "unavailable"), entry["static"]
        if entry["static"]["status"] == "ok":
            assert entry["static"]["arch"] == "sm_90" and entry["static"]["instructions"]["total"]
