"""Regression rules over history series: pure functions, no database.

Three separate pieces (as in asv): change detection (`pooled_change()`: the median of the
newest k runs against the median of the stable runs before them, k = 1 and 3..pool, so a step
is seen by pooling the runs after it, as the change-point search does), significance
(`threshold()`: the change a look must exceed, from the history's sigma-scaled spread, 1.4826 x
MAD, at a stated false-alarm rate) and policy (`Policy`); the verdict is
protocol.statistics.decide's. docs/method/alerts.md has the calibration.
`review()` applies them to every current series and its metrics:
- a candidate's gap (ratio of medians against its baseline) and its absolute median time;
- a baseline's absolute median time. A baseline's source is part of every key, so when its time
  moves on an unchanged series the code did not change: the machine did (clocks, driver, thermals,
  another tenant), and the alert says so.
Unstable newest points are shown (status "unstable") but never alert; points with no value
(a failed case) are shown as "failed".
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, replace

import numpy as np

from harness.history import cards
from protocol import autocorrelation
from protocol import statistics as statistics_core

__all__ = [
    "READ_FIELDS",
    "Change",
    "Finding",
    "Policy",
    "change",
    "current_series",
    "review",
    "review_series",
    "threshold",
]


@dataclass(frozen=True)
class Policy:
    """When a change is an alert: calibrated by a stated false-alarm rate, never a fixed
    multiple of an unscaled MAD.

    window: how many previous stable points are read (the reference and the pooled runs).
    min_change: the smallest relative change ever reported (0.01 = 1%).
    false_alarm: the chance, per run of a series with no step and independent normal noise,
    that some pooled look alerts (Bonferroni over the looks, two-sided).
    pool: the most newest runs pooled (their median) after a candidate step, at least 3.
    at_once: the newest run alone alerts only beyond this many standard errors (sigma-scaled):
    heavy tails (t(3) noise) pass 20 about once in 5,000 runs, where pooled medians tame them.
    min_history: fewer reference points than this and the series is only shown.
    """

    window: int = 100
    min_change: float = 0.01
    false_alarm: float = 0.00025
    pool: int = 10
    at_once: float = 20.0
    min_history: int = 5

    def __post_init__(self):
        for name in ("window", "min_history", "pool"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"Policy.{name} must be an int >= 1 (got {value!r})")
        for name in ("min_change", "at_once"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
                raise ValueError(f"Policy.{name} must be a finite number >= 0 (got {value!r})")
        if not (isinstance(self.false_alarm, int | float) and 0 < self.false_alarm < 0.5):
            raise ValueError(f"Policy.false_alarm must be in (0, 0.5) (got {self.false_alarm!r})")

    def looks(self) -> list[int]:
        """How many newest runs each look pools: the newest alone, and `pool` (a median of
        fewer keeps too much of a heavy tail: of 5 t(3) values, 60 times a normal's rate
        beyond 4.3 standard errors; two looks, a small Bonferroni price)."""
        return sorted({1, self.pool})

    @property
    def mad_factor(self) -> float:
        """The multiple of a look's standard error (sigma-scaled MADs) that alerts: the normal
        quantile of false_alarm / (2 x looks), widened to Student's t on the reference's
        degrees of freedom where they are few (`factor`)."""
        return factor(self, self.window)

    def method(self) -> str:
        """The rule in a sentence, with what it cannot see (for the report and the dashboard)."""
        return (
            f"The median of the newest k runs (k = {', '.join(map(str, self.looks()))}) against the median of the "
            f"stable runs before them (up to {self.window} read); alert when |change| > "
            f"max({self.min_change:.0%}, the look's false-alarm quantile x its standard error "
            f"from 1.4826 x MAD, sigma-scaled, widened for lag-1 correlation), at a stated "
            f"false-alarm rate of {self.false_alarm:g} per run and series; the newest run alone "
            f"only beyond {self.at_once:g} standard errors. It cannot see a step smaller than "
            f"that before {self.looks()[1]} runs follow it, a step of less than about 4 x the noise / sqrt(k) within k "
            "runs, nor a slow drift: the change-point search (harness changes) finds those "
            "over its window."
        )


def factor(policy: Policy, reference: int) -> float:
    """The alerting multiple of a look's standard error: the two-sided normal quantile of
    false_alarm / len(looks) (Bonferroni), as Student's t on 0.37 x `reference` degrees of
    freedom (a MAD's efficiency at the normal: the spread is estimated)."""
    p = 1 - policy.false_alarm / (2 * len(policy.looks()))
    return autocorrelation.student_t_quantile(p, max(0.37 * reference, 2.0))


@dataclass(frozen=True)
class Change:
    """The newest runs against the history before them.

    reference = median(history); relative = median(newest `pooled` runs) / reference - 1;
    spread = 1.4826 x MAD(history) / reference (SIGMA-SCALED); threshold: the change that
    alerts at this look; history: the reference's points.
    """

    newest: float
    reference: float
    relative: float
    spread: float
    history: int
    pooled: int = 1
    threshold: float = 0.0


def change(history: list[float], newest: float) -> Change:
    """Change of `newest` alone against `history` (previous stable values, at least one, > 0)."""
    if not history:
        raise ValueError("change: the history is empty; nothing to compare the newest value with")
    reference = statistics.median(history)
    if not reference > 0:
        raise ValueError(f"change: the history's median is {reference!r}; expected > 0")
    spread = statistics_core.sigma_mad(history) if len(history) > 1 else 0.0
    return Change(newest, reference, newest / reference - 1, spread, len(history))


def standard_error(spread: float, pooled: int, reference: list[float]) -> float:
    """The standard error of median(newest pooled) / median(reference) - 1 for values of
    relative sd `spread`: both medians' variances (protocol.statistics.median_variance),
    each widened for the reference's lag-1 correlation where it is significant
    (protocol.autocorrelation, as a gap's bootstrap does; AR(1): the variance of a mean of k
    correlated points over that of k independent ones)."""
    rho = 0.0
    if len(reference) >= autocorrelation.MIN_ROUNDS:
        r = autocorrelation.lag1_autocorrelation(np.log(np.asarray(reference)))
        if autocorrelation.dependent(r, len(reference)):
            rho = float(autocorrelation.corrected_rho(r, len(reference)))
    k, m = pooled, len(reference)
    inflation_k = _ar1_inflation(k, rho)
    inflation_m = _ar1_inflation(m, rho)
    variance = statistics_core.median_variance(k) * inflation_k
    variance += statistics_core.median_variance(m) * inflation_m
    return spread * math.sqrt(float(variance))


def _ar1_inflation(k: int, rho: float) -> float:
    """Var(mean of k AR(1) points) / Var(mean of k independent ones): 1 + 2 sum (1 - j/k) rho^j."""
    return 1.0 + 2.0 * sum((1 - j / k) * rho**j for j in range(1, k))


def pooled_change(values: list[float], policy: Policy, between_cards: float = 0.0) -> Change | None:
    """The look that says most about `values` (stable, > 0, oldest first, the newest last):
    for k in policy.looks(), the newest k runs' median against the runs before them; the one
    whose |relative| stands highest over its threshold. None with too little history."""
    best = None
    for k in policy.looks():
        history = values[:-k]
        if len(history) < policy.min_history:
            break
        found = change(history, statistics_core.middle(values[-k:]))
        se = standard_error(found.spread, k, history)
        spread = max(factor(policy, len(history)), policy.at_once if k == 1 else 0.0) * se
        if between_cards > 0:
            spread = math.hypot(spread, CARD_Z * math.sqrt(2) * between_cards)
        limit = max(policy.min_change, spread)
        look = replace(found, newest=values[-1], pooled=k, threshold=limit)
        if best is None or abs(look.relative) / limit > abs(best.relative) / best.threshold:
            best = look
    return best


def threshold(found: Change, policy: Policy, between_cards: float = 0.0) -> float:
    """The relative change that alerts for `found` (a pooled_change look, or change() of the
    newest alone against its history): its own threshold where it has one, else the newest
    alone's: max(min_change, at_once or the calibrated multiple of its standard error), that
    widened in quadrature by 1.96 x sqrt(2) x `between_cards` for points from other cards."""
    if found.threshold:
        return found.threshold
    multiple = max(factor(policy, found.history), policy.at_once)
    spread = multiple * found.spread * math.sqrt(1 + math.pi / 2 / found.history)
    if between_cards > 0:
        spread = math.hypot(spread, CARD_Z * math.sqrt(2) * between_cards)
    return max(policy.min_change, spread)


CARD_Z = 1.959963984540054  # the two-sided 95% normal quantile


# metric name -> (point field holding the value, point field saying it is stable)
METRICS = {"gap": ("gap", "gap_stable"), "time": ("median_s", "stable")}
# what the review reads of a point (Store.recent's dicts hold more): a caller that has the
# points as columns already (the dashboard) builds just these
READ_FIELDS = (
    *("run_id", "commit_sha", "started_utc", "median_s", "stable", "gap", "gap_stable"),
    *("gpu_uuid", "error_message", "check_status"),
)


@dataclass(frozen=True)
class Finding:
    """One metric of one series: its newest point against its recent history.

    status: "alert" (|relative| > threshold), "ok", "unstable" (newest point unstable: shown,
    never an alert), "failed" (the newest point has no value), "short" (too little stable
    history). direction: "slower" or "faster" for gap and time alike (both: lower is better).
    """

    series_id: str
    label: str
    case_id: str
    impl: str
    role: str
    metric: str
    status: str
    run_id: str
    commit: str | None
    started_utc: str
    newest: float | None
    reference: float | None = None
    relative: float | None = None
    threshold: float | None = None
    spread: float | None = None
    history: int = 0
    note: str = ""

    @property
    def alert(self) -> bool:
        return self.status == "alert"

    @property
    def direction(self) -> str | None:
        if self.relative is None:
            return None
        return "slower" if self.relative > 0 else "faster"

    def to_dict(self) -> dict:
        return {**asdict(self), "alert": self.alert, "direction": self.direction}


def review_series(
    series: dict, points: list[dict], policy: Policy = Policy(), between_cards: float = 0.0
) -> list[Finding]:
    """Findings for one series (a list_series() row) from its points, oldest first.

    Metrics: "time" for every implementation and "gap" for candidates. The history of a metric
    is the last `policy.window` points before the newest whose value exists and is stable. A gap
    whose newest point ran on another card than one of those (points' gpu_uuid; unknown counts
    as another) has its threshold widened by the between-card SD `between_cards`.
    """
    if not points:
        return []
    metrics = ("gap", "time") if series["role"] == "candidate" else ("time",)
    return [_review_metric(series, points, metric, policy, between_cards) for metric in metrics]


def _review_metric(
    series: dict, points: list[dict], metric: str, policy: Policy, between_cards: float
) -> Finding:
    """review_series()'s finding for one metric of the newest of `points`."""
    newest = points[-1]
    value_field, stable_field = METRICS[metric]
    window = [
        p
        for p in points[:-1]
        if p[value_field] is not None and p[stable_field] and p[value_field] > 0
    ][-policy.window :]
    history = [p[value_field] for p in window]
    card = newest.get("gpu_uuid")
    across = metric == "gap" and any(card is None or p.get("gpu_uuid") != card for p in window)
    base = {
        "series_id": series["series_id"],
        "label": series["label"],
        "case_id": series["case_id"],
        "impl": series["impl"],
        "role": series["role"],
        "metric": metric,
        "run_id": newest["run_id"],
        "commit": newest["commit_sha"],
        "started_utc": newest["started_utc"],
        "newest": newest[value_field],
    }
    if newest[value_field] is None:
        note = newest.get("error_message") or f"check {newest.get('check_status')}"
        return Finding(**base, status="failed", note=note)
    if len(history) < policy.min_history:
        note = f"{len(history)} stable point(s) before it; need {policy.min_history}"
        return Finding(**base, status="short", history=len(history), note=note)
    values = [*history, newest[value_field]]
    moved = pooled_change(values, policy, between_cards if across else 0.0)
    status = _status(moved, bool(newest[stable_field]))
    return Finding(
        **base,
        status=status,
        reference=moved.reference,
        relative=moved.relative,
        threshold=moved.threshold,
        spread=moved.spread,
        history=moved.history,
        note=_note(moved, status, series["role"], between_cards if across else 0.0),
    )


def _status(moved: Change, stable: bool) -> str:
    """The status: "alert", "unstable" or "ok", by the shared decision rule on the change."""
    ratio = 1 + moved.relative
    said = statistics_core.decide(
        statistics_core.Change(ratio, ratio, ratio),
        None,
        stable,
        statistics_core.Policy(min_effect=moved.threshold, alpha=None),
    )
    return {"slower": "alert", "faster": "alert", "unstable": "unstable"}.get(said, "ok")


def _note(moved: Change, status: str, role: str, between_cards: float) -> str:
    """A finding's note: how the change was pooled and whether the threshold counts the
    between-card SD (`between_cards`: 0 where the history ran on the newest point's card); a
    baseline's alert says it points at the machine instead."""
    if status == "alert" and role == "baseline":
        return (
            "the baseline's own time moved on an unchanged source: this points at the "
            "machine (clocks, driver, thermals, load), not at the code"
        )
    notes = []
    if moved.pooled > 1:
        notes.append(f"the median of the newest {moved.pooled} runs against the runs before")
    if between_cards > 0:
        notes.append(
            f"its history ran on other cards: threshold includes the between-card SD "
            f"{between_cards:.2%}"
        )
    return "; ".join(notes)


def current_series(series: list[dict]) -> list[dict]:
    """The series still being extended: of those sharing GPU, mode, case id and implementation,
    the one with the latest point (older ones were superseded by a changed key); and of those,
    only the ones the newest run on their GPU and mode reached (a case or implementation that
    was removed from the suite stops being checked instead of alerting forever)."""
    latest: dict[tuple, dict] = {}
    newest_run: dict[tuple, str] = {}
    for s in series:
        slot = (s["gpu"], s["mode"], s["case_id"], s["impl"])
        if slot not in latest or (s["last_utc"] or "") > (latest[slot]["last_utc"] or ""):
            latest[slot] = s
        machine = (s["gpu"], s["mode"])
        newest_run[machine] = max(newest_run.get(machine, ""), s["last_utc"] or "")
    return [
        s
        for s in series
        if latest[(s["gpu"], s["mode"], s["case_id"], s["impl"])] is s
        and (s["last_utc"] or "") == newest_run[(s["gpu"], s["mode"])]
    ]


def review(
    series: list[dict],
    points_of: dict[str, list[dict]],
    policy: Policy = Policy(),
    between_cards: float | dict[str, float] = 0.0,
) -> list[Finding]:
    """Findings for every current series; `points_of` maps series_id to its points (oldest first);
    `between_cards` the between-card SD of a gap (harness.history.cards), or one per GPU model
    (harness.history.cards.by_model, with a series' own where it has one), for points from
    other cards.

    A candidate's time alert in the same run and direction as its baseline's time alert gets a
    note: the baseline moved too, so the machine is the likelier cause.
    """
    findings = [
        f
        for s in current_series(series)
        for f in review_series(
            s,
            points_of[s["series_id"]],
            policy,
            cards.sd_for(between_cards, s.get("gpu"), s["series_id"]),
        )
    ]
    baseline_moves = {
        (f.case_id, f.run_id): f.direction
        for f in findings
        if f.role == "baseline" and f.metric == "time" and f.alert
    }
    note = "the baseline moved the same way in this run: likely the machine, not the code"
    return [
        replace(f, note=note)
        if f.role == "candidate"
        and f.metric == "time"
        and f.alert
        and baseline_moves.get((f.case_id, f.run_id)) == f.direction
        else f
        for f in findings
    ]
