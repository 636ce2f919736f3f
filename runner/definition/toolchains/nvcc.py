"""nvcc: CUDA C++ -> PTX with fixed flags (-O3, no fast-math). The canonical baseline compiler."""

from __future__ import annotations

import functools
import shutil
import subprocess
import tempfile
from pathlib import Path

FIXED_FLAGS = ["-O3", "-std=c++17"]


def program(template: str | None = None) -> str:
    from runner.errors import ToolchainMissing
    from runner.explain import static

    path = static.find_program("nvcc")
    if path is None:
        raise ToolchainMissing(
            "nvcc is not on PATH (install the CUDA toolkit or `pip install 'kernelgap[nvcc]'`, "
            "or build elsewhere and pass PTX)"
        )
    return path


@functools.cache
def version(template: str | None = None) -> str:
    out = subprocess.run(
        [program(), "--version"], capture_output=True, text=True, timeout=60
    ).stdout
    lines = [line for line in out.splitlines() if line.strip()]
    return lines[-1].strip() if lines else "unknown"


def build(
    source: Path, arch: str, flags: list[str], template: str | None = None
) -> tuple[str, list[str]]:
    """PTX of `source`. nvcc hands file names to a shell, so it only ever sees safe ones: the
    source is copied to `kernel.cu` in a temporary folder, and its own folder (for #include)
    is reached through a symbolic link named `src`."""
    from runner.errors import BuildError

    with tempfile.TemporaryDirectory(prefix="kernelgap-nvcc-") as tmp:
        work = Path(tmp)
        (work / "src").symlink_to(source.resolve().parent, target_is_directory=True)
        shutil.copyfile(source, work / "kernel.cu")
        head = [program(), "-ptx", f"-arch={arch}", *FIXED_FLAGS]
        command = [*head, "-I", "src", *flags, "kernel.cu", "-o", "kernel.ptx"]
        recorded = [
            *head,
            "-I",
            str(source.resolve().parent),
            *flags,
            str(source),
            "-o",
            f"{source.stem}.ptx",
        ]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=work)
        except subprocess.TimeoutExpired:
            raise BuildError(f"{source}: nvcc did not finish within 300 s") from None
        if done.returncode != 0:
            message = (done.stderr or done.stdout).strip().replace("kernel.cu", source.name)
            raise BuildError(f"{source}: nvcc exited with {done.returncode}:\n{message}")
        return (work / "kernel.ptx").read_text(), recorded  # what it means, with the real paths
