"""The figures of two implementations side by side, each with its ratio (candidate / baseline).

Rows come in sections (resources, occupancy, instructions, loops, memory operations, profile);
a row where both sides are zero or absent is left out, so a table shows what either one does.
Helpers here are also what `findings` reads, so a sentence and its table row never disagree.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.history import counters

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
