"""Gaps: each timed candidate against the baseline (or a note saying why it gets none), the
systematic term that widens their intervals, and revisions of one candidate paired together."""

from __future__ import annotations

from collections.abc import Callable

from runner.measurement import aa_control, stats

__all__ = [
    "candidate_gaps",
    "case_systematic",
    "control_block",
    "gap_block",
    "pair_blocks",
    "systematic_of",
]


def gap_block(
    baseline_samples: list[float],
    candidate_samples: list[float],
    stable: bool,
    systematic: float = stats.INSTANCE_SD,
    source: str = "default",
) -> dict:
    """A `gap` block (stats.gap: ratio of medians, paired bootstrap interval) of the two rows."""
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
