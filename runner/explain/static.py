"""The static analysis of one implementation: PTX -> ptxas -v -> cubin -> SASS -> figures.

`analyze()` returns the `static` block that `runner bench` records per implementation in the
result document and `runner build` in the bundle manifest (schemas: `$defs/static`). Where a
tool is missing the block says so and how to install it (`status: unavailable`); where a tool
fails it carries the tool's message (`status: failed`). Nothing here needs a GPU.
"""

from __future__ import annotations

import hashlib

from runner.explain import instruction_mix, occupancy, ptxas_resources, sass, tools


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
        "instructions": instruction_mix.mix(instructions),
    }
    try:
        limits = occupancy.limits_for(arch, device)
    except occupancy.UnknownArch as exc:
        result["occupancy"] = {"status": "unavailable", "reason": str(exc)}
    else:
        shared = resources.get("shared_static_bytes", 0) + dynamic_shared_bytes
        result["occupancy"] = occupancy.theoretical(
            block_threads, resources["registers"], shared, limits
        )
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
