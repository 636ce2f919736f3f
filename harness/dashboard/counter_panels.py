"""Each case's counter panel in data.js: the static counters (harness.history.counters) of its
primary candidate and its baseline over time, drawn under the case's gap chart (counters.js)
with every step marked, each step linked to its explanation.

Static counters carry no noise, so a line is a step line: data.js keeps only the runs where a
line's counter set changed (with the run before each change, its first and its newest run) and
each distinct set of the case once. A step is said in the words `harness changes` uses (the
compilers on each side, then the counters that differ, most telling first); a change point of
the case's times that a counter step of the same implementation falls in (after its last run
before, up to its first after) names that step, so its mark leads to the explanation too.
Profiled counters (ncu) are sampled, not steps: the panel leaves them to `harness explain`.
"""

from __future__ import annotations

import re
from collections import defaultdict
from itertools import pairwise

import numpy as np

from harness.analysis.counter_diff import differences, label
from harness.dashboard.case_charts import Series
from harness.history.counter_series import counter_sets, static_changes
from harness.history.counters import CLASS_LABELS, RESOURCE_UNITS, unit, value
from harness.history.series import describe_compiler
from harness.history.store import Store
from harness.reporting.change_report import code_words

__all__ = ["counter_panels", "link_marks"]

ORDER = [
    *(f"static/{name}" for name in RESOURCE_UNITS),
    "static/occupancy",
    "static/loops",
    *(f"static/instructions/{name}" for name in ("total", *CLASS_LABELS)),
    *(f"static/in_loops/{name}" for name in ("total", *CLASS_LABELS)),
]  # the panel's rows, resources first (names outside it go last, by name)


def _shown(case_series: list[Series], primary: str | None) -> list[Series]:
    """The series of the case's primary candidate (else its first candidate) and baseline."""
    candidates = sorted({s.info["impl"] for s in case_series if s.info["role"] == "candidate"})
    chosen = primary if primary in candidates else (candidates[0] if candidates else None)
    return [s for s in case_series if s.info["role"] == "baseline" or s.info["impl"] == chosen]


def _compiler(s: Series, run: int) -> str:
    k = int(np.searchsorted(s.run, run))
    if k >= len(s.run) or s.run[k] != run:
        return ""
    return describe_compiler(*(field[k] for field in s.compiler))


def counter_panels(
    store: Store,
    all_series: list[Series],
    runs: list[dict],
    colors: dict[str, str],
    primary: str | None,
    used: set,
) -> dict[str, dict]:
    """{case_id: its panel} for the cases with static counters (module doc); runs as indices
    into `runs` (store.runs()); the runs the panels name are added to `used`."""
    by_case: dict[str, list[Series]] = defaultdict(list)
    for s in all_series:
        by_case[s.info["case_id"]].append(s)
    shown = {case: _shown(members, primary) for case, members in by_case.items()}
    changes = static_changes(store, [s.info["series_id"] for ss in shown.values() for s in ss])
    sets = counter_sets(store, {k for found in changes.values() for _, k in found})
    run_index = {r["run_id"]: i for i, r in enumerate(runs)}
    panels = {}
    for case, members in shown.items():
        lines: dict[tuple, list] = defaultdict(list)  # (impl, mode) -> [(run, set, series)]
        for s in members:
            for run_id, k in changes.get(s.info["series_id"], ()):
                lines[s.info["impl"], s.info["mode"]].append((run_index[run_id], k, s))
        if lines:
            panels[case] = _panel(case, lines, sets, colors)
            used.update(r for line in panels[case]["lines"] for r in line["run"])
    return panels


def _panel(case: str, lines: dict[tuple, list], sets: dict[int, dict], colors) -> dict:
    """One case's panel: names, labels, units, its distinct sets' values, lines and steps."""
    ids = sorted({k for found in lines.values() for _, k, _ in found})
    names = sorted(
        {n for k in ids for n in sets[k]},
        key=lambda n: (ORDER.index(n) if n in ORDER else len(ORDER), n),
    )
    out_lines, steps = [], []
    for (impl, mode), found in sorted(lines.items(), key=lambda kv: kv[1][0][2].info["role"]):
        found.sort(key=lambda f: f[0])
        role = found[0][2].info["role"]
        out_lines.append(
            {
                "impl": impl,
                "role": role,
                "mode": mode,
                "color": colors.get(impl, "#333333"),
                "run": [r for r, _, _ in found],
                "set": [ids.index(k) for _, k, _ in found],
            }
        )
        for (r0, a, s0), (r1, b, s1) in pairwise(found):
            if a == b:
                continue
            counters = tuple(c for c in differences(sets[a], sets[b]) if not c.profiled)
            before, after = _compiler(s0, r0), _compiler(s1, r1)
            steps.append(
                {
                    "id": _step_id(mode, impl, len(steps)),
                    "impl": impl,
                    "mode": mode,
                    "run": r1,
                    "from": r0,
                    "names": [c.name for c in counters],
                    "text": code_words(before, after, counters, True),
                }
            )
    return {
        "names": names,
        "labels": [label(n) for n in names],
        "units": [unit(n, next((sets[k] for k in ids if n in sets[k]), {})) for n in names],
        "sets": [[value(sets[k], n) for n in names] for k in ids],
        "lines": out_lines,
        "steps": steps,
    }


def _step_id(mode: str, impl: str, k: int) -> str:
    """The step's element id on its case page: counter-step-<mode>-<impl>-<k>, made safe."""
    return re.sub(r"[^A-Za-z0-9_-]+", "-", f"counter-step-{mode}-{impl}-{k}")


def link_marks(marks: list[dict], panel: dict | None) -> None:
    """Each change mark of a case (runs as indices into store.runs()) that a counter step of
    its implementation and mode falls in gets that step's id as "step"."""
    for m in marks:
        for step in (panel or {}).get("steps", ()):
            same = (step["impl"], step["mode"]) == (m["impl"], m["mode"])
            if same and m["from"] < step["run"] <= m["run"]:
                m["step"] = step["id"]
                break
