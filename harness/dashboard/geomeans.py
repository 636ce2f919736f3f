"""The suite's geometric-mean gap per run (its chart's traces) and the headline cards.

Headline: the geometric-mean gap exp(mean(ln gap)) per candidate over the ok cases of the newest
run whose gap is stable (the rule of harness.summary.geomean_gaps), and its change against the
latest earlier run of the same GPU model, timing mode and suite version that shares stable
cases with it, computed over those common cases only (a case that failed, became unstable or is
new in one of the two runs would otherwise move the change by itself). On the suite line, a
point whose set of stable cases differs from the previous drawn point's says so ("cases: 7
(was 8); without transpose"). The suite's primary candidate (harness.primary) leads: its card
and its line come first.
"""

from __future__ import annotations

import math
from collections import defaultdict
from itertools import pairwise

import numpy as np

from harness.dashboard.case_charts import Series
from harness.dashboard.display import MAX_POINTS, display_indices, key_change, rounded

__all__ = ["suite_geomeans"]

SUITE_FIELDS = ("gpu", "mode", "suite_version")


def suite_geomeans(
    all_series: list[Series],
    runs: list[dict],
    colors: dict[str, str],
    used: set,
    primary: str | None,
    max_points: int = MAX_POINTS,
) -> tuple[list[dict], list[dict]]:
    """The suite geomean gap per run (one trace per candidate and GPU/mode/suite version) and
    the headline cards of the newest run; the primary candidate's first."""
    # (gpu, mode, suite version, candidate) -> run -> {(case id, case version): ln gap} of the
    # cases whose gap is stable, and -> run -> cases with a gap (stable or not).
    logs: dict[tuple, dict[int, dict]] = defaultdict(dict)
    gaps: dict[tuple, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    baselines: dict[tuple, set] = defaultdict(set)
    for s in all_series:
        if s.info["role"] != "candidate":
            continue
        key = (*(s.info[f] for f in SUITE_FIELDS), s.info["impl"])
        case = (s.info["case_id"], s.info["case_version"])
        per_run, counts = logs[key], gaps[key]
        has_gap = ~np.isnan(s.gap)
        ln_gap = np.log(np.where(has_gap, s.gap, 1.0))
        for run, ln, stable, present in zip(
            s.run.tolist(), ln_gap.tolist(), s.gap_stable.tolist(), has_gap.tolist(), strict=True
        ):
            if present:
                counts[run] += 1
                if stable:
                    per_run.setdefault(run, {})[case] = ln
        if len(s.run) and s.run[-1] == len(runs) - 1:
            baselines[key].add(s.info["baseline"])
    latest = len(runs) - 1
    traces, cards = [], []
    previous_key: dict[str, dict] = {}  # candidate -> its previous suite key
    # A candidate that never had a gap (never checked) has no line and no card.
    order = (k for k in gaps if gaps[k])
    for key in sorted(order, key=lambda k: (k[3] != primary, k[3], min(gaps[k]))):
        impl, per_run = key[3], logs[key]
        if latest in gaps[key]:
            cards.append(_card(key, per_run, gaps[key][latest], latest, baselines[key]))
            used.add(latest)
        if not per_run:
            continue
        run_arr = np.array(sorted(per_run), dtype=np.int64)
        gap = np.array([_geomean(per_run[r].values()) for r in run_arr.tolist()])
        keep = display_indices(len(run_arr), np.zeros(len(run_arr), bool), (gap,), max_points)
        used.update(run_arr[keep].tolist())
        drawn = [per_run[r].keys() for r in run_arr[keep].tolist()]
        suite_key = dict(zip(SUITE_FIELDS, key[:3], strict=True))
        change = key_change(previous_key.get(impl), suite_key)
        previous_key[impl] = suite_key
        traces.append(
            {
                "impl": impl,
                "name": f"{impl} · {change}" if change else impl,
                "change": change,
                "color": colors[impl],
                "suite": f"{key[0]} | {key[1]} | suite v{key[2]}",
                "run": run_arr[keep].tolist(),
                "gap": rounded(gap[keep]),
                "cases": [len(c) for c in drawn],
                # How each point's cases differ from the previous drawn point's ('' if alike).
                "cases_note": [""] + [_case_set_note(a, b) for a, b in pairwise(drawn)],
            }
        )
    for card in cards:
        if card["previous"]:
            used.add(card["previous"]["run"])
    return traces, cards


def _geomean(ln_gaps) -> float:
    values = list(ln_gaps)
    return math.exp(math.fsum(values) / len(values))


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


def _card(key: tuple, per_run: dict, with_gap: int, latest: int, baselines: set) -> dict:
    """A headline card: the newest run's geomean gap of one candidate over its stable cases,
    and its change against the previous run sharing stable cases with it, over those common
    cases only: exp(mean over common cases c of (ln gap_now(c) - ln gap_before(c))) - 1, so a
    case that became unstable, failed or new between the runs does not move the change."""
    now = per_run.get(latest, {})
    gap = _geomean(now.values()) if now else None
    earlier = [r for r, before in per_run.items() if r < latest and now.keys() & before.keys()]
    previous, change = None, None
    if earlier:
        r = max(earlier)
        before = per_run[r]
        common = sorted(now.keys() & before.keys())
        change = math.exp(math.fsum(now[c] - before[c] for c in common) / len(common)) - 1.0
        previous = {
            "run": r,
            "gap": _geomean(before.values()),  # over all of its stable cases, as once shown
            "cases": len(before),
            "common": len(common),
            "common_gap": _geomean(before[c] for c in common),
            "common_gap_now": _geomean(now[c] for c in common),
        }
    return {
        "candidate": key[3],
        "baseline": ", ".join(sorted(baselines)) or "baseline",
        "gpu": key[0],
        "mode": key[1],
        "suite_version": key[2],
        "gap": gap,
        "cases": len(now),
        "of": with_gap,
        "run": latest,
        "previous": previous,
        "change": change,
    }
