"""What a gap carries from the card it ran on: the between-card term of a GPU model.

Two H200s are not the same GPU: the same kernels, suite and compiler give gaps that differ
from card to card by more than either run's interval (issue 37: warpforth's geomean read
1.2895, 1.3028 and 1.3156 on three rentals). A run's interval cannot see that, so a comparison
of two documents from different cards (compare, regressions, changes) widens its interval by
the term; two documents from the same card (a base/head pair in one rental) do not.

The term is a relative standard deviation of ln(gap) between cards, estimated from the history:
points of the same series (so the same suite, case, compiler sources and GPU model) on different
card UUIDs (harness.history.store, points.gpu_uuid). Estimator (one-way random effects, pooled over
series, in log space): per series, each card's mean ln gap m_c and its own variance w_c (the
spread of its points over its count when it has several, else its interval's squared standard
error); then sd_between^2 = max(0, sum over series of sum_c (m_c - mean_s)^2 / sum over series
of (cards_s - 1) - mean of w_c). With fewer than MIN_CARDS distinct cards in the pool the
default DEFAULT_BETWEEN_CARD_SD is used instead, and the estimate says so.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from dataclasses import dataclass

from protocol.headline import log_standard_error

__all__ = [
    "DEFAULT_BETWEEN_CARD_SD",
    "MIN_CARDS",
    "BetweenCards",
    "by_model",
    "card_of",
    "estimate",
    "from_store",
    "same_card",
    "sd_for",
    "widen",
]

DEFAULT_BETWEEN_CARD_SD = 0.007
"""Relative SD of a gap between two cards of one model, until the history has MIN_CARDS cards.
From issue 37's three H200 rentals: the geomeans 1.2895, 1.3028 and 1.3156 spread by 1.0% (SD
of ln); each is one run's figure, with its own run-to-run noise of about 0.7% (SD), so the
cards' own share is about sqrt(1.0^2 - 0.7^2) ~ 0.7%."""

MIN_CARDS = 3
"""Distinct cards (UUIDs) the history must hold, over the series pooled, before its estimate
replaces the default: two cards give one degree of freedom, too few to trust."""


@dataclass(frozen=True)
class BetweenCards:
    """The between-card SD of ln gap used, where it came from, and what it rests on."""

    sd: float
    source: str  # "history" or "default"
    cards: int  # distinct cards in the pooled series
    series: int  # series with points on two cards or more


def card_of(document: dict, case: dict | None = None) -> str | None:
    """The UUID of the card a case (or, without one, the run) ran on; None when unrecorded."""
    own = ((case or {}).get("device") or {}).get("uuid")
    return own or ((document.get("environment") or {}).get("device") or {}).get("uuid")


def same_card(base_doc: dict, head_doc: dict, base_case=None, head_case=None) -> bool:
    """Whether two documents (cases) ran on one card: both UUIDs known and equal. An unknown
    UUID counts as another card, the cautious side."""
    a, b = card_of(base_doc, base_case), card_of(head_doc, head_case)
    return a is not None and a == b


def estimate(
    points: list[tuple[str, str | None, dict]], min_cards: int = MIN_CARDS
) -> BetweenCards:
    """The between-card SD from (series id, card UUID, gap block) points; points without a
    UUID or a gap are left out (see the module docstring for the estimator). Under
    `min_cards` distinct cards, the default (a lower `min_cards` shows the raw figure of
    fewer cards: tools/perf/two_boxes.py)."""
    by_series: dict[str, dict[str, list[tuple[float, float]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for sid, uuid, gap in points:
        if uuid and gap and gap.get("ratio_of_medians", 0) > 0:
            by_series[sid][uuid].append(
                (math.log(gap["ratio_of_medians"]), log_standard_error(gap))
            )
    between, dof, within, cards, used = 0.0, 0, [], set(), 0
    for per_card in by_series.values():
        if len(per_card) < 2:
            continue
        used += 1
        cards.update(per_card)
        means = []
        for values in per_card.values():
            logs = [v for v, _ in values]
            mean = math.fsum(logs) / len(logs)
            means.append(mean)
            if len(logs) > 1:
                within.append(statistics.variance(logs) / len(logs))
            else:
                within.append(values[0][1] ** 2)
        grand = math.fsum(means) / len(means)
        between += math.fsum((m - grand) ** 2 for m in means)
        dof += len(means) - 1
    if len(cards) < min_cards or dof == 0:
        return BetweenCards(DEFAULT_BETWEEN_CARD_SD, "default", len(cards), used)
    variance = max(0.0, between / dof - math.fsum(within) / len(within))
    return BetweenCards(math.sqrt(variance), "history", len(cards), used)


def from_store(store, gpu: str | None = None) -> BetweenCards:
    """estimate() over the candidate series of a history on GPU model `gpu` (a series key's
    spelling, harness.history.series.gpu_model), or of every model when None."""
    points = []
    for info in store.list_series():
        if info["role"] != "candidate" or (gpu is not None and info["gpu"] != gpu):
            continue
        for p in store.points(info["series_id"]):
            if p.get("gap") is None:
                continue
            gap = {
                "ratio_of_medians": p["gap"],
                "ci_low": p["gap_ci_low"],
                "ci_high": p["gap_ci_high"],
            }
            points.append((info["series_id"], p.get("gpu_uuid"), gap))
    return estimate(points)


def by_model(store) -> dict[str, float]:
    """{GPU model: its between-card SD} for every model of the history (from_store)."""
    return {
        gpu: from_store(store, gpu).sd for gpu in sorted({s["gpu"] for s in store.list_series()})
    }


def sd_for(between: float | dict[str, float], gpu: str | None) -> float:
    """The SD for a series on GPU model `gpu`: `between` itself, or its entry for the model
    (the default where the model has none)."""
    if isinstance(between, dict):
        return between.get(gpu, DEFAULT_BETWEEN_CARD_SD)
    return between


def widen(ratio: float, low: float, high: float, sd: float, confidence: float = 0.95):
    """(low, high) of a ratio of two gaps from different cards, each side's distance from the
    ratio widened in quadrature, in log space, by z x sqrt(2) x sd (each document carries its
    own card's term)."""
    if sd <= 0:
        return low, high
    extra = statistics.NormalDist().inv_cdf((1 + confidence) / 2) * math.sqrt(2) * sd
    down = math.hypot(math.log(ratio / low) if low > 0 else 0.0, extra)
    up = math.hypot(math.log(high / ratio) if high > 0 else 0.0, extra)
    return ratio * math.exp(-down), ratio * math.exp(up)
