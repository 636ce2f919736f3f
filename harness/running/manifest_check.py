"""The runner's own manifest check, run on the host before `harness run` reaches a target.

The harness never imports the runner, so it runs `python -m runner check --manifest-only` as a
subprocess, from the same tree that would be shipped (REPO_ROOT first on
PYTHONPATH): the target would refuse exactly what this refuses, and now nothing is rented or
connected to first. A manifest loader shared through protocol/ would mean moving the suite
model and its expression language out of the runner; a subprocess keeps one loader and the
imports one way, for about a second of start-up.

`read()`: a suite manifest's TOML as the host reads it, its bytes and its tables, or an error naming
the file.

The harness never imports the runner (its manifest loader needs the suite's references and
toolchains); it reads only what it needs: the files a suite names (harness.running.shipping) and its
`[suite]` table (harness.running.trust). Malformed input is refused here as the runner refuses it,
nesting too deep for the parser included (a RecursionError, not a traceback)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from harness.errors import ManifestRefused, SuiteTomlError
from protocol.errors import InputFileError
from protocol.input_files import read_toml

REPO_ROOT = Path(__file__).resolve().parents[2]  # the tree `harness run` ships

__all__ = ["CHECK_TIMEOUT_S", "check_manifest", "read"]


def read(path: Path) -> tuple[bytes, dict]:
    """The manifest's bytes (what its sha256 is taken of) and its parsed TOML."""
    try:
        return read_toml(path, "suite manifest")
    except InputFileError as exc:
        raise SuiteTomlError(str(exc)) from None


CHECK_TIMEOUT_S = 120.0


STATUS_BAD_INPUT = 2


def check_manifest(cases: Path, root: Path = REPO_ROOT, python: str = sys.executable) -> None:
    """ManifestRefused with the runner's message unless `runner check --manifest-only` accepts
    `cases`."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(root), *filter(None, [os.environ.get("PYTHONPATH")])]),
    }
    try:
        done = subprocess.run(
            [python, "-m", "runner", "check", "--manifest-only", str(cases)],
            capture_output=True,
            text=True,
            errors="replace",
            env=env,
            stdin=subprocess.DEVNULL,
            timeout=CHECK_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        raise ManifestRefused(
            f"{cases}: the runner's manifest check did not finish in {CHECK_TIMEOUT_S:.0f} s"
        ) from None
    except OSError as exc:
        raise ManifestRefused(f"{cases}: cannot run the runner's manifest check: {exc}") from None
    if done.returncode == 0:
        return
    lines = done.stderr.strip().splitlines()
    if done.returncode == STATUS_BAD_INPUT and lines and lines[-1].startswith("error: "):
        raise ManifestRefused(lines[-1].removeprefix("error: "))
    tail = "\n".join(f"  | {line}" for line in lines[-8:])
    raise ManifestRefused(
        f"{cases}: the runner's manifest check ({python} -m runner check --manifest-only) "
        f"exited {done.returncode}:\n{tail}"
    )
