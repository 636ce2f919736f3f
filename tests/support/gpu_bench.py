"""`python -m runner bench` in a process of its own, for the GPU tests: the document it wrote
(a copy kept under $KERNELGAP_TEST_ARTIFACTS when set, e.g. $OUT on the GPU box) and the
finished process."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tests.conftest import ROOT

__all__ = ["bundle_args", "run_bench"]

CLANGS = ("clang++-19", "clang++", "clang")


def bundle_args(needs: str = "clang") -> tuple[str, ...]:
    """`--bundle $KERNELGAP_BUNDLE` where that names a bundle (the GPU box, which has no clang
    or warpforthc: the PTX is built here and carried); () where `needs` (clang or warpforthc) is
    on PATH to build from source; else the test is skipped, saying which."""
    given = os.environ.get("KERNELGAP_BUNDLE")
    if given:
        return ("--bundle", given)
    found = any(map(shutil.which, CLANGS)) if needs == "clang" else shutil.which(needs)
    if not found:
        pytest.skip(f"{needs} is not on PATH and $KERNELGAP_BUNDLE names no bundle built with it")
    return ()


def run_bench(suite: str, document: Path, *args: str) -> tuple[dict, subprocess.CompletedProcess]:
    done = subprocess.run(
        [sys.executable, "-m", "runner", "bench", suite, "-o", str(document), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert document.exists(), f"no document written; stderr:\n{done.stderr}"
    keep = os.environ.get("KERNELGAP_TEST_ARTIFACTS")
    if keep:
        shutil.copy(document, Path(keep) / document.name)
    return orjson.loads(document.read_bytes()), done
