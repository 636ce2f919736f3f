"""Compare two result documents (a base and a head run): per implementation time and per gap.

Three separate pieces decide a verdict, as in asv and pyperf:
- detection: the ratio of medians head / base with a percentile bootstrap interval (`detect`);
- significance: a two-sided Mann-Whitney U test on the raw samples (`significance`);
- policy: the thresholds that turn both into faster / slower / same (`Policy`, `decide`).
A side whose statistics the runner marked unstable gives `unstable` whatever the numbers say.
Only series with equal keys (harness.series.series_key) are compared; the rest are listed.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from harness import fail_on
from harness.escaping import markdown as md
from harness.export.table import MARKDOWN, Column, first_line, format_table, format_time
from harness.series import series_key

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
    "markdown",
    "significance",
]

VERDICTS = ("faster", "slower", "same", "unstable")
FAIL_ON = fail_on.WORDS
"""The `--fail-on` words (harness.fail_on, shared with `harness regressions`)."""

# Cap on resampled values held at once (doubles), so long sample arrays do not blow up memory.
_BLOCK_VALUES = 1 << 21


@dataclass(frozen=True)
class Policy:
    """Thresholds that turn a detected change into a verdict.

    min_effect: smallest relative change of the median, |ratio - 1|, that counts (0.02 = 2%).
    alpha: a Mann-Whitney U p-value below this counts as significant.
    """

    min_effect: float = 0.02
    alpha: float = 0.05

    def __post_init__(self):
        if not _number_in(self.min_effect, 0, math.inf, low_open=False):
            raise ValueError(f"Policy.min_effect must be a number >= 0 (got {self.min_effect!r})")
        if not _number_in(self.alpha, 0, 1):
            raise ValueError(f"Policy.alpha must be a number in (0, 1) (got {self.alpha!r})")


@dataclass(frozen=True)
class Bootstrap:
    """Settings of the percentile bootstrap interval (numpy PCG64 seeded with `seed`)."""

    resamples: int = 10000
    confidence: float = 0.95
    seed: int = 0

    def __post_init__(self):
        if isinstance(self.resamples, bool) or not isinstance(self.resamples, int):
            raise ValueError(f"Bootstrap.resamples must be an int (got {self.resamples!r})")
        if self.resamples < 1:
            raise ValueError(f"Bootstrap.resamples must be >= 1 (got {self.resamples})")
        if not _number_in(self.confidence, 0, 1):
            raise ValueError(f"Bootstrap.confidence must be in (0, 1) (got {self.confidence!r})")


def _number_in(value, low: float, high: float, *, low_open: bool = True) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        return False
    return (low < value if low_open else low <= value) and value < high


@dataclass(frozen=True)
class Change:
    """ratio = statistic(head) / statistic(base) with its bootstrap interval [ci_low, ci_high]."""

    ratio: float
    ci_low: float
    ci_high: float

    @property
    def percent(self) -> float:
        """Relative change in percent: (ratio - 1) * 100; positive means head takes longer."""
        return (self.ratio - 1) * 100


# --- detection ---------------------------------------------------------------------------


def _row_medians(matrix: np.ndarray) -> np.ndarray:
    """Median of each row: mean of the two middle order statistics (one when n is odd)."""
    ordered = np.sort(matrix, axis=1)
    n = matrix.shape[1]
    return (ordered[:, (n - 1) // 2] + ordered[:, n // 2]) / 2


def _resampled(columns: tuple[np.ndarray, ...], rng, resamples: int) -> list[np.ndarray]:
    """Row medians of `resamples` draws of n indices with replacement, shared by all `columns`.

    Columns of one side share the indices, so paired samples (one per round) stay paired.
    """
    n = columns[0].size
    block = max(1, _BLOCK_VALUES // n)
    out = [np.empty(resamples) for _ in columns]
    for start in range(0, resamples, block):
        stop = min(resamples, start + block)
        idx = rng.integers(0, n, size=(stop - start, n))
        for column, medians in zip(columns, out, strict=True):
            medians[start:stop] = _row_medians(column[idx])
    return out


def _interval(boot: np.ndarray, confidence: float) -> tuple[float, float]:
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(boot, [tail, 100 - tail], method="linear")
    return float(low), float(high)


def _samples(values, what: str) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1 or array.size == 0 or not np.all(np.isfinite(array)):
        raise ValueError(f"{what}: expected a non-empty flat sequence of finite times in seconds")
    median_s = float(np.median(array))
    if median_s <= 0:
        raise ValueError(f"{what}: the median time is {median_s!r} s; expected > 0")
    return array


def detect(base_s, head_s, bootstrap: Bootstrap = Bootstrap()) -> Change:
    """Change of the median time: ratio = median(head) / median(base).

    Interval: percentile bootstrap (Efron) with the two sides resampled independently (they
    come from different runs, so nothing pairs them): `resamples` times draw n_base and n_head
    samples with replacement, take the ratio of their medians, and report the (1 - confidence) / 2
    and (1 + confidence) / 2 type-7 percentiles of those ratios.
    """
    base = _samples(base_s, "base samples")
    head = _samples(head_s, "head samples")
    rng = np.random.Generator(np.random.PCG64(bootstrap.seed))
    (base_boot,) = _resampled((base,), rng, bootstrap.resamples)
    (head_boot,) = _resampled((head,), rng, bootstrap.resamples)
    ratio = float(np.median(head)) / float(np.median(base))
    return Change(ratio, *_interval(head_boot / base_boot, bootstrap.confidence))


def detect_gap(base_pair: tuple, head_pair: tuple, bootstrap: Bootstrap = Bootstrap()) -> Change:
    """Change of a gap: ratio = gap(head) / gap(base), gap = median(candidate) / median(baseline).

    Each pair is (baseline samples, candidate samples) from paired rounds. Each bootstrap draw
    resamples whole rounds within a side (pairs kept, as the runner's own gap interval does) and
    the two sides independently; the interval is the percentile interval of the gap ratios.
    """
    sides = []
    for label, (baseline_s, candidate_s) in (("base", base_pair), ("head", head_pair)):
        baseline = _samples(baseline_s, f"{label} baseline samples")
        candidate = _samples(candidate_s, f"{label} candidate samples")
        if baseline.size != candidate.size:
            raise ValueError(
                f"{label}: baseline has {baseline.size} samples and candidate {candidate.size}; "
                "a gap needs one sample of each per round"
            )
        sides.append((baseline, candidate))
    rng = np.random.Generator(np.random.PCG64(bootstrap.seed))
    boot = []
    for baseline, candidate in sides:
        base_med, cand_med = _resampled((baseline, candidate), rng, bootstrap.resamples)
        boot.append(cand_med / base_med)
    (b_base, c_base), (b_head, c_head) = sides
    ratio = (np.median(c_head) / np.median(b_head)) / (np.median(c_base) / np.median(b_base))
    return Change(float(ratio), *_interval(boot[1] / boot[0], bootstrap.confidence))


# --- significance ------------------------------------------------------------------------


def significance(base_s, head_s) -> float:
    """Two-sided Mann-Whitney U test (scipy.stats.mannwhitneyu) p-value of base vs head.

    Rank-based, so it needs no normality and one outlier moves it little. Identical samples
    give 1.0; a NaN p-value (degenerate input) is reported as 1.0, i.e. no evidence.
    """
    # Imported here: scipy.stats takes about 0.9 s to import, most of `harness compare`'s start,
    # and no other command needs it.
    from scipy.stats import mannwhitneyu

    p_value = float(mannwhitneyu(base_s, head_s, alternative="two-sided").pvalue)
    return 1.0 if math.isnan(p_value) else p_value


# --- policy ------------------------------------------------------------------------------


def decide(change: Change, p_value: float, stable: bool, policy: Policy = Policy()) -> str:
    """unstable if a side is unstable; else slower / faster when p < alpha AND |ratio - 1| >=
    min_effect (the sign of ratio - 1 says which); else same."""
    if not stable:
        return "unstable"
    if p_value < policy.alpha and abs(change.ratio - 1) >= policy.min_effect:
        return "slower" if change.ratio > 1 else "faster"
    return "same"


# --- documents ---------------------------------------------------------------------------


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
        counts = dict.fromkeys(VERDICTS, 0)
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
    base_doc: dict, head_doc: dict, policy: Policy = Policy(), bootstrap: Bootstrap = Bootstrap()
) -> Comparison:
    """Compare every case and implementation present in both (validated) documents.

    Matched by case id and implementation name. Cases or implementations in one side only,
    failed or skipped cases, implementations without timing, and series whose key differs
    (GPU model, timing mode, suite or case version, source hashes) land in `not_compared`.
    """
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
        rows = _compare_case(base_doc, head_doc, base_case, head_case, policy, bootstrap)
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


def _compare_case(base_doc, head_doc, base_case, head_case, policy, bootstrap):
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
            row = _compare_gap(base_case, head_case, name, policy, bootstrap)
            (gaps if isinstance(row, GapChange) else skipped).append(row)
    return times, gaps, skipped


def _compare_gap(base_case, head_case, name, policy, bootstrap) -> GapChange | NotCompared:
    """Gap change of candidate `name`: detect_gap + a U test on the per-round ratios."""
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
    return GapChange(
        case_id,
        head_case["version"],
        name,
        head_case["baseline"],
        gaps[0]["ratio_of_medians"],
        gaps[1]["ratio_of_medians"],
        change,
        p_value,
        decide(change, p_value, stable, policy),
    )


def gate(comparison: Comparison, word: str) -> list[TimeChange | GapChange]:
    """The rows whose verdict trips `--fail-on word` (harness.fail_on); empty: the gate passes."""
    rows = [("time", r) for r in comparison.times] + [("gap", r) for r in comparison.gaps]
    return [r for metric, r in rows if fail_on.trips(word, metric, r.verdict)]


# --- markdown ----------------------------------------------------------------------------


def _pct(ratio: float) -> str:
    return f"{(ratio - 1) * 100:+.2f}%"


def _verdict_cell(verdict: str) -> str:
    return f"**{verdict}**" if verdict in ("slower", "unstable") else verdict


def _label(run: dict) -> str:
    commit = md(run["commit"][:12], code=True) if run["commit"] else "`unknown commit`"
    started = md(run["started_utc"][:16].replace("T", " "))
    return f"{commit} ({started} UTC, {md(run['gpu'])})"


def _columns(first: str, second: str, base: str, head: str, conf: str) -> list[Column]:
    titles = (first, second, base, head, "Change", f"{conf} CI", "p", "Verdict")
    return [Column(t, right=i in (2, 3, 4, 5, 6)) for i, t in enumerate(titles)]


def markdown(comparison: Comparison) -> str:
    """A markdown report for a pull-request comment or a CI job summary; every name and reason
    from the documents is escaped (harness.escaping.markdown)."""
    c, policy = comparison, comparison.policy
    counts = ", ".join(f"{n} {v}" for v, n in c.counts().items() if n)
    conf = f"{c.bootstrap.confidence:.0%}"
    parts = [
        "## kernelgap compare\n\n"
        f"base {_label(c.base)} → head {_label(c.head)}: {counts or 'nothing compared'}\n\n"
        f"A change counts when the two-sided Mann-Whitney U p-value is below {policy.alpha:g} "
        f"and the median moves by at least {policy.min_effect:.1%}; `unstable` when either "
        "side's noise is above the runner's limit. Change = head / base - 1 (+ is slower); "
        f"the interval is a {conf} bootstrap interval of the ratio of medians.\n"
    ]
    if c.times:
        rows = [
            (
                f"{r.case_id} v{r.case_version}",
                f"{r.impl} ({r.role})",
                format_time(r.base_median_s),
                format_time(r.head_median_s),
                _pct(r.change.ratio),
                f"{_pct(r.change.ci_low)} … {_pct(r.change.ci_high)}",
                f"{r.p_value:.2g}",
                _verdict_cell(r.verdict),
            )
            for r in c.times
        ]
        columns = _columns("Case", "Implementation", "Base", "Head", conf)
        parts.append(format_table(MARKDOWN, columns, rows))
    if c.gaps:
        rows = [
            (
                f"{r.case_id} v{r.case_version}",
                f"{r.candidate} vs {r.baseline}",
                f"{r.base_gap:.4f}x",
                f"{r.head_gap:.4f}x",
                _pct(r.change.ratio),
                f"{_pct(r.change.ci_low)} … {_pct(r.change.ci_high)}",
                f"{r.p_value:.2g}",
                _verdict_cell(r.verdict),
            )
            for r in c.gaps
        ]
        columns = _columns("Case", "Candidate", "Base gap", "Head gap", conf)
        parts.append(
            "### Gaps (candidate / baseline; lower is better)\n\n"
            + format_table(MARKDOWN, columns, rows)
        )
    if c.not_compared:
        items = [
            f"- {md(r.case_id, code=True)}{f' / {md(r.impl, code=True)}' if r.impl else ''}: "
            f"{md(r.reason)}\n"
            for r in c.not_compared
        ]
        parts.append("### Not compared\n\n" + "".join(items))
    return "\n".join(parts)
