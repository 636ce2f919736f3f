"""The one place that turns measurements into a result document, for both front ends.

`runner bench` (runner.execution.result, from a worker's raw record) and `runner.bench` (the
Python API, runner.bench.report, from its measurement objects) fill their cases with these
blocks, section by section below: a row's timing block and rates, its gap against the baseline,
the clocks' verdict on a case, a swept case's points and curve, and the run's document with its
summary, written whole or not at all. Everything is
computed from raw samples by runner.measurement's pure functions, so a document can always be
recomputed from itself; what differs between the front ends stays in them.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from protocol import statistics
from protocol.points import NEAR_PARITY, curve, point_block, sweep_block
from protocol.validation import point_counts, summary
from protocol.version import RESULT_SCHEMA_VERSION
from runner.measurement import aa_control, stats
from runner.measurement.environment import judge_rate
from runner.measurement.timing import clocks, cupti

__all__ = [
    "FLOPS_MARGIN",
    "NEAR_PARITY",
    "apply_clocks",
    "candidate_gaps",
    "case_systematic",
    "control_block",
    "curve",
    "document",
    "gap_block",
    "impossible",
    "pair_blocks",
    "point_block",
    "point_counts",
    "rate_bound",
    "run_max_clock",
    "summary",
    "sweep_block",
    "systematic_of",
    "throughput",
    "timing_block",
    "write_atomic",
]


# -- timing ------------------------------------------------------------------------------------
# A timed row's `timing` block: its raw samples, how they were taken, and their statistics.


def timing_block(timing: dict, measurement: dict) -> dict:
    """The block of one row from its raw timing ({samples_s, method, batch, calibration_s, timer,
    timer_reason, ...}) and the case's measurement settings ({mode, warmup})."""
    samples = timing["samples_s"]
    block = {
        "mode": measurement["mode"],
        "method": timing["method"],
        "timer": timing.get("timer", "events"),
        "batch": timing["batch"],
        "warmup": measurement["warmup"],
        "calibration_s": timing["calibration_s"],
        "samples_s": samples,
        "stats": statistics.summarize(samples),
    }
    if timing.get("timer_reason"):  # why this timer (runner.measurement.timing.cupti.choose_timer)
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


# -- rates -------------------------------------------------------------------------------------
# A timed row's rates: bytes and FLOPs a second at its median, their fraction of the device's
# peaks, and whether they are physically possible on it (the rate ceiling).


# Margin past the nominal FLOP/s (a datasheet figure at the clock NVML reported) before a result
# is called impossible; the bandwidth ceiling and its margin are runner.measurement.environment's.
FLOPS_MARGIN = 1.05


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


def rate_bound(
    rates: dict,
    peaks: dict,
    working_set_bytes: float | None,
    split: tuple[float, float] | None = None,
    footprint_known: bool = True,
) -> dict | None:
    """The `throughput.bound` block (runner.measurement.environment.judge_rate) of a row with these
    rates; `split` is (bytes read, bytes written) a call where known. None when there is nothing
    to judge, or when the working set fits in the L2 (no measured L2 figure to judge it by).
    `footprint_known`: whether the working set is the row's distinct footprint (a suite case's
    buffers) or only its declared traffic (runner.bench: an in-place op counts its buffer twice)."""
    l2 = peaks.get("l2_bytes")
    if working_set_bytes is not None and l2 and working_set_bytes <= l2:
        return None
    if not rates.get("bytes") or not rates.get("bytes_per_s"):
        return None
    read, write = split if split is not None else (None, None)
    median_s = rates["bytes"] / rates["bytes_per_s"]
    footprint = working_set_bytes if footprint_known else None
    return judge_rate(rates["bytes"], median_s, peaks, read, write, footprint)


def impossible(
    rates: dict,
    peaks: dict,
    working_set_bytes: float | None,
    split: tuple[float, float] | None = None,
    footprint_known: bool = True,
) -> str | None:
    """Why a result is physically impossible on this device, naming both figures, or None: its
    memory rate beyond the L2 above the ceiling (rate_bound), or its FLOP rate above nominal."""
    bound = rate_bound(rates, peaks, working_set_bytes, split, footprint_known)
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


# -- gaps --------------------------------------------------------------------------------------
# Gaps: each timed candidate against the baseline (or a note saying why it gets none), the
# systematic term that widens their intervals, and revisions of one candidate paired together.


def gap_block(
    baseline_samples: list[float],
    candidate_samples: list[float],
    stable: bool,
    systematic: float = stats.INSTANCE_SD,
    source: str = "default",
) -> dict:
    """A `gap` block (statistics.gap: ratio of medians, paired bootstrap interval) of the two rows."""
    g = statistics.gap(baseline_samples, candidate_samples, systematic=systematic)
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


def candidate_gaps(
    case_doc: dict,
    no_gap: Callable[[str, dict], str | None],
    systematic: Callable[[str], tuple[float, str]],
) -> None:
    """Give every timed row but the baseline its gap against the baseline, in place; a row for
    which `no_gap(name, row)` gives a reason gets `gap` None and that reason as `gap_note`.
    `systematic(name)` is (the systematic term, its source) of that row's gap."""
    baseline = case_doc["baseline"]
    base = case_doc["implementations"][baseline]["timing"]
    for name, impl in case_doc["implementations"].items():
        if name == baseline or "timing" not in impl:
            continue
        note = no_gap(name, impl)
        if note:
            impl["gap"], impl["gap_note"] = None, note
            continue
        stable = impl["timing"]["stats"]["stable"] and base["stats"]["stable"]
        impl["gap"] = gap_block(
            base["samples_s"], impl["timing"]["samples_s"], stable, *systematic(name)
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
        control.get("loads_per_group", 1),
    )


def case_systematic(case_doc: dict, baseline_timing: dict) -> tuple[float, str]:
    """The systematic term of the case's gaps and where it came from: its A/A control's, or,
    without one, the documented defaults (stats.systematic)."""
    if case_doc.get("aa_control"):
        return case_doc["aa_control"]["systematic"], "control"
    return systematic_of(baseline_timing), "default"


def pair_blocks(case_doc: dict) -> list[dict]:
    """Revisions of one candidate timed together (runner.definition.bundle: `X@base`, `X@head`): each
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


# -- clocks ------------------------------------------------------------------------------------
# The clocks' verdict on a case: samples flagged against the run's highest SM clock, and the
# case's gaps and pairs made unstable when most of its samples are.


def apply_clocks(
    case_doc: dict, run_max: int | None, source: str | None = None, baseline: str | None = None
) -> None:
    """Flag the case's samples against the run's highest SM clock (runner.measurement.timing.clocks) and,
    when they are mostly flagged, make its gaps and pairs unstable, saying why. Idempotent: run
    again with the final maximum once the whole run is known. A sweep point's block names no
    baseline of its own: its case's comes as `baseline`."""
    timings = {
        n: i["timing"]
        for n, i in case_doc["implementations"].items()
        if "clocks" in i.get("timing", {})
    }
    if not timings:
        if source and "timing_wall_s" in case_doc:
            case_doc["clocks"] = {"source": source}
        return
    report = clocks.clock_report(timings, run_max)
    for timing in timings.values():
        timing["clock_flags"] = clocks.sample_flags(
            timing["clocks"], report["usual_sm_mhz"], report["own_state"]
        )
    case_doc["clocks"] = {
        "source": source or case_doc.get("clocks", {}).get("source", "nvml"),
        **report,
    }
    _restate_stability(case_doc, baseline or case_doc["baseline"], report["unstable"])
    notes = [n for n in case_doc.get("notes", []) if not n.startswith("clocks: ")]
    if report.get("note"):
        notes.append("clocks: " + report["note"])
    if notes:
        case_doc["notes"] = notes
    else:
        case_doc.pop("notes", None)


def _restate_stability(case_doc: dict, baseline: str, unstable: bool) -> None:
    """Gaps and pairs are stable when both sides' statistics are and the clocks held."""
    impls = case_doc["implementations"]
    base = impls.get(baseline, {}).get("timing")
    for impl in impls.values():
        if impl.get("gap") and base:
            impl["gap"]["stable"] = (
                impl["timing"]["stats"]["stable"] and base["stats"]["stable"] and not unstable
            )
    for pair in case_doc.get("pairs", []):
        sides = (impls[pair["base"]]["timing"], impls[pair["head"]]["timing"])
        pair["stable"] = all(t["stats"]["stable"] for t in sides) and not unstable


def run_max_clock(case_docs: list[dict]) -> int | None:
    """The highest SM clock read around any sample of these cases."""
    return clocks.run_max_mhz(
        i["timing"] for c in case_docs for i in c["implementations"].values() if "timing" in i
    )


# -- points ------------------------------------------------------------------------------------
# A swept case's block (its headline point's measurements as the case's own, every point in
# `points`, the curve of each candidate's gap) is assembled by protocol.points, which the harness
# also uses to merge a sweep dealt point by point over a cluster.


# -- run ---------------------------------------------------------------------------------------
# The run's document: its cases under one envelope, with the summary and headline gaps (the
# summary is protocol.validation', which the harness also uses to merge a cluster's cases).


def document(
    suite_block: dict,
    environment: dict,
    options: dict,
    cases: list[dict],
    started: str,
    finished: str | None,
) -> dict:
    """The result document (schemas/result.schema.json); `finished` None while it is partial."""
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


# -- writing -----------------------------------------------------------------------------------
# A document written to a file whole or not at all, so a crash never leaves half of one.


def write_atomic(path: Path, data: bytes) -> None:
    """`data` under `path`, whole or not at all: a temporary file in the same folder, flushed to
    disk, then renamed over `path`. On any failure (a full disk) the temporary file is removed
    and the error raised; an earlier document under `path` stays as it was."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
