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
of (cards_s - 1) - mean of w_c), on sum of (cards_s - 1) degrees of freedom. With fewer than
MIN_CARDS distinct cards in the pool the default DEFAULT_BETWEEN_CARD_SD is used instead, and the
estimate says so. Card effects differ by case (16 of 17 series moved <= 0.38% between two
cards, one 1.13%), so a series seen on two cards or more gets its own estimate, pooled with its
model's by degrees of freedom (per_series_arrays, by_series).
"""

from __future__ import annotations

import functools
import math
import statistics
from dataclasses import dataclass

import numpy as np

from protocol.headline import BETWEEN_CARD_SD, log_standard_error

__all__ = [
    "DEFAULT_BETWEEN_CARD_SD",
    "MIN_CARDS",
    "BetweenCards",
    "by_model",
    "card_of",
    "estimate",
    "estimate_arrays",
    "from_store",
    "log_standard_errors",
    "per_series_arrays",
    "same_card",
    "sd_for",
    "widen",
]

DEFAULT_BETWEEN_CARD_SD = BETWEEN_CARD_SD
"""Relative SD of a gap between two cards of one model, until the history has MIN_CARDS cards
(protocol.headline.BETWEEN_CARD_SD: three H200 rentals, 2 degrees of freedom)."""

DEFAULT_DOF = 2  # the default's degrees of freedom (three cards)

MIN_CARDS = 3
"""Distinct cards (UUIDs) the history must hold, over the series pooled, before its estimate
replaces the default: two cards give one degree of freedom, too few to trust."""


@dataclass(frozen=True)
class BetweenCards:
    """The between-card SD of ln gap used, where it came from, and what it rests on."""

    sd: float
    source: str  # "history", "default" or "case" (a series' own, pooled with its model's)
    cards: int  # distinct cards in the pooled series
    series: int  # series with points on two cards or more
    dof: int = DEFAULT_DOF  # degrees of freedom the SD rests on


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
    kept = [
        (sid, uuid, gap)
        for sid, uuid, gap in points
        if uuid and gap and (gap.get("ratio_of_medians") or 0) > 0
    ]
    return estimate_arrays(
        np.array([sid for sid, _, _ in kept], dtype=object),
        np.array([uuid for _, uuid, _ in kept], dtype=object),
        np.log([gap["ratio_of_medians"] for _, _, gap in kept]),
        np.array([log_standard_error(gap) for _, _, gap in kept], dtype=np.float64),
        min_cards,
    )


def estimate_arrays(
    series: np.ndarray,
    uuid: np.ndarray,
    log_gap: np.ndarray,
    log_se: np.ndarray,
    min_cards: int = MIN_CARDS,
) -> BetweenCards:
    """estimate() over parallel arrays, one entry per point with a card and a gap: its series
    (any hashable labels), card UUID, ln gap and the standard error of ln gap its interval
    implies. Grouped with numpy, so a history of 800,000 points takes a fraction of a second
    (the dashboard estimates it on every build)."""
    if len(series) == 0:
        return BetweenCards(DEFAULT_BETWEEN_CARD_SD, "default", 0, 0)
    s_code, c_code = _codes(series), _codes(uuid)
    n_cards = int(c_code.max()) + 1
    # one group per (series, card)
    pairs, group, count = np.unique(
        s_code * n_cards + c_code, return_inverse=True, return_counts=True
    )
    group = group.ravel()
    mean = np.bincount(group, weights=log_gap) / count
    spread = np.bincount(group, weights=(log_gap - mean[group]) ** 2)
    own_se2 = np.bincount(group, weights=log_se**2)  # a one-point group: its interval's SE^2
    within = np.where(count > 1, spread / np.maximum(count - 1, 1) / count, own_se2)
    pair_series, pair_card = pairs // n_cards, pairs % n_cards
    cards_per_series = np.bincount(pair_series)
    used = cards_per_series[pair_series] >= 2  # the groups of series seen on two cards or more
    if not used.any():
        return BetweenCards(DEFAULT_BETWEEN_CARD_SD, "default", 0, 0)
    grand = np.bincount(pair_series[used], weights=mean[used], minlength=len(cards_per_series))
    grand /= np.maximum(cards_per_series, 1)
    between = float(np.sum((mean[used] - grand[pair_series[used]]) ** 2))
    series_used = int(np.count_nonzero(cards_per_series >= 2))
    dof = int(used.sum()) - series_used
    cards = len(np.unique(pair_card[used]))
    if cards < min_cards or dof == 0:
        return BetweenCards(DEFAULT_BETWEEN_CARD_SD, "default", cards, series_used)
    variance = max(0.0, between / dof - float(np.mean(within[used])))
    return BetweenCards(math.sqrt(variance), "history", cards, series_used, dof)


def per_series_arrays(
    series: np.ndarray, uuid: np.ndarray, log_gap: np.ndarray, log_se: np.ndarray
) -> dict:
    """{series label: BetweenCards} for every series seen on two cards or more: its own
    one-way estimate (cards - 1 degrees of freedom) pooled with the model's (estimate_arrays
    over the same arrays) weighted as DEFAULT_DOF degrees of freedom, sd^2 = (df_s sd_s^2 +
    2 sd_m^2) / (df_s + 2): card effects differ by case, so the model's figure is a weak prior
    for one case, not 50 degrees of freedom of it; a case whose cards differ more than the
    model's widens its own series."""
    pooled = estimate_arrays(series, uuid, log_gap, log_se)
    out = {}
    for label in np.unique(series) if len(series) else []:
        own = series == label
        cards = _codes(uuid[own])
        if cards.max(initial=-1) < 1:
            continue
        count = np.bincount(cards)
        mean = np.bincount(cards, weights=log_gap[own]) / count
        spread = np.bincount(cards, weights=(log_gap[own] - mean[cards]) ** 2)
        own_se2 = np.bincount(cards, weights=log_se[own] ** 2)
        within = np.where(count > 1, spread / np.maximum(count - 1, 1) / count, own_se2)
        df = len(mean) - 1
        variance = max(0.0, float(np.var(mean, ddof=1)) - float(np.mean(within)))
        prior = min(pooled.dof, DEFAULT_DOF)
        shrunk = (df * variance + prior * pooled.sd**2) / (df + prior)
        out[label] = BetweenCards(math.sqrt(shrunk), "case", len(mean), 1, df + prior)
    return out


def _codes(labels: np.ndarray) -> np.ndarray:
    """0..k-1 for the k distinct labels: numpy's own for numbers, a dict for strings (sorting
    an object array of 400,000 UUIDs costs a second; hashing them, a few tens of ms)."""
    if labels.dtype != object:
        return np.unique(labels, return_inverse=True)[1].ravel()
    values = labels.tolist()
    index = {v: k for k, v in enumerate(dict.fromkeys(values))}  # in order of first appearance
    return np.fromiter(map(index.__getitem__, values), dtype=np.int64, count=len(values))


def from_store(store, gpu: str | None = None) -> BetweenCards:
    """estimate() over the candidate series of a history on GPU model `gpu` (a series key's
    spelling, harness.history.series.gpu_model), or of every model when None."""
    rows = store.card_gaps(gpu)
    if not rows:
        return estimate_arrays(*(np.array([]),) * 4)
    return estimate_arrays(*_arrays(rows))


def _arrays(rows: list[tuple]) -> tuple[np.ndarray, ...]:
    """(series, card UUID, ln gap, its standard error) from the store's card_gaps rows."""
    series, uuid, gap, low, high, confidence = zip(*rows, strict=True)
    as_float = functools.partial(np.array, dtype=np.float64)
    return (
        np.array(series),
        np.array(uuid, dtype=object),
        np.log(as_float(gap)),
        log_standard_errors(
            as_float(low),
            as_float(high),
            as_float([0.95 if c is None else c for c in confidence]),
        ),
    )


def log_standard_errors(ci_low, ci_high, confidence=0.95) -> np.ndarray:
    """protocol.headline.log_standard_error over arrays: the standard error of ln gap each
    interval implies at its confidence (one for all, or one each), 0 where an interval is
    missing (NaN) or degenerate."""
    ci_low, ci_high = np.asarray(ci_low, dtype=np.float64), np.asarray(ci_high, dtype=np.float64)
    ok = (ci_low > 0) & (ci_high >= ci_low)
    low, high = np.where(ok, ci_low, 1.0), np.where(ok, ci_high, 1.0)
    levels = np.broadcast_to(np.asarray(confidence, dtype=np.float64), ci_low.shape)
    z = np.empty(ci_low.shape)
    for level in np.unique(levels):
        z[levels == level] = statistics.NormalDist().inv_cdf((1 + level) / 2)
    return np.where(ok, (np.log(high) - np.log(low)) / (2 * z), 0.0)


def by_model(store) -> dict[str, float]:
    """{GPU model: its between-card SD} for every model of the history (from_store)."""
    return {
        gpu: from_store(store, gpu).sd for gpu in sorted({s["gpu"] for s in store.list_series()})
    }


def by_series(store) -> dict[str, float]:
    """{series id: its own between-card SD} for every series of the history seen on two cards
    or more (per_series_arrays, pooled with its GPU model's); sd_for takes it before the
    model's."""
    found: dict[str, float] = {}
    ids = {rowid: sid for sid, rowid in store._series_rowids().items()}
    for gpu in sorted({s["gpu"] for s in store.list_series()}):
        rows = store.card_gaps(gpu)
        if not rows:
            continue
        own = per_series_arrays(*_arrays(rows))
        found |= {ids[int(k)]: est.sd for k, est in own.items() if int(k) in ids}
    return found


def sd_for(
    between: float | dict[str, float], gpu: str | None, series_id: str | None = None
) -> float:
    """The SD for a series on GPU model `gpu`: `between` itself, or its entry for the series
    (by_series: one seen on two cards or more), else for the model (the default where the model
    has none)."""
    if isinstance(between, dict):
        if series_id is not None and series_id in between:
            return between[series_id]
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
