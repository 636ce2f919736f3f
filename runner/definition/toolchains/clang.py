"""clang: CUDA C++ -> PTX through LLVM's NVPTX back end, the built-in candidate compiler.

LLVM NVPTX against NVIDIA's NVVM: the same back-end family that MLIR-based compilers use. The
flags are fixed and recorded in the build's command: device code only, no CUDA headers or CUDA
runtime (`-nocudainc -nocudalib`), -O3, no fast-math. `clang_prelude.h` stands in for the CUDA
headers (keywords, threadIdx & co, math functions); libdevice is linked as builtin bitcode
whenever it is found, which costs nothing when unused (unreferenced functions are dropped).
Debian's clang-19 is preferred (`apt-get install clang-19`) so that results name one compiler.
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

PROGRAMS = ("clang++-19", "clang++", "clang")
PRELUDE = Path(__file__).with_name("clang_prelude.h")
FIXED_FLAGS = [
    "-x",
    "cuda",
    "--cuda-device-only",
    "-nocudainc",
    "-nocudalib",
    "-O3",
    "-S",
    "-std=c++17",
    "-Wno-unknown-cuda-version",
]
LIBDEVICE = "libdevice.10.bc"
# `.extern .func  (.param .b64 func_retval0) __nv_exp`: a libdevice function left undefined.
_UNDEFINED_LIBDEVICE = re.compile(r"^\.extern\s+\.func\b[^\n]*?\b(__nv_\w+)", re.MULTILINE)


@functools.cache
def program(template: str | None = None) -> str:
    """The first of PROGRAMS on PATH whose LLVM has the NVPTX back end."""
    from runner.errors import ToolchainMissing

    for name in PROGRAMS:
        path = shutil.which(name)
        if path is None:
            continue
        targets = subprocess.run(
            [path, "--print-targets"], capture_output=True, text=True, timeout=30
        ).stdout
        if "nvptx64" in targets:
            return path
    raise ToolchainMissing(
        f"no clang with the NVPTX back end on PATH (tried {', '.join(PROGRAMS)}); "
        "install it with `apt-get install clang-19`"
    )


@functools.cache
def version(template: str | None = None) -> str:
    """First line of `clang --version`, e.g. "Debian clang version 19.1.7 (3~deb12u1)"."""
    out = subprocess.run([program(), "--version"], capture_output=True, text=True, timeout=60)
    lines = [line.strip() for line in out.stdout.splitlines() if line.strip()]
    return lines[0] if lines else "unknown"


def libdevice_places() -> list[Path]:
    """Where libdevice.10.bc is looked for: nvvm/libdevice under each of `cuda_roots()`."""
    from runner.definition.toolchains import cuda_roots

    return [root / "nvvm" / "libdevice" / LIBDEVICE for root in cuda_roots()]


@functools.cache
def find_libdevice() -> Path | None:
    """libdevice.10.bc from a CUDA toolkit, else from NVIDIA's pip wheels (nvidia-nvvm), else None."""
    for path in libdevice_places():
        if path.is_file():
            return path
    try:
        from cuda.pathfinder import find_bitcode_lib

        return Path(find_bitcode_lib("device"))
    except (ImportError, RuntimeError):  # no cuda-python, or not in any wheel
        return None


def build(
    source: Path, arch: str, flags: list[str], template: str | None = None
) -> tuple[str, list[str]]:
    from runner.definition.toolchains import cuda_roots
    from runner.errors import BuildError, ToolchainMissing

    libdevice = find_libdevice()
    link = ["-Xclang", "-mlink-builtin-bitcode", "-Xclang", str(libdevice)] if libdevice else []
    # clang picks the PTX ISA version from the CUDA installation it detects by itself (an nvcc on
    # PATH, /usr/local/cuda): name the one the runner uses, so the PTX does not change with PATH.
    roots = cuda_roots()
    cuda_path = [f"--cuda-path={roots[0]}"] if roots else []
    with tempfile.TemporaryDirectory(prefix="kernelgap-clang-") as tmp:
        out = Path(tmp) / (source.stem + ".ptx")
        command = [
            program(),
            *FIXED_FLAGS,
            f"--cuda-gpu-arch={arch}",
            *cuda_path,
            "-include",
            str(PRELUDE),
            *link,
            *flags,
            str(source),
            "-o",
            str(out),
        ]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            raise BuildError(f"{source}: clang did not finish within 300 s") from None
        if done.returncode != 0:
            raise BuildError(
                f"{source}: clang exited with {done.returncode}:\n{(done.stderr or done.stdout).strip()}"
            )
        ptx = out.read_text()
    # Without libdevice, math calls stay undefined `.extern .func __nv_*` and ptxas would fail later.
    missing = sorted(set(_UNDEFINED_LIBDEVICE.findall(ptx)))
    if missing:
        places = ", ".join(str(p) for p in libdevice_places())
        looked = (
            f"looked in {places} and in NVIDIA's pip wheels"
            if places
            else (
                "there is no CUDA toolkit here (CUDA_HOME, /usr/local/cuda) and no nvidia-nvvm wheel"
            )
        )
        raise ToolchainMissing(
            f"{source}: the kernel calls libdevice functions ({', '.join(missing)}) and "
            f"{LIBDEVICE} was not found: {looked}; `pip install 'kernelgap[nvcc]'` (it brings "
            "nvidia-nvvm) or set CUDA_HOME to a CUDA toolkit; implementation skipped"
        )
    return ptx, command
