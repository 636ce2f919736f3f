"""What every toolchain module shares: its errors and where CUDA toolkits are (imports no other
toolchain module, so the package and its modules import one way)."""

from __future__ import annotations

import os
from pathlib import Path

from runner import cuda_programs
from runner.errors import BuildError, ToolchainMissing

__all__ = ["BuildError", "ToolchainMissing", "cuda_roots"]


def cuda_roots() -> list[Path]:
    """CUDA toolkit folders, best first, without duplicates.

    Order: $CUDA_PATH and $CUDA_HOME (taken as given), then the guesses that look like a toolkit
    (an nvvm/ folder or include/cuda.h): the folder above the real `nvcc` on PATH or in NVIDIA's
    wheels (symlinks resolved), /usr/local/cuda, /usr/local/cuda-* (newest first), /usr/lib/cuda
    (Debian). nvcc may be a shell wrapper, which resolves to its own folder: hence the /usr/local
    guesses.
    """
    given = [Path(os.environ[var]) for var in ("CUDA_PATH", "CUDA_HOME") if os.environ.get(var)]
    guessed = [Path("/usr/local/cuda")]
    nvcc_path = cuda_programs.find("nvcc")
    if nvcc_path:
        guessed.insert(0, Path(nvcc_path).resolve().parent.parent)
    guessed += sorted(Path("/usr/local").glob("cuda-*"), key=_version_key, reverse=True)
    guessed.append(Path("/usr/lib/cuda"))
    roots: list[Path] = []
    for root in given + [
        g for g in guessed if (g / "nvvm").is_dir() or (g / "include/cuda.h").is_file()
    ]:
        if root.is_dir() and root.resolve() not in {r.resolve() for r in roots}:
            roots.append(root)
    return roots


def _version_key(path: Path) -> tuple[int, ...]:
    """`cuda-13.0` -> (13, 0), so that cuda-12.10 sorts after cuda-12.9."""
    return tuple(int(part) for part in path.name.removeprefix("cuda-").split(".") if part.isdigit())
