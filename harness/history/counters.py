"""Counters: an implementation's static figures and profiled metrics as named, unit-carrying
values, the series kept beside each timing series (never mixed with its times).

A counter is named hierarchically, as nvbench names its results: `static/registers`,
`static/spill_store_bytes`, `static/instructions/global_load`, `static/in_loops/total`,
`static/occupancy`, and `ncu/<metric name>` for what `--profile` recorded (ncu's own metric
names and units). Static counters come from `runner build`'s or `runner bench`'s `static` block
and carry no noise: one compiler, one PTX, one number, so any change is a change. Profiled ones
(`profiled()` is true) come from one ncu launch: exact counts for instructions and bytes, a
sampled figure for stalls; they explain a time, never measure one.

A class of instructions that a build does not have is left out of its block (the runner's
reader takes it as 0): `value()` reads a missing instruction counter as 0, so two builds
compare class by class.
"""

from __future__ import annotations

import orjson

__all__ = [
    "CLASS_LABELS",
    "RESOURCE_UNITS",
    "essentials",
    "from_essentials",
    "from_impl",
    "profile_counters",
    "profiled",
    "static_counters",
    "unit",
    "value",
]

CLASS_LABELS = {
    "global_load": "global loads (LDG)",
    "global_store": "global stores (STG)",
    "generic_load": "generic loads (LD)",
    "generic_store": "generic stores (ST)",
    "shared_load": "shared loads (LDS)",
    "shared_store": "shared stores (STS)",
    "local_load": "local loads (LDL)",
    "local_store": "local stores (STL)",
    "constant_load": "constant loads (LDC/ULDC)",
    "async_copy": "async copies",
    "atomic": "atomics",
    "fp64_fma": "f64 FMA (DFMA)",
    "fp64_mul": "f64 multiply (DMUL)",
    "fp64_add": "f64 add (DADD)",
    "fp32_fma": "f32 FMA (FFMA)",
    "fp32_mul": "f32 multiply (FMUL)",
    "fp32_add": "f32 add (FADD)",
    "fp16_arith": "f16 arithmetic",
    "tensor": "tensor-core (MMA)",
    "special_function": "special functions (MUFU)",
    "conversion": "conversions (F2F, I2F, ...)",
    "integer": "integer arithmetic",
    "compare_select": "compares and selects",
    "move": "moves",
    "branch": "branches (BRA, EXIT, CALL, ...)",
    "convergence": "convergence (BSSY/BSYNC)",
    "barrier": "barriers (BAR)",
    "memory_fence": "memory fences",
    "predicated": "predicated instructions",
    "other": "other",
    "total": "instructions",
}
RESOURCE_UNITS = {
    "registers": "registers/thread",
    "spill_store_bytes": "bytes/thread",
    "spill_load_bytes": "bytes/thread",
    "stack_bytes": "bytes/thread",  # local memory: the stack frame spills live in
    "shared_static_bytes": "bytes/block",
    "barriers": "barriers",
}
SCOPES = ("instructions", "in_loops")  # static/<scope>/<class>: the whole function, inside loops


def essentials(static: dict | None) -> tuple | None:
    """What the history keeps of an ok `static` block, compactly (resources, occupancy, class
    counts in total and in loops, loop count): a few hundred bytes once encoded by the store
    (store_schema.stored_json), the same bytes for the same analysis, so the store keeps each
    distinct one once. None for none."""
    if not static or static.get("status") != "ok":
        return None
    mix = static.get("instructions") or {}
    loops = mix.get("loops")
    return (
        static.get("resources") or {},
        (static.get("occupancy") or {}).get("occupancy"),
        mix.get("classes") or {},
        mix.get("in_loops") or {},
        None if loops is None else len(loops),
    )


def from_essentials(blob: bytes | tuple | None) -> dict[str, list]:
    """{name: [value, unit]} of what `essentials()` kept, as stored or as made ({} for None)."""
    if not blob:
        return {}
    resources, occupancy, classes, in_loops, loops = (
        orjson.loads(blob) if isinstance(blob, bytes) else blob
    )
    out: dict[str, list] = {}
    for name, what in RESOURCE_UNITS.items():
        if isinstance(resources.get(name), int | float):
            out[f"static/{name}"] = [resources[name], what]
    if isinstance(occupancy, int | float):
        out["static/occupancy"] = [occupancy, "fraction"]
    for scope, block in (("instructions", classes), ("in_loops", in_loops)):
        for name, count in block.items():
            out[f"static/{scope}/{name}"] = [count, "instructions"]
    if loops is not None:
        out["static/loops"] = [loops, "loops"]
    return out


def static_counters(static: dict | None) -> dict[str, list]:
    """{name: [value, unit]} of an ok `static` block ({} for none, unavailable or failed)."""
    return from_essentials(essentials(static))


def profile_counters(profile: dict | None) -> dict[str, list]:
    """{name: [value, unit]} of an ok `profile` block: every metric ncu measured, by its name."""
    if not profile or profile.get("status") != "ok":
        return {}
    return {
        f"ncu/{name}": [m["value"], m.get("unit") or ""]
        for name, m in (profile.get("metrics") or {}).items()
        if m.get("value") is not None
    }


def from_impl(impl: dict) -> dict[str, list]:
    """Every counter of one implementation of a result document (static and profiled)."""
    return {**static_counters(impl.get("static")), **profile_counters(impl.get("profile"))}


def profiled(name: str) -> bool:
    return name.startswith("ncu/")


def unit(name: str, counters: dict[str, list]) -> str:
    found = counters.get(name)
    return found[1] if found else "instructions" if _is_class(name) else ""


def _is_class(name: str) -> bool:
    return any(name.startswith(f"static/{scope}/") for scope in SCOPES)


def value(counters: dict[str, list], name: str) -> float | None:
    """A counter's value; a missing instruction class of a build that has a mix reads 0."""
    found = counters.get(name)
    if found is not None:
        return found[0]
    if _is_class(name) and "static/instructions/total" in counters:
        return 0
    return None
