"""Regression rules over history series: pure functions, no database.

Three separate pieces (as in asv): change detection (`change()`: the newest value against the
median of the recent stable history), significance (`threshold()`: how large a change must be,
from the history's own spread) and policy (`Policy`: window, minimum effect, MAD factor).
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

from harness.history import cards

__all__ = [
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
    """When a change is an alert.

    window: how many previous stable points form the reference (the newest is not one of them).
    min_change: the smallest relative change ever reported (0.05 = 5%).
    mad_factor: a change must also exceed this many times the history's relative MAD.
    min_history: fewer previous stable points than this and the series is only shown.
    """

    window: int = 10
    min_change: float = 0.05
    mad_factor: float = 3.0
    min_history: int = 3

    def __post_init__(self):
        for name in ("window", "min_history"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"Policy.{name} must be an int >= 1 (got {value!r})")
        for name in ("min_change", "mad_factor"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
                raise ValueError(f"Policy.{name} must be a finite number >= 0 (got {value!r})")


@dataclass(frozen=True)
class Change:
    """The newest value against its history.

    reference = median(history); relative = newest / reference - 1;
    spread = MAD(history) / reference, MAD = median(|h - median(history)|) (unscaled).
    """

    newest: float
    reference: float
    relative: float
    spread: float
    history: int


def change(history: list[float], newest: float) -> Change:
    """Change of `newest` against `history` (previous stable values, at least one, all > 0)."""
    if not history:
        raise ValueError("change: the history is empty; nothing to compare the newest value with")
    reference = statistics.median(history)
    if not reference > 0:
        raise ValueError(f"change: the history's median is {reference!r}; expected > 0")
    mad = statistics.median(abs(h - reference) for h in history)
    return Change(newest, reference, newest / reference - 1, mad / reference, len(history))


def threshold(found: Change, policy: Policy, between_cards: float = 0.0) -> float:
    """The relative change that counts: max(policy.min_change, policy.mad_factor x spread),
    the second widened in quadrature by 1.96 x sqrt(2) x `between_cards` when the newest point
    ran on another card than some of its history (harness.history.cards)."""
    spread = policy.mad_factor * found.spread
    if between_cards > 0:
        spread = math.hypot(spread, CARD_Z * math.sqrt(2) * between_cards)
    return max(policy.min_change, spread)


CARD_Z = 1.959963984540054  # the two-sided 95% normal quantile


# metric name -> (point field holding the value, point field saying it is stable)
METRICS = {"gap": ("gap", "gap_stable"), "time": ("median_s", "stable")}


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
    newest = points[-1]
    metrics = ("gap", "time") if series["role"] == "candidate" else ("time",)
    found = []
    for metric in metrics:
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
            found.append(Finding(**base, status="failed", note=note))
            continue
        if len(history) < policy.min_history:
            note = f"{len(history)} stable point(s) before it; need {policy.min_history}"
            found.append(Finding(**base, status="short", history=len(history), note=note))
            continue
        moved = change(history, newest[value_field])
        limit = threshold(moved, policy, between_cards if across else 0.0)
        if not newest[stable_field]:
            status = "unstable"
        else:
            status = "alert" if abs(moved.relative) > limit else "ok"
        note = (
            f"its history ran on other cards: threshold includes the between-card SD "
            f"{between_cards:.2%}"
            if across and between_cards > 0
            else ""
        )
        if status == "alert" and series["role"] == "baseline":
            note = (
                "the baseline's own time moved on an unchanged source: this points at the "
                "machine (clocks, driver, thermals, load), not at the code"
            )
        found.append(
            Finding(
                **base,
                status=status,
                reference=moved.reference,
                relative=moved.relative,
                threshold=limit,
                spread=moved.spread,
                history=moved.history,
                note=note,
            )
        )
    return found


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
    (harness.history.cards.by_model), for points from other cards.

    A candidate's time alert in the same run and direction as its baseline's time alert gets a
    note: the baseline moved too, so the machine is the likelier cause.
    """
    findings = [
        f
        for s in current_series(series)
        for f in review_series(
            s, points_of[s["series_id"]], policy, cards.sd_for(between_cards, s.get("gpu"))
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
