"""A pull request's own effect: base and head of the compiler timed together in one run.

`runner bench --bundle base=DIR --bundle head=DIR` (or `harness run --base-bundle DIR
--head-bundle DIR`) times each candidate X as X@base and X@head in the same context and rounds
as the baseline, and gives each case a `pairs` block: head/base as a ratio of medians with the
paired bootstrap interval of a gap (runner.document.pair_blocks). Here that becomes one row per
case and candidate, a verdict and the markdown for the pull-request comment. Same-machine,
same-rounds numbers, so unlike `harness compare` of two rentals they can gate a merge.

Verdict (policy, apart from the measurement): `slower` when the interval lies above 1 and
head/base >= 1 + min_effect, `faster` when it lies below 1 and head/base <= 1 - min_effect,
`unstable` when either side's statistics were marked unstable, else `same`; `failed` when the
case has no pair (it failed, or a side failed its check).

Beside each verdict, the counters of base and head that differ (harness.analysis.counter_diff),
most telling first: from the document's `static` and `profile` blocks, or from the two bundles
where the document has no static analysis (same PTX, same sha256). Two bundles alone
(`bundle_rows`) give the counters without a time: verdict `untimed`, no GPU needed.
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass, field

from harness.analysis import fail_on as failing
from harness.analysis.counter_diff import (
    CounterChange,
    differences,
    is_share,
    sentence,
    static_changed,
)
from harness.escaping import first_line
from harness.escaping import markdown as md
from harness.history import counters as counting
from harness.history.store import bundle_statics
from protocol.statistics import Change, Policy, decide

__all__ = ["PairRow", "bundle_rows", "gate", "markdown", "rows", "verdict"]

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
    base_counters: dict = field(default_factory=dict, repr=False)  # {name: [value, unit]}
    head_counters: dict = field(default_factory=dict, repr=False)
    same_ptx: bool = False  # base and head loaded byte-identical PTX (the same sha256)

    @functools.cached_property
    def _differences(self) -> list[CounterChange]:
        """Every counter that differs, most telling first (the cell, the verdict, the JSON and
        the headline each ask; a row's counters never change)."""
        return differences(self.base_counters, self.head_counters)

    @property
    def counters(self) -> list[CounterChange]:
        """The counters that differ from base to head, most telling first. Between builds of
        the same PTX, ncu's profiled counters can only differ by their own run-to-run
        variation, so they are not listed as changes (`profile_noise` has them)."""
        found = self._differences
        return [c for c in found if not c.profiled] if self.same_ptx else found

    @property
    def profile_noise(self) -> list[CounterChange]:
        """For the same PTX on both sides: the profiled counters that still differ (ncu's
        sampling, the stalls and hit rates of one launch each); none otherwise."""
        return [c for c in self._differences if c.profiled] if self.same_ptx else []

    @property
    def code_changed(self) -> bool:
        return static_changed(self.counters)

    def to_dict(self) -> dict:
        out = asdict(self)
        del out["base_counters"], out["head_counters"]
        out["counters"] = [c.to_dict() for c in self.counters]
        out["profile_noise"] = [c.to_dict() for c in self.profile_noise]
        out["code_changed"] = self.code_changed
        return out


def verdict(pair: dict, min_effect: float = DEFAULT_MIN_EFFECT) -> str:
    """faster / slower / same / unstable for one pair block (see the module docstring), by
    protocol.statistics.decide under the pull request's policy: the interval, no U test."""
    change = Change(pair["ratio_of_medians"], pair["ci_low"], pair["ci_high"])
    return decide(change, None, pair["stable"], Policy(min_effect, alpha=None, interval=True))


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


def _ptx_sha256(case: dict, name: str | None) -> str | None:
    impl = case["implementations"].get(name) if name else None
    return ((impl or {}).get("build") or {}).get("ptx_sha256")


def _counters(case: dict, name: str | None, statics: dict) -> dict:
    """{name: [value, unit]} of implementation `name` of a document's case; a bundle's static
    analysis of the same PTX stands in where the document has none."""
    impl = case["implementations"].get(name) if name else None
    if impl is None:
        return {}
    found = counting.from_impl(impl)
    if not counting.static_counters(impl.get("static")):
        sha = _ptx_sha256(case, name)
        found.update(
            counting.static_counters(statics.get((case["id"], impl.get("variant_of", name), sha)))
        )
    return found


def rows(
    document: dict, min_effect: float = DEFAULT_MIN_EFFECT, bundles: tuple = ()
) -> list[PairRow]:
    """A row per case and candidate that was timed in revisions (or should have been), with
    base's and head's counters; `bundles` (manifests) fill in static analyses it lacks.

    Raises ValueError when the document holds no revisions at all: it was not a base/head run.
    """
    statics = {k: v for b in bundles for k, v in bundle_statics(b).items()}
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
                # a case the run never reached (its budget, --case) is not a failure of head
                said = "not run" if case["status"] == "skipped" else "failed"
                empty = dict.fromkeys(("base", "head", "base_gap", "head_gap", "ratio"))
                empty.update(ci_low=None, ci_high=None, confidence=None)
                out.append(
                    PairRow(case["id"], candidate, **empty, verdict=said, note=first_line(why))
                )
                continue
            base_ptx = _ptx_sha256(case, pair["base"])
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
                    base_counters=_counters(case, pair["base"], statics),
                    head_counters=_counters(case, pair["head"], statics),
                    same_ptx=base_ptx is not None and base_ptx == _ptx_sha256(case, pair["head"]),
                )
            )
    return out


def bundle_rows(base: dict, head: dict) -> list[PairRow]:
    """A row per case and candidate built in both bundles (manifests of `runner build`): their
    static counters, no time (verdict `untimed`)."""
    theirs = {(e["case"], e["impl"]): e for e in base["implementations"]}
    out = []
    for e in head["implementations"]:
        if e.get("role", "candidate") != "candidate" or (e["case"], e["impl"]) not in theirs:
            continue
        b = theirs[(e["case"], e["impl"])]
        empty = dict.fromkeys(("base_gap", "head_gap", "ratio", "ci_low", "ci_high", "confidence"))
        out.append(
            PairRow(
                e["case"],
                e["impl"],
                f"{e['impl']}@base",
                f"{e['impl']}@head",
                **empty,
                verdict="untimed",
                base_counters=counting.static_counters(b.get("static")),
                head_counters=counting.static_counters(e.get("static")),
            )
        )
    return out


def gate(found: list[PairRow], fail_on: str | failing.FailOn) -> list[tuple[PairRow, str]]:
    """(row, why) for the rows that make `--fail-on fail_on` exit 1 (harness.analysis.fail_on's
    words; head/base is a ratio of two gaps over the same baseline rounds, so a gap verdict; a
    failed row counts as unstable; counter words compare head's static counters with base's)."""
    spec = fail_on if isinstance(fail_on, failing.FailOn) else failing.parse(fail_on)
    out = []
    for r in found:
        timed = r.verdict != "untimed"
        # no head/base to judge: --fail-on unstable (the strictest timed word) trips on it
        time_verdict = "unstable" if r.verdict in ("failed", "not run") else r.verdict
        if timed and failing.trips(spec.word, "gap", time_verdict):
            out.append((r, r.verdict))
            continue
        before = {
            n: counting.value(r.base_counters, n)
            for w in spec.counters
            for n in failing.COUNTER_WORDS[w.word]
        }
        after = {
            n: counting.value(r.head_counters, n)
            for w in spec.counters
            for n in failing.COUNTER_WORDS[w.word]
        }
        hit = [str(w) for w in spec.counters if w.trips(before, after)]
        if hit:
            out.append((r, ", ".join(hit)))
    return out


def geometric_mean(values: list[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}x"


SHOWN_COUNTERS = 3  # counter sentences in a row's cell; the rest under the table


def counter_cell(r: PairRow, limit: int = SHOWN_COUNTERS) -> str:
    """The counters that changed, in words, most telling first ('-' for none)."""
    found = r.counters
    if not found:
        if r.same_ptx:
            return "the same PTX"
        return "-" if r.base_counters or r.head_counters else "no counters recorded"
    words = [sentence(c) for c in found[:limit]]
    if found[limit:]:
        words.append(f"+{len(found) - limit} more")
    return "; ".join(words)


def _verdict_cell(r: PairRow) -> str:
    mark = f"**{r.verdict}**" if r.verdict in ("slower", "failed", "not run") else r.verdict
    if r.verdict == "same" and r.code_changed:
        mark += " (the code changed: see counters)"
    if r.note:
        mark += f": {md(r.note, cell=True)}"
    return mark


def _headline(document: dict | None, found: list[PairRow], min_effect: float) -> list[str]:
    changed = sum(r.code_changed for r in found)
    if document is None:
        return [
            "## Benchmark: head against base, counters from the two bundles",
            "",
            f"{changed} of {len(found)} candidate builds changed their code (static counters: "
            "ptxas resources and the SASS instruction mix); not timed. Static counters carry no "
            "noise: every difference listed is real.",
        ]
    device = document["environment"]["device"]["name"]
    suite = document["suite"]
    counts = {v: sum(r.verdict == v for r in found) for v in ("slower", "faster", "unstable")}
    failed = sum(r.verdict == "failed" for r in found)
    not_run = sum(r.verdict == "not run" for r in found)
    per_candidate = {}
    for r in found:
        if r.ratio is not None and r.verdict != "unstable":
            per_candidate.setdefault(r.candidate, []).append(r.ratio)
    means = ", ".join(
        f"{md(name)} {geometric_mean(values):.3f}x over {len(values)} case(s)"
        for name, values in sorted(per_candidate.items())
    )
    return [
        "## Benchmark: head against base, paired on one GPU",
        "",
        f"{counts['slower']} slower, {counts['faster']} faster, {counts['unstable']} unstable, "
        f"{failed} failed{f', {not_run} not run' if not_run else ''} of {len(found)}, "
        f"{changed} with changed code · head/base geometric "
        f"mean: {means or '-'}",
        "",
        f"{md(device)} · suite {md(suite['name'])} v{suite['version']} · commit "
        f"{md((suite.get('commit') or '-')[:12], code=True)}. Each case loaded base and head of every "
        "candidate into one context and timed them in the same interleaved rounds as the "
        "baseline; head/base = median(head) / median(base) with a paired bootstrap interval. "
        f"A verdict needs the interval to exclude 1 and a change of at least {min_effect:.0%}; "
        "lower is better. Counters: static (ptxas, SASS) and, when profiled, ncu's; most "
        "telling first." + _noise_sentence(found),
    ]


def _noise_sentence(found: list[PairRow], shown: int = 3) -> str:
    """What ncu's counters did between base and head builds of the same PTX: the scale of its
    own variation in this run, against which a profiled change of a changed build can be read
    ('' where no such pair was profiled). A share of a whole moved by its fraction of the whole
    (counter_diff.WHOLES), any other counter by its fraction of itself."""
    pairs = [
        r
        for r in found
        if r.same_ptx
        and any(map(counting.profiled, r.base_counters))
        and any(map(counting.profiled, r.head_counters))
    ]
    if not pairs:
        return ""
    moved = sorted(
        ((c, r) for r in pairs for c in r.profile_noise if c.moved is not None),
        key=lambda cr: -cr[0].moved,
    )
    start = (
        f" Between base and head builds of the same PTX ({len(pairs)} profiled), ncu's own "
        "run-to-run variation"
    )
    if not moved:
        return f"{start} moved no counter by its threshold."
    listed = "; ".join(
        f"{md(c.name[4:])} by {c.moved:.1%}{' of its whole' if is_share(c.name) else ''} "
        f"({md(r.case_id)} / {md(r.candidate)})"
        for c, r in moved[:shown]
    )
    more = f" and {len(moved) - shown} more" if len(moved) > shown else ""
    return (
        f"{start} moved {listed}{more}: not listed as changes; a profiled change of that size in "
        "a changed build may be the same."
    )


def markdown(document: dict | None, found: list[PairRow], min_effect: float) -> str:
    """The pull-request comment: headline, method, one row per case and candidate with the
    counters that changed; every counter change in full below (None: bundles only)."""
    lines = [
        *_headline(document, found, min_effect),
        "",
        "| case | candidate | base gap | head gap | head/base [interval] | verdict | counters (head vs base) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in found:
        if r.ratio is None:
            ratio = "-"
        else:
            level = f"{r.confidence:.0%}" if r.confidence else ""
            ratio = f"{_x(r.ratio)} [{r.ci_low:.3f}, {r.ci_high:.3f}] {level}".rstrip()
        cells = [md(r.case_id, cell=True), md(r.candidate, cell=True), _x(r.base_gap),
                 _x(r.head_gap), ratio, _verdict_cell(r), md(counter_cell(r), cell=True)]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    more = [r for r in found if len(r.counters) > SHOWN_COUNTERS]
    if more:
        lines += ["", "<details><summary>Every counter that changed</summary>", ""]
        for r in more:
            lines.append(f"- {md(r.case_id)} / {md(r.candidate)}:")
            lines += [f"  - {md(sentence(c))}" for c in r.counters]
        lines += ["", "</details>"]
    return "\n".join(lines) + "\n"
