"""Where the CUDA compiler programs (nvcc, ptxas) are: PATH first, else NVIDIA's pip wheels.

`pip install 'kernelgap[nvcc]'` (nvidia-cuda-nvcc and the crt, nvvm and runtime wheels it needs)
puts a complete nvcc and ptxas under site-packages/nvidia/cu<major>/bin, which no PATH names: a
machine without a CUDA toolkit then builds and assembles the suite all the same.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

__all__ = ["find", "wheel_bin_dirs"]


def wheel_bin_dirs() -> list[Path]:
    """bin/ folders of NVIDIA's CUDA wheels (nvidia/cu13/bin, ...), newest major first."""
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        return []
    found = []
    for base in (spec.submodule_search_locations or []) if spec else []:
        found += [p for p in Path(base).glob("cu*/bin") if p.is_dir()]
    return sorted(found, key=lambda p: p.parent.name, reverse=True)


def find(name: str) -> str | None:
    """The program `name` on PATH, else in NVIDIA's wheels (executable), else None."""
    on_path = shutil.which(name)
    if on_path is not None:
        return on_path
    for folder in wheel_bin_dirs():
        candidate = folder / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None
