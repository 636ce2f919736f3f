"""Load a lab script of tools/perf/ as a module for its CPU tests, or skip the test module
where the tree has no tools/ (harness run ships the package and its tests to a GPU box); run a
script of tools/ as a user does (`run_tool`)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load(name: str):
    """tools/perf/<name>.py as a module (a module-level skip where it is not in the tree)."""
    script = ROOT / "tools" / "perf" / f"{name}.py"
    if not script.exists():
        pytest.skip(f"{script} is not in this tree", allow_module_level=True)
    spec = importlib.util.spec_from_file_location(name, script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_tool(script: Path, *args: str, timeout_s: float = 120) -> subprocess.CompletedProcess:
    """`python <script> <args>` from the repository root, its output captured as text."""
    return subprocess.run(
        [sys.executable, str(script), *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        cwd=ROOT,
    )
