"""The command lines as a user meets them: exit statuses, messages, stdout kept for documents."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from runner.execution.isolation import run_worker
from tests.conftest import ROOT, gpu_unavailable_reason

needs_no_gpu = pytest.mark.skipif(
    gpu_unavailable_reason() is None, reason="checks the no-GPU path; this machine has a GPU"
)


def runner(*args, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "runner", *args],
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        timeout=300,
    )


@needs_no_gpu
def test_bench_without_gpu_fails_fast_and_says_what_to_do():
    done = runner("bench", "benchmarks/cases.toml")
    assert done.returncode == 2
    assert done.stdout == b""
    err = done.stderr.decode()
    assert "no NVIDIA driver found" in err or "no CUDA device" in err
    assert (
        "runner check benchmarks/cases.toml" in err and "harness run benchmarks/cases.toml" in err
    )


@needs_no_gpu
def test_the_no_gpu_answers_name_the_suite_given_and_the_way_for_launches(tmp_path):
    suite = tmp_path / "my suite" / "cases.toml"
    suite.parent.mkdir()
    shutil.copy(ROOT / "benchmarks" / "cases.toml", suite)
    shutil.copytree(ROOT / "benchmarks" / "kernels", suite.parent / "kernels")
    shutil.copy(ROOT / "benchmarks" / "reference.py", suite.parent / "reference.py")
    err = runner("bench", str(suite)).stderr.decode()
    assert f"runner check '{suite}'" in err and "benchmarks/cases.toml" not in err
    request = (
        b'{"ptx": ".version 8.0\\n.target sm_90\\n", "kernel": "k", "grid": [1, 1, 1], '
        b'"block": [1, 1, 1], "shared_bytes": 0, "params": [], "outputs": []}'
    )
    answer = runner("run", "--no-service", stdin=request).stdout.decode()
    assert "harness run" not in answer and "ssh gpu-host python3 -m runner run" in answer


@needs_no_gpu
def test_info_without_gpu_exits_2():
    done = runner("info")
    assert done.returncode == 2 and done.stdout == b""
    assert "error:" in done.stderr.decode()


def test_bench_rejects_a_bad_manifest_before_any_gpu_work(tmp_path):
    bad = tmp_path / "cases.toml"
    bad.write_text(
        (ROOT / "benchmarks" / "cases.toml")
        .read_text()
        .replace('role = "inout"', 'role = "sideways"')
    )
    done = runner("bench", str(bad))
    assert done.returncode == 2
    err = done.stderr.decode()
    assert str(bad) in err and "axpy_f64" in err and "role" in err and "probing the GPU" not in err


def test_bench_rejects_malformed_toml(tmp_path):
    bad = tmp_path / "cases.toml"
    bad.write_text("[suite\nname = 1\n")
    done = runner("bench", str(bad))
    assert done.returncode == 2 and "malformed TOML" in done.stderr.decode()


def test_check_builds_and_assembles_the_suite():
    done = runner("check", "benchmarks/cases.toml")
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout == b""  # the report goes to stderr, like runner build's: no document here
    out = done.stderr.decode()
    assert "axpy_f64/cuda: nvcc" in out and "axpy_f64/handptx: ptx, PTX 6.0 sm_70" in out
    assert "0 failure(s)" in out


def test_check_reports_a_signature_mismatch(tmp_path):
    text = (
        (ROOT / "benchmarks" / "cases.toml")
        .read_text()
        .replace('type = "f64", value = 2.5', 'type = "f32", value = 2.5')
    )
    shutil.copytree(ROOT / "benchmarks" / "kernels", tmp_path / "kernels")
    shutil.copy(ROOT / "benchmarks" / "reference.py", tmp_path / "reference.py")
    manifest = tmp_path / "cases.toml"
    manifest.write_text(text)
    done = runner("check", str(manifest))
    assert done.returncode == 1
    out = done.stderr.decode()
    assert (
        "signature" in out
        and "parameter 2 'a'" in out
        and "f32 (4 bytes)" in out
        and ".param .f64 (8 bytes)" in out
    )


def test_help_works_without_a_gpu():
    done = runner("--help")
    assert done.returncode == 0 and b"bench" in done.stdout and b"run" in done.stdout


def test_run_answers_json_on_garbage():
    done = runner("run", "--no-service", stdin=b"{not json")
    assert done.returncode == 0  # as a JSON runner answers: the status is in the answer (issue 54)
    assert done.stdout.startswith(b"{") and b'"status":"error"' in done.stdout.replace(b" ", b"")


def test_worker_reports_an_unknown_job_as_data():
    outcome = run_worker({"job": "nonsense"}, timeout_s=60, echo_stderr=False)
    assert not outcome.timed_out
    assert outcome.record["status"] == "failed"
    assert (
        outcome.record["error"]["phase"] == "worker"
        and "nonsense" in outcome.record["error"]["message"]
    )


def test_every_command_of_both_clis_has_help_with_an_example():
    from click.testing import CliRunner

    from harness.cli import main as harness_main
    from runner.cli import main as runner_main

    for group, module in ((runner_main, "runner"), (harness_main, "harness")):
        assert group.commands, module
        for name in group.commands:
            done = CliRunner().invoke(group, [name, "--help"])
            assert done.exit_code == 0, (module, name, done.output)
            examples = done.output.split("Example")[1:]
            assert examples, f"{module} {name} --help has no example"
            assert f"python -m {module} {name} " in examples[0], (module, name)


def test_check_without_any_compiler_counts_skips_as_skips(monkeypatch, tmp_path, capsys):
    """A first `runner check` after `pip install .` on a machine with no CUDA toolkit, clang or
    warpforthc: every implementation is skipped and named with its reason, none is a failure,
    and the check passes unless --require-all."""
    from runner.definition import manifest
    from runner.definition.toolchains import clang, command, nvcc
    from runner.execution.checking import check_suite
    from runner.explain import static

    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setattr(static, "wheel_bin_dirs", lambda: [])
    for cached in (clang.program, clang.version, command.version, nvcc.version):
        if hasattr(cached, "cache_clear"):
            cached.cache_clear()
    try:
        suite = manifest.load(ROOT / "benchmarks" / "cases.toml")
        assert check_suite(suite, "sm_90") == 0
        report = capsys.readouterr().err
        assert check_suite(suite, "sm_90", require_all=True) == 1
    finally:
        for cached in (clang.program, clang.version, command.version, nvcc.version):
            if hasattr(cached, "cache_clear"):
                cached.cache_clear()
    impls = sum(len(case.impls) for case in suite.cases)
    summary = [line for line in report.splitlines() if "case(s)" in line][-1]
    assert f"{len(suite.cases)} case(s), 0 failure(s), {impls} skipped" in summary, summary
    assert "FAIL" not in report
    assert "nvcc is not on PATH" in report and "pip install 'kernelgap[nvcc]'" in report
    assert "warpforthc is not on PATH" in report and "WarpForth" in report
    assert "no clang with the NVPTX back end" in report
