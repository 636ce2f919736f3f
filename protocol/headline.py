"""The headline of a result document: each candidate's geometric-mean gap over a fixed case set.

The set is every case of the document in which the candidate is an implementation, whatever
happened to it: a case whose gap is unstable stays in (and is listed as unstable), a case that
has no gap (failed, skipped, not checked) is listed as missing and the headline says "over k of
n cases". A swept case counts at its headline point only (its other points' rows, which
protocol.points makes, are left out). So a candidate's trend cannot jump because power throttling made one case noisy in
one run. The interval comes from the cases' own intervals, in log space: each case's standard
error is its interval's log half-width over z, the cases are independent (each has its own
module, buffers and rounds), so var(mean ln gap) = sum of se^2 / k^2.

Each headline carries two intervals and says what each covers: `ci_low`/`ci_high` this run on
this card (its rounds and placement: `covers`), and `across_cards` the same widened in
quadrature, in log space, by the between-card SD of a headline on this GPU model
(BETWEEN_CARD_SD, a stated default; the harness passes the history's estimate where it has one).
Two cards' headlines are two draws of that term: their run intervals may well be disjoint.

Shared by the runner, which writes summary.geomean_gap, and the harness, which recomputes it
for a partial document and for documents written before the rule (stdlib only).
"""

from __future__ import annotations

import math
import statistics

__all__ = [
    "BETWEEN_CARD_SD",
    "COVERS_CARDS",
    "COVERS_RUN",
    "HEADLINE_CONFIDENCE",
    "candidate_headlines",
    "log_standard_error",
]

HEADLINE_CONFIDENCE = 0.95

BETWEEN_CARD_SD = 0.007
"""Relative SD of a headline (or a gap) between two cards of one GPU model, where the history
has no estimate: from three H200 rentals' warpforth geomeans (1.2895, 1.3028, 1.3156: SD of ln
1.0%, less each run's own 0.7%); resting on 2 degrees of freedom, the true figure could be
0.5%-6.3% (docs/method/intervals-and-headline.md). harness.history.cards estimates it per case."""

COVERS_RUN = "this run on this card: its rounds and its loads' placement"
COVERS_CARDS = "a run on any card of this GPU model: the run's interval and the between-card SD"


def _z(confidence: float) -> float:
    return statistics.NormalDist().inv_cdf((1 + confidence) / 2)


def log_standard_error(gap: dict) -> float:
    """The standard error of ln(gap) that a gap's interval implies: the half-width of
    [ln ci_low, ln ci_high] over the normal quantile of its confidence (0 for a degenerate
    interval)."""
    low, high = gap.get("ci_low"), gap.get("ci_high")
    if not (low and high and low > 0 and high >= low):
        return 0.0
    return (math.log(high) - math.log(low)) / (2 * _z(gap.get("confidence", 0.95)))


def candidate_headlines(
    cases: list[dict],
    confidence: float = HEADLINE_CONFIDENCE,
    between_cards: tuple[float, str] = (BETWEEN_CARD_SD, "default"),
) -> dict:
    """{candidate: headline} over `cases` (result documents' case objects). A headline:
    value (geometric mean of ratio_of_medians over the cases with a gap), cases (k, how many),
    of (n, the fixed set's size), ci_low and ci_high (at `confidence`: this run on this card,
    `covers`), across_cards (ci_low, ci_high widened by `between_cards`' SD, its sd, source and
    covers), confidence, missing and unstable (case ids), remeasured (ids of cases measured a
    second time, run_suite). A candidate with no gap in any case has no headline."""
    found: dict[str, dict] = {}
    for case in cases:
        if "point_of" in case:  # a sweep's other points: the headline is one size per case
            continue
        for name, impl in case.get("implementations", {}).items():
            if impl.get("role") == "baseline":
                continue
            entry = found.setdefault(
                name, {"logs": [], "se": [], "of": 0, "missing": [], "unstable": [], "again": []}
            )
            entry["of"] += 1
            if case.get("remeasured"):
                entry["again"].append(case.get("id", "?"))
            gap = impl.get("gap")
            if case.get("status") != "ok" or not gap:
                entry["missing"].append(case.get("id", "?"))
                continue
            entry["logs"].append(math.log(gap["ratio_of_medians"]))
            entry["se"].append(log_standard_error(gap))
            if not gap.get("stable", True):
                entry["unstable"].append(case.get("id", "?"))
    z = _z(confidence)
    headlines = {}
    for name, entry in found.items():
        k = len(entry["logs"])
        if not k:
            continue
        mean = math.fsum(entry["logs"]) / k
        half = z * math.sqrt(math.fsum(se * se for se in entry["se"])) / k
        sd, source = between_cards
        across = math.hypot(half, z * sd)
        headlines[name] = {
            "value": math.exp(mean),
            "cases": k,
            "of": entry["of"],
            "ci_low": math.exp(mean - half),
            "ci_high": math.exp(mean + half),
            "covers": COVERS_RUN,
            "across_cards": {
                "ci_low": math.exp(mean - across),
                "ci_high": math.exp(mean + across),
                "between_card_sd": sd,
                "source": source,
                "covers": COVERS_CARDS,
            },
            "confidence": confidence,
            "missing": entry["missing"],
            "unstable": entry["unstable"],
            "remeasured": entry["again"],
        }
    return headlines
