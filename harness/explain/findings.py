"""The differences between a candidate and its baseline that most plausibly explain the gap.

Each rule looks at one kind of difference a compiler engineer would check first in the SASS and
returns a Finding with a score (how much of the time it can plausibly account for, higher first)
and one sentence with the numbers. Loop bodies are weighed over the whole kernel where both
implementations have loops, since that is where a loop-bound kernel spends its time. With a
profile (runner bench --profile) the counters ncu measured come first: executed instructions and
DRAM traffic are the dynamic truth that static counts only approximate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from harness.explain.figures import biggest_loop, classes, limited_by, loads, memory_rows, ok

MAX_SHOWN = 4  # the leading findings; the others are listed as "also different"


@dataclass(frozen=True)
class Finding:
    score: float
    text: str


def _scope(b: dict, c: dict) -> tuple[str, str]:
    """('in_loops', ' in loops') when both have loops, else the whole kernel."""
    if b["instructions"]["loops"] and c["instructions"]["loops"]:
        return "in_loops", " in loops"
    return "classes", ""


def _ops(counts: dict, parts: list[tuple[str, str]]) -> str:
    shown = [f"{counts.get(k, 0)} {name}" for k, name in parts if counts.get(k, 0)]
    return " + ".join(shown) or "none"


def fma(b: dict, c: dict) -> list[Finding]:
    """Multiplies and adds left apart where the baseline fuses them into FMAs."""
    scope, where = _scope(b, c)
    cb, cc = classes(b, scope), classes(c, scope)
    found = []
    for bits, prefix in (("fp64", "D"), ("fp32", "F")):
        fb, fc = cb.get(f"{bits}_fma", 0), cc.get(f"{bits}_fma", 0)
        mb, mc = cb.get(f"{bits}_mul", 0), cc.get(f"{bits}_mul", 0)
        fused_b = fb / (fb + mb) if fb + mb else 0.0
        fused_c = fc / (fc + mc) if fc + mc else 0.0
        if fb == 0 or mc == 0 or fused_b - fused_c < 0.5:
            continue
        parts = [
            (f"{bits}_fma", f"{prefix}FMA"),
            (f"{bits}_mul", f"{prefix}MUL"),
            (f"{bits}_add", f"{prefix}ADD"),
        ]
        head = f"no {prefix}FMA" if fc == 0 else f"fewer {prefix}FMA ({fc} vs {fb})"
        fp_share = sum(cc.get(k, 0) for k, _ in parts) / max(cc["total"], 1)
        found.append(
            Finding(
                1 + 4 * fp_share * (fused_b - fused_c),
                f"{head}: multiplies and adds are separate{where} "
                f"({_ops(cc, parts)} vs {_ops(cb, parts)})",
            )
        )
    return found


def instruction_count(b: dict, c: dict, pb: dict | None, pc: dict | None) -> list[Finding]:
    """More static SASS instructions (in loops where both have them); with a profile the
    executed count (profiled) says it instead."""
    if _executed(pb, pc) is not None:
        return []
    scope, where = _scope(b, c)
    nb, nc = classes(b, scope)["total"], classes(c, scope)["total"]
    if nb and nc / nb >= 1.15:
        r = nc / nb
        return [
            Finding(
                1 + 2 * math.log2(r),
                f"{r:.1f}x the instructions{where} ({nc} vs {nb} static SASS instructions)",
            )
        ]
    return []


def _executed(pb: dict | None, pc: dict | None) -> tuple[float, float] | None:
    """(baseline, candidate) warp instructions executed, where both profiles have them."""
    if not (ok(pb) and ok(pc)):
        return None
    metric = "smsp__inst_executed.sum"
    nb = pb["metrics"].get(metric, {}).get("value")
    nc = pc["metrics"].get(metric, {}).get("value")
    return (nb, nc) if nb and nc else None


def _opcodes(static: dict, kinds: tuple[str, ...]) -> str:
    rows = [r for k in kinds for r in memory_rows(static, k)]
    return ", ".join(f"{r['count']} {r['opcode']}" for r in rows)


def addressing(b: dict, c: dict) -> list[Finding]:
    """Generic LD/ST where the baseline addresses global memory (LDG/STG), and the read-only
    path (LDG.E.CONSTANT) the baseline takes and the candidate does not."""
    cb, cc = classes(b), classes(c)
    generic = [k for k in ("generic_load", "generic_store") if cc.get(k, 0)]
    glob = [k for k in ("global_load", "global_store") if cb.get(k, 0)]
    base_constant = any("CONSTANT" in r["qualifiers"] for r in memory_rows(b, "global_load"))
    found = []
    if generic and glob and not any(cb.get(k, 0) for k in ("generic_load", "generic_store")):
        what = " and ".join(k.split("_")[1] + "s" for k in generic)
        text = (
            f"generic {what} ({_opcodes(c, tuple(generic))}) where the baseline addresses "
            f"global memory ({_opcodes(b, tuple(glob))})"
        )
        if base_constant and "generic_load" in generic:
            text += ", its loads through the read-only (non-coherent) cache path"
        found.append(Finding(2.5 if "generic_load" in generic else 1.5, text))
    cand_constant = any("CONSTANT" in r["qualifiers"] for r in memory_rows(c, "global_load"))
    if base_constant and not cand_constant and cc.get("global_load", 0):
        found.append(
            Finding(
                1.5,
                "global loads without the read-only path: the baseline uses "
                f"{_opcodes(b, ('global_load',))}, the candidate "
                f"{_opcodes(c, ('global_load',))}",
            )
        )
    return found


def _widest(static: dict, kinds: tuple[str, ...]) -> int:
    return max((r["width_bits"] for k in kinds for r in memory_rows(static, k)), default=0)


def widths(b: dict, c: dict) -> list[Finding]:
    """Narrower loads than the baseline's: more instructions for the same bytes."""
    found = []
    for space, cand_kinds, base_kinds, score in (
        ("global", ("global_load", "generic_load"), ("global_load", "generic_load"), 1.5),
        ("shared", ("shared_load",), ("shared_load",), 1.0),
    ):
        wb, wc = _widest(b, base_kinds), _widest(c, cand_kinds)
        if wb and wc and wc < wb:
            found.append(
                Finding(
                    score,
                    f"narrower {space} loads: at most {wc} bits per thread "
                    f"({_opcodes(c, cand_kinds)}) where the baseline loads {wb} "
                    f"({_opcodes(b, base_kinds)})",
                )
            )
    return found


def unrolling(b: dict, c: dict) -> list[Finding]:
    lb, lc = biggest_loop(b), biggest_loop(c)
    if lb is None or lc is None:
        return []
    nb, nc = loads(lb["classes"]), loads(lc["classes"])
    if nc == 0 or nb < 2 * nc:
        return []
    factor = round(nb / nc)

    def body(lp: dict) -> str:
        k = lp["classes"]
        fp = [
            (n, name)
            for n, name in (
                ("fp64_fma", "DFMA"),
                ("fp64_mul", "DMUL"),
                ("fp64_add", "DADD"),
                ("fp32_fma", "FFMA"),
                ("fp32_mul", "FMUL"),
                ("fp32_add", "FADD"),
            )
            if k.get(n)
        ]
        parts = [f"{loads(k)} loads", *(f"{k[n]} {name}" for n, name in fp)]
        return ", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else parts[0]

    return [
        Finding(
            2 + math.log2(factor) / 2,
            f"loops not unrolled: the baseline's biggest inner loop does {body(lb)} per "
            f"iteration ({lb['instructions']} instructions), the candidate's {body(lc)} "
            f"({lc['instructions']} instructions): the baseline looks unrolled about "
            f"{factor}x",
        )
    ]


def resources(b: dict, c: dict) -> list[Finding]:
    found = []
    rb, rc = b["resources"], c["resources"]
    spill_c = rc["spill_store_bytes"] + rc["spill_load_bytes"]
    spill_b = rb["spill_store_bytes"] + rb["spill_load_bytes"]
    local = classes(c).get("local_load", 0) + classes(c).get("local_store", 0)
    if spill_c > spill_b or local > classes(b).get("local_load", 0) + classes(b).get(
        "local_store", 0
    ):
        found.append(
            Finding(
                3.5,
                f"register spills to local memory: {rc['spill_store_bytes']} "
                f"bytes stored, {rc['spill_load_bytes']} loaded per thread "
                f"({local} LDL/STL; the baseline {spill_b} bytes)",
            )
        )
    ob, oc = b.get("occupancy") or {}, c.get("occupancy") or {}
    if "occupancy" in ob and "occupancy" in oc and ob["occupancy"] - oc["occupancy"] >= 0.1:
        found.append(
            Finding(
                2 + 4 * (ob["occupancy"] - oc["occupancy"]),
                f"lower theoretical occupancy: {100 * oc['occupancy']:.0f}% vs "
                f"{100 * ob['occupancy']:.0f}% (limited by "
                f"{limited_by(oc)}; {rc['registers']} vs "
                f"{rb['registers']} registers per thread)",
            )
        )
    bars_b, bars_c = classes(b).get("barrier", 0), classes(c).get("barrier", 0)
    if bars_c > bars_b:
        found.append(Finding(1.5, f"more barriers: {bars_c} BAR vs {bars_b}"))
    conv_b, conv_c = (
        classes(b, "in_loops").get("conversion", 0),
        classes(c, "in_loops").get("conversion", 0),
    )
    if conv_c and not conv_b:
        found.append(Finding(1.0, f"{conv_c} conversions in loops where the baseline has none"))
    return found


def profiled(pb: dict | None, pc: dict | None) -> list[Finding]:
    if not (ok(pb) and ok(pc)):
        return []
    mb, mc = pb["metrics"], pc["metrics"]

    def value(m: dict, key: str) -> float | None:
        return m.get(key, {}).get("value")

    found = []
    executed = _executed(pb, pc)
    if executed and executed[1] / executed[0] >= 1.1:
        nb, nc = executed
        found.append(
            Finding(
                1 + 3 * math.log2(nc / nb),
                f"{nc / nb:.1f}x the instructions executed ({nc:.4g} vs {nb:.4g} warp "
                "instructions, ncu)",
            )
        )
    keys = ("dram__bytes_read.sum", "dram__bytes_write.sum")
    db = sum(value(mb, k) or 0 for k in keys)
    dc = sum(value(mc, k) or 0 for k in keys)
    if db and dc / db >= 1.1:
        found.append(
            Finding(
                2 + 2 * math.log2(dc / db),
                f"{dc / db:.1f}x the DRAM traffic ({dc / 1e6:.1f} MB vs "
                f"{db / 1e6:.1f} MB read and written, ncu)",
            )
        )
    for key, what in (
        ("lts__t_sector_hit_rate.pct", "L2 hit rate"),
        ("sm__warps_active.avg.pct_of_peak_sustained_active", "achieved occupancy"),
    ):
        vb, vc = value(mb, key), value(mc, key)
        if vb is not None and vc is not None and vb - vc >= 10:
            found.append(Finding(1.5, f"lower {what}: {vc:.0f}% vs {vb:.0f}% (ncu)"))
    sb, sc = pb.get("stalls") or [], pc.get("stalls") or []
    if sc and (not sb or sb[0]["reason"] != sc[0]["reason"]):
        theirs = f"{sb[0]['reason']} {100 * sb[0]['share']:.0f}%" if sb else "none recorded"
        found.append(
            Finding(
                1.0,
                f"warps stall mostly on {sc[0]['reason']} "
                f"({100 * sc[0]['share']:.0f}% of stalled warps; the "
                f"baseline's top reason: {theirs})",
            )
        )
    return found


def findings(
    b: dict | None, c: dict | None, pb: dict | None = None, pc: dict | None = None
) -> list[Finding]:
    """Every finding, the most plausible first (only the profile's without both static blocks)."""
    if not (ok(b) and ok(c)):
        return sorted(profiled(pb, pc), key=lambda f: -f.score)
    found = [
        *profiled(pb, pc),
        *fma(b, c),
        *instruction_count(b, c, pb, pc),
        *addressing(b, c),
        *widths(b, c),
        *unrolling(b, c),
        *resources(b, c),
    ]
    return sorted(found, key=lambda f: -f.score)
