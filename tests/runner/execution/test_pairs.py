"""Base and head of a compiler paired in one run, on the CPU: the labelled bundles, the variants
of each candidate, the timing loop on a fake device, the pairs block, `harness pr`, and what
`harness run --base-bundle --head-bundle` ships and passes on. The GPU half is
tests/runner/execution/test_pairs_gpu.py."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import numpy as np
import orjson
import pytest
from click.testing import CliRunner

from harness.analysis import pull_request
from harness.cli import main
from harness.running import shipping
from protocol.validation import validate
from protocol.version import RESULT_SCHEMA_VERSION
from runner import document as document_gaps
from runner import document as document_run
from runner.definition import manifest, spec
from runner.definition.bundle import Bundle, parse_bundle_options
from runner.errors import BundleError
from runner.execution import result
from runner.execution.case import CaseRun
from runner.execution.result import case_skeleton
from runner.execution.suite import build_case
from runner.measurement.timing import TimingSettings, measure
from tests.conftest import ROOT
from tests.harness.running.test_run import FakeRunner, harness
from tests.support.fake_device import FakeBackend
from tests.support.revision_bundles import build_pair, pair_suite

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
FIXTURE = json.loads((ROOT / "tests" / "fixtures" / "result-1.0.0-h200-axpy.json").read_text())


# -- the --bundle option -------------------------------------------------------------------------
def test_bundle_options_are_one_plain_folder_or_two_labelled_ones():
    assert parse_bundle_options(()) == (None, ())
    plain, labelled = parse_bundle_options(("dir",))
    assert str(plain) == "dir" and labelled == ()
    plain, labelled = parse_bundle_options(("base=b1", "head=b2"))
    assert plain is None and [(k, str(v)) for k, v in labelled] == [("base", "b1"), ("head", "b2")]
    for bad, message in [
        (("dir", "base=b1", "head=b2"), "not both"),
        (("a", "b"), "not both"),
        (("base=b1",), "give at least two"),
        (("base=b1", "base=b2"), "label given twice"),
        (("1x=b1", "head=b2"), "a label is a letter"),
    ]:
        with pytest.raises(BundleError, match=message):
            parse_bundle_options(bad)


def test_runner_bench_refuses_a_lone_labelled_bundle_before_any_gpu_work():
    done = subprocess.run(
        [sys.executable, "-m", "runner", "bench", "benchmarks/cases.toml", "--bundle", "base=x"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2 and "give at least two" in done.stderr
    assert "probing the GPU" not in done.stderr


# -- variants of each candidate ------------------------------------------------------------------
@pytest.fixture(scope="module")
def pair(tmp_path_factory):  # its one test is marked needs_nvcc
    return build_pair(tmp_path_factory.mktemp("pair"))


@needs_nvcc
def test_each_candidate_becomes_one_implementation_per_revision(pair):
    cases, base, head = pair
    suite = manifest.load(cases)
    revisions = {"base": Bundle.load(base), "head": Bundle.load(head)}
    for case_id, candidate in (("scale_aa", "cuda_again"), ("scale_double_work", "twice")):
        case = suite.case(case_id)
        doc = case_skeleton(case)
        built = build_case(case, "sm_90", doc, lambda text: None, None, revisions)
        names = [candidate + "@base", candidate + "@head"]
        assert list(doc["implementations"]) == ["cuda", *names]
        assert list(built) == ["cuda", *names]
        for name, label in zip(names, ("base", "head"), strict=True):
            impl = doc["implementations"][name]
            assert impl["variant_of"] == candidate and impl["revision"] == label
            assert impl["role"] == "candidate" and impl["build"]["bundle"] == str(
                revisions[label].root
            )
            assert impl["ptx"]["entries"]
        assert doc["implementations"]["cuda"]["build"]["bundle"] == str(base)  # the first bundle
        same = built[names[0]] == built[names[1]]
        assert same is (case_id == "scale_double_work")


def test_the_worker_loads_every_variant_in_the_suites_order(tmp_path):
    cases = pair_suite(tmp_path / "suite")
    job = {
        "manifest": str(cases),
        "case": "scale_aa",
        "ptx": {"cuda": "", "cuda_again@head": "", "cuda_again@base": ""},
        "timing": {"mode": "hot", "samples": 30, "warmup": 1, "target_sample_s": 0.01},
        "variants": {"cuda_again@base": "cuda_again", "cuda_again@head": "cuda_again"},
    }
    run = CaseRun(job, lambda event: None)  # no GPU work before setup()
    assert run.names == ["cuda", "cuda_again@base", "cuda_again@head"]
    assert run.baseline_first[0] == "cuda"


# -- timing on a fake device, then the document --------------------------------------------------
def measured(per_launch_s: dict[str, float], seed: int = 0):
    backend = FakeBackend(per_launch_s, noise=0.01, seed=seed, drift_per_call=2e-4)
    names = list(per_launch_s)
    settings = TimingSettings(samples=40, warmup=1, target_sample_s=0.01)
    return measure(backend, names, settings), names


def case_document(case_id: str, candidate: str, head_factor: float, seed: int = 0) -> dict:
    """A finished case whose candidate's head takes head_factor x its base's time."""
    names = {"cuda": 1e-5, f"{candidate}@base": 1.2e-5, f"{candidate}@head": 1.2e-5 * head_factor}
    m, order = measured(names, seed)
    doc = {
        "id": case_id, "version": 1, "description": "d", "status": "ok", "baseline": "cuda",
        "dims": {"n": 1}, "check_dims": {"n": 1},
        "launch": {"grid": [1, 1, 1], "block": [1, 1, 1], "shared_bytes": 0},
        "implementations": {
            n: {"role": "baseline" if n == "cuda" else "candidate", "toolchain": "nvcc",
                "source": "kernels/scale.cu", "entry": "scale_f64",
                **({"variant_of": candidate, "revision": n.split("@")[1]} if "@" in n else {})}
            for n in order
        },
    }  # fmt: skip
    record = {
        "status": "ok",
        "impls": {n: {"check": {"status": "passed"}} for n in order},
        "measurement": {
            "mode": m.mode, "warmup": m.warmup, "wall_s": m.wall_s, "orders": m.orders,
            "impls": {n: vars(t) for n, t in m.impls.items()},
        },
    }  # fmt: skip
    geometry = spec.Geometry(
        dims={"n": 1}, lengths={}, grid=(1, 1, 1), block=(1, 1, 1), shared_bytes=0, scalars={},
        bytes=None, flops=None,
    )  # fmt: skip
    return result.finish_case(doc, record, geometry, None, {})


def test_head_equal_to_base_reads_one_within_its_interval():
    doc = case_document("scale_double_work", "twice", 1.0)
    (pair,) = doc["pairs"]
    assert (pair["of"], pair["base"], pair["head"]) == ("twice", "twice@base", "twice@head")
    assert pair["ci_low"] <= 1.0 <= pair["ci_high"]
    assert pair["ratio_of_medians"] == pytest.approx(1.0, abs=0.01)
    assert pair["rounds"] == 40 and pair["stable"] is True
    for name in ("twice@base", "twice@head"):  # each variant keeps its own gap to the baseline
        assert doc["implementations"][name]["gap"]["ratio_of_medians"] == pytest.approx(1.2, 0.02)


def test_head_doing_twice_the_work_reads_about_two_and_drift_cancels():
    doc = case_document("scale_aa", "cuda_again", 2.0)
    (pair,) = doc["pairs"]
    assert pair["ratio_of_medians"] == pytest.approx(2.0, rel=0.01)
    assert pair["ci_low"] <= 2.0 <= pair["ci_high"] and pair["ci_low"] > 1.9


def test_no_pair_when_a_side_failed_its_check():
    doc = case_document("scale_aa", "cuda_again", 1.0)
    doc["implementations"]["cuda_again@head"]["check"] = {"status": "failed"}
    assert document_gaps.pair_blocks(doc) == []


def pair_document() -> dict:
    doc = json.loads(json.dumps(FIXTURE))
    doc["schema_version"] = RESULT_SCHEMA_VERSION
    cases = [
        case_document("scale_aa", "cuda_again", 2.0),
        case_document("scale_double_work", "twice", 1.0, 1),
    ]
    doc["cases"] = cases
    doc["summary"] = document_run.summary(cases)
    return doc


def test_a_base_head_document_validates_and_older_ones_still_do():
    validate(pair_document(), "result", "base/head document")
    validate(FIXTURE, "result", "1.0.0 fixture")
    bad = pair_document()
    bad["cases"][0]["pairs"][0]["ratio_of_medians"] = 0
    with pytest.raises(ValueError):
        validate(bad, "result", "bad pair")


# -- harness pr --------------------------------------------------------------------------------
def test_pr_rows_give_verdicts_from_the_interval_and_the_minimum_effect():
    rows = {r.case_id: r for r in pull_request.rows(pair_document())}
    assert rows["scale_aa"].verdict == "slower" and rows["scale_aa"].ratio == pytest.approx(2, 0.02)
    assert rows["scale_double_work"].verdict == "same"
    assert rows["scale_aa"].base_gap == pytest.approx(1.2, 0.02)
    assert rows["scale_aa"].head_gap == pytest.approx(2.4, 0.02)
    pair = {"stable": True, "ratio_of_medians": 0.99, "ci_low": 0.985, "ci_high": 0.995}
    assert pull_request.verdict(pair) == "same"  # significant, but under the 2% minimum effect
    assert pull_request.verdict({**pair, "ratio_of_medians": 0.95, "ci_high": 0.97}) == "faster"
    assert pull_request.verdict({**pair, "stable": False}) == "unstable"


def test_harness_pr_writes_the_comment_and_gates(tmp_path):
    path = tmp_path / "result.json"
    path.write_bytes(orjson.dumps(pair_document()))
    done = CliRunner().invoke(main, ["pr", str(path)])
    assert done.exit_code == 0, done.output
    text = done.stdout
    assert text.startswith("## Benchmark: head against base, paired on one GPU")
    assert "1 slower, 0 faster, 0 unstable, 0 failed of 2" in text
    row = next(line for line in text.splitlines() if line.startswith("| scale_aa"))
    assert "| cuda_again | 1.2" in row and "**slower**" in row
    assert CliRunner().invoke(main, ["pr", str(path), "--fail-on", "slower"]).exit_code == 1
    data = orjson.loads(CliRunner().invoke(main, ["pr", str(path), "--format", "json"]).stdout)
    assert [r["verdict"] for r in data["rows"]] == ["slower", "same"]
    failed = pair_document()
    failed["cases"][1] = {**failed["cases"][1], "status": "failed", "pairs": []}
    failed["cases"][1]["error"] = {"phase": "check", "message": "twice@head: wrong\nmore"}
    path.write_bytes(orjson.dumps(failed))
    out = CliRunner().invoke(main, ["pr", str(path), "--fail-on", "unstable"])
    assert out.exit_code == 1 and "**failed**: twice@head: wrong |" in out.stdout


def test_a_case_the_run_skipped_is_not_run_not_failed(tmp_path):
    """A case its budget never reached has no head/base: the comment says "not run" with the
    reason, counts it apart from failures, and only --fail-on unstable trips on it."""
    path = tmp_path / "result.json"
    skipped = pair_document()
    skipped["cases"][1] = {**skipped["cases"][1], "status": "skipped", "pairs": []}
    skipped["cases"][1]["error"] = {
        "phase": "timeout",
        "message": "not run: the suite's time budget (--budget-s 170) was spent",
    }
    path.write_bytes(orjson.dumps(skipped))
    out = CliRunner().invoke(main, ["pr", str(path), "--fail-on", "slower"])
    assert out.exit_code == 1  # the other case is slower
    assert "0 unstable, 0 failed, 1 not run of 2" in out.stdout
    assert (
        "**not run**: not run: the suite's time budget (--budget-s 170) was spent |" in out.stdout
    )
    data = orjson.loads(CliRunner().invoke(main, ["pr", str(path), "--format", "json"]).stdout)
    assert [r["verdict"] for r in data["rows"]] == ["slower", "not run"]
    skipped["cases"][0]["pairs"][0]["ratio_of_medians"] = 1.0  # base and head alike
    skipped["cases"][0]["pairs"][0].update(ci_low=0.99, ci_high=1.01)
    path.write_bytes(orjson.dumps(skipped))
    assert CliRunner().invoke(main, ["pr", str(path), "--fail-on", "slower"]).exit_code == 0
    assert CliRunner().invoke(main, ["pr", str(path), "--fail-on", "unstable"]).exit_code == 1


def test_harness_pr_refuses_a_document_without_revisions(tmp_path):
    path = tmp_path / "result.json"
    path.write_bytes(orjson.dumps(FIXTURE))
    done = CliRunner().invoke(main, ["pr", str(path)])
    assert done.exit_code == 2 and "has no revisions" in done.output


# -- harness run --base-bundle --head-bundle -----------------------------------------------------
def test_harness_run_ships_both_bundles_and_passes_them_on_labelled(tmp_path):
    fake = FakeRunner(tmp_path / "fake")
    for label in ("base", "head"):
        (tmp_path / label / "axpy_f64").mkdir(parents=True)
        (tmp_path / label / "bundle.json").write_text("{}")
    done = harness(
        "--target", "local", "--python", fake.python, "--out", tmp_path,
        "--base-bundle", tmp_path / "base", "--head-bundle", tmp_path / "head",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    args = fake.seen["args"]
    assert [args[i + 1] for i, a in enumerate(args) if a == "--bundle"] == [
        "base=bundle/base",
        "head=bundle/head",
    ]
    assert fake.seen["bundle"] == ["base", "head"]
    lone = harness("--target", "local", "--base-bundle", tmp_path / "base")
    assert lone.returncode == 2 and "go together" in lone.stderr
    plan = shipping.plan(
        ROOT / "benchmarks" / "cases.toml", revisions=(("base", tmp_path / "base"),)
    )
    assert ("base", "bundle/base") in plan.revisions
    assert any(name == "bundle/base/bundle.json" for _, name in plan.files)


def test_fake_device_rounds_interleave_every_variant():
    m, names = measured({"cuda": 1e-5, "x@base": 1e-5, "x@head": 1e-5})
    assert m.orders[0] == names and m.orders[1] == names[::-1]
    counts = {n: len(t.samples_s) for n, t in m.impls.items()}
    assert set(counts.values()) == {40}
    assert np.isfinite([s for t in m.impls.values() for s in t.samples_s]).all()


# -- harness run --base REF --head REF --build-bundle CMD ---------------------------------------
def compiler_repo(tmp_path):
    """A git repository whose 'compiler' (version.txt) differs between two commits."""
    repo = tmp_path / "compiler"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git[:3], "init", "-q", "-b", "main"], check=True)
    for version in ("1", "2"):
        (repo / "version.txt").write_text(version)
        subprocess.run([*git, "add", "version.txt"], check=True)
        subprocess.run([*git, "commit", "-q", "-m", f"v{version}"], check=True)
    return repo


BUILD = "mkdir -p {out} && cp {src}/version.txt {out}/bundle.json && echo {label} > {out}/label"


def test_build_revisions_builds_each_ref_in_its_own_worktree(tmp_path):
    from harness.errors import RevisionBuildError
    from harness.running.revision_build import build_revisions, fill

    repo = compiler_repo(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    built = dict(build_revisions(repo, {"base": "HEAD~1", "head": "HEAD"}, BUILD, work))
    assert (built["base"] / "bundle.json").read_text() == "1"
    assert (built["head"] / "bundle.json").read_text() == "2"
    assert (built["head"] / "label").read_text().strip() == "head"
    listed = subprocess.run(
        ["git", "-C", str(repo), "worktree", "list"], capture_output=True, text=True
    )
    assert len(listed.stdout.splitlines()) == 1  # the worktrees are removed again
    assert fill("x {src}") == 'x "$KERNELGAP_SRC"'  # the value travels in the environment
    for command, refs, message in [
        ("exit 3 # {out}", {"base": "HEAD"}, "exited 3"),
        ("true {out}", {"base": "HEAD"}, "left no bundle"),
        (BUILD, {"base": "no-such-ref"}, "cannot check out 'no-such-ref'"),
        ("true", {"base": "HEAD"}, "must write the bundle to {out}"),
    ]:
        with pytest.raises(RevisionBuildError, match=re.escape(message)):
            build_revisions(repo, refs, command, tmp_path / f"w{len(message)}")


def test_harness_run_builds_both_revisions_and_runs_them_paired(tmp_path):
    fake = FakeRunner(tmp_path / "fake")
    repo = compiler_repo(tmp_path)
    done = harness(
        "--target", "local", "--python", fake.python, "--out", tmp_path,
        "--base", "HEAD~1", "--head", "HEAD", "--build-bundle", BUILD, "--compiler-repo", repo,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    args = fake.seen["args"]
    assert [args[i + 1] for i, a in enumerate(args) if a == "--bundle"] == [
        "base=bundle/base",
        "head=bundle/head",
    ]
    assert "building the base bundle at HEAD~1" in done.stderr
    bad = harness("--target", "local", "--base", "HEAD", "--build-bundle", BUILD)
    assert bad.returncode == 2 and "go together" in bad.stderr
