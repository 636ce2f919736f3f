"""Where NVIDIA's tools are (ptxas, cuobjdump, nvdisasm, ncu) and what version each one is.

ptxas comes first from PATH, as `runner check` finds it, so both assemble with the same one.
cuobjdump and nvdisasm come first from the NVIDIA wheels (`pip install -e '.[explain]'` installs
nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm) through cuda.pathfinder, which also knows
CUDA_HOME and the toolkit's own folders, then from PATH. ncu (Nsight Compute) is searched the same
way; it is installed with the CUDA toolkit on a GPU box. compute-sanitizer, also part of the
toolkit, is looked for the same way and then in $CUDA_HOME/bin and /usr/local/cuda/bin.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess

from runner import cuda_programs
from runner.errors import ToolMissing

VERSION_TIMEOUT_S = 30.0
INSTALL_HINT = {
    "ptxas": "install the CUDA toolkit (ptxas on PATH), or pip install nvidia-cuda-nvcc",
    "cuobjdump": "pip install -e '.[explain]' (the nvidia-cuda-cuobjdump wheel), or put the CUDA "
    "toolkit's bin/ on PATH",
    "nvdisasm": "pip install -e '.[explain]' (the nvidia-cuda-nvdisasm wheel), or put the CUDA "
    "toolkit's bin/ on PATH",
    "ncu": "install Nsight Compute (it comes with the CUDA toolkit) and put ncu on PATH",
    "compute-sanitizer": "install the CUDA toolkit (compute-sanitizer comes with it) and put its "
    "bin/ on PATH, or set CUDA_HOME",
}
# Where a CUDA toolkit keeps its programs when its bin/ is not on PATH (compute-sanitizer).
TOOLKIT_BINS = ("/usr/local/cuda/bin", "/opt/cuda/bin")


def _pathfinder(name: str) -> str | None:
    try:
        from cuda.pathfinder import find_nvidia_binary_utility
    except ImportError:  # an older cuda-python without the binary finder
        return None
    try:
        return find_nvidia_binary_utility(name)
    except Exception:  # an unsupported name or a broken install: fall back to PATH
        return None


@functools.cache
def find(name: str) -> str | None:
    """The path of tool `name`, or None. cuda_programs.find (PATH, then the wheels' bin/ folders)
    covers a cuda-python without cuda.pathfinder (12.6.x, the floor)."""
    if name == "ptxas":
        return cuda_programs.find("ptxas") or _pathfinder("ptxas")
    found = _pathfinder(name) or cuda_programs.find(name)
    if found is None and name == "compute-sanitizer":
        home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
        folders = ([os.path.join(home, "bin")] if home else []) + list(TOOLKIT_BINS)
        found = shutil.which(name, path=os.pathsep.join(folders))
    return found


def require(name: str) -> str:
    path = find(name)
    if path is None:
        raise ToolMissing(f"{name} not found: {INSTALL_HINT[name]}")
    return path


@functools.cache
def version(path: str) -> str:
    """The last meaningful line of `path --version` ('Cuda compilation tools, release 13.0,
    V13.0.88', 'Version 2025.3.1.0 (build ...)'), or every line joined when none names a version."""
    try:
        done = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=VERSION_TIMEOUT_S
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unknown ({exc})"
    lines = [line.strip() for line in (done.stdout or done.stderr).splitlines() if line.strip()]
    for line in reversed(lines):
        if line.startswith(("Cuda compilation tools", "Version ")):
            return line
    return "; ".join(lines) or "unknown"


def disassembler() -> tuple[str, str]:
    """(name, path) of the SASS disassembler to use: cuobjdump, else nvdisasm."""
    for name in ("cuobjdump", "nvdisasm"):
        path = find(name)
        if path:
            return name, path
    raise ToolMissing(
        "neither cuobjdump nor nvdisasm was found: pip install -e '.[explain]' (the "
        "nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm wheels), or put the CUDA toolkit's bin/ "
        "on PATH"
    )
