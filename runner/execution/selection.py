"""`runner bench --case` and `--point`: which cases, and which points of a swept case, are run.

`--case` takes a case id, a point id (`axpy_f64[n=2^20]`: that case at that point) or a glob
over either (`axpy*`, `*[n=2^20]`); `--point` takes a point id, a bare one (`n=2^20`, at every
case that has it) or a glob. Globs know `*` and `?`; a `[` is a point id's bracket, never a
character class. A pattern that selects nothing is bad input naming the pattern.
"""

from __future__ import annotations

import re

from runner.definition.spec import CaseSpec, ManifestError, Suite

__all__ = ["select"]


def _matches(pattern: str, name: str) -> bool:
    """`name` is `pattern` or matches it as a glob of * and ? only."""
    if pattern == name:
        return True
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, name) is not None


def _hits(pattern: str, case: CaseSpec) -> bool:
    """Whether `pattern` selects the case or one of its points."""
    return _matches(pattern, case.id) or any(
        _matches(pattern, f"{case.id}[{p}]") for p in _point_ids(case)
    )


def _point_ids(case: CaseSpec) -> list[str]:
    return [p.id for p in case.sweep.points] if case.sweep else []


def _by_case_pattern(suite: Suite, patterns: tuple[str, ...]) -> dict[str, set[str] | None]:
    """{case id: its selected point ids, None for all} from --case patterns."""
    chosen: dict[str, set[str] | None] = {}
    for pattern in patterns:
        hit = False
        for case in suite.cases:
            if _matches(pattern, case.id):
                chosen[case.id], hit = None, True
                continue
            points = {p for p in _point_ids(case) if _matches(pattern, f"{case.id}[{p}]")}
            if points:
                hit = True
                if chosen.get(case.id, set()) is not None:
                    chosen[case.id] = chosen.get(case.id, set()) | points
        if not hit:
            raise ManifestError(
                f"{suite.path}: --case: no case with id {pattern!r}, and no point or glob matches it "
                f"(cases: {', '.join(c.id for c in suite.cases)})"
            )
    return chosen


def _by_point_pattern(suite: Suite, patterns: tuple[str, ...]) -> dict[str, set[str]]:
    """{case id: its point ids that --point patterns select} (swept cases only)."""
    chosen: dict[str, set[str]] = {}
    for pattern in patterns:
        hit = False
        for case in suite.cases:
            for p in _point_ids(case):
                name = f"{case.id}[{p}]" if "[" in pattern else p
                if _matches(pattern, name):
                    chosen.setdefault(case.id, set()).add(p)
                    hit = True
        if not hit:
            swept = [f"{c.id}[{p}]" for c in suite.cases for p in _point_ids(c)][:8]
            raise ManifestError(
                f"{suite.path}: --point {pattern}: no point matches "
                f"(points look like {', '.join(swept) or 'nothing: no case has axes'})"
            )
    return chosen


def select(
    suite: Suite, case_patterns: tuple[str, ...], point_patterns: tuple[str, ...] = ()
) -> tuple[list[CaseSpec], dict[str, tuple[str, ...]]]:
    """(the cases to run, in the order of the --case patterns that name them, else the suite's;
    {case id: the points to run, in declared order}
    for each swept case run at fewer than all its points)."""
    by_case = _by_case_pattern(suite, case_patterns) if case_patterns else None
    by_point = _by_point_pattern(suite, point_patterns) if point_patterns else None
    cases, points = [], {}
    for case in suite.cases:
        if by_case is not None and case.id not in by_case:
            continue
        if by_point is not None and case.id not in by_point:
            continue
        wanted = None if by_case is None else by_case[case.id]
        if by_point is not None:
            wanted = by_point[case.id] if wanted is None else wanted & by_point[case.id]
            if not wanted:
                continue
        cases.append(case)
        if wanted is not None:
            points[case.id] = tuple(p for p in _point_ids(case) if p in wanted)
    if by_case is not None:  # in the order asked for, as the ids were run before patterns
        cases.sort(key=lambda c: next(i for i, p in enumerate(case_patterns) if _hits(p, c)))
    if not cases:
        raise ManifestError(
            f"{suite.path}: --case {' '.join(case_patterns)} with --point "
            f"{' '.join(point_patterns)}: no point is selected by both"
        )
    return cases, points
