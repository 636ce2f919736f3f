"""A pull request's own effect: base and head of the compiler timed together in one run.

`runner bench --bundle base=DIR --bundle head=DIR` (or `harness run --base-bundle DIR
--head-bundle DIR`) times each candidate X as X@base and X@head in the same context and rounds
as the baseline, and gives each case a `pairs` block: head/base as a ratio of medians with the
paired bootstrap interval of a gap (runner.document.gaps.pair_blocks). Here that becomes one row per
case and candidate, a verdict and the markdown for the pull-request comment. Same-machine,
same-rounds numbers, so unlike `harness compare` of two rentals they can gate a merge.

Verdict (policy, apart from the measurement): `slower` when the interval lies above 1 and
head/base >= 1 + min_effect, `faster` when it lies below 1 and head/base <= 1 - min_effect,
`unstable` when either side's statistics were marked unstable, else `same`; `failed` when the
case has no pair (it failed, or a side failed its check).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from harness.analysis import fail_on as failing
from harness.escaping import first_line
from harness.escaping import markdown as md

__all__ = ["PairRow", "gate", "markdown", "rows", "verdict"]

DEFAULT_MIN_EFFECT = 0.02


@dataclass(frozen=True)
class PairRow:
    """One candidate of one case: its base and head gaps (against the baseline) and head/base."""

    case_id: str
    candidate: str
    base: str | None
    head: str | None
    base_gap: float | None
    head_gap: float | None
    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    confidence: float | None
    verdict: str
    note: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def verdict(pair: dict, min_effect: float = DEFAULT_MIN_EFFECT) -> str:
    """faster / slower / same / unstable for one pair block (see the module docstring)."""
    if not pair["stable"]:
        return "unstable"
    ratio = pair["ratio_of_medians"]
    if pair["ci_low"] > 1 and ratio >= 1 + min_effect:
        return "slower"
    if pair["ci_high"] < 1 and ratio <= 1 - min_effect:
        return "faster"
    return "same"


def _gap(case: dict, name: str | None) -> float | None:
    gap = (case["implementations"].get(name) or {}).get("gap") if name else None
    return gap["ratio_of_medians"] if gap else None


def _revision_names(document: dict) -> set[str]:
    return {
        impl["variant_of"]
        for case in document["cases"]
        for impl in case["implementations"].values()
        if impl.get("variant_of")
    }


def rows(document: dict, min_effect: float = DEFAULT_MIN_EFFECT) -> list[PairRow]:
    """A row per case and candidate that was timed in revisions (or should have been).

    Raises ValueError when the document holds no revisions at all: it was not a base/head run.
    """
    candidates = _revision_names(document)
    if not candidates:
        raise ValueError(
            "the result document has no revisions (no implementation with variant_of): run the "
            "suite with `runner bench --bundle base=DIR --bundle head=DIR` or `harness run "
            "--base-bundle DIR --head-bundle DIR`"
        )
    out = []
    for case in document["cases"]:
        pairs = {p["of"]: p for p in case.get("pairs", [])}
        names = {
            impl.get("variant_of", name)
            for name, impl in case["implementations"].items()
            if impl["role"] == "candidate"
        }
        for candidate in sorted(names & candidates):
            pair = pairs.get(candidate)
            if pair is None:
                why = (case.get("error") or {}).get("message") or "no pair: a side was not timed"
                if case["status"] == "skipped":
                    why = f"skipped: {why}"
                empty = dict.fromkeys(("base", "head", "base_gap", "head_gap", "ratio"))
                empty.update(ci_low=None, ci_high=None, confidence=None)
                out.append(
                    PairRow(case["id"], candidate, **empty, verdict="failed", note=first_line(why))
                )
                continue
            out.append(
                PairRow(
                    case_id=case["id"],
                    candidate=candidate,
                    base=pair["base"],
                    head=pair["head"],
                    base_gap=_gap(case, pair["base"]),
                    head_gap=_gap(case, pair["head"]),
                    ratio=pair["ratio_of_medians"],
                    ci_low=pair["ci_low"],
                    ci_high=pair["ci_high"],
                    confidence=pair["confidence"],
                    verdict=verdict(pair, min_effect),
                )
            )
    return out


def gate(found: list[PairRow], fail_on: str) -> list[PairRow]:
    """The rows that make `--fail-on fail_on` exit 1 (harness.analysis.fail_on's words; head/base is a
    ratio of two gaps over the same baseline rounds, so a gap verdict; a failed row counts as
    unstable)."""
    return [
        r
        for r in found
        if failing.trips(fail_on, "gap", "unstable" if r.verdict == "failed" else r.verdict)
    ]


def geometric_mean(values: list[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}x"


def markdown(document: dict, found: list[PairRow], min_effect: float) -> str:
    """The pull-request comment: headline, method, one row per case and candidate."""
    device = document["environment"]["device"]["name"]
    suite = document["suite"]
    counts = {v: sum(r.verdict == v for r in found) for v in ("slower", "faster", "unstable")}
    failed = sum(r.verdict == "failed" for r in found)
    per_candidate = {}
    for r in found:
        if r.ratio is not None and r.verdict != "unstable":
            per_candidate.setdefault(r.candidate, []).append(r.ratio)
    means = ", ".join(
        f"{md(name)} {geometric_mean(values):.3f}x over {len(values)} case(s)"
        for name, values in sorted(per_candidate.items())
    )
    lines = [
        "## Benchmark: head against base, paired on one GPU",
        "",
        f"{counts['slower']} slower, {counts['faster']} faster, {counts['unstable']} unstable, "
        f"{failed} failed of {len(found)} · head/base geometric mean: {means or '-'}",
        "",
        f"{md(device)} · suite {md(suite['name'])} v{suite['version']} · commit "
        f"{md((suite.get('commit') or '-')[:12], code=True)}. Each case loaded base and head of every "
        "candidate into one context and timed them in the same interleaved rounds as the "
        "baseline; head/base = median(head) / median(base) with a paired bootstrap interval. "
        f"A verdict needs the interval to exclude 1 and a change of at least {min_effect:.0%}; "
        "lower is better.",
        "",
        "| case | candidate | base gap | head gap | head/base [interval] | verdict |",
        "|---|---|---|---|---|---|",
    ]
    for r in found:
        if r.ratio is None:
            ratio = "-"
        else:
            level = f"{r.confidence:.0%}" if r.confidence else ""
            ratio = f"{_x(r.ratio)} [{r.ci_low:.3f}, {r.ci_high:.3f}] {level}".rstrip()
        mark = f"**{r.verdict}**" if r.verdict in ("slower", "failed") else r.verdict
        if r.note:
            mark += f": {md(r.note, cell=True)}"
        cells = [md(r.case_id, cell=True), md(r.candidate, cell=True), _x(r.base_gap),
                 _x(r.head_gap), ratio, mark]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
