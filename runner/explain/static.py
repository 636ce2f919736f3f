"""The static analysis of one implementation: PTX -> ptxas -v -> cubin -> SASS -> figures.

`analyze()` returns the `static` block that `runner bench` records per implementation in the
result document and `runner build` in the bundle manifest (schemas: `$defs/static`). Where a
tool is missing the block says so and how to install it (`status: unavailable`); where a tool
fails it carries the tool's message (`status: failed`). Nothing here needs a GPU.

`mix()`: the SASS instruction mix of one function: counts by class, memory operations by space, width
and cache qualifier, and the loops (backward branches) with what their bodies hold.

Classes are named for what a compiler engineer asks about (`fp64_fma` vs `fp64_mul` +
`fp64_add`, `generic_load` vs `global_load`); each counts the instructions whose opcode (without
modifiers) is in its set. NOPs (alignment padding after the final branch) are counted apart and
left out of `total`, and so is the trailing `BRA` to itself that ends every function.

`theoretical()`: the theoretical occupancy of a kernel, resident warps per SM over the most an SM can hold.

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
when a kernel needs it."""

from __future__ import annotations

import hashlib
import re
from collections import Counter

from runner.errors import UnknownArch
from runner.explain import ptxas_resources, sass, tools
from runner.explain.sass import BRANCHES, Instruction

CLASSES: dict[str, tuple[str, ...]] = {
    "global_load": ("LDG",),
    "global_store": ("STG",),
    "generic_load": ("LD",),
    "generic_store": ("ST",),
    "shared_load": ("LDS", "LDSM"),
    "shared_store": ("STS",),
    "local_load": ("LDL",),
    "local_store": ("STL",),
    "constant_load": ("LDC", "ULDC"),
    "async_copy": ("LDGSTS", "UBLKCP", "UTMALDG", "UTMASTG"),
    "atomic": ("ATOM", "ATOMG", "ATOMS", "RED"),
    "fp64_fma": ("DFMA",),
    "fp64_mul": ("DMUL",),
    "fp64_add": ("DADD",),
    "fp32_fma": ("FFMA", "FFMA32I"),
    "fp32_mul": ("FMUL", "FMUL32I"),
    "fp32_add": ("FADD", "FADD32I"),
    "fp16_arith": ("HFMA2", "HMUL2", "HADD2", "HFMA2MMA"),
    "tensor": ("HMMA", "IMMA", "DMMA", "BMMA", "HGMMA", "IGMMA", "QGMMA"),
    "special_function": ("MUFU",),
    "conversion": ("F2F", "F2I", "I2F", "I2I", "F2FP", "I2FP", "FRND", "I2IP"),
    "integer": (
        "IMAD",
        "IADD3",
        "IADD",
        "LEA",
        "ISCADD",
        "LOP3",
        "LOP",
        "SHF",
        "SHL",
        "SHR",
        "IABS",
        "IMNMX",
        "VIADD",
        "VIMNMX",
        "VIADDMNMX",
        "POPC",
        "FLO",
        "BREV",
        "PRMT",
        "UIMAD",
        "UIADD3",
        "ULEA",
        "ULOP3",
        "USHF",
        "UPRMT",
        "UFLO",
        "UPOPC",
    ),
    "compare_select": (
        "ISETP",
        "FSETP",
        "DSETP",
        "HSETP2",
        "FSEL",
        "SEL",
        "PLOP3",
        "FMNMX",
        "UISETP",
        "USEL",
        "UPLOP3",
        "DMNMX",
    ),
    "move": ("MOV", "UMOV", "S2R", "S2UR", "CS2R", "R2UR", "SHFL", "R2P", "P2R"),
    "branch": ("BRA", "BRX", "JMP", "JMX", "CALL", "RET", "EXIT", "BREAK", "CONT"),
    "convergence": ("BSSY", "BSYNC", "WARPSYNC", "BMOV", "YIELD"),
    "barrier": ("BAR", "BARRIER"),
    "memory_fence": ("MEMBAR", "FENCE", "ERRBAR", "CCTL", "DEPBAR"),
}


_CLASS_OF = {opcode: name for name, opcodes in CLASSES.items() for opcode in opcodes}


MEMORY_CLASSES = (
    "global_load",
    "global_store",
    "generic_load",
    "generic_store",
    "shared_load",
    "shared_store",
    "local_load",
    "local_store",
)


_WIDTHS = {"U8": 8, "S8": 8, "U16": 16, "S16": 16, "32": 32, "64": 64, "128": 128}


# Modifiers that say nothing about caching or width: .E (64-bit address), the .desc of sm_90, ...
_PLAIN = {"E", "SYS", "GPU", "STRONG", "WEAK", "CTA", "SM", "U32", "S32"}


def class_of(instruction: Instruction) -> str:
    """The class of an instruction; IMAD.MOV is ptxas's favourite move, counted as one."""
    if instruction.opcode.startswith("IMAD.MOV"):
        return "move"
    return _CLASS_OF.get(instruction.base, "other")


def width_bits(instruction: Instruction) -> int:
    """Bits a memory instruction moves per thread: .64, .128, .U8 ...; 32 by default."""
    for modifier in instruction.opcode.split(".")[1:]:
        if modifier in _WIDTHS:
            return _WIDTHS[modifier]
    return 32


def qualifiers(instruction: Instruction) -> list[str]:
    """The modifiers of a memory instruction that are neither its width nor plain addressing
    (CONSTANT = the read-only/non-coherent path, EF = evict-first, LTC128B, ...)."""
    return [m for m in instruction.opcode.split(".")[1:] if m not in _WIDTHS and m not in _PLAIN]


def body(instructions: list[Instruction]) -> list[Instruction]:
    """Instructions without NOP padding and without the trailing self-branch."""
    return [
        i
        for i in instructions
        if i.base != "NOP" and not (i.base == "BRA" and i.target == i.address)
    ]


def counts(instructions: list[Instruction]) -> dict:
    """Class counts (classes with none are left out: a reader takes a missing class as 0), plus
    `predicated` (non-branch instructions guarded by a predicate) and `total`."""
    kept = body(instructions)
    found = Counter(class_of(i) for i in kept)
    result = {name: found[name] for name in [*CLASSES, "other"] if found[name]}
    result["predicated"] = sum(1 for i in kept if i.guard and i.base not in BRANCHES)
    result["total"] = len(kept)
    return result


def memory(instructions: list[Instruction]) -> dict[str, list[dict]]:
    """Per memory class, one row per distinct opcode: width, qualifiers and count, largest first."""
    rows: dict[str, Counter] = {}
    for i in body(instructions):
        kind = class_of(i)
        if kind in MEMORY_CLASSES:
            rows.setdefault(kind, Counter())[i.opcode] += 1
    result = {}
    for kind, found in rows.items():
        result[kind] = [
            {
                "opcode": opcode,
                "width_bits": width_bits(Instruction(0, opcode, "")),
                "qualifiers": qualifiers(Instruction(0, opcode, "")),
                "count": n,
            }
            for opcode, n in sorted(found.items(), key=lambda kv: (-kv[1], kv[0]))
        ]
    return result


def loops(instructions: list[Instruction]) -> list[dict]:
    """Every backward branch closes a loop from its target to itself. Innermost loops (no other
    loop inside) carry their instruction count and class counts: a compiler that unrolls shows
    more loads and FMAs per iteration, and fewer loop iterations for the same work."""
    spans = sorted(
        {
            (i.target, i.address)
            for i in instructions
            if i.base in ("BRA", "JMP") and i.target is not None and i.target < i.address
        }
    )
    result = []
    for start, end in spans:
        inner = any(s >= start and e <= end and (s, e) != (start, end) for s, e in spans)
        inside = [i for i in instructions if start <= i.address <= end]
        classes = counts(inside)
        result.append(
            {
                "start": start,
                "end": end,
                "innermost": not inner,
                "instructions": classes["total"],
                "classes": {k: v for k, v in classes.items() if k != "total"},
            }
        )
    return result


def in_loops(instructions: list[Instruction], found_loops: list[dict]) -> dict:
    """Class counts of the instructions inside any loop: where the time of a loop-bound kernel is."""
    inside = [
        i for i in instructions if any(lp["start"] <= i.address <= lp["end"] for lp in found_loops)
    ]
    return counts(inside)


def opcodes(instructions: list[Instruction]) -> dict[str, int]:
    """Every opcode as printed (with modifiers) and its count, most frequent first."""
    found = Counter(i.opcode for i in instructions)
    return dict(sorted(found.items(), key=lambda kv: (-kv[1], kv[0])))


def mix(instructions: list[Instruction]) -> dict:
    """The `instructions` block of a static analysis."""
    found_loops = loops(instructions)
    return {
        "total": counts(instructions)["total"],
        "classes": counts(instructions),
        "memory": memory(instructions),
        "opcodes": opcodes(instructions),
        "loops": found_loops,
        "in_loops": in_loops(instructions, found_loops),
    }


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


def unavailable(reason: str) -> dict:
    return {"status": "unavailable", "reason": reason}


def analyze(
    ptx_text: str,
    entry: str,
    arch: str,
    block_threads: int,
    dynamic_shared_bytes: int = 0,
    device: dict | None = None,
) -> dict:
    """Resources, instruction mix, loops and theoretical occupancy of `entry` assembled for
    `arch`, for blocks of `block_threads` threads with `dynamic_shared_bytes` of dynamic shared
    memory; SM limits from `device` (the environment's device block) when it has them."""
    try:
        ptxas = tools.require("ptxas")
        tools.disassembler()
    except tools.ToolMissing as exc:
        return unavailable(str(exc))
    try:
        assembled = ptxas_resources.assemble(ptx_text, arch)
        resources = ptxas_resources.resources(assembled.log, entry)
        listing = sass.disassemble(assembled.cubin)
        instructions = sass.function(listing, entry)
    except (ptxas_resources.AssemblyError, sass.DisassemblyError) as exc:
        return {"status": "failed", "reason": str(exc)}
    disassembler = tools.find(listing.tool)
    result = {
        "status": "ok",
        "arch": arch,
        "tools": {
            "ptxas": {"command": assembled.command, "version": tools.version(ptxas)},
            "disassembler": {"command": listing.command, "version": tools.version(disassembler)},
        },
        "resources": resources,
        "instructions": mix(instructions),
    }
    try:
        limits = limits_for(arch, device)
    except UnknownArch as exc:
        result["occupancy"] = {"status": "unavailable", "reason": str(exc)}
    else:
        shared = resources.get("shared_static_bytes", 0) + dynamic_shared_bytes
        result["occupancy"] = theoretical(block_threads, resources["registers"], shared, limits)
    return result


def block_threads(block) -> int:
    """Threads of a block given as an int or as (x, y, z)."""
    if isinstance(block, int):
        return block
    total = 1
    for n in block:
        total *= int(n)
    return total


def record_static(
    case, case_doc: dict, built: dict[str, str], arch: str, device=None, bundle=None
) -> None:
    """`static` on every built implementation of `case_doc`, at the case's timed geometry. A
    bundle's analysis of the same PTX for the same target is taken as it is (the GPU box then
    needs neither ptxas nor a disassembler); otherwise it is made here, with the device's SM
    limits when the device is the target (a run with --arch for another one takes the table's)."""
    geometry = case.geometry(case.dims)
    device = device if device and device.get("arch") == arch else None
    for impl in case.impls:
        if impl.name not in built:
            continue
        sha = hashlib.sha256(built[impl.name].encode()).hexdigest()
        found = bundle.static(case, impl, sha, arch) if bundle is not None else None
        case_doc["implementations"][impl.name]["static"] = found or analyze(
            built[impl.name],
            impl.entry,
            arch,
            block_threads(geometry.block),
            geometry.shared_bytes,
            device,
        )
