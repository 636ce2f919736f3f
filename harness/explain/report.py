"""The explanation as markdown (a pull request, a job summary, the dashboard's explain/ pages) or
plain text: per case and candidate, the findings first, then the figures side by side with the
ratio of each, then where the figures came from (tools, versions, SM limits).

Names, reasons, opcodes and tool versions come from a document anyone can write: each passes
through harness.escaping (markdown() in markdown, terminal() in text) before it is joined into
a line, so no HTML, link or escape sequence from the data reaches the reader.

By section: the figures of two implementations side by side, each with its ratio (candidate /
baseline), in sections (resources, occupancy, instructions, loops, memory operations, profile);
a row where both sides are zero or absent is left out, so a table shows what either one does.
The findings read the same helpers, so a sentence and its table row never disagree: the
differences between a candidate and its baseline that most plausibly explain the gap. Each rule looks at one kind of difference a compiler engineer would check first in the SASS and
returns a Finding with a score (how much of the time it can plausibly account for, higher first)
and one sentence with the numbers. Loop bodies are weighed over the whole kernel where both
implementations have loops, since that is where a loop-bound kernel spends its time. With a
profile (runner bench --profile) the counters ncu measured come first: executed instructions and
DRAM traffic are the dynamic truth that static counts only approximate."""

from __future__ import annotations

import math
from dataclasses import dataclass

from harness.escaping import markdown as md
from harness.escaping import terminal
from harness.explain.sources import HOW_TO_GET_PROFILE, HOW_TO_GET_STATIC, Case, Source
from harness.history import counters
from harness.reporting.table import MARKDOWN, TEXT, Column, Markup, format_table, format_time

# one label per class, as counters name them (the total has its own row)
CLASS_LABELS = {k: v for k, v in counters.CLASS_LABELS.items() if k != "total"}


LOOP_EXTRA = ("conversion", "special_function", "barrier", "branch")


PROFILE_ROWS = (
    ("dram__bytes_read.sum", "DRAM bytes read", "bytes"),
    ("dram__bytes_write.sum", "DRAM bytes written", "bytes"),
    ("lts__t_sector_hit_rate.pct", "L2 hit rate", "pct"),
    ("smsp__inst_executed.sum", "warp instructions executed", "count"),
    ("sm__warps_active.avg.pct_of_peak_sustained_active", "achieved occupancy", "pct"),
    ("gpu__time_duration.sum", "duration under ncu (ns, not a timing)", "count"),
)


@dataclass(frozen=True)
class Row:
    label: str
    baseline: float | str | None
    candidate: float | str | None
    unit: str = "count"  # count, bytes, pct (0-100), fraction (0-1), text

    @property
    def ratio(self) -> float | None:
        b, c = self.baseline, self.candidate
        if isinstance(b, int | float) and isinstance(c, int | float) and b:
            return c / b
        return None


def ok(block: dict | None) -> bool:
    return bool(block) and block.get("status") == "ok"


def classes(static: dict, scope: str = "classes") -> dict[str, int]:
    """Class counts of the whole kernel (`classes`) or of its loops (`in_loops`)."""
    return static["instructions"][scope]


def count(static: dict, name: str, scope: str = "classes") -> int:
    return classes(static, scope).get(name, 0)


def memory_rows(static: dict, kind: str) -> list[dict]:
    return static["instructions"]["memory"].get(kind, [])


def biggest_loop(static: dict) -> dict | None:
    """The innermost loop with the most memory and floating-point work per iteration."""
    work = ("load", "store", "fp64", "fp32", "fp16")
    inner = [lp for lp in static["instructions"]["loops"] if lp["innermost"]]
    if not inner:
        return None
    return max(
        inner,
        key=lambda lp: (
            sum(v for k, v in lp["classes"].items() if any(w in k for w in work)),
            lp["instructions"],
        ),
    )


def loads(classes_: dict) -> int:
    return sum(classes_.get(k, 0) for k in ("global_load", "generic_load", "shared_load"))


def _nonzero(rows: list[Row]) -> list[Row]:
    return [r for r in rows if r.baseline or r.candidate]


def resources(b: dict, c: dict) -> list[Row]:
    rb, rc = b["resources"], c["resources"]
    rows = [Row("registers per thread", rb["registers"], rc["registers"])]
    for key, label in (
        ("spill_store_bytes", "spill stores (bytes)"),
        ("spill_load_bytes", "spill loads (bytes)"),
        ("stack_bytes", "stack frame (bytes)"),
        ("shared_static_bytes", "static shared memory (bytes)"),
        ("barriers", "barriers used"),
    ):
        rows.append(Row(label, rb.get(key, 0), rc.get(key, 0)))
    return [rows[0], *_nonzero(rows[1:])]


def occupancy(b: dict, c: dict) -> list[Row]:
    ob, oc = b.get("occupancy") or {}, c.get("occupancy") or {}
    if "occupancy" not in ob or "occupancy" not in oc:
        return []
    return [  # the schema requires none of an occupancy block's fields
        Row("theoretical occupancy", ob["occupancy"], oc["occupancy"], "fraction"),
        Row("blocks per SM", ob.get("blocks_per_sm"), oc.get("blocks_per_sm")),
        Row("limited by", limited_by(ob), limited_by(oc), "text"),
    ]


def limited_by(occupancy: dict) -> str:
    """What limits the occupancy, in words ("-" where the block does not say)."""
    return ", ".join(occupancy.get("limited_by") or ()) or "-"


def instructions(b: dict, c: dict, scope: str = "classes") -> list[Row]:
    cb, cc = classes(b, scope), classes(c, scope)
    rows = [
        Row(
            "instructions" if scope == "classes" else "instructions in loops",
            cb["total"],
            cc["total"],
        )
    ]
    rows += [Row(label, cb.get(k, 0), cc.get(k, 0)) for k, label in CLASS_LABELS.items()]
    return [rows[0], *_nonzero(rows[1:])]


def loop(b: dict, c: dict) -> list[Row]:
    lb, lc = biggest_loop(b), biggest_loop(c)
    if lb is None and lc is None:
        return []
    cb, cc = (lb or {}).get("classes", {}), (lc or {}).get("classes", {})
    rows = [
        Row(
            "loops (innermost)",
            *(sum(lp["innermost"] for lp in s["instructions"]["loops"]) for s in (b, c)),
        ),
        Row(
            "biggest innermost loop: instructions",
            (lb or {}).get("instructions", 0),
            (lc or {}).get("instructions", 0),
        ),
    ]
    rows += _nonzero(
        [
            Row(f"  per iteration: {CLASS_LABELS[k]}", cb.get(k, 0), cc.get(k, 0))
            for k in CLASS_LABELS
            if (("load" in k or "store" in k) and k != "constant_load")
            or k.startswith("fp")
            or k in LOOP_EXTRA
        ]
    )
    return rows


def memory(b: dict, c: dict) -> list[Row]:
    """One row per memory opcode as the tools print it (LDG.E.64.CONSTANT, LD.E, ...)."""
    rows = []
    for kind in (
        "global_load",
        "generic_load",
        "shared_load",
        "local_load",
        "global_store",
        "generic_store",
        "shared_store",
        "local_store",
    ):
        opcodes = {r["opcode"]: [0, 0] for r in memory_rows(b, kind) + memory_rows(c, kind)}
        for side, s in enumerate((b, c)):
            for r in memory_rows(s, kind):
                opcodes[r["opcode"]][side] = r["count"]
        rows += [Row(opcode, nb, nc) for opcode, (nb, nc) in opcodes.items()]
    return rows


def profile(b: dict, c: dict) -> list[Row]:
    mb, mc = b.get("metrics", {}), c.get("metrics", {})
    rows = [
        Row(label, mb.get(k, {}).get("value"), mc.get(k, {}).get("value"), unit)
        for k, label, unit in PROFILE_ROWS
        if mb.get(k, {}).get("value") is not None or mc.get(k, {}).get("value") is not None
    ]
    top = max(len(b.get("stalls", [])), len(c.get("stalls", [])))
    for n in range(top):
        sb = b["stalls"][n] if n < len(b.get("stalls", [])) else None
        sc = c["stalls"][n] if n < len(c.get("stalls", [])) else None
        rows.append(Row(f"stall #{n + 1} (share of stalled warps)", _stall(sb), _stall(sc), "text"))
    return rows


def _stall(s: dict | None) -> str:
    return f"{s['reason']} {100 * s['share']:.0f}%" if s else "-"


def sections(base: dict | None, cand: dict | None, pbase: dict | None, pcand: dict | None):
    """[(title, rows)] for the static blocks and, where both were profiled, the profiles."""
    out = []
    if ok(base) and ok(cand):
        out += [
            ("Resources (ptxas -v)", resources(base, cand)),
            ("Occupancy (theoretical)", occupancy(base, cand)),
            ("Instruction mix (SASS, static)", instructions(base, cand)),
            ("In loops (SASS, static)", instructions(base, cand, "in_loops")),
            ("Loops", loop(base, cand)),
            ("Memory operations by opcode", memory(base, cand)),
        ]
    if ok(pbase) and ok(pcand):
        out.append(
            ("Profile (Nsight Compute, one launch at the timed size)", profile(pbase, pcand))
        )
    return [(title, rows) for title, rows in out if rows]


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


def resource_findings(b: dict, c: dict) -> list[Finding]:
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
        *resource_findings(b, c),
    ]
    return sorted(found, key=lambda f: -f.score)


PARITY = 0.03  # a gap within 3% of 1.0x is parity: the differences then cost no time here


FOLDED = ("Memory operations by opcode", "In loops (SASS, static)")  # in <details> (markdown)


def _shown(text: object, markdown: bool) -> str:
    """Data as the output shows it: markdown-escaped, or with control characters visible."""
    return md(text) if markdown else terminal(text)


def _value(v, unit: str) -> str:
    if v is None:
        return "-"
    if unit == "text":
        return str(v)
    if unit == "fraction":
        return f"{100 * v:.0f}%"
    if unit == "pct":
        return f"{v:.1f}%"
    if unit == "bytes":
        return f"{v / 1e6:.1f} MB" if v >= 1e6 else f"{v:.0f} B"
    return f"{v:.4g}" if isinstance(v, float) and not float(v).is_integer() else f"{int(v)}"


def _ratio(row: Row) -> str:
    r = row.ratio
    if r is None:
        return "new" if row.unit != "text" and not row.baseline and row.candidate else ""
    return f"{r:.2f}x"


def _table(rows: list[Row], names: tuple[str, str], markup: Markup) -> str:
    columns = [
        Column("figure"),
        Column(names[0], True),
        Column(names[1], True),
        Column("ratio", True),
    ]
    cells = [
        [r.label, _value(r.baseline, r.unit), _value(r.candidate, r.unit), _ratio(r)] for r in rows
    ]
    return format_table(markup, columns, cells)


def _gap_line(case: Case, candidate: str, markdown: bool) -> str:
    impl, base = case.impls[candidate], case.impls[case.baseline]
    gap = impl.gap
    if case.gap_line:
        return _shown(case.gap_line, markdown)
    if not gap:
        return "no gap here (a bundle has no timings)" if impl.median_s is None else "no gap"
    times = ""
    if impl.median_s and base.median_s:
        times = (
            f" ({_shown(candidate, markdown)} {format_time(impl.median_s)}, "
            f"{_shown(case.baseline, markdown)} {format_time(base.median_s)})"
        )
    verdict = ""
    if abs(gap["ratio_of_medians"] - 1) <= PARITY:
        verdict = "; at parity: the differences below cost no time here"
    return (
        f"gap {gap['ratio_of_medians']:.3f}x [{gap['ci_low']:.3f}, {gap['ci_high']:.3f}]"
        f"{times}{verdict}"
    )


# An occupancy's SM limits as the provenance line says them; the schema requires only `source`.
LIMITS = (
    ("registers_per_sm", "{} registers"),
    ("threads_per_sm", "{} threads"),
    ("blocks_per_sm", "{} blocks"),
    ("shared_bytes_per_sm", "{} KiB shared memory"),
    ("reserved_shared_bytes_per_block", "({} B reserved per block)"),
    ("register_allocation_unit", "registers allocated per warp in units of {}"),
)


def _provenance(static: dict, markdown: bool) -> str:
    """The tools that made the figures (each one the block names) and the SM limits used."""
    tools = static["tools"]
    occ = static.get("occupancy") or {}
    text = (
        "; ".join(
            f"{' '.join(tool['command'])} ({tool['version']})"
            for tool in (tools.get("ptxas"), tools.get("disassembler"))
            if tool
        )
        or "tools not recorded"
    )
    limits = occ.get("limits")
    if limits:
        threads = occ.get("block_threads")
        said = ", ".join(
            form.format(limits[k] // 1024 if "KiB" in form else limits[k])
            for k, form in LIMITS
            if k in limits
        )
        text += (
            f"; occupancy{f' for {threads} threads per block' if threads else ''} with SM limits "
            f"{said or 'not recorded'}, from {limits['source']}"
        ).replace(", (", " (")
    return _shown(text, markdown)


def _missing(case: Case, names: tuple[str, str], block: str, markdown: bool) -> str:
    """Why the two implementations lack a usable `block`: the recorded reasons (one line each,
    naming the implementations that share it), or that neither has one."""
    reasons: dict[str, list[str]] = {}
    for name in names:
        got = getattr(case.impls[name], block)
        if got and not ok(got):
            reasons.setdefault(got["reason"].splitlines()[0], []).append(name)
    text = "; ".join(f"{', '.join(n)}: {r}" for r, n in reasons.items()) or "not recorded"
    return _shown(text, markdown)


def explain_pair(case: Case, candidate: str, source: Source, markdown: bool) -> str:
    """One case, one candidate against the baseline."""
    base, cand = case.impls[case.baseline], case.impls[candidate]
    names = (f"{case.baseline} (baseline)", candidate)
    markup = MARKDOWN if markdown else TEXT
    head = _shown(f"{case.id}: {candidate} vs {case.baseline} (baseline)", markdown)
    out = [
        f"### {head}" if markdown else f"{head}\n{'=' * len(head)}",
        "",
        _gap_line(case, candidate, markdown),
        "",
    ]
    static_ok = ok(base.static) and ok(cand.static)
    profile_ok = ok(base.profile) and ok(cand.profile)
    found = (
        findings(base.static, cand.static, base.profile, cand.profile)
        if static_ok
        else findings(None, None, base.profile, cand.profile)
    )
    if found:
        at_parity = bool(cand.gap) and abs(cand.gap["ratio_of_medians"] - 1) <= PARITY
        out.append("Differences:" if at_parity else "Most plausible differences:")
        out += [f"{n}. {_shown(f.text, markdown)}" for n, f in enumerate(found[:MAX_SHOWN], 1)]
        if found[MAX_SHOWN:]:
            rest = "; ".join(_shown(f.text, markdown) for f in found[MAX_SHOWN:])
            out += ["", f"Also different: {rest}."]
        out.append("")
    elif static_ok:
        out += ["No difference in resources, instruction mix or loops stands out.", ""]
    if not static_ok:
        why = _missing(case, (case.baseline, candidate), "static", markdown)
        out += [f"No static analysis ({why}): {HOW_TO_GET_STATIC}.", ""]
    if source.kind == "result" and not profile_ok:
        why = _missing(case, (case.baseline, candidate), "profile", markdown)
        out += [f"No profile ({why}): {HOW_TO_GET_PROFILE}.", ""]
    for title, rows in sections(base.static, cand.static, base.profile, cand.profile):
        table = _table(rows, names, markup)
        if markdown and title in FOLDED:
            out += [f"<details><summary>{title}</summary>", "", table, "</details>", ""]
        else:
            out += [f"**{title}**" if markdown else title, "", table]
    if static_ok:
        out += [f"Static figures: {_provenance(cand.static, markdown)}.", ""]
    if profile_ok:
        p = cand.profile
        command = f"{' '.join((p.get('command') or ['ncu'])[:1])} ..."
        out += [
            f"Profile: {_shown(p['version'], markdown)}, "
            f"{md(command, code=True) if markdown else terminal(command)}, one launch of "
            "each implementation at the timed size after timing (profiled data, not a "
            "timing).",
            "",
        ]
    return "\n".join(out)


def _candidates(case: Case, wanted: tuple[str, ...], primary: str | None) -> list[str]:
    names = case.candidates()
    if wanted:
        return [n for n in wanted if n in names]
    if primary in names:
        return [primary]
    return names


def render(
    source: Source,
    case_ids: tuple[str, ...] = (),
    candidates: tuple[str, ...] = (),
    markdown: bool = True,
) -> str:
    """Every case asked for (all by default), each against the candidates asked for (default:
    the suite's primary candidate where the case has it, else every candidate)."""
    cases = [c for c in source.cases if not case_ids or c.id in case_ids]
    where = f"{source.kind} {source.what}" + (f", {source.device}" if source.device else "")
    title = _shown(f"kernelgap explain: {where}, arch {source.arch or 'unknown'}", markdown)
    out = [f"## {title}" if markdown else title, ""]
    for case in cases:
        shown_id = _shown(case.id, markdown)
        if case.baseline not in case.impls:
            out += [f"{shown_id}: no baseline in this {source.kind}.", ""]
            continue
        names = _candidates(case, candidates, source.primary)
        if not names:
            out += [f"{shown_id}: none of the candidates asked for is in this case.", ""]
        for name in names:
            impl = case.impls[name]
            if impl.status == "skipped":
                why = _shown(f"{name} was not built: {impl.skip_reason}", markdown)
                out += [f"{shown_id}: {why}", ""]
                continue
            out.append(explain_pair(case, name, source, markdown))
    return "\n".join(out).rstrip() + "\n"
