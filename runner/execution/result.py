"""Assembly of the result document from raw samples: statistics, gaps and throughput.

The worker returns raw per-launch samples; everything derived from them is computed
here by the pure functions of runner.measurement.stats, so a document can always be recomputed
from its own raw samples.
"""

from __future__ import annotations

from protocol.headline import candidate_headlines
from protocol.version import RESULT_SCHEMA_VERSION
from runner.measurement import aa_control, ceiling, stats
from runner.measurement.timing import clocks, cupti


def throughput(
    nbytes: float | None, flops: float | None, median_s: float, peaks: dict, flop_dtype: str | None
) -> dict:
    """Achieved rates at the median and their fraction of the device's measured or nominal peaks."""
    out = {}
    if nbytes is not None and median_s > 0:
        out["bytes"] = nbytes
        out["bytes_per_s"] = nbytes / median_s
        peak = peaks.get("measured_memory_bytes_per_s") or peaks.get("nominal_memory_bytes_per_s")
        if peak:
            out["fraction_of_peak_bandwidth"] = out["bytes_per_s"] / peak
            out["peak_bandwidth_source"] = (
                "measured" if peaks.get("measured_memory_bytes_per_s") else "nominal"
            )
    if flops is not None and median_s > 0:
        out["flops"] = flops
        out["flops_per_s"] = flops / median_s
        peak = peaks.get(f"nominal_{flop_dtype or 'f64'}_flops_per_s")
        if peak:
            out["fraction_of_peak_flops"] = out["flops_per_s"] / peak
            out["peak_flops_source"] = f"nominal {flop_dtype or 'f64'}"
    return out


# Margin past the nominal FLOP/s (a datasheet figure at the clock NVML reported) before a result
# is called impossible; the bandwidth ceiling and its margin are runner.measurement.ceiling's.
FLOPS_MARGIN = 1.05


def rate_bound(
    rates: dict,
    peaks: dict,
    working_set_bytes: float | None,
    split: tuple[float, float] | None = None,
) -> dict | None:
    """The `throughput.bound` block (runner.measurement.ceiling.judge_rate) of a row with these
    rates; `split` is (bytes read, bytes written) a call where known. None when there is nothing
    to judge, or when the working set fits in the L2 (no measured L2 figure to judge it by)."""
    l2 = peaks.get("l2_bytes")
    if working_set_bytes is not None and l2 and working_set_bytes <= l2:
        return None
    if not rates.get("bytes") or not rates.get("bytes_per_s"):
        return None
    read, write = split if split is not None else (None, None)
    median_s = rates["bytes"] / rates["bytes_per_s"]
    return ceiling.judge_rate(rates["bytes"], median_s, peaks, read, write)


def impossible(
    rates: dict,
    peaks: dict,
    working_set_bytes: float | None,
    split: tuple[float, float] | None = None,
) -> str | None:
    """Why a result is physically impossible on this device, naming both figures, or None: its
    memory rate beyond the L2 above the ceiling (rate_bound), or its FLOP rate above nominal."""
    bound = rate_bound(rates, peaks, working_set_bytes, split)
    if bound is not None and bound["exceeded"]:
        return bound["message"]
    fraction = rates.get("fraction_of_peak_flops")
    if fraction is not None and fraction > FLOPS_MARGIN:
        peak = rates["flops_per_s"] / fraction
        return (
            f"{rates['flops_per_s'] / 1e12:.2f} TFLOP/s is above the device's "
            f"{rates.get('peak_flops_source', 'nominal')} {peak / 1e12:.2f} TFLOP/s "
            f"(x{FLOPS_MARGIN:g} allowed)"
        )
    return None


def timing_block(timing: dict, measurement: dict) -> dict:
    samples = timing["samples_s"]
    block = {
        "mode": measurement["mode"],
        "method": timing["method"],
        "timer": timing.get("timer", "events"),
        "batch": timing["batch"],
        "warmup": measurement["warmup"],
        "calibration_s": timing["calibration_s"],
        "samples_s": samples,
        "stats": stats.summarize(samples),
    }
    if timing.get("timer_reason"):  # why this timer (runner.measurement.timing.timer_choice)
        block["timer_reason"] = timing["timer_reason"]
    if block["timer"] == "cupti":
        block["cupti_span"] = cupti.SPAN
    if timing.get("clocks") is not None:
        block["clocks"] = timing["clocks"]
    if timing.get("problems"):
        block["problems"] = timing["problems"]
    if timing.get("audit"):
        block["audit"] = timing["audit"]
    return block


def apply_clocks(case_doc: dict, run_max: int | None, source: str | None = None) -> None:
    """Flag the case's samples against the run's highest SM clock (runner.measurement.timing.clocks) and,
    when they are mostly flagged, make its gaps and pairs unstable, saying why. Idempotent: run
    again with the final maximum once the whole run is known."""
    timings = {
        n: i["timing"]
        for n, i in case_doc["implementations"].items()
        if "clocks" in i.get("timing", {})
    }
    if not timings:
        if source and "timing_wall_s" in case_doc:
            case_doc["clocks"] = {"source": source}
        return
    for timing in timings.values():
        timing["clock_flags"] = clocks.sample_flags(timing["clocks"], run_max)
    report = clocks.clock_report(timings, run_max)
    case_doc["clocks"] = {
        "source": source or case_doc.get("clocks", {}).get("source", "nvml"),
        **report,
    }
    unstable = report["unstable"]
    impls = case_doc["implementations"]
    base = impls[case_doc["baseline"]].get("timing")
    for impl in impls.values():
        if impl.get("gap") and base:
            impl["gap"]["stable"] = (
                impl["timing"]["stats"]["stable"] and base["stats"]["stable"] and not unstable
            )
    for pair in case_doc.get("pairs", []):
        sides = (impls[pair["base"]]["timing"], impls[pair["head"]]["timing"])
        pair["stable"] = all(t["stats"]["stable"] for t in sides) and not unstable
    notes = [n for n in case_doc.get("notes", []) if not n.startswith("clocks: ")]
    if unstable:
        notes.append("clocks: " + report["note"])
    if notes:
        case_doc["notes"] = notes
    else:
        case_doc.pop("notes", None)


def run_max_clock(case_docs: list[dict]) -> int | None:
    """The highest SM clock read around any sample of these cases."""
    return clocks.run_max_mhz(
        i["timing"] for c in case_docs for i in c["implementations"].values() if "timing" in i
    )


def dependence(integrity: dict) -> str:
    """What the hot output-dependence check found, in words."""
    after = integrity.get("outputs_after_replay")
    if after and not after.startswith("match"):
        return after
    return (
        f"{integrity['poisoned_s'] * 1e6:.2f} us a launch when its outputs are poisoned first, "
        f"{integrity['plain_s'] * 1e6:.2f} us in plain hot replay (x{integrity['ratio']:.2f}, "
        f"limit x{integrity['limit']:.2f})"
    )


def systematic_of(baseline_timing: dict, per_call_s: float = 0.0) -> float:
    """What a gap against this baseline's timing block adds for what stays fixed within a run
    (stats.systematic: its mode and median, and the graphs' `per_call_s`)."""
    median_s = baseline_timing["stats"]["median_s"]
    return stats.systematic(baseline_timing["mode"], median_s, per_call_s)


def control_block(measurement: dict, baseline_timing: dict) -> dict | None:
    """The case's `aa_control` (runner.measurement.aa_control.document_block) from the worker's
    measurement, or None where it has no control (or too few of its samples to judge)."""
    control = measurement.get("control")
    timing = measurement["impls"].get(control["name"]) if control else None
    if not timing or not timing.get("loads"):
        return None
    return aa_control.document_block(
        baseline_timing["samples_s"],
        timing["samples_s"],
        timing["loads"],
        control["per_side_loads"],
    )


def case_systematic(case_doc: dict, baseline_timing: dict) -> tuple[float, str]:
    """The systematic term of the case's gaps and where it came from: its A/A control's, or,
    without one, the documented defaults (stats.systematic)."""
    if case_doc.get("aa_control"):
        return case_doc["aa_control"]["systematic"], "control"
    return systematic_of(baseline_timing), "default"


def gap_block(
    baseline_samples: list[float],
    candidate_samples: list[float],
    stable: bool,
    systematic: float = stats.INSTANCE_SD,
    source: str = "default",
) -> dict:
    g = stats.gap(baseline_samples, candidate_samples, systematic=systematic)
    return {
        "ratio_of_medians": g["ratio_of_medians"],
        "median_of_round_ratios": g["median_of_round_ratios"],
        "ci_low": g["ci_low"],
        "ci_high": g["ci_high"],
        "confidence": g["confidence"],
        "resamples": g["resamples"],
        "rounds": g["rounds"],
        "systematic": g["systematic"],
        "systematic_source": source,
        "stable": stable,
        **{k: g[k] for k in ("bootstrap", "block_rounds", "lag1_autocorrelation") if k in g},
    }


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
        for key in ("load_s", "ptx", "check", "integrity"):
            if key in raw:
                impl[key] = raw[key]
    measurement = record.get("measurement")
    if measurement and case_doc["status"] == "ok":
        baseline = case_doc["baseline"]
        hidden = (measurement.get("control") or {}).get("name")
        for name, timing in measurement["impls"].items():
            if name == hidden:  # the A/A control: its own block below, never a row
                continue
            impl = case_doc["implementations"][name]
            why = case_doc.get("settings", {}).get("timer_reason")
            impl["timing"] = timing_block({**timing, "timer_reason": why}, measurement)
            impl["throughput"] = throughput(
                geometry.bytes,
                geometry.flops,
                impl["timing"]["stats"]["median_s"],
                peaks,
                flop_dtype,
            )
        for impl in case_doc["implementations"].values():
            if "throughput" not in impl:
                continue
            bound = rate_bound(impl["throughput"], peaks, working_set_bytes, split)
            if bound is not None:
                impl["throughput"]["bound"] = bound
        impossible_rows = {
            name: why
            for name, impl in case_doc["implementations"].items()
            if "throughput" in impl
            and (why := impossible(impl["throughput"], peaks, working_set_bytes, split))
        }
        dependent_rows = {
            name: dependence(i["integrity"])
            for name, i in case_doc["implementations"].items()
            if i.get("integrity", {}).get("output_dependent")
        }
        for name, i in case_doc["implementations"].items():
            if i.get("timing", {}).get("problems"):
                dependent_rows.setdefault(name, "; ".join(i["timing"]["problems"][:2]))
        found = [f"{name}: {why}" for name, why in impossible_rows.items()]
        dependent = [f"{name}: {why}" for name, why in dependent_rows.items()]
        if found or dependent:  # the samples stay in the document; those rows get no gap
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
        # A flagged row loses its gap; the others keep theirs, unless the baseline they are
        # divided by is itself flagged.
        flagged = set(impossible_rows) | set(dependent_rows)
        base_timing = case_doc["implementations"][baseline]["timing"]
        aa = control_block(measurement, base_timing)
        if aa is not None:
            case_doc["aa_control"] = aa
        systematic, source = case_systematic(case_doc, base_timing)
        for name, impl in case_doc["implementations"].items():
            if (
                impl["role"] == "candidate"
                and "timing" in impl
                and (name in flagged or baseline in flagged)
            ):
                culprit = name if name in flagged else baseline
                why = impossible_rows.get(culprit) or dependent_rows.get(culprit)
                whose = name if culprit == name else f"its baseline {baseline}"
                impl["gap"] = None
                impl["gap_note"] = f"no gap: the timing of {whose} cannot be trusted: {why}"
            elif impl["role"] == "candidate" and "timing" in impl:
                checked = impl.get("check", {}).get("status") == "passed"
                if not checked:
                    impl["gap"] = None
                    impl["gap_note"] = "not checked: no gap is given for an unchecked result"
                    continue
                stable = impl["timing"]["stats"]["stable"] and base_timing["stats"]["stable"]
                impl["gap"] = gap_block(
                    base_timing["samples_s"],
                    impl["timing"]["samples_s"],
                    stable,
                    systematic,
                    source,
                )
        pairs = pair_blocks(case_doc)
        if pairs:
            case_doc["pairs"] = pairs
        case_doc["timing_wall_s"] = measurement["wall_s"]
        case_doc["round_orders"] = measurement["orders"][:2]
        precision = measurement.get("precision")
        if precision:
            case_doc["precision"] = precision
            if not precision["converged"]:
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
        apply_clocks(case_doc, run_max_clock([case_doc]), measurement.get("clocks_source"))
    case_doc.setdefault("phases_s", {}).update(record.get("phases_s", {}))
    return case_doc


def pair_blocks(case_doc: dict) -> list[dict]:
    """Revisions of one candidate timed together (runner.definition.revisions: `X@base`, `X@head`): each
    later one against the first, {"of", "base", "head"} plus a gap block's keys computed from the
    two variants' paired samples with the first in the baseline's place, so `ratio_of_medians`
    is head / base with the same paired bootstrap interval as a gap. Only pairs where both sides
    were timed and passed the check; `stable` when both sides' statistics are."""
    by_candidate: dict[str, list[str]] = {}
    for name, impl in case_doc["implementations"].items():
        if impl.get("variant_of"):
            by_candidate.setdefault(impl["variant_of"], []).append(name)
    blocks = []
    for of, names in by_candidate.items():
        first = case_doc["implementations"][names[0]]
        for name in names[1:]:
            sides = (first, case_doc["implementations"][name])
            if not all(
                "timing" in s and s.get("check", {}).get("status") == "passed" for s in sides
            ):
                continue
            block = gap_block(
                first["timing"]["samples_s"],
                sides[1]["timing"]["samples_s"],
                all(s["timing"]["stats"]["stable"] for s in sides),
                *case_systematic(case_doc, first["timing"]),
            )
            blocks.append({"of": of, "base": names[0], "head": name, **block})
    return blocks


def summary(cases: list[dict]) -> dict:
    """Counts, and per candidate the headline: its geometric-mean gap over the fixed set of
    cases it is in, with an interval, the cases missing from it and the unstable ones in it
    (protocol.headline)."""
    ok = [c for c in cases if c["status"] == "ok"]
    return {
        "cases": len(cases),
        "ok": len(ok),
        "failed": sum(c["status"] == "failed" for c in cases),
        "skipped": sum(c["status"] == "skipped" for c in cases),
        "unstable": sum(
            any(i.get("gap") and not i["gap"]["stable"] for i in c["implementations"].values())
            for c in ok
        ),
        "geomean_gap": candidate_headlines(cases),
    }


def document(
    suite_block: dict,
    environment: dict,
    options: dict,
    cases: list[dict],
    started: str,
    finished: str | None,
) -> dict:
    return {
        "schema_version": RESULT_SCHEMA_VERSION,
        "kind": "kernelgap.result",
        "complete": finished is not None,
        "suite": suite_block,
        "options": options,
        "environment": environment,
        "started_utc": started,
        "finished_utc": finished,
        "cases": cases,
        "summary": summary(cases),
    }
