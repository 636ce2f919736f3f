"""Load a lab script of tools/perf/ as a module for its CPU tests, or skip the test module
where the tree has no tools/ (harness run ships the package and its tests to a GPU box)."""

from __future__ import annotations

import importlib.util
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
