"""Every command, run as a user runs it (a subprocess), ends a missing extra or an output path
that cannot be written in one `error:` line naming the fix or the path, exit 2: no traceback.

An extra is made missing for real: a sitecustomize on PYTHONPATH refuses to import its packages
(scipy, plotly, ruptures, vastai), as an install without `[harness]` or `[vast]` would.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import click
import click.testing
import pytest

from harness.cli import EXTRA_OF_MODULE
from harness.cli import main as harness_main
from protocol.input_files import os_error_line, output_problem
from runner.cli import Commands
from runner.cli import main as runner_main
from tests.conftest import ROOT

RESULT = str(ROOT / "tests" / "fixtures" / "result-1.2.0-h200-warpforth.json")
FIXTURE_CASES = str(ROOT / "tests" / "fixtures" / "cases-f92b730d6bf3.toml")
SUITE = str(ROOT / "tests" / "gpu_suite" / "cases.toml")
BLOCK = """import sys
class _Missing:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in {names!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, _Missing())
"""
# What the extras' packages are needed for: these end at once in the extra's line. regressions and
# changes import them only for a history with series to search, so on this one-run history they work.
NEEDS_HARNESS_EXTRA = {"dashboard"}  # compare computes its U test without scipy


def cli(program: str, *argv: str, cwd: Path, blocked: Path | None = None):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if blocked is not None:
        env["PYTHONPATH"] = str(blocked)
    return subprocess.run(
        [sys.executable, "-m", program, *argv],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=120,
    )


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> dict:
    """A folder with a history of the fixture result, and a sitecustomize folder hiding every
    extra's packages."""
    base = tmp_path_factory.mktemp("errors")
    blocked = base / "no-extras"
    blocked.mkdir()
    (blocked / "sitecustomize.py").write_text(BLOCK.format(names=set(EXTRA_OF_MODULE)))
    db = base / "history.sqlite"
    done = cli("harness", "ingest", RESULT, "--db", str(db), "--trusted", "--cases", FIXTURE_CASES, cwd=base)  # fmt: skip
    assert done.returncode == 0, done.stderr
    (base / "a-file").write_text("not a folder\n")
    return {"base": base, "blocked": blocked, "db": str(db)}


def harness_args(work: dict) -> dict[str, list[str]]:
    """Arguments that get each harness command past its own input checks."""
    db = ["--db", work["db"]]
    return {
        "run": [SUITE, "--target", "vast:NVIDIA H200", "--max-price", "1", "--out", str(work["base"] / "r")],
        "ingest": [RESULT, "--db", str(work["base"] / "other.sqlite")],
        "history": db,
        "regressions": db,
        "changes": db,
        "pr": [RESULT],
        "compare": [RESULT, RESULT],
        "summary": [RESULT],
        "export": [RESULT, "--format", "csv"],
        "dashboard": [*db, "--out", str(work["base"] / "site")],
        "explain": [RESULT],
        "robust": [RESULT, RESULT],
    }  # fmt: skip


def test_every_harness_command_without_its_extra_names_it_or_works(work):
    args = harness_args(work)
    assert set(args) == set(harness_main.commands), "a new command: give it arguments here"
    for name, argv in args.items():
        done = cli("harness", name, *argv, cwd=work["base"], blocked=work["blocked"])
        assert "Traceback" not in done.stderr, (name, done.stderr)
        last = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else ""
        if name in NEEDS_HARNESS_EXTRA:
            assert done.returncode == 2 and done.stderr.count("\n") == 1, (name, done.stderr)
            assert last.startswith(f"error: harness {name} needs the [harness] extra"), last
            assert "pip install '.[harness]'" in last and ".whl[harness]'" in last
        elif done.returncode == 2:  # its own bad input (pr of a run without revisions), or vast
            assert last.startswith("error: ") and last.count("error:") == 1, (name, last)
        assert name != "run" or "pip install 'kernelgap[vast]'" in last, last


def output_options() -> list[tuple[str, str, str]]:
    """(program, command, option) for every option of either CLI that names an output path."""
    found = []
    for program, group in (("runner", runner_main), ("harness", harness_main)):
        for name, command in sorted(group.commands.items()):
            for param in command.params:
                if {"-o", "--out", "--output"} & set(param.opts):
                    found.append((program, name, param.opts[-1]))
    return found


def test_every_output_option_under_a_file_is_one_line_naming_the_path(work):
    cases = str(ROOT / "benchmarks" / "cases.toml")
    before = {
        ("runner", "bench"): [cases],
        ("runner", "check"): [cases],
        ("runner", "build"): [cases],
        ("harness", "dashboard"): ["--db", work["db"]],
        ("harness", "run"): [SUITE, "--target", "local"],
    }
    found = output_options()
    assert {(p, c) for p, c, _ in found} == set(before), "a new output option: add it here"
    for program, name, option in found:
        out = work["base"] / "a-file" / "out"
        done = cli(program, name, *before[program, name], option, str(out), cwd=work["base"])
        assert done.returncode == 2, (name, done.stderr)
        assert done.stderr == f"error: {option} {out}: cannot be made: {out.parent} is a file, not a folder\n"  # fmt: skip
        assert done.stdout == ""


def test_an_output_path_is_judged_before_any_work(tmp_path):
    (tmp_path / "file").write_text("")
    assert output_problem(tmp_path / "new" / "deeper", folder=True) is None
    assert output_problem(tmp_path / "new" / "result.json", folder=False) is None
    assert output_problem(tmp_path / "file", folder=False) is None  # rewritten
    assert output_problem(tmp_path / "file", folder=True) == f"{tmp_path}/file: exists and is not a folder"  # fmt: skip
    assert output_problem(tmp_path, folder=False) == f"{tmp_path}: is a folder; give a file name"


def test_a_file_error_that_passed_the_checks_is_still_one_line():
    @click.group(cls=Commands)
    def group():
        pass

    @group.command()
    def write():
        raise IsADirectoryError(21, "Is a directory", "/some/where")

    done = click.testing.CliRunner().invoke(group, ["write"])
    assert done.exit_code == 2 and done.stderr == "error: /some/where: Is a directory\n"
    assert os_error_line(BrokenPipeError(32, "Broken pipe")) is None  # names no file: raised


def test_history_of_a_case_with_no_series_says_so_on_stderr(work):
    done = cli("harness", "history", "--db", work["db"], "--case", "nosuch", cwd=work["base"])
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("error: --case nosuch: no series of that case in ")
    assert "axpy_f64" in done.stderr and done.stderr.count("\n") == 1  # the cases it has
    known = cli("harness", "history", "--db", work["db"], "--case", "axpy_f64", cwd=work["base"])
    assert known.returncode == 0 and "axpy_f64" in known.stdout, known.stderr
