"""nvcc: CUDA C++ -> PTX with fixed flags (-O3, no fast-math). The canonical baseline compiler."""

from __future__ import annotations

import functools
import shutil
import subprocess
import tempfile
from pathlib import Path

FIXED_FLAGS = ["-O3", "-std=c++17"]


def _program() -> str:
    from runner.toolchains import ToolchainMissing

    path = shutil.which("nvcc")
    if path is None:
        raise ToolchainMissing(
            "nvcc is not on PATH (install the CUDA toolkit, or build elsewhere and pass PTX)"
        )
    return path


@functools.cache
def version(template: str | None = None) -> str:
    out = subprocess.run(
        [_program(), "--version"], capture_output=True, text=True, timeout=60
    ).stdout
    lines = [line for line in out.splitlines() if line.strip()]
    return lines[-1].strip() if lines else "unknown"


def build(
    source: Path, arch: str, flags: list[str], template: str | None = None
) -> tuple[str, list[str]]:
    from runner.toolchains import BuildError

    with tempfile.TemporaryDirectory(prefix="kernelgap-nvcc-") as tmp:
        out = Path(tmp) / (source.stem + ".ptx")
        command = [
            _program(),
            "-ptx",
            f"-arch={arch}",
            *FIXED_FLAGS,
            *flags,
            str(source),
            "-o",
            str(out),
        ]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            raise BuildError(f"{source}: nvcc did not finish within 300 s") from None
        if done.returncode != 0:
            raise BuildError(
                f"{source}: nvcc exited with {done.returncode}:\n{(done.stderr or done.stdout).strip()}"
            )
        return out.read_text(), command
