"""The explanation as markdown (a pull request, a job summary, the dashboard's explain/ pages) or
plain text: per case and candidate, the findings first, then the figures side by side with the
ratio of each, then where the figures came from (tools, versions, SM limits).

Names, reasons, opcodes and tool versions come from a document anyone can write: each passes
through harness.escaping (markdown() in markdown, terminal() in text) before it is joined into
a line, so no HTML, link or escape sequence from the data reaches the reader."""

from __future__ import annotations

from harness.escaping import markdown as md
from harness.escaping import terminal
from harness.explain import figures
from harness.explain.findings import MAX_SHOWN, findings
from harness.explain.sources import HOW_TO_GET_PROFILE, HOW_TO_GET_STATIC, Case, Source
from harness.reporting.table import MARKDOWN, TEXT, Column, Markup, format_table, format_time

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


def _ratio(row: figures.Row) -> str:
    r = row.ratio
    if r is None:
        return "new" if row.unit != "text" and not row.baseline and row.candidate else ""
    return f"{r:.2f}x"


def _table(rows: list[figures.Row], names: tuple[str, str], markup: Markup) -> str:
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
        if got and not figures.ok(got):
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
    static_ok = figures.ok(base.static) and figures.ok(cand.static)
    profile_ok = figures.ok(base.profile) and figures.ok(cand.profile)
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
    for title, rows in figures.sections(base.static, cand.static, base.profile, cand.profile):
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
