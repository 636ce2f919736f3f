"""What a kernel launch may ask of a GPU: grid and block extents, threads per block and dynamic
shared memory per block.

Numbers from the CUDA C++ Programming Guide, "Technical Specifications per Compute
Capability": the same for every architecture since 3.0 except the shared memory a block may
opt in to. `check_launch(..., arch=None)` holds a launch to what any GPU allows (the manifest
loader: `runner check --manifest-only`, `harness run` before a target is reached);
with an arch (`runner check --arch`) to what that architecture allows. A launch past these
limits fails on every GPU with CUDA_ERROR_INVALID_VALUE; refused at check time it names the case
and the field instead.
"""

from __future__ import annotations

import re

from runner.errors import LaunchLimitError

__all__ = [
    "MAX_BLOCK",
    "MAX_GRID",
    "MAX_THREADS_PER_BLOCK",
    "SHARED_BYTES_PER_BLOCK",
    "LaunchLimitError",
    "check_launch",
    "shared_limit",
]

MAX_GRID = (2**31 - 1, 65535, 65535)
MAX_BLOCK = (1024, 1024, 64)
MAX_THREADS_PER_BLOCK = 1024
# compute capability -> the most dynamic shared memory one block may opt in to (bytes)
SHARED_BYTES_PER_BLOCK = {
    "7.0": 96 * 1024,
    "7.2": 48 * 1024,
    "7.5": 64 * 1024,
    "8.0": 163 * 1024,
    "8.6": 99 * 1024,
    "8.7": 163 * 1024,
    "8.9": 99 * 1024,
    "9.0": 227 * 1024,
    "10.0": 227 * 1024,
    "10.3": 227 * 1024,
    "12.0": 99 * 1024,
}
ANY_GPU_SHARED_BYTES = max(SHARED_BYTES_PER_BLOCK.values())


def _capability(arch: str) -> str | None:
    found = re.fullmatch(r"(?:sm|compute)_(\d+)(\d)[a-z]?", arch)
    return f"{int(found.group(1))}.{found.group(2)}" if found else None


def shared_limit(arch: str | None) -> tuple[int, str]:
    """(bytes of dynamic shared memory one block may use, what that limit is) for `arch`; the
    largest of any GPU when `arch` is None or not in the table."""
    cc = _capability(arch) if arch else None
    if cc in SHARED_BYTES_PER_BLOCK:
        return SHARED_BYTES_PER_BLOCK[cc], f"the most a block may use on {arch}"
    return ANY_GPU_SHARED_BYTES, "the most a block may use on any GPU"


def check_launch(
    grid: tuple[int, int, int],
    block: tuple[int, int, int],
    shared_bytes: int,
    *,
    where: str,
    arch: str | None = None,
) -> None:
    """LaunchLimitError naming `where` and the field when the launch exceeds the limits."""
    for name, dims, limits in (("grid", grid, MAX_GRID), ("block", block, MAX_BLOCK)):
        for axis, value, limit in zip("xyz", dims, limits, strict=True):
            if value > limit:
                raise LaunchLimitError(
                    f"{where}: {name}.{axis} = {value} is past the limit of {limit} "
                    f"(CUDA: {name} dimensions at most {list(limits)})"
                )
    threads = block[0] * block[1] * block[2]
    if threads > MAX_THREADS_PER_BLOCK:
        raise LaunchLimitError(
            f"{where}: block {list(block)} has {threads} threads, past the limit of "
            f"{MAX_THREADS_PER_BLOCK} per block"
        )
    limit, what = shared_limit(arch)
    if shared_bytes > limit:
        raise LaunchLimitError(
            f"{where}: shared_bytes = {shared_bytes} is past {limit} bytes, {what}"
        )
