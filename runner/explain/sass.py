"""Disassemble a cubin with NVIDIA's tools and read their listing into instructions.

Only the text that `cuobjdump -sass` or `nvdisasm -c` prints is parsed, never the cubin itself.
An instruction line of either tool is

    /*0290*/               @P0 BRA 0x150 ;          /* 0xfffffffc00ac0947 */   (cuobjdump)
    /*0290*/               @P0 BRA `(.L_x_1) ;                                  (nvdisasm)

an address, an optional guard predicate, the opcode with its modifiers, operands, `;`.
cuobjdump starts a function at `Function : NAME`; nvdisasm at the label `.text.NAME:` and names
branch targets by label (`.L_x_1:` lines), which are resolved here to addresses.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from runner.errors import DisassemblyError
from runner.explain import tools

TIMEOUT_S = 120.0

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
    name, path = tools.disassembler()
    with tempfile.TemporaryDirectory(prefix="kernelgap-sass-") as tmp:
        file = Path(tmp) / "module.cubin"
        file.write_bytes(cubin)
        args = ["-sass"] if name == "cuobjdump" else ["-c"]
        done = subprocess.run(
            [path, *args, str(file)], capture_output=True, text=True, timeout=TIMEOUT_S
        )
    if done.returncode != 0:
        raise DisassemblyError(f"{name} {' '.join(args)}: {(done.stderr or done.stdout).strip()}")
    return Listing(name, [name, *args], parse(done.stdout))


def _target(opcode: str, operands: str, labels: dict[str, int]) -> int | None:
    if opcode.split(".", 1)[0] not in ("BRA", "JMP", "CALL", "BRX", "JMX"):
        return None
    if m := _LABEL_TARGET.search(operands):
        return labels.get(m.group(1))
    if m := _HEX_TARGET.match(operands):
        return int(m.group(1), 16)
    return None


def parse(text: str) -> dict[str, list[Instruction]]:
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
