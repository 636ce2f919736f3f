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
when a kernel needs it.

`find_program()`: where NVIDIA's programs are (nvcc, ptxas, ...) for building and checking too:
PATH first, else NVIDIA's pip wheels. `pip install 'kernelgap[nvcc]'` (nvidia-cuda-nvcc and the
crt, nvvm and runtime wheels it needs) puts a complete nvcc and ptxas under
site-packages/nvidia/cu<major>/bin, which no PATH names: a machine without a CUDA toolkit then
builds and assembles the suite all the same.

`find()`: where NVIDIA's tools are (ptxas, cuobjdump, nvdisasm, ncu) and what version each one is.

ptxas comes first from PATH, as `runner check` finds it, so both assemble with the same one.
cuobjdump and nvdisasm come first from the NVIDIA wheels (`pip install -e '.[explain]'` installs
nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm) through cuda.pathfinder, which also knows
CUDA_HOME and the toolkit's own folders, then from PATH. ncu (Nsight Compute) is searched the same
way; it is installed with the CUDA toolkit on a GPU box. compute-sanitizer, also part of the
toolkit, is looked for the same way and then in $CUDA_HOME/bin and /usr/local/cuda/bin.

`assemble()`: assemble PTX with `ptxas -v`, and `resources()`: read the resource usage it prints
for each function.

ptxas -v prints, per function (CUDA 12 and 13 wording; older releases put cmem on the last line):

    ptxas info    : Compiling entry function 'polynomial_f64' for 'sm_90'
    ptxas info    : Function properties for polynomial_f64
        0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
    ptxas info    : Used 14 registers, used 0 barriers, 8208 bytes smem, 380 bytes cmem[0]

`disassemble()`: disassemble a cubin with NVIDIA's tools, and `parse_listing()`: read their
listing into instructions.

Only the text that `cuobjdump -sass` or `nvdisasm -c` prints is parsed, never the cubin itself.
An instruction line of either tool is

    /*0290*/               @P0 BRA 0x150 ;          /* 0xfffffffc00ac0947 */   (cuobjdump)
    /*0290*/               @P0 BRA `(.L_x_1) ;                                  (nvdisasm)

an address, an optional guard predicate, the opcode with its modifiers, operands, `;`.
cuobjdump starts a function at `Function : NAME`; nvdisasm at the label `.text.NAME:` and names
branch targets by label (`.L_x_1:` lines), which are resolved here to addresses."""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from runner.errors import AssemblyError, DisassemblyError, ToolMissing, UnknownArch


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


def find_program(name: str) -> str | None:
    """The program `name` on PATH, else in NVIDIA's wheels (executable), else None."""
    on_path = shutil.which(name)
    if on_path is not None:
        return on_path
    for folder in wheel_bin_dirs():
        candidate = folder / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


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
    """The path of tool `name`, or None. find_program (PATH, then the wheels' bin/ folders)
    covers a cuda-python without cuda.pathfinder (12.6.x, the floor)."""
    if name == "ptxas":
        return find_program("ptxas") or _pathfinder("ptxas")
    found = _pathfinder(name) or find_program(name)
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


ASSEMBLE_TIMEOUT_S = 300.0

_COMPILING = re.compile(r"Compiling (?:entry )?function '([^']+)' for '([^']+)'")
_PROPERTIES = re.compile(r"Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_BARRIERS = re.compile(r"used (\d+) barriers")
_SMEM = re.compile(r"(\d+) bytes smem")
_CMEM = re.compile(r"(\d+) bytes cmem\[(\d+)\]")


@dataclass(frozen=True)
class Assembled:
    cubin: bytes
    log: str  # what ptxas -v printed
    command: list[str]


def assemble(ptx_text: str, arch: str) -> Assembled:
    """`ptxas -v -arch=ARCH module.ptx -o module.cubin`; the cubin's bytes and ptxas's log."""
    ptxas = require("ptxas")
    with tempfile.TemporaryDirectory(prefix="kernelgap-explain-") as tmp:
        src, out = Path(tmp) / "module.ptx", Path(tmp) / "module.cubin"
        src.write_text(ptx_text.rstrip("\0"))  # ptxas rejects the NUL the driver wants
        command = [ptxas, "-v", f"-arch={arch}", str(src), "-o", str(out)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=ASSEMBLE_TIMEOUT_S)
        log = (done.stdout or "") + (done.stderr or "")
        if done.returncode != 0:
            raise AssemblyError(f"ptxas -arch={arch}: {log.strip()}")
        return Assembled(out.read_bytes(), log, ["ptxas", "-v", f"-arch={arch}"])


def parse_resources(log: str) -> dict[str, dict]:
    """Resource usage by function name from a ptxas -v log (functions it did not describe in
    full are left with the fields it did print)."""
    functions: dict[str, dict] = {}
    current: dict | None = None
    for line in log.splitlines():
        if m := _COMPILING.search(line):
            current = functions.setdefault(m.group(1), {"arch": m.group(2)})
            continue
        if m := _PROPERTIES.search(line):
            current = functions.setdefault(m.group(1), {})
            continue
        if current is None:
            continue
        if m := _FRAME.search(line):
            current["stack_bytes"] = int(m.group(1))
            current["spill_store_bytes"] = int(m.group(2))
            current["spill_load_bytes"] = int(m.group(3))
        if m := _USED.search(line):
            current["registers"] = int(m.group(1))
            b = _BARRIERS.search(line)
            current["barriers"] = int(b.group(1)) if b else 0
            s = _SMEM.search(line)
            current["shared_static_bytes"] = int(s.group(1)) if s else 0
            cmem = {f"bank{bank}": int(n) for n, bank in _CMEM.findall(line)}
            if cmem:
                current["constant_bytes"] = cmem
    for record in functions.values():
        record.pop("arch", None)
    return functions


def resources(log: str, entry: str) -> dict:
    """The entry's resources; AssemblyError when the log does not describe it."""
    found = parse_resources(log).get(entry)
    if not found or "registers" not in found:
        raise AssemblyError(f"ptxas -v printed no resource usage for entry {entry!r}:\n{log}")
    found.setdefault("stack_bytes", 0)
    found.setdefault("spill_store_bytes", 0)
    found.setdefault("spill_load_bytes", 0)
    return found


DISASSEMBLE_TIMEOUT_S = 120.0

_INSTRUCTION = re.compile(
    r"^\s*/\*(?P<address>[0-9a-fA-F]{4,})\*/\s+"
    r"(?:(?P<guard>@!?U?P(?:T|\d+))\s+)?"
    r"(?P<opcode>[A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)"
    r"(?P<operands>[^;]*);"
)
_CUOBJDUMP_FUNCTION = re.compile(r"^\s*Function\s*:\s*(\S+)\s*$")
_NVDISASM_FUNCTION = re.compile(r"^\s*\.text\.(\S+):\s*$")
_LABEL = re.compile(r"^\s*([.$A-Za-z_][.$A-Za-z0-9_]*):\s*$")
_HEX_TARGET = re.compile(r"^\s*(?:U?P\d+,\s*)?(?:!?U?PT?\d*,\s*)?(0x[0-9a-fA-F]+)\s*$")
_LABEL_TARGET = re.compile(r"`\(([^)]+)\)")
BRANCHES = ("BRA", "BRX", "JMP", "JMX", "CALL", "RET", "EXIT", "BREAK", "CONT", "BPT")


@dataclass(frozen=True)
class Instruction:
    address: int
    opcode: str  # with modifiers, as printed: "LDG.E.64.CONSTANT"
    operands: str
    guard: str | None = None  # "@P0", "@!P1"; None when unpredicated (or @PT)
    target: int | None = None  # the address a branch goes to, where the listing gives one

    @property
    def base(self) -> str:
        """The opcode without modifiers: "LDG"."""
        return self.opcode.split(".", 1)[0]


@dataclass(frozen=True)
class Listing:
    tool: str  # "cuobjdump" or "nvdisasm"
    command: list[str]
    functions: dict[str, list[Instruction]]


def disassemble(cubin: bytes) -> Listing:
    """The SASS of every function in `cubin`, by the first disassembler found."""
    name, path = disassembler()
    with tempfile.TemporaryDirectory(prefix="kernelgap-sass-") as tmp:
        file = Path(tmp) / "module.cubin"
        file.write_bytes(cubin)
        args = ["-sass"] if name == "cuobjdump" else ["-c"]
        done = subprocess.run(
            [path, *args, str(file)], capture_output=True, text=True, timeout=DISASSEMBLE_TIMEOUT_S
        )
    if done.returncode != 0:
        raise DisassemblyError(f"{name} {' '.join(args)}: {(done.stderr or done.stdout).strip()}")
    return Listing(name, [name, *args], parse_listing(done.stdout))


def _target(opcode: str, operands: str, labels: dict[str, int]) -> int | None:
    if opcode.split(".", 1)[0] not in ("BRA", "JMP", "CALL", "BRX", "JMX"):
        return None
    if m := _LABEL_TARGET.search(operands):
        return labels.get(m.group(1))
    if m := _HEX_TARGET.match(operands):
        return int(m.group(1), 16)
    return None


def parse_listing(text: str) -> dict[str, list[Instruction]]:
    """Instructions by function name from a cuobjdump -sass or nvdisasm listing."""
    raw: dict[str, list[tuple]] = {}
    labels: dict[str, dict[str, int]] = {}
    pending: list[str] = []  # labels waiting for the address of the next instruction
    current: str | None = None
    for line in text.splitlines():
        if m := _CUOBJDUMP_FUNCTION.match(line) or _NVDISASM_FUNCTION.match(line):
            current = m.group(1)
            raw.setdefault(current, [])
            labels.setdefault(current, {})
            pending = []
            continue
        if current is None:
            continue
        if m := _LABEL.match(line):
            pending.append(m.group(1))
            continue
        m = _INSTRUCTION.match(line)
        if m is None:
            continue
        address = int(m.group("address"), 16)
        for label in pending:
            labels[current][label] = address
        pending = []
        guard = m.group("guard")
        if guard in ("@PT", "@UPT"):
            guard = None
        raw[current].append((address, m.group("opcode"), m.group("operands").strip(), guard))
    return {
        name: [
            Instruction(a, op, ops, g, _target(op, ops, labels[name])) for a, op, ops, g in items
        ]
        for name, items in raw.items()
    }


def function(listing: Listing, entry: str) -> list[Instruction]:
    found = listing.functions.get(entry)
    if not found:
        raise DisassemblyError(
            f"{listing.tool}: no SASS for entry {entry!r} (functions: {', '.join(listing.functions) or 'none'})"
        )
    return found


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
        ptxas = require("ptxas")
        disassembler()
    except ToolMissing as exc:
        return unavailable(str(exc))
    try:
        assembled = assemble(ptx_text, arch)
        usage = resources(assembled.log, entry)
        listing = disassemble(assembled.cubin)
        instructions = function(listing, entry)
    except (AssemblyError, DisassemblyError) as exc:
        return {"status": "failed", "reason": str(exc)}
    disassembler_path = find(listing.tool)
    result = {
        "status": "ok",
        "arch": arch,
        "tools": {
            "ptxas": {"command": assembled.command, "version": version(ptxas)},
            "disassembler": {"command": listing.command, "version": version(disassembler_path)},
        },
        "resources": usage,
        "instructions": mix(instructions),
    }
    try:
        limits = limits_for(arch, device)
    except UnknownArch as exc:
        result["occupancy"] = {"status": "unavailable", "reason": str(exc)}
    else:
        shared = usage.get("shared_static_bytes", 0) + dynamic_shared_bytes
        result["occupancy"] = theoretical(block_threads, usage["registers"], shared, limits)
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
