"""A suite case's document: its skeleton, its failures, and its blocks from its worker's raw
record (`runner bench`).

The worker returns raw per-launch samples; the blocks derived from them come from runner.document,
the one assembly both front ends share. What is the suite's own stays here: the record's fields,
the hot output-dependence check, the rows whose timing cannot be trusted (they fail the case and
lose their gap), unchecked rows, and the --precision stopping rule's note.
"""

from __future__ import annotations

from runner.definition import manifest, spec
from runner.document import (
    apply_clocks,
    candidate_gaps,
    case_systematic,
    control_block,
    impossible,
    pair_blocks,
    rate_bound,
    run_max_clock,
    throughput,
    timing_block,
)

__all__ = [
    "case_skeleton",
    "dependence",
    "finish_case",
    "finish_from_worker",
    "outcome_line",
    "over_budget",
    "record_failure",
    "record_worker_failure",
]

# What the worker's record carries per implementation into its row as it is.
RECORD_FIELDS = ("load_s", "ptx", "check", "integrity")


def dependence(integrity: dict) -> str:
    """What the hot output-dependence check found, in words."""
    after = integrity.get("outputs_after_replay")
    if after and not after.startswith("match"):
        return after
    said = (
        f"{integrity['poisoned_s'] * 1e6:.2f} us a launch when its outputs are poisoned first, "
        f"{integrity['plain_s'] * 1e6:.2f} us in plain hot replay (x{integrity['ratio']:.2f}, "
        f"limit x{integrity['limit']:.2f})"
    )
    if "disturbed_s" in integrity:
        said += (
            f", {integrity['disturbed_s'] * 1e6:.2f} us after the same traffic with the answer "
            f"left in place (x{integrity['ratio_disturbed']:.2f})"
        )
    if "method_bias" in integrity:
        said += (
            f"; the case's other rows x{integrity['method_bias']:.2f} at least, so judged over that"
        )
    if "disturbed_vs_baseline" in integrity:
        said += (
            f"; disturbed, x{integrity['disturbed_vs_baseline']:.2f} the baseline's time beyond "
            "its plain gap"
        )
    return said


def finish_case(
    case_doc: dict,
    worker_record: dict | None,
    geometry,
    flop_dtype,
    peaks: dict,
    working_set_bytes: float | None = None,
    split: tuple[float, float] | None = None,
) -> dict:
    """Fill `case_doc` (already holding builds and errors) from the worker's raw record.
    `split`: the case's bytes a call as (read, written), for the rate ceiling."""
    record = worker_record or {}
    for name, impl in case_doc["implementations"].items():
        raw = record.get("impls", {}).get(name, {})
        impl.update({key: raw[key] for key in RECORD_FIELDS if key in raw})
    measurement = record.get("measurement")
    if measurement and case_doc["status"] == "ok":
        _time_rows(case_doc, measurement, geometry, flop_dtype, peaks)
        for impl in case_doc["implementations"].values():
            if "throughput" in impl:
                bound = rate_bound(impl["throughput"], peaks, working_set_bytes, split)
                if bound is not None:
                    impl["throughput"]["bound"] = bound
        untrusted = _untrusted_rows(case_doc, peaks, working_set_bytes, split)
        _fail_untrusted(case_doc, *untrusted)
        _gaps(case_doc, measurement, {**untrusted[1], **untrusted[0]})
        _flag_gaps(case_doc)
        pairs = pair_blocks(case_doc)
        if pairs:
            case_doc["pairs"] = pairs
        case_doc["timing_wall_s"] = measurement["wall_s"]
        case_doc["round_orders"] = measurement["orders"][:2]
        _precision(case_doc, measurement.get("precision"))
        if measurement.get("sequential"):
            case_doc["sequential"] = measurement["sequential"]
        apply_clocks(case_doc, run_max_clock([case_doc]), measurement.get("clocks_source"))
    case_doc.setdefault("phases_s", {}).update(record.get("phases_s", {}))
    return case_doc


def _flag_gaps(case_doc: dict) -> None:
    """A hot row the output-dependence check flagged relative to the baseline keeps its gap,
    with the flag beside it (issue 50 item 10: the gap is reported, not withheld)."""
    for impl in case_doc["implementations"].values():
        flag = impl.get("integrity", {}).get("flag")
        if flag and impl.get("gap"):
            impl["gap_note"] = f"flagged: {flag}"


def _time_rows(case_doc: dict, measurement: dict, geometry, flop_dtype, peaks: dict) -> None:
    """Each timed row's timing and rates; the A/A control gets no row (its block is apart)."""
    hidden = (measurement.get("control") or {}).get("name")
    why = case_doc.get("settings", {}).get("timer_reason")
    for name, timing in measurement["impls"].items():
        if name == hidden:
            continue
        impl = case_doc["implementations"][name]
        impl["timing"] = timing_block({**timing, "timer_reason": why}, measurement)
        impl["throughput"] = throughput(
            geometry.bytes, geometry.flops, impl["timing"]["stats"]["median_s"], peaks, flop_dtype
        )


def _untrusted_rows(
    case_doc: dict, peaks: dict, working_set_bytes, split
) -> tuple[dict[str, str], dict[str, str]]:
    """({row: why its rates are physically impossible}, {row: why its timing depends on its
    outputs, or the timing's own problems})."""
    impls = case_doc["implementations"]
    impossible_rows = {
        name: why
        for name, impl in impls.items()
        if "throughput" in impl
        and (why := impossible(impl["throughput"], peaks, working_set_bytes, split))
    }
    dependent_rows = {
        name: dependence(i["integrity"])
        for name, i in impls.items()
        if i.get("integrity", {}).get("output_dependent")
    }
    for name, i in impls.items():
        if i.get("timing", {}).get("problems"):
            dependent_rows.setdefault(name, "; ".join(i["timing"]["problems"][:2]))
    return impossible_rows, dependent_rows


def _fail_untrusted(case_doc: dict, impossible_rows: dict, dependent_rows: dict) -> None:
    """Fail the case, naming every untrusted row; the samples stay in the document."""
    found = [f"{name}: {why}" for name, why in impossible_rows.items()]
    dependent = [f"{name}: {why}" for name, why in dependent_rows.items()]
    if not (found or dependent):
        return
    case_doc["status"] = "failed"
    parts = []
    if found:
        parts.append(
            "physically impossible timing (the work was not all done, or not all "
            "timed): " + "; ".join(found)
        )
    if dependent:
        parts.append(
            "output-dependent timing (faster when its outputs already hold the answer, "
            "or outputs not written by a timed launch): " + "; ".join(dependent)
        )
    case_doc["error"] = {"phase": "timing", "message": "; ".join(parts)}


def _gaps(case_doc: dict, measurement: dict, untrusted: dict[str, str]) -> None:
    """The candidates' gaps with the case's systematic term (its A/A control's where it has
    one). An untrusted row loses its gap, and so does every row when the baseline is untrusted;
    an unchecked row gets none."""
    baseline = case_doc["baseline"]
    base_timing = case_doc["implementations"][baseline]["timing"]
    aa = control_block(measurement, base_timing)
    if aa is not None:
        case_doc["aa_control"] = aa
    systematic = case_systematic(case_doc, base_timing)

    def no_gap(name: str, impl: dict) -> str | None:
        if name in untrusted or baseline in untrusted:
            culprit = name if name in untrusted else baseline
            whose = name if culprit == name else f"its baseline {baseline}"
            return f"no gap: the timing of {whose} cannot be trusted: {untrusted[culprit]}"
        if impl.get("check", {}).get("status") != "passed":
            return "not checked: no gap is given for an unchecked result"
        return None

    candidate_gaps(case_doc, no_gap, lambda name: systematic)


def _precision(case_doc: dict, precision: dict | None) -> None:
    """The --precision stopping rule's record, and a note where it did not converge."""
    if not precision:
        return
    case_doc["precision"] = precision
    if precision["converged"]:
        return
    floor = (
        ": the target is below what stays fixed within the run (a cold short "
        "kernel's placement, stats.systematic), which no sample narrows"
        if precision["stopped_by"] == "floor"
        else ""
    )
    case_doc.setdefault("notes", []).append(
        f"not converged: the widest gap interval is +-{precision['half_width']:.2%} "
        f"against the --precision target of {precision['target']:.2%} after "
        f"{precision['samples']} samples (stopped by {precision['stopped_by']}{floor})"
    )


def access_split(
    case: manifest.CaseSpec, sizes: dict[str, int], nbytes: float | None
) -> tuple[float, float] | None:
    """The case's declared `nbytes` a call as (read, written), in the proportion of its input
    and output buffers (an inout buffer counts on both sides); None without declared bytes."""
    reads = sum(sizes[b.name] for b in case.buffers if b.role in ("input", "inout"))
    writes = sum(sizes[b.name] for b in case.buffers if b.role in ("output", "inout"))
    if nbytes is None or reads + writes == 0:
        return None
    return nbytes * reads / (reads + writes), nbytes * writes / (reads + writes)


def case_skeleton(case: manifest.CaseSpec) -> dict:
    canonical, check = case.geometry(case.dims), case.geometry(case.check_dims)
    return {
        "id": case.id,
        "version": case.version,
        "description": case.description,
        "status": "ok",
        "baseline": case.baseline.name,
        "dims": canonical.dims,
        "check_dims": check.dims,
        "launch": {
            "grid": list(canonical.grid),
            "block": list(canonical.block),
            "shared_bytes": canonical.shared_bytes,
        },
        "implementations": {
            i.name: {
                "role": i.role,
                "toolchain": i.toolchain,
                "source": i.source_rel,
                "entry": i.entry,
            }
            for i in case.impls
        },
    }


def record_failure(case_doc: dict, phase: str, message: str, cuda_error: str | None = None) -> None:
    case_doc["status"] = "failed"
    case_doc["error"] = {"phase": phase, "message": message}
    if cuda_error:
        case_doc["error"]["cuda_error"] = cuda_error


def record_worker_failure(case_doc: dict, case, outcome, timeout_s: float, by_budget: bool) -> None:
    """A worker that timed out (killed, with its kernels and context), crashed without a
    record, or reported an error fails the case with that phase and message."""
    record = outcome.record
    if outcome.timed_out:
        limit = (
            f"the {timeout_s:.0f} s left of the suite's --budget-s"
            if by_budget
            else f"{timeout_s:g} s"
        )
        record_failure(
            case_doc,
            "timeout",
            f"case {case.id} did not finish within {limit} (last phase: {outcome.last_phase or 'start'}); "
            "its worker process was killed, which ends its kernels and its context",
        )
    elif record is None:
        tail = "\n".join(outcome.stderr_tail[-10:])
        record_failure(
            case_doc,
            "crash",
            f"case {case.id}: the worker exited with status {outcome.returncode} "
            f"during phase {outcome.last_phase or 'start'} without a result\n{tail}",
        )
    elif record.get("status") != "ok":
        err = record.get("error", {})
        record_failure(
            case_doc,
            err.get("phase", "unknown"),
            err.get("message", "unknown error"),
            err.get("cuda_error"),
        )


def finish_from_worker(case_doc: dict, case, record: dict | None, peaks: dict) -> None:
    """The case's document from the worker's record (runner.execution.result), with its working
    set and its bytes read and written a call for the rate ceiling."""
    geometry = case.geometry(case.dims)
    sizes = spec.buffer_bytes(case, geometry.lengths)
    finish_case(
        case_doc,
        record,
        geometry,
        case.flop_dtype,
        peaks,
        sum(sizes.values()),
        access_split(case, sizes, geometry.bytes),
    )


def outcome_line(case_doc: dict) -> str:
    """The case's last progress line: its gaps (and its A/A control's), or why it failed."""
    if case_doc["status"] != "ok":
        return (
            f"FAILED in {case_doc['error']['phase']}: "
            f"{case_doc['error']['message'].splitlines()[0]}"
        )
    gaps = [
        f"{n} {i['gap']['ratio_of_medians']:.3f}x [{i['gap']['ci_low']:.3f}, {i['gap']['ci_high']:.3f}]"
        for n, i in case_doc["implementations"].items()
        if i.get("gap")
    ]
    if aa := case_doc.get("aa_control"):  # the hidden A/A control and the term it set
        gaps.append(
            f"A/A control {aa['ratio_of_medians']:.4f}x [{aa['ci_low']:.4f}, "
            f"{aa['ci_high']:.4f}], systematic {aa['systematic']:.3%}"
        )
    return f"ok: {'; '.join(gaps) or 'no candidates timed'}"


def over_budget(case: manifest.CaseSpec, budget_s: float, done: int) -> dict:
    """A case left out because the suite's time budget was spent: skipped, saying why."""
    case_doc = case_skeleton(case)
    case_doc["status"] = "skipped"
    case_doc["error"] = {
        "phase": "timeout",
        "message": f"not run: the suite's time budget (--budget-s {budget_s:g}) was spent after "
        f"{done} case(s)",
    }
    return case_doc
