"""Theoretical occupancy of a kernel: resident warps per SM over the most an SM can hold.

The arithmetic is the CUDA Occupancy Calculator's (cuda_occupancy.h in the CUDA toolkit:
cudaOccMaxBlocksPerSMWarpsLimit, ...RegsLimit, ...SMemLimit): registers are allocated per warp
in units of 256 and split evenly over the SM's 4 sub-partitions; shared memory per block is
rounded up to the allocation unit after adding what the driver reserves per block (1 KiB from
sm_80 on); the SM holds the fewest blocks any of the three limits allows, and at most its block
limit. The SM limits come from the device when the run measured them (device attributes of
cuDeviceGetAttribute) and otherwise from the table below for the target: the CUDA C++
Programming Guide's "Technical Specifications per Compute Capability" for registers, threads,
blocks and shared memory per SM, and cuda_occupancy.h for the allocation units and the
sub-partition count. The shared memory per SM is the largest carveout, which the driver chooses
when a kernel needs it.
"""

from __future__ import annotations

import re

from runner.errors import UnknownArch

# (compute capability) -> SM limits. Units: registers, threads, blocks, bytes.
ARCH_LIMITS: dict[str, dict[str, int]] = {
    "7.0": {"regs": 65536, "threads": 2048, "blocks": 32, "shared": 96 * 1024, "reserved": 0},
    "7.5": {"regs": 65536, "threads": 1024, "blocks": 16, "shared": 64 * 1024, "reserved": 0},
    "8.0": {"regs": 65536, "threads": 2048, "blocks": 32, "shared": 164 * 1024, "reserved": 1024},
    "8.6": {"regs": 65536, "threads": 1536, "blocks": 16, "shared": 100 * 1024, "reserved": 1024},
    "8.9": {"regs": 65536, "threads": 1536, "blocks": 24, "shared": 100 * 1024, "reserved": 1024},
    "9.0": {"regs": 65536, "threads": 2048, "blocks": 32, "shared": 228 * 1024, "reserved": 1024},
    "10.0": {"regs": 65536, "threads": 2048, "blocks": 32, "shared": 228 * 1024, "reserved": 1024},
    "12.0": {"regs": 65536, "threads": 1536, "blocks": 24, "shared": 100 * 1024, "reserved": 1024},
}
TABLE_SOURCE = (
    "CUDA C++ Programming Guide, Technical Specifications per Compute Capability; "
    "allocation units from cuda_occupancy.h"
)
DEVICE_SOURCE = "device attributes (cuDeviceGetAttribute); allocation units from cuda_occupancy.h"
WARP_SIZE = 32
REGISTER_UNIT = 256  # registers per warp are allocated in multiples of this (every arch since 3.x)
SUB_PARTITIONS = 4
MAX_REGISTERS_PER_THREAD = 255
MAX_THREADS_PER_BLOCK = 1024
REGISTERS_PER_BLOCK = 65536
# device attribute names (runner.measurement.environment records them) -> our limit names
DEVICE_KEYS = {
    "max_registers_per_sm": "regs",
    "max_threads_per_sm": "threads",
    "max_blocks_per_sm": "blocks",
    "max_shared_bytes_per_sm": "shared",
    "reserved_shared_bytes_per_block": "reserved",
}


def capability(arch: str) -> str:
    """'sm_90a' -> '9.0', 'sm_120' -> '12.0'."""
    m = re.fullmatch(r"(?:sm|compute)_(\d+)(\d)[a-z]?", arch)
    if m is None:
        raise UnknownArch(f"{arch!r} is not a target such as sm_90")
    return f"{int(m.group(1))}.{m.group(2)}"


def limits_for(arch: str, device: dict | None = None) -> dict:
    """The SM limits used, with their source: the device's attributes where all are known,
    else the table for `arch`."""
    cc = capability(arch)
    from_device = {ours: (device or {}).get(theirs) for theirs, ours in DEVICE_KEYS.items()}
    if all(isinstance(v, int) and v >= 0 for v in from_device.values()):
        limits, source = from_device, DEVICE_SOURCE
    elif cc in ARCH_LIMITS:
        limits, source = dict(ARCH_LIMITS[cc]), f"{TABLE_SOURCE} (compute capability {cc})"
    else:
        raise UnknownArch(
            f"no SM limits known for {arch} (compute capability {cc}); known: "
            + ", ".join(ARCH_LIMITS)
        )
    shared_unit = 256 if int(cc.split(".")[0]) < 8 else 128  # cudaOccSMemAllocationGranularity
    return {
        "registers_per_sm": limits["regs"],
        "threads_per_sm": limits["threads"],
        "blocks_per_sm": limits["blocks"],
        "shared_bytes_per_sm": limits["shared"],
        "reserved_shared_bytes_per_block": limits["reserved"],
        "register_allocation_unit": REGISTER_UNIT,
        "shared_allocation_unit": shared_unit,
        "sub_partitions": SUB_PARTITIONS,
        "source": source,
    }


def _round_up(value: int, unit: int) -> int:
    return -(-value // unit) * unit


def theoretical(
    block_threads: int, registers: int, shared_bytes_per_block: int, limits: dict
) -> dict:
    """Blocks and warps per SM and the occupancy, with the limit that binds."""
    warps_per_block = -(-block_threads // WARP_SIZE)
    max_warps = limits["threads_per_sm"] // WARP_SIZE
    by_warps = max_warps // warps_per_block if block_threads <= MAX_THREADS_PER_BLOCK else 0
    regs_per_warp = _round_up(registers * WARP_SIZE, limits["register_allocation_unit"])
    # the hardware's per-block check assumes every sub-partition gets the block's warps
    assumed = regs_per_warp * _round_up(warps_per_block, limits["sub_partitions"])
    if registers > MAX_REGISTERS_PER_THREAD or assumed > REGISTERS_PER_BLOCK:
        by_registers = 0
    elif regs_per_warp == 0:
        by_registers = limits["blocks_per_sm"]
    else:
        per_partition = limits["registers_per_sm"] // limits["sub_partitions"] // regs_per_warp
        by_registers = per_partition * limits["sub_partitions"] // warps_per_block
    shared_per_block = _round_up(
        shared_bytes_per_block + limits["reserved_shared_bytes_per_block"],
        limits["shared_allocation_unit"],
    )
    # with nothing to allocate (no shared memory, none reserved) shared memory sets no bound
    by_shared = limits["shared_bytes_per_sm"] // shared_per_block if shared_per_block else None
    bounds = {
        "blocks": limits["blocks_per_sm"],
        "warps": by_warps,
        "registers": by_registers,
        "shared_memory": by_shared,
    }
    blocks = min(v for v in bounds.values() if v is not None)
    binding = [name for name, value in bounds.items() if value == blocks]
    return {
        "block_threads": block_threads,
        "warps_per_block": warps_per_block,
        "registers_per_thread": registers,
        "registers_per_warp": regs_per_warp,
        "shared_bytes_per_block": shared_bytes_per_block,
        "blocks_per_sm": blocks,
        "warps_per_sm": blocks * warps_per_block,
        "max_warps_per_sm": max_warps,
        "occupancy": blocks * warps_per_block / max_warps if max_warps else 0.0,
        "blocks_per_sm_by_limit": bounds,
        "limited_by": binding,
        "limits": limits,
    }
