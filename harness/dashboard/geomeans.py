"""The suite's geometric-mean gap per run (its chart's traces) and the headline cards.

Headline: the geometric-mean gap exp(mean(ln gap)) per candidate over the suite's fixed set of
cases (protocol.headline): every case of the run the candidate is in; a case whose gap is
unstable stays in and is counted as unstable, a case that failed or has no gap is counted as
missing ("over 7 of 8"), so the set never changes because a case turned noisy. Each point and
card carries the mean's 95% interval, propagated from the cases' intervals in log space
(independent cases: var = sum of se^2 / k^2). A card's change against the latest earlier run of
the same GPU model, timing mode and suite version is over the cases with a gap in both (a case
new in one of the two runs would otherwise move the change by itself). On the suite line, a
point whose cases differ from the previous drawn point's says so ("cases: 7 (was 8); without
transpose"). The suite's primary candidate (harness.reporting.table) leads: its card and its line come
first.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from itertools import pairwise

import numpy as np

from harness.dashboard.case_charts import MAX_POINTS, Series, display_indices, key_change, rounded
from harness.history import cards

__all__ = ["gaps_by_run", "suite_geomeans"]

SUITE_FIELDS = ("gpu", "mode", "suite_version")
Z95 = statistics.NormalDist().inv_cdf(0.975)


def suite_geomeans(
    all_series: list[Series],
    runs: list[dict],
    colors: dict[str, str],
    used: set,
    primary: str | None,
    max_points: int = MAX_POINTS,
    latest_of: dict[str | None, int] | None = None,
) -> tuple[list[dict], list[dict]]:
    """The suite geomean gap per run (one trace per candidate and GPU/mode/suite version) and
    the headline cards of each mode's newest run (latest_of: mode -> its newest run; default
    the newest run's), the primary candidate's first. Each card carries its trend: the
    geomean of every run of its key, for the sparkline and "since" figures."""
    latest = len(runs) - 1
    latest_of = latest_of or {}
    logs, missing, baselines = gaps_by_run(all_series)
    traces, cards = [], []
    previous_key: dict[tuple, dict] = {}  # (candidate, mode) -> its previous suite key
    # A candidate that never had a gap (never checked) has no line and no card.
    order = (k for k in logs if logs[k])
    for key in sorted(order, key=lambda k: (k[3] != primary, k[3], min(logs[k]))):
        impl, per_run = key[3], logs[key]
        newest = latest_of.get(key[1], latest)
        run_arr = np.array(sorted(per_run), dtype=np.int64)
        means = [_geomean(per_run[r].values()) for r in run_arr.tolist()]
        gap = np.array([m[0] for m in means])
        if newest in per_run or newest in missing[key]:
            names = {b for r, b in baselines[key] if r == newest}
            card = _card(key, per_run, missing[key], newest, names)
            card["trend"] = {"run": run_arr.tolist(), "gap": rounded(gap, 4)}
            cards.append(card)
            used.update(run_arr.tolist())
        keep = display_indices(len(run_arr), np.zeros(len(run_arr), bool), (gap,), max_points)
        used.update(run_arr[keep].tolist())
        kept = run_arr[keep].tolist()
        drawn = [per_run[r].keys() | missing[key].get(r, set()) for r in kept]
        suite_key = dict(zip(SUITE_FIELDS, key[:3], strict=True))
        change = key_change(previous_key.get((impl, key[1])), suite_key)
        previous_key[(impl, key[1])] = suite_key
        traces.append(
            {
                "impl": impl,
                "name": f"{impl} · {change}" if change else impl,
                "change": change,
                "color": colors[impl],
                "mode": key[1],
                "gpu": key[0],
                "suite": f"{key[0]} | {key[1]} | suite v{key[2]}",
                "run": kept,
                "gap": rounded(gap[keep]),
                "lo": rounded(np.array([m[1] for m in means])[keep]),
                "hi": rounded(np.array([m[2] for m in means])[keep]),
                "cases": [len(per_run[r]) for r in kept],
                "of": [len(c) for c in drawn],
                "unstable": [sum(not v[2] for v in per_run[r].values()) for r in kept],
                # How each point's cases differ from the previous drawn point's, and which of
                # its set have no gap ('' if the set is alike and whole).
                "cases_note": [
                    _join(changed, _missing_note(missing[key].get(r, set())))
                    for changed, r in zip(
                        [""] + [_case_set_note(a, b) for a, b in pairwise(drawn)], kept, strict=True
                    )
                ],
            }
        )
    for card in cards:
        if card["previous"]:
            used.add(card["previous"]["run"])
    return traces, cards


def gaps_by_run(all_series: list[Series]) -> tuple[dict, dict, dict]:
    """The candidates' gaps run by run, keyed (gpu, mode, suite version, candidate): the ln gap,
    its standard error and stability per case with a gap; the cases without one; and each
    series' (newest run, baseline), so a card names the baselines of its run."""
    # (gpu, mode, suite version, candidate) -> run -> {(case id, case version): (ln gap, se of
    # ln gap, stable)} of the cases with a gap, and -> run -> the cases without one (missing).
    logs: dict[tuple, dict[int, dict]] = defaultdict(dict)
    missing: dict[tuple, dict[int, set]] = defaultdict(lambda: defaultdict(set))
    baselines: dict[tuple, set] = defaultdict(set)
    for s in all_series:
        if s.info["role"] != "candidate":
            continue
        key = (*(s.info[f] for f in SUITE_FIELDS), s.info["impl"])
        case = (s.info["case_id"], s.info["case_version"])
        per_run = logs[key]
        has_gap = ~np.isnan(s.gap)
        ln_gap = np.log(np.where(has_gap, s.gap, 1.0))
        se = cards.log_standard_errors(s.ci_low, s.ci_high)
        for run, ln, err, stable, present in zip(
            s.run.tolist(),
            ln_gap.tolist(),
            se.tolist(),
            s.gap_stable.tolist(),
            has_gap.tolist(),
            strict=True,
        ):
            if present:
                per_run.setdefault(run, {})[case] = (ln, err, bool(stable))
            else:
                missing[key][run].add(case)
        for run in s.failed:
            missing[key][run].add(case)
        if len(s.run):
            baselines[key].add((int(s.run[-1]), s.info["baseline"]))
    return logs, missing, baselines


def _geomean(cases) -> tuple[float, float, float]:
    """(geometric mean, 95% low, 95% high) of (ln gap, se, stable) tuples: independent cases,
    var(mean ln gap) = sum of se^2 / k^2."""
    values = list(cases)
    k = len(values)
    mean = math.fsum(v[0] for v in values) / k
    half = Z95 * math.sqrt(math.fsum(v[1] ** 2 for v in values)) / k
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


def _join(*parts: str) -> str:
    return "; ".join(p for p in parts if p)


def _missing_note(cases: set, shown: int = 3) -> str:
    """'' when none of the point's cases is missing, else 'missing: transpose'."""
    names = sorted(c for c, _ in cases)
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return f"missing: {', '.join(names[:shown])}{more}" if names else ""


def _case_set_note(before, after, shown: int = 3) -> str:
    """'' when two points' stable cases are the same, else what changed:
    'cases: 7 (was 8); without transpose; with matmul v2'."""
    if before == after:
        return ""
    gone, new = before - after, after - before
    both = {c for c, _ in gone} & {c for c, _ in new}  # a case whose version changed

    def names(cases) -> str:
        words = sorted(f"{c} v{v}" if c in both else c for c, v in cases)
        more = f" and {len(words) - shown} more" if len(words) > shown else ""
        return ", ".join(words[:shown]) + more

    parts = [f"cases: {len(after)} (was {len(before)})"]
    parts += [f"without {names(gone)}"] if gone else []
    parts += [f"with {names(new)}"] if new else []
    return "; ".join(parts)


def _card(key: tuple, per_run: dict, missing: dict, latest: int, baselines: set) -> dict:
    """A headline card: the newest run's geomean gap of one candidate over its fixed set of
    cases (with its interval, the unstable cases in it and the missing ones), and its change
    against the previous run sharing cases with a gap with it, over those common cases only:
    exp(mean over common cases c of (ln gap_now(c) - ln gap_before(c))) - 1."""
    now = per_run.get(latest, {})
    gap, lo, hi = _geomean(now.values()) if now else (None, None, None)
    earlier = [r for r, before in per_run.items() if r < latest and now.keys() & before.keys()]
    previous, change = None, None
    if earlier:
        r = max(earlier)
        before = per_run[r]
        common = sorted(now.keys() & before.keys())
        change = math.exp(math.fsum(now[c][0] - before[c][0] for c in common) / len(common)) - 1
        previous = {
            "run": r,
            "gap": _geomean(before.values())[0],  # over all of its cases, as once shown
            "cases": len(before),
            "common": len(common),
            "common_gap": _geomean(before[c] for c in common)[0],
            "common_gap_now": _geomean(now[c] for c in common)[0],
        }
    gone = missing.get(latest, set())
    return {
        "candidate": key[3],
        "baseline": ", ".join(sorted(baselines)) or "baseline",
        "gpu": key[0],
        "mode": key[1],
        "suite_version": key[2],
        "gap": gap,
        "ci_low": lo,
        "ci_high": hi,
        "cases": len(now),
        "of": len(now) + len(gone),
        "unstable": sorted(c[0] for c, v in now.items() if not v[2]),
        "missing": sorted(c for c, _ in gone),
        "run": latest,
        "previous": previous,
        "change": change,
    }
