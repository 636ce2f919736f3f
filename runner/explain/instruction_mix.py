"""The SASS instruction mix of one function: counts by class, memory operations by space, width
and cache qualifier, and the loops (backward branches) with what their bodies hold.

Classes are named for what a compiler engineer asks about (`fp64_fma` vs `fp64_mul` +
`fp64_add`, `generic_load` vs `global_load`); each counts the instructions whose opcode (without
modifiers) is in its set. NOPs (alignment padding after the final branch) are counted apart and
left out of `total`, and so is the trailing `BRA` to itself that ends every function.
"""

from __future__ import annotations

from collections import Counter

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
