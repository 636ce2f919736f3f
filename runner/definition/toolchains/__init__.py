"""Toolchains behind one interface: `build(toolchain, source, arch, flags, template) -> Build`.

One module per toolchain; `TOOLCHAINS` maps the manifest's `toolchain` names to them. Each module
has `build(source, arch, flags, template) -> (ptx_text, command)` and `version(template) -> str`,
and a module that runs a program has `program(template) -> str`, its path (the build records the
sha256 of that file as the compiler's identity); `template` is the implementation's command
template and only the `command` toolchain reads it.
A module raises `ToolchainMissing` when its compiler is not installed here (the implementation is
then skipped with that reason) and `BuildError` when the compiler rejects the source.

What every toolchain module shares (`cuda_roots`, the errors) is here; they import it lazily,
inside their functions, so the package and its modules import one way."""

from __future__ import annotations

import functools
import hashlib
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from runner.definition.toolchains import clang, command, nvcc, nvrtc, prebuilt
from runner.errors import BuildError
from runner.explain import static

__all__ = ["TOOLCHAINS", "Build", "build", "build_impl", "compiler_sha256", "cuda_roots"]


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
    nvcc_path = static.find_program("nvcc")
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


@dataclass
class Build:
    ptx: str
    toolchain: str
    version: str
    command: list[str]
    flags: list[str]
    source_sha256: str
    build_s: float = 0.0
    compiler_sha256: str | None = None  # the compiler program's file, where there is one
    ptx_sha256: str = field(init=False)

    def __post_init__(self):
        self.ptx_sha256 = hashlib.sha256(self.ptx.encode()).hexdigest()

    def provenance(self) -> dict:
        record = {
            "toolchain": self.toolchain,
            "version": self.version,
            "command": self.command,
            "flags": self.flags,
            "source_sha256": self.source_sha256,
            "ptx_sha256": self.ptx_sha256,
            "build_s": self.build_s,
        }
        if self.compiler_sha256:
            record["compiler_sha256"] = self.compiler_sha256
        return record


@functools.cache
def _file_sha256(path: str, size: int, mtime_ns: int) -> str:
    """sha256 of a file, cached per (path, size, mtime) so a suite hashes each compiler once."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def compiler_sha256(module, template: str | None) -> str | None:
    """sha256 of the toolchain's program file (symlinks resolved), or None where it has none."""
    find = getattr(module, "program", None)
    if find is None:
        return None
    real = Path(find(template)).resolve()
    stat = real.stat()
    return _file_sha256(str(real), stat.st_size, stat.st_mtime_ns)


TOOLCHAINS = {"nvcc": nvcc, "nvrtc": nvrtc, "clang": clang, "command": command, "ptx": prebuilt}


def build(
    toolchain: str,
    source: Path,
    arch: str,
    flags: tuple[str, ...] = (),
    template: str | None = None,
    variables: dict[str, str] | None = None,
) -> Build:
    """Build `source` for `arch` (e.g. "sm_90") with the named toolchain.

    `template` is the command template of the `command` toolchain and `variables` the values of
    the variables it declares (both ignored by the others).
    build_s is the wall time of the compile alone, version look-up excluded.
    """
    module = TOOLCHAINS.get(toolchain)
    if module is None:
        raise BuildError(
            f"{source}: unknown toolchain {toolchain!r}; expected one of {sorted(TOOLCHAINS)}"
        )
    source_bytes = Path(source).read_bytes()
    t0 = time.perf_counter()
    extra = {"variables": variables} if variables else {}  # only the command toolchain has them
    ptx, command_line = module.build(Path(source), arch, list(flags), template, **extra)
    elapsed = time.perf_counter() - t0
    return Build(
        ptx=ptx,
        toolchain=toolchain,
        version=module.version(template),
        command=command_line,
        flags=list(flags),
        source_sha256=hashlib.sha256(source_bytes).hexdigest(),
        build_s=elapsed,
        compiler_sha256=compiler_sha256(module, template),
    )


def build_impl(impl, arch: str) -> Build:
    """Build an implementation (runner.definition.spec.ImplSpec) as it is declared: its flags,
    template and variables, for its own arch where an option axis gives it one, else `arch`."""
    return build(
        impl.toolchain, impl.source, impl.arch or arch, impl.flags, impl.command,
        dict(impl.variables),
    )  # fmt: skip
