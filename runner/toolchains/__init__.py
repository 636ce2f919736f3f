"""Toolchains behind one interface: `build(source, arch, flags) -> Build` (PTX text plus provenance).

One module per toolchain; `TOOLCHAINS` maps the manifest's `toolchain` names to them.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path

from runner.toolchains import nvcc, prebuilt


class BuildError(RuntimeError):
    """The source could not be turned into PTX; the message carries the compiler's output."""


class ToolchainMissing(BuildError):
    """The toolchain's program is not installed here (the implementation is skipped, with this reason)."""


@dataclass
class Build:
    ptx: str
    toolchain: str
    version: str
    command: list[str]
    flags: list[str]
    source_sha256: str
    build_s: float = 0.0
    ptx_sha256: str = field(init=False)

    def __post_init__(self):
        self.ptx_sha256 = hashlib.sha256(self.ptx.encode()).hexdigest()

    def provenance(self) -> dict:
        return {
            "toolchain": self.toolchain,
            "version": self.version,
            "command": self.command,
            "flags": self.flags,
            "source_sha256": self.source_sha256,
            "ptx_sha256": self.ptx_sha256,
            "build_s": self.build_s,
        }


TOOLCHAINS = {"nvcc": nvcc, "ptx": prebuilt}


def build(toolchain: str, source: Path, arch: str, flags: tuple[str, ...] = ()) -> Build:
    """Build `source` for `arch` (e.g. "sm_90") with the named toolchain."""
    module = TOOLCHAINS[toolchain]
    source_bytes = Path(source).read_bytes()
    t0 = time.perf_counter()
    ptx, command = module.build(Path(source), arch, list(flags))
    elapsed = time.perf_counter() - t0
    return Build(
        ptx=ptx,
        toolchain=toolchain,
        version=module.version(),
        command=command,
        flags=list(flags),
        source_sha256=hashlib.sha256(source_bytes).hexdigest(),
        build_s=elapsed,
    )
