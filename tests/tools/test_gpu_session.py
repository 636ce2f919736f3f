"""tools/gpu_session.py: every GPU test file belongs to one group, and a cut run still reports."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.support.perf_script import run_tool

ROOT = Path(__file__).resolve().parents[2]
GPU_MARK = re.compile(r"^(pytestmark\s*=.*pytest\.mark\.gpu|\s*@pytest\.mark\.gpu)", re.MULTILINE)
sys.path.insert(0, str(ROOT / "tools"))
import gpu_session  # noqa: E402


def _covered(path: Path) -> bool:
    rel = path.relative_to(ROOT).as_posix()
    return any(
        rel == entry or rel.startswith(entry.rstrip("/") + "/")
        for paths in gpu_session.GROUPS.values()
        for entry in paths
    )


def test_every_gpu_test_file_is_in_a_group():
    gpu_files = [
        p
        for p in (ROOT / "tests").rglob("test_*.py")
        if GPU_MARK.search(p.read_text(encoding="utf-8"))
    ]
    assert gpu_files, "no GPU test file found: the scan is broken"
    missing = [str(p.relative_to(ROOT)) for p in gpu_files if not _covered(p)]
    assert missing == [], f"GPU test files in no group of tools/gpu_session.py: {missing}"


def test_a_group_with_no_time_left_is_reported_not_run(tmp_path):
    args = ("--budget-s", "1", "--out", str(tmp_path), "--only", "launch", "suite")
    done = run_tool(ROOT / "tools" / "gpu_session.py", *args, timeout_s=60)
    assert done.returncode == 1
    report = (tmp_path / "gpu-session.txt").read_text().splitlines()
    assert report == ["launch: not run (1 s left)", "suite: not run (1 s left)"]


def test_summary_line_takes_pytests_closing_line():
    out = "....\n=== 3 passed, 1 skipped in 2.50s ===\n"
    assert gpu_session.summary_line(out) == "3 passed, 1 skipped in 2.50s"
    assert gpu_session.summary_line("") == "(no output)"


def test_a_group_cut_short_says_which_tests_ended(tmp_path, monkeypatch):
    """The call's budget ends a group mid-run: its report line counts the tests pytest -v had
    reported by then (pytest's own output, as subprocess.run hands it back on a timeout)."""
    partial = (
        "tests/a_gpu.py::test_one PASSED [ 10%]\n"
        "tests/a_gpu.py::test_two FAILED [ 20%]\n"
        "tests/a_gpu.py::test_three PASSED [ 30%]\n"
    )

    def cut(command, **kwargs):
        raise subprocess.TimeoutExpired(command, kwargs["timeout"], output=partial.encode())

    monkeypatch.setattr(gpu_session.subprocess, "run", cut)
    line, ok = gpu_session.run_group("launch", gpu_session.GROUPS["launch"], 30.0, tmp_path)
    assert not ok
    assert line == "launch: cut at 30 s (the budget ran out; 2 passed, 1 failed)"
    assert (tmp_path / "launch.log").read_text() == partial
