"""nvrtc: the same CUDA C++ source through NVRTC (cuda-python), for a machine without nvcc.

Options are nvcc's defaults made explicit: `--gpu-architecture=compute_XX` (PTX for the virtual
architecture of sm_XX), `-std=c++17`, no fast-math (NVRTC optimises like `nvcc -O3` by default).
The source's folder is on the include path, as it is for nvcc.

Finding libnvrtc: cuda-python looks in NVIDIA's pip wheels (`pip install nvidia-cuda-nvrtc`), conda,
the system loader path and $CUDA_PATH/$CUDA_HOME. A toolkit installed under /usr/local without an
ld.so.conf entry (nvcc only reachable through PATH or a wrapper script) is found by none of those,
so when the first call fails we load libnvrtc (and libnvrtc-builtins, which libnvrtc dlopens by
bare name) from `cuda_roots()` ourselves: cuda-python then finds it already loaded. Nothing in
os.environ is changed (cuda-python reads CUDA_HOME once and caches it, so setting it late is useless).
"""

from __future__ import annotations

import ctypes
import functools
import re
from pathlib import Path

FIXED_FLAGS = ["-std=c++17"]
_ARCH = re.compile(r"(?:sm|compute)_(\d+[a-z]?)")


@functools.cache
def _nvrtc():
    """The cuda.bindings.nvrtc module with libnvrtc loaded; ToolchainMissing if it cannot be."""
    from runner.errors import ToolchainMissing

    try:
        from cuda.bindings import nvrtc
    except ImportError as exc:
        from runner import cuda_bindings as bindings

        raise ToolchainMissing(bindings.missing("nvrtc", exc)) from None
    try:
        nvrtc.nvrtcVersion()
        return nvrtc
    except RuntimeError as exc:  # cuda.pathfinder's DynamicLibNotFoundError
        first_error = str(exc).splitlines()[0]
    library = _toolkit_libnvrtc()
    if library is None:
        raise ToolchainMissing(
            f"libnvrtc could not be loaded ({first_error}); install it with "
            "`pip install nvidia-cuda-nvrtc`, or set CUDA_HOME to a CUDA toolkit that has lib64/libnvrtc.so"
        )
    # libnvrtc.so.13 -> libnvrtc.so.13.0.88 goes with libnvrtc-builtins.so.13.0.
    major_minor = ".".join(library.resolve().name.removeprefix("libnvrtc.so.").split(".")[:2])
    builtins = library.parent / f"libnvrtc-builtins.so.{major_minor}"
    try:
        if builtins.is_file():
            ctypes.CDLL(str(builtins), mode=ctypes.RTLD_GLOBAL)
        ctypes.CDLL(str(library), mode=ctypes.RTLD_GLOBAL)
        nvrtc.nvrtcVersion()
    except (OSError, RuntimeError) as exc:
        raise ToolchainMissing(f"{library} could not be loaded: {exc}") from None
    return nvrtc


def _toolkit_libnvrtc() -> Path | None:
    """libnvrtc.so.N (the newest N) in the first CUDA toolkit of `cuda_roots()` that has one."""
    from runner.definition.toolchains import cuda_roots

    for root in cuda_roots():
        for lib_dir in (root / "lib64", root / "lib", *sorted(root.glob("targets/*/lib"))):
            found = [
                p
                for p in lib_dir.glob("libnvrtc.so.*")
                if p.name.removeprefix("libnvrtc.so.").isdigit()
            ]
            if found:
                return max(found, key=lambda p: int(p.name.removeprefix("libnvrtc.so.")))
    return None


def _check(result, call: str, source: Path) -> None:
    from runner.errors import BuildError

    if int(result) != 0:  # NVRTC_SUCCESS
        nvrtc = _nvrtc()
        name = nvrtc.nvrtcGetErrorString(result)[1].decode()
        raise BuildError(f"{source}: {call}: {name}")


@functools.cache
def version(template: str | None = None) -> str:
    """`NVRTC <major>.<minor>`, from nvrtcVersion()."""
    _, major, minor = _nvrtc().nvrtcVersion()
    return f"NVRTC {major}.{minor}"


def options(source: Path, arch: str, flags: list[str]) -> list[str]:
    """NVRTC options for `arch` ("sm_90" -> --gpu-architecture=compute_90), fixed flags, then `flags`."""
    from runner.errors import BuildError

    match = _ARCH.fullmatch(arch)
    if match is None:
        raise BuildError(f"{source}: arch {arch!r} is not of the form sm_XX (e.g. sm_90)")
    return [
        f"--gpu-architecture=compute_{match.group(1)}",
        *FIXED_FLAGS,
        f"--include-path={source.parent}",
        *flags,
    ]


def build(
    source: Path, arch: str, flags: list[str], template: str | None = None
) -> tuple[str, list[str]]:
    from runner.errors import BuildError

    opts = options(source, arch, flags)
    nvrtc = _nvrtc()
    result, program = nvrtc.nvrtcCreateProgram(source.read_bytes(), source.name.encode(), 0, [], [])
    _check(result, "nvrtcCreateProgram", source)
    try:
        (result,) = nvrtc.nvrtcCompileProgram(program, len(opts), [o.encode() for o in opts])
        if int(result) != 0:
            _, size = nvrtc.nvrtcGetProgramLogSize(program)
            log = b" " * size
            nvrtc.nvrtcGetProgramLog(program, log)
            name = nvrtc.nvrtcGetErrorString(result)[1].decode()
            text = log.rstrip(b"\0").decode(errors="replace").strip()
            raise BuildError(f"{source}: NVRTC failed ({name}):\n{text}")
        result, size = nvrtc.nvrtcGetPTXSize(program)
        _check(result, "nvrtcGetPTXSize", source)
        ptx = b" " * size
        _check(nvrtc.nvrtcGetPTX(program, ptx)[0], "nvrtcGetPTX", source)
    finally:
        nvrtc.nvrtcDestroyProgram(program)
    return ptx.rstrip(b"\0").decode(), ["nvrtc", *opts, str(source)]
