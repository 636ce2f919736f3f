"""Compare two result documents (a base and a head run): per implementation time and per gap.

Each implementation present in both runs becomes a TimeChange, each candidate's gap a GapChange,
with the verdict protocol.statistics gives them (detection, significance and policy); only series
with equal keys (harness.history.series.series_key) are compared, and the rest are listed as NotCompared
with the reason. `gate()` says which rows trip `--fail-on`; harness.reporting.compare_report writes the
markdown.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

import numpy as np

from harness.analysis import fail_on
from harness.escaping import first_line
from harness.history import cards
from harness.history.series import series_key
from protocol.points import as_rows
from protocol.statistics import (
    Bootstrap,
    Change,
    Policy,
    decide,
    detect,
    detect_gap,
    significance,
)

__all__ = [
    "FAIL_ON",
    "Bootstrap",
    "Change",
    "Comparison",
    "GapChange",
    "NotCompared",
    "Policy",
    "TimeChange",
    "compare",
    "decide",
    "detect",
    "detect_gap",
    "gate",
    "significance",
]

COMPARED = ("faster", "slower", "same", "unstable")
"""The verdicts a comparison of two timed rows can give (protocol.statistics.VERDICTS' first four)."""

FAIL_ON = fail_on.WORDS
"""The `--fail-on` words (harness.analysis.fail_on, shared with `harness regressions`)."""


@dataclass(frozen=True)
class TimeChange:
    """One implementation's per-launch time, base vs head."""

    case_id: str
    case_version: int
    impl: str
    role: str
    base_median_s: float
    head_median_s: float
    change: Change
    p_value: float
    verdict: str

    @property
    def label(self) -> str:
        return f"{self.case_id}/{self.impl}"


@dataclass(frozen=True)
class GapChange:
    """One candidate's gap (candidate / baseline ratio of medians), base vs head."""

    case_id: str
    case_version: int
    candidate: str
    baseline: str
    base_gap: float
    head_gap: float
    change: Change
    p_value: float
    verdict: str
    # the between-card SD of ln gap the interval was widened by (harness.history.cards): None when
    # both documents ran on one card (a base/head pair of one rental needs none)
    between_cards: float | None = None

    @property
    def label(self) -> str:
        return f"{self.case_id}/{self.candidate} gap"


@dataclass(frozen=True)
class NotCompared:
    """A case or implementation left out of the comparison, and why (impl None: whole case)."""

    case_id: str
    impl: str | None
    reason: str


@dataclass(frozen=True)
class Comparison:
    base: dict
    head: dict
    policy: Policy
    times: tuple[TimeChange, ...] = ()
    gaps: tuple[GapChange, ...] = ()
    not_compared: tuple[NotCompared, ...] = ()
    bootstrap: Bootstrap = field(default_factory=Bootstrap)

    def counts(self) -> dict[str, int]:
        """How many time and gap rows carry each verdict."""
        counts = dict.fromkeys(COMPARED, 0)
        for row in (*self.times, *self.gaps):
            counts[row.verdict] += 1
        return counts

    def to_json(self) -> dict:
        def row(r):
            d = asdict(r)
            d["change"]["percent"] = r.change.percent
            return d

        return {
            "kind": "kernelgap.comparison",
            "base": self.base,
            "head": self.head,
            "policy": asdict(self.policy),
            "bootstrap": asdict(self.bootstrap),
            "counts": self.counts(),
            "times": [row(r) for r in self.times],
            "gaps": [row(r) for r in self.gaps],
            "not_compared": [asdict(r) for r in self.not_compared],
        }


def _run_label(document: dict) -> dict:
    return {
        "commit": document["suite"]["commit"],
        "started_utc": document["started_utc"],
        "gpu": document["environment"]["device"]["name"],
    }


def _cases_by_id(document: dict, side: str) -> dict[str, dict]:
    cases: dict[str, dict] = {}
    for case in document["cases"]:
        if case["id"] in cases:
            raise ValueError(f"{side}: case id {case['id']!r} appears twice in cases[]")
        cases[case["id"]] = case
    return cases


def _case_problem(case: dict, side: str) -> str | None:
    if case["status"] == "ok":
        return None
    error = case.get("error")
    if error:
        return f"{case['status']} in {side} ({error['phase']}: {first_line(error['message'])})"
    return f"{case['status']} in {side}"


def _short(value) -> str:
    """A key value for a message; a sha256 is cut to its first 12 hex digits."""
    if isinstance(value, str) and len(value) == 64:
        return value[:12]
    return repr(value)


def _key_change(base_key: dict, head_key: dict) -> str | None:
    changed = [
        k for k in sorted(base_key.keys() | head_key.keys()) if base_key.get(k) != head_key.get(k)
    ]
    if not changed:
        return None
    parts = [f"{k} {_short(base_key.get(k))} -> {_short(head_key.get(k))}" for k in changed]
    return "not comparable: series key changed: " + "; ".join(parts)


def compare(
    base_doc: dict,
    head_doc: dict,
    policy: Policy = Policy(),  # noqa: B008 (frozen dataclasses: a shared default is safe)
    bootstrap: Bootstrap = Bootstrap(),  # noqa: B008
    between_cards: float = cards.DEFAULT_BETWEEN_CARD_SD,
) -> Comparison:
    """Compare every case and implementation present in both (validated) documents.

    Matched by case id and implementation name; a swept case's points as rows `case[point]`
    (protocol.points). Cases or implementations in one side only,
    failed or skipped cases, implementations without timing, and series whose key differs
    (GPU model, timing mode, suite or case version, source hashes) land in `not_compared`.
    A gap measured on two different cards (harness.history.cards.same_card) has its interval widened
    by `between_cards` (the between-card SD of ln gap: harness.history.cards.from_store, or the
    default) and is called "same" while that interval holds 1.0.
    """
    base_doc, head_doc = as_rows(base_doc), as_rows(head_doc)  # a sweep's points: rows
    base_cases = _cases_by_id(base_doc, "base")
    head_cases = _cases_by_id(head_doc, "head")
    times, gaps, skipped = [], [], []
    for case_id in base_cases.keys() - head_cases.keys():
        skipped.append(NotCompared(case_id, None, "only in base"))
    for case_id in head_cases.keys() - base_cases.keys():
        skipped.append(NotCompared(case_id, None, "only in head"))
    for case_id in [c for c in head_cases if c in base_cases]:
        base_case, head_case = base_cases[case_id], head_cases[case_id]
        problems = [_case_problem(base_case, "base"), _case_problem(head_case, "head")]
        if any(problems):
            skipped.append(NotCompared(case_id, None, "; ".join(p for p in problems if p)))
            continue
        rows = _compare_case(
            base_doc, head_doc, base_case, head_case, policy, bootstrap, between_cards
        )
        times += rows[0]
        gaps += rows[1]
        skipped += rows[2]
    skipped.sort(key=lambda r: (r.case_id, r.impl or ""))
    return Comparison(
        _run_label(base_doc),
        _run_label(head_doc),
        policy,
        tuple(times),
        tuple(gaps),
        tuple(skipped),
        bootstrap,
    )


def _compare_case(base_doc, head_doc, base_case, head_case, policy, bootstrap, between_cards):
    case_id, version = head_case["id"], head_case["version"]
    base_impls, head_impls = base_case["implementations"], head_case["implementations"]
    times, gaps, skipped = [], [], []
    for name in sorted(base_impls.keys() - head_impls.keys()):
        skipped.append(NotCompared(case_id, name, "only in base"))
    for name in sorted(head_impls.keys() - base_impls.keys()):
        skipped.append(NotCompared(case_id, name, "only in head"))
    for name in [n for n in head_impls if n in base_impls]:
        old, new = base_impls[name], head_impls[name]
        key_change = _key_change(
            series_key(base_doc, base_case, name), series_key(head_doc, head_case, name)
        )
        if key_change:
            skipped.append(NotCompared(case_id, name, key_change))
            continue
        missing = [side for side, impl in (("base", old), ("head", new)) if "timing" not in impl]
        if missing:
            skipped.append(NotCompared(case_id, name, f"no timing in {' and '.join(missing)}"))
            continue
        old_t, new_t = old["timing"], new["timing"]
        change = detect(old_t["samples_s"], new_t["samples_s"], bootstrap)
        p_value = significance(old_t["samples_s"], new_t["samples_s"])
        stable = old_t["stats"]["stable"] and new_t["stats"]["stable"]
        times.append(
            TimeChange(
                case_id,
                version,
                name,
                new["role"],
                old_t["stats"]["median_s"],
                new_t["stats"]["median_s"],
                change,
                p_value,
                decide(change, p_value, stable, policy),
            )
        )
        if new["role"] == "candidate":
            one_card = cards.same_card(base_doc, head_doc, base_case, head_case)
            row = _compare_gap(
                base_case, head_case, name, policy, bootstrap, None if one_card else between_cards
            )
            (gaps if isinstance(row, GapChange) else skipped).append(row)
    return times, gaps, skipped


def _compare_gap(
    base_case, head_case, name, policy, bootstrap, between_cards: float | None
) -> GapChange | NotCompared:
    """Gap change of candidate `name`: detect_gap + a U test on the per-round ratios; from two
    cards (`between_cards` not None), the interval widened by that SD and the verdict "same"
    while the widened interval holds 1.0."""
    case_id = head_case["id"]
    pairs, gaps = [], []
    for side, case in (("base", base_case), ("head", head_case)):
        impl, baseline = case["implementations"][name], case["implementations"][case["baseline"]]
        if not impl.get("gap") or "timing" not in baseline:
            return NotCompared(case_id, f"{name} gap", f"no gap in {side} (not checked or failed)")
        baseline_s, candidate_s = baseline["timing"]["samples_s"], impl["timing"]["samples_s"]
        if len(baseline_s) != len(candidate_s):
            return NotCompared(case_id, f"{name} gap", f"{side} samples are not paired by round")
        pairs.append((baseline_s, candidate_s))
        gaps.append(impl["gap"])
    change = detect_gap(pairs[0], pairs[1], bootstrap)
    round_ratios = [np.asarray(c) / np.asarray(b) for b, c in pairs]
    p_value = significance(round_ratios[0], round_ratios[1])
    stable = gaps[0]["stable"] and gaps[1]["stable"]
    if between_cards is not None:
        low, high = cards.widen(
            change.ratio, change.ci_low, change.ci_high, between_cards, bootstrap.confidence
        )
        change = Change(change.ratio, low, high)
        policy = replace(policy, interval=True)  # within what two cards differ by is "same"
    verdict = decide(change, p_value, stable, policy)
    return GapChange(
        case_id,
        head_case["version"],
        name,
        head_case["baseline"],
        gaps[0]["ratio_of_medians"],
        gaps[1]["ratio_of_medians"],
        change,
        p_value,
        verdict,
        between_cards,
    )


def gate(comparison: Comparison, word: str) -> list[TimeChange | GapChange]:
    """The rows whose verdict trips `--fail-on word` (harness.analysis.fail_on); empty: the gate passes."""
    rows = [("time", r) for r in comparison.times] + [("gap", r) for r in comparison.gaps]
    return [r for metric, r in rows if fail_on.trips(word, metric, r.verdict)]
