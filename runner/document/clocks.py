"""The clocks' verdict on a case: samples flagged against the run's highest SM clock, and the
case's gaps and pairs made unstable when most of its samples are."""

from __future__ import annotations

from runner.measurement.timing import clocks

__all__ = ["apply_clocks", "run_max_clock"]


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
    for timing in timings.values():
        timing["clock_flags"] = clocks.sample_flags(timing["clocks"], run_max)
    report = clocks.clock_report(timings, run_max)
    case_doc["clocks"] = {
        "source": source or case_doc.get("clocks", {}).get("source", "nvml"),
        **report,
    }
    _restate_stability(case_doc, baseline or case_doc["baseline"], report["unstable"])
    notes = [n for n in case_doc.get("notes", []) if not n.startswith("clocks: ")]
    if report["unstable"]:
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
