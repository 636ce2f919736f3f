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

from tests.conftest import ROOT

__all__ = ["run_bench"]


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
