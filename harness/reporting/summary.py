"""A concise markdown summary of one result document, for `$GITHUB_STEP_SUMMARY` or a PR.

Sections: the primary candidate's geometric-mean gap (harness.reporting.table) as the headline, the
geometric-mean gap per candidate over the suite's fixed set of cases (its interval, the
unstable cases in it, the missing ones), every gap with its interval, a gap-by-size table per
swept case (harness.reporting.sweep_table), unstable and failed
results, and the hardware and toolchain signature of the run, with each implementation's
compiler identity (toolchain, what its --version prints, the sha256 of its program).
"""

from __future__ import annotations

from harness.escaping import first_line
from harness.escaping import markdown as md
from harness.history.series import compiler_identity, describe_compiler
from harness.reporting.sweep_table import render, sweep_tables
from harness.reporting.table import (
    MARKDOWN,
    Column,
    format_table,
    format_time,
    lead_first,
    primary_candidate,
)
from protocol.headline import candidate_headlines
from protocol.points import is_point_row

__all__ = [
    "compiler_identities",
    "describe_headline",
    "geomean_gaps",
    "headline",
    "markdown",
    "signature",
]


def geomean_gaps(document: dict) -> dict[str, dict]:
    """{candidate: headline} over the fixed set of cases each candidate is in
    (protocol.headline.candidate_headlines: value, cases k, of n, ci_low, ci_high, missing,
    unstable, remeasured). Geometric mean = exp(mean(ln ratio_of_medians)), the mean that
    treats 2x and 0.5x as symmetric; unstable cases stay in, marked. The same rule as the
    runner's summary.geomean_gap, recomputed here so a partial document (complete: false), a
    document written before the rule and the document's own cases always agree."""
    return candidate_headlines(document["cases"])


def describe_headline(found: dict, versus: str = "") -> str:
    """'1.2345x vs cuda (95% interval 1.2300 to 1.2390) over 7 of 8 cases (missing: a;
    unstable: b; re-measured: b)'."""
    k, n = found["cases"], found["of"]
    over = f"{k} of {n} cases" if k != n else f"{n} case{'s' * (n != 1)}"
    notes = [
        f"{what}: {', '.join(found[key])}"
        for what, key in (
            ("missing", "missing"),
            ("unstable", "unstable"),
            ("re-measured", "remeasured"),
        )
        if found.get(key)
    ]
    text = f"{found['value']:.4f}x" + (f" vs {versus}" if versus else "")
    if "ci_low" in found:
        conf = found.get("confidence", 0.95)
        text += f" ({conf:.0%} interval {found['ci_low']:.4f} to {found['ci_high']:.4f})"
    return f"{text} over {over}" + (f" ({'; '.join(notes)})" if notes else "")


def headline(document: dict) -> str | None:
    """The sentence every report leads with: the primary candidate's geometric-mean gap over
    the suite's fixed set of cases, with its interval, and the cases missing from it or
    unstable in it (or that it has no gap); None when the run has no primary (harness.reporting.table)."""
    primary = primary_candidate(document)
    if primary is None:
        return None
    found = geomean_gaps(document).get(primary)
    if found is None:
        return f"Primary candidate {primary}: no gap in this run"
    baselines = {
        case["baseline"]
        for case in document["cases"]
        if case["status"] == "ok" and (case["implementations"].get(primary) or {}).get("gap")
    }
    versus = next(iter(baselines)) if len(baselines) == 1 else "the baselines"
    return f"Primary candidate {primary}: geometric-mean gap {describe_headline(found, versus)}"


def compiler_identities(document: dict) -> list[tuple[str, str]]:
    """(implementation, 'toolchain, version[, compiler sha256 <12 hex>]'), the primary first,
    then in document order; one line per distinct identity (an implementation is normally
    built by one compiler in every case)."""
    seen: dict[str, list[str]] = {}
    for case in document["cases"]:
        for name, impl in case["implementations"].items():
            toolchain, version, sha = compiler_identity(impl)
            text = describe_compiler(toolchain or "?", version or "version unknown", sha)
            if text not in seen.setdefault(name, []):
                seen[name].append(text)
    primary = primary_candidate(document)
    return [(name, text) for name in lead_first(seen, primary) for text in seen[name]]


def _cuda_version(device: dict) -> str:
    """CUDA driver API version: the runner's string, else 13000 -> '13.0'."""
    if device.get("driver_version_string"):
        return device["driver_version_string"]
    version = device["driver_version"]
    return f"{version // 1000}.{version % 1000 // 10}"


def signature(document: dict) -> list[tuple[str, str]]:
    """(what, value) pairs naming the hardware and toolchain a run's numbers belong to."""
    env = document["environment"]
    device, software = env["device"], env["software"]
    sensors = env.get("sensors_start") or {}
    memory_gib = device["memory_bytes"] / 2**30
    pairs = [
        (
            "GPU",
            f"{device['name']} ({device['arch']}, {device['sm_count']} SMs, "
            f"{memory_gib:.0f} GiB, L2 {device['l2_bytes'] / 2**20:.0f} MiB)",
        ),
        ("Driver", str(sensors.get("driver_version") or "unknown (NVML unavailable)")),
        ("CUDA (driver API)", _cuda_version(device)),
    ]
    for name, toolchain in sorted(env["toolchains"].items()):
        pairs.append((f"Toolchain {name}", str(toolchain["version"])))
    pairs += [("Compiler", f"{name}: {text}") for name, text in compiler_identities(document)]
    pairs += [
        (
            "Python / cuda-bindings / numpy",
            " / ".join(str(software.get(k, "?")) for k in ("python", "cuda_bindings", "numpy")),
        ),
        ("Host", str(software["hostname"])),
    ]
    suite = document["suite"]
    commit = suite["commit"] or "unknown"
    dirty = " (dirty)" if suite["dirty"] else ""
    pairs.append(
        (
            "Suite",
            f"{suite['name']} v{suite['version']}, commit {commit}{dirty}, "
            f"sha256 {suite['sha256'][:12]}",
        )
    )
    return pairs


def _gap_rows(document: dict) -> list[tuple]:
    """A row per gap of each case (a swept case's headline point; its other points are in the
    gap-by-size tables)."""
    rows = []
    for case in document["cases"]:
        if is_point_row(case):
            continue
        impls = case["implementations"]
        base = impls.get(case["baseline"], {}).get("timing")
        for name, impl in impls.items():
            gap = impl.get("gap")
            if not gap:
                continue
            rows.append(
                (
                    f"{case['id']} v{case['version']}",
                    f"{name} vs {case['baseline']}",
                    f"{gap['ratio_of_medians']:.4f}x",
                    f"{gap['ci_low']:.4f} – {gap['ci_high']:.4f}",
                    format_time(base["stats"]["median_s"]) if base else "-",
                    format_time(impl["timing"]["stats"]["median_s"]) if impl.get("timing") else "-",
                    ("stable" if gap["stable"] else "**unstable**") + _cold_by_events(impl),
                )
            )
    return rows


def _cold_by_events(impl: dict) -> str:
    """The mark ", cold by events" of a cold row read by CUDA events (an explicit choice since result
    schema 1.9.0: their overhead compresses cold gaps toward 1; a series apart from CUPTI's)."""
    timing = impl.get("timing") or {}
    cold_events = timing.get("mode") == "cold" and timing.get("timer", "events") == "events"
    return ", cold by events" if cold_events else ""


def _unstable_lines(document: dict) -> list[str]:
    lines = []
    for case in document["cases"]:
        for name, impl in case["implementations"].items():
            stats = (impl.get("timing") or {}).get("stats")
            if stats and not stats["stable"]:
                lines.append(
                    f"- {md(case['id'], code=True)} / {md(name, code=True)}: noise (MAD / median) "
                    f"{stats['noise']:.2%} over {stats['count']} samples"
                )
    return lines


def _problem_lines(document: dict) -> list[str]:
    """Failed and skipped cases (phase, CUDA error, first line), then results without a gap."""
    lines = []
    for case in document["cases"]:
        error = case.get("error")
        if case["status"] != "ok":
            detail = "no error recorded"
            if error:
                cuda = f" {error['cuda_error']}" if error.get("cuda_error") else ""
                detail = f"{error['phase']}{cuda}: {first_line(error['message'])}"
            lines.append(
                f"- {md(case['id'], code=True)} v{case['version']} {md(case['status'])}: {md(detail)}"
            )
            continue
        for name, impl in case["implementations"].items():
            which = f"- {md(case['id'], code=True)} / {md(name, code=True)}"
            if impl.get("status") == "skipped":
                reason = first_line(impl.get("skip_reason", "")) or "no reason recorded"
                lines.append(f"{which} skipped: {md(reason)}")
            elif impl["role"] == "candidate" and not impl.get("gap"):
                note = impl.get("gap_note") or f"check {impl.get('check', {}).get('status')}"
                lines.append(f"{which} has no gap: {md(first_line(note))}")
    return lines


def markdown(document: dict) -> str:
    """The summary as markdown (one document; validate it before calling). Every name and
    message from the document is escaped (harness.escaping.markdown)."""
    suite, counts = document["suite"], document["summary"]
    device = md(document["environment"]["device"]["name"])
    incomplete = "" if document["complete"] else " **Incomplete run: not every case finished.**"
    parts = [
        f"## kernelgap: {md(suite['name'])} v{suite['version']} on {device}\n\n"
        f"{counts['cases']} case{'s' * (counts['cases'] != 1)}: {counts['ok']} ok, {counts['failed']} failed, "
        f"{counts['skipped']} skipped, {counts['unstable']} with an unstable gap; started "
        f"{md(document['started_utc'])}. Gap = median(candidate) / median(baseline): 1.0x is "
        f"parity, lower is better.{incomplete}\n"
    ]
    lead = headline(document)
    if lead:
        parts.append(f"**{md(lead)}.**\n")
    geomeans = geomean_gaps(document)
    title = "### Geometric-mean gap (the suite's fixed set of cases)\n\n"
    if geomeans:
        order = lead_first(sorted(geomeans), primary_candidate(document))
        rows = [_geomean_row(n, geomeans[n]) for n in order]
        columns = [
            Column("Candidate"),
            Column("Geomean gap", True),
            Column("95% CI", True),
            Column("Cases", True),
            Column("Unstable (in it)"),
            Column("Missing"),
        ]
        parts.append(title + format_table(MARKDOWN, columns, rows))
    else:
        parts.append(title + "No gap in this run.\n")
    gap_rows = _gap_rows(document)
    if gap_rows:
        columns = [
            Column("Case"),
            Column("Candidate"),
            Column("Gap", True),
            Column("95% CI", True),
            Column("Baseline", True),
            Column("Candidate time", True),
            Column("Status"),
        ]
        parts.append("### Gaps per case\n\n" + format_table(MARKDOWN, columns, gap_rows))
    tables = sweep_tables(document)
    for kind, heading in (
        ("size", "Gap by size (swept cases; the headline point is the case's row above)"),
        ("option", "Gap by option (one implementation built several ways, at the case's dims)"),
    ):
        sweeps = [t for t in tables if t.kind == kind]
        if sweeps:
            parts.append(
                f"### {heading}\n\n"
                + "\n".join(
                    f"**{md(t.case_id)} v{t.version}**\n\n{render(t, MARKDOWN)}" for t in sweeps
                )
            )
    unstable = _unstable_lines(document)
    if unstable:
        parts.append(
            "### Unstable (noise above the limit; kept in the geomean, marked; left out of alerts)\n\n"
            + "\n".join(unstable)
            + "\n"
        )
    problems = _problem_lines(document)
    if problems:
        parts.append("### Failed, skipped or without a gap\n\n" + "\n".join(problems) + "\n")
    columns = [Column("What"), Column("Value")]
    parts.append(
        "### Hardware and toolchain\n\n" + format_table(MARKDOWN, columns, signature(document))
    )
    return "\n".join(parts)


def _geomean_row(name: str, found: dict) -> tuple[str, ...]:
    interval = f"{found['ci_low']:.4f} to {found['ci_high']:.4f}"
    return (
        md(name),
        f"{found['value']:.4f}x",
        interval,
        f"{found['cases']} of {found['of']}",
        md(", ".join(found["unstable"])) or "-",
        md(", ".join(found["missing"])) or "-",
    )
