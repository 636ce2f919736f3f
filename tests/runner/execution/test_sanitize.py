"""`runner check --sanitize` on the CPU: compute-sanitizer's reports parsed (samples in NVIDIA's
documented format), the command line built, a run judged from a stand-in compute-sanitizer, and
the document valid against schemas/sanitize.schema.json."""

from __future__ import annotations

import os
import stat
import sys
import textwrap
import types

import orjson
import pytest

from protocol.errors import DocumentError
from protocol.validation import validate
from runner.errors import SanitizerOutputError
from runner.execution import sanitize
from runner.explain import compute_sanitizer

MEMCHECK_OOB = """\
========= COMPUTE-SANITIZER
========= Invalid __global__ read of size 8 bytes
=========     at scale_past_end+0x90
=========     by thread (2,0,0) in block (16,0,0)
=========     Address 0x7f2a4e008018 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7f2a4e000000 of size 32792 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame:  [0x2f0e4f] in libcuda.so.1
=========
========= Invalid __global__ read of size 8 bytes
=========     at scale_past_end+0x90
=========     by thread (3,0,0) in block (16,0,0)
=========     Address 0x7f2a4e008020 is out of bounds
=========
========= Program hit CUDA_ERROR_LAUNCH_FAILED (error 719) due to "unspecified launch failure" on CUDA API call to cuStreamSynchronize.
=========     Saved host backtrace up to driver entry point at error
=========
========= ERROR SUMMARY: 3 errors
"""

MEMCHECK_OLD_FORMAT = """\
========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at 0x00000070 in add_one(float*, int)
=========     by thread (0,0,0) in block (4,0,0)
=========     Address 0x7f0000001000 is out of bounds
=========
========= ERROR SUMMARY: 1 error
"""

RACECHECK = """\
========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at reduce_racy+0x1b0
=========     and Read access at reduce_racy+0x1d0 [1016 hazards]
=========
========= Warning: Race reported between Read access at reduce_racy+0x220
=========     and Write access at reduce_racy+0x240 [32 hazards]
=========
========= RACECHECK SUMMARY: 2 hazards displayed (1 error, 1 warning)
"""

CLEAN = """\
========= COMPUTE-SANITIZER
========= ERROR SUMMARY: 0 errors
"""

SYNCCHECK = """\
========= COMPUTE-SANITIZER
========= Barrier error detected. Divergent thread(s) in block
=========     at divergent_barrier+0x50 in /tmp/sync.cu:9
=========     by thread (32,0,0) in block (0,0,0)
=========
========= ERROR SUMMARY: 1 error
"""


def test_memcheck_counts_every_error_and_names_the_kernel_and_kind():
    found = compute_sanitizer.parse(MEMCHECK_OOB)
    assert found["errors"] == 3 and found["warnings"] == 0
    assert found["kernels"] == ["scale_past_end"]
    assert "Invalid __global__ read of size 8 bytes" in found["kinds"]
    first = found["findings"][0]
    assert first["kernel"] == "scale_past_end"
    assert first["lines"][0] == "Invalid __global__ read of size 8 bytes"
    assert "Address 0x7f2a4e008018 is out of bounds" in first["lines"]
    assert len(first["lines"]) == compute_sanitizer.FIRST_LINES
    assert found["findings"][2]["kind"].startswith("Program hit CUDA_ERROR_LAUNCH_FAILED")
    assert found["findings"][2]["kernel"] is None


def test_the_older_at_address_in_kernel_form_names_the_kernel_not_the_block():
    found = compute_sanitizer.parse(MEMCHECK_OLD_FORMAT)
    assert found["errors"] == 1 and found["kernels"] == ["add_one"]


def test_racecheck_counts_errors_and_warnings_from_its_own_summary():
    found = compute_sanitizer.parse(RACECHECK)
    assert (found["errors"], found["warnings"]) == (1, 1)
    assert found["kinds"] == [
        "Race reported between Read access",
        "Race reported between Write access",
    ]
    assert found["kernels"] == ["reduce_racy"]


def test_synccheck_names_the_kernel_before_the_source_file():
    found = compute_sanitizer.parse(SYNCCHECK)
    assert found["errors"] == 1 and found["kernels"] == ["divergent_barrier"]
    assert found["kinds"] == ["Barrier error detected. Divergent thread(s) in block"]


def test_a_clean_report_has_no_findings():
    assert compute_sanitizer.parse(CLEAN) == {
        "errors": 0,
        "warnings": 0,
        "findings": [],
        "kinds": [],
        "kernels": [],
    }


def test_a_report_without_a_summary_is_not_trusted():
    with pytest.raises(SanitizerOutputError, match="no ERROR SUMMARY"):
        compute_sanitizer.parse("========= COMPUTE-SANITIZER\n========= Invalid __global__ read\n")
    with pytest.raises(SanitizerOutputError, match=r"\(empty\)"):
        compute_sanitizer.parse("")


def test_the_command_names_the_tool_the_limit_and_the_log_before_the_program():
    argv = compute_sanitizer.command(
        "/cuda/bin/compute-sanitizer", "racecheck", ["py", "-m", "x"], "/t/l"
    )
    assert argv == [
        "/cuda/bin/compute-sanitizer",
        "--tool",
        "racecheck",
        "--print-limit",
        str(compute_sanitizer.PRINT_LIMIT),
        "--log-file",
        "/t/l",
        "py",
        "-m",
        "x",
    ]
    with pytest.raises(ValueError, match="'leakcheck' is not one of memcheck"):
        compute_sanitizer.command("cs", "leakcheck", [], "/t/l")


def test_tools_are_parsed_and_an_unknown_one_is_named():
    assert sanitize.parse_tools("memcheck, racecheck,memcheck") == ("memcheck", "racecheck")
    with pytest.raises(ValueError, match="--sanitize-tools: racechek is not"):
        sanitize.parse_tools("memcheck,racechek")
    with pytest.raises(ValueError, match=r"\(none given\)"):
        sanitize.parse_tools(" , ")


def _stand_in(tmp_path, report: str, exit_status: int, stderr: str = "") -> str:
    """A compute-sanitizer that writes `report` to its --log-file and exits with `exit_status`,
    after checking it was given the one-launch program and a job of size "check"."""
    (tmp_path / "report.txt").write_text(report)
    script = tmp_path / "compute-sanitizer"
    script.write_text(
        textwrap.dedent(
            f"""\
            #!{sys.executable}
            import json, sys
            argv = sys.argv[1:]
            log = argv[argv.index("--log-file") + 1]
            program = argv[argv.index("--log-file") + 2:]
            assert program[1:3] == ["-m", "runner.execution.profile_launch"], program
            job = json.load(open(program[3]))
            assert job["size"] == "check" and job["case"] == "c1", job
            open(log, "w").write(open({str(tmp_path / "report.txt")!r}).read())
            sys.stderr.write({stderr!r})
            sys.exit({exit_status})
            """
        )
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


JOB = {"manifest": "m.toml", "case": "c1", "impl": "cuda", "ptx": "//", "size": "check"}


def test_a_run_with_errors_is_errors_even_when_the_program_failed(tmp_path):
    run = sanitize.run_tool(_stand_in(tmp_path, MEMCHECK_OOB, 1), "memcheck", JOB)
    assert run["status"] == "errors" and run["errors"] == 3 and run["exit_status"] == 1
    assert run["command"][:3] == ["compute-sanitizer", "--tool", "memcheck"]


def test_a_clean_report_from_a_program_that_failed_checked_nothing(tmp_path):
    run = sanitize.run_tool(_stand_in(tmp_path, CLEAN, 2, "error: no CUDA GPU"), "memcheck", JOB)
    assert run["status"] == "failed"
    assert "exited with status 2" in run["reason"] and "no CUDA GPU" in run["reason"]


def test_a_clean_run(tmp_path):
    run = sanitize.run_tool(_stand_in(tmp_path, CLEAN, 0), "synccheck", JOB)
    assert run["status"] == "clean" and run["errors"] == 0


def test_a_missing_report_fails_with_what_the_program_said(tmp_path):
    run = sanitize.run_tool(_stand_in(tmp_path, "", 3, "Traceback: boom"), "initcheck", JOB)
    assert run["status"] == "failed" and "Traceback: boom" in run["reason"]


def _suite(tmp_path):
    case = types.SimpleNamespace(
        id="c1", check_dims={"n": 5}, geometry=lambda dims: types.SimpleNamespace(dims=dims)
    )
    return types.SimpleNamespace(path=tmp_path / "cases.toml", name="s"), case


def test_the_document_counts_runs_and_is_valid(tmp_path):
    suite, case = _suite(tmp_path)
    said = []
    path = _stand_in(tmp_path, RACECHECK, 0)
    sanitizer = sanitize.Sanitizer(suite, ("racecheck", "memcheck"), path, 0, said.append)
    assert sanitizer.implementation(case, "cuda", "reduce_racy", "//") is False
    assert said[0].startswith("FAIL  c1/cuda: sanitize: racecheck: 1 error(s) in reduce_racy")
    doc = sanitizer.document()
    validate(doc, "sanitize")
    assert doc["status"] == "errors" and doc["summary"] == {
        "runs": 2,
        "clean": 0,
        "errors": 2,
        "failed": 0,
    }
    assert doc["cases"][0]["check_dims"] == {"n": 5}
    doc["cases"][0]["implementations"]["cuda"]["runs"][0]["status"] = "maybe"
    with pytest.raises(DocumentError, match="status"):
        validate(doc, "sanitize")


def test_a_clean_implementation_passes(tmp_path):
    suite, case = _suite(tmp_path)
    sanitizer = sanitize.Sanitizer(suite, ("memcheck",), _stand_in(tmp_path, CLEAN, 0), 0, print)
    assert sanitizer.implementation(case, "cuda", "scale", "//") is True
    assert sanitizer.document()["status"] == "clean"


def test_compute_sanitizer_is_found_in_cuda_home(tmp_path, monkeypatch):
    from runner.explain import static

    (tmp_path / "bin").mkdir()
    program = tmp_path / "bin" / "compute-sanitizer"
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    monkeypatch.setenv("PATH", os.defpath if "compute-sanitizer" not in os.defpath else "")
    monkeypatch.setattr(static, "_pathfinder", lambda name: None)
    static.find.cache_clear()
    try:
        assert static.find("compute-sanitizer") == str(program)
    finally:
        static.find.cache_clear()


def test_check_refuses_out_without_sanitize_and_names_a_missing_sanitizer(monkeypatch):
    from click.testing import CliRunner

    from runner.cli import main
    from runner.explain import static

    done = CliRunner().invoke(main, ["check", "benchmarks/cases.toml", "-o", "x.json"])
    assert done.exit_code == 2 and "it needs --sanitize" in done.output
    done = CliRunner().invoke(
        main, ["check", "benchmarks/cases.toml", "--sanitize", "--sanitize-tools", "leak"]
    )
    assert done.exit_code == 2 and "--sanitize-tools: leak is not" in done.output
    monkeypatch.setattr(static, "find", lambda name: None)
    done = CliRunner().invoke(main, ["check", "benchmarks/cases.toml", "--sanitize"])
    assert done.exit_code == 2
    assert "compute-sanitizer not found: install the CUDA toolkit" in done.output


def test_a_run_past_its_time_limit_failed(tmp_path):
    script = tmp_path / "compute-sanitizer"
    script.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(30)\n")
    script.chmod(0o755)
    run = sanitize.run_tool(str(script), "racecheck", JOB, timeout_s=0.5)
    assert run["status"] == "failed" and run["reason"] == "did not finish in 0.5 s"
    assert run["wall_s"] >= 0.5
    validate(
        {
            "schema_version": "1.0.0",
            "kind": "sanitize",
            "suite": {"path": "s.toml", "name": "s"},
            "sanitizer": {"path": str(script), "version": "unknown"},
            "tools": ["racecheck"],
            "size": "check",
            "status": "failed",
            "summary": {"runs": 1, "clean": 0, "errors": 0, "failed": 1},
            "cases": [
                {
                    "id": "c1",
                    "check_dims": {"n": 5},
                    "implementations": {"cuda": {"entry": "k", "runs": [run]}},
                }
            ],
        },
        "sanitize",
    )


def test_runner_check_sanitize_end_to_end_with_a_stand_in(tmp_path, monkeypatch):
    """The CLI wiring: every built implementation of tests/sanitize is run under each tool, the
    document is written and valid, and an error fails the check (exit 1)."""
    import shutil

    from click.testing import CliRunner

    from runner.cli import main
    from runner.explain import static
    from runner.gpu import driver

    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH (the sanitize suite's kernels are CUDA C++)")
    (tmp_path / "oob.txt").write_text(MEMCHECK_OOB)
    (tmp_path / "clean.txt").write_text(CLEAN)
    script = tmp_path / "compute-sanitizer"
    script.write_text(
        textwrap.dedent(
            f"""\
            #!{sys.executable}
            import json, sys
            argv = sys.argv[1:]
            tool, log = argv[argv.index("--tool") + 1], argv[argv.index("--log-file") + 1]
            job = json.load(open(argv[-1]))
            bad = job["impl"] == "past_end" and tool == "memcheck"
            report = {str(tmp_path)!r} + ("/oob.txt" if bad else "/clean.txt")
            open(log, "w").write(open(report).read())
            sys.exit(1 if bad else 0)
            """
        )
    )
    script.chmod(0o755)

    class NoContext:
        def __init__(self, device):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(
        static,
        "find",
        lambda name: str(script) if name == "compute-sanitizer" else shutil.which(name),
    )
    monkeypatch.setattr(static, "version", lambda path: "Version 2025.3.0.0 (stand-in)")
    monkeypatch.setattr(driver, "Context", NoContext)
    out = tmp_path / "sanitize.json"
    suite = "tests/sanitize/cases.toml"
    done = CliRunner().invoke(main, ["check", suite, "--sanitize", "-o", str(out)])
    assert done.exit_code == 1, done.output
    assert "FAIL  scale/past_end: sanitize: memcheck: 3 error(s) in scale_past_end" in done.output
    assert "ok    block_sum/cuda: sanitize: memcheck clean; racecheck clean" in done.output
    document = orjson.loads(out.read_bytes())
    validate(document, "sanitize")
    assert document["summary"] == {"runs": 16, "clean": 15, "errors": 1, "failed": 0}
    assert document["tools"] == ["memcheck", "racecheck", "synccheck", "initcheck"]
    assert document["sanitizer"]["version"] == "Version 2025.3.0.0 (stand-in)"


def test_initcheck_runs_by_default_under_sanitize():
    """Issue 50 class 7: an uninitialised read passes wherever the memory happens to hold
    zeros; only initcheck sees it, so `--sanitize` runs it unless told otherwise."""
    from runner.cli import main

    default = next(p.default for p in main.commands["check"].params if p.name == "sanitize_tools")
    assert sanitize.parse_tools(default) == compute_sanitizer.TOOLS
    assert "initcheck" in sanitize.parse_tools(default)
