"""Assemble PTX with `ptxas -v` and read the resource usage it prints for each function.

ptxas -v prints, per function (CUDA 12 and 13 wording; older releases put cmem on the last line):

    ptxas info    : Compiling entry function 'polynomial_f64' for 'sm_90'
    ptxas info    : Function properties for polynomial_f64
        0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
    ptxas info    : Used 14 registers, used 0 barriers, 8208 bytes smem, 380 bytes cmem[0]
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from runner.errors import AssemblyError
from runner.explain import tools

TIMEOUT_S = 300.0

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
    ptxas = tools.require("ptxas")
    with tempfile.TemporaryDirectory(prefix="kernelgap-explain-") as tmp:
        src, out = Path(tmp) / "module.ptx", Path(tmp) / "module.cubin"
        src.write_text(ptx_text.rstrip("\0"))  # ptxas rejects the NUL the driver wants
        command = [ptxas, "-v", f"-arch={arch}", str(src), "-o", str(out)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S)
        log = (done.stdout or "") + (done.stderr or "")
        if done.returncode != 0:
            raise AssemblyError(f"ptxas -arch={arch}: {log.strip()}")
        return Assembled(out.read_bytes(), log, ["ptxas", "-v", f"-arch={arch}"])


def parse(log: str) -> dict[str, dict]:
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
    found = parse(log).get(entry)
    if not found or "registers" not in found:
        raise AssemblyError(f"ptxas -v printed no resource usage for entry {entry!r}:\n{log}")
    found.setdefault("stack_bytes", 0)
    found.setdefault("spill_store_bytes", 0)
    found.setdefault("spill_load_bytes", 0)
    return found
