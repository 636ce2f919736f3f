"""A swept case's points as rows of their own: how the harness reads a sweep (stdlib only).

On the wire a swept case is one block (the headline point's measurements) with its other points
nested in `points` (runner.document.sweep_block). The harness compares, stores and charts per
point, so `as_rows` gives each non-headline point a case-shaped row right after its case, with
id `case[point]` (`axpy_f64[n=2^20]`) and `point_of` naming the case: every reader that walks
`document["cases"]` then names the point, and a history series keys on it through the case id,
while the headline keeps the case's own id and so its series. A row with `point_of` is never
part of a headline geomean (protocol.headline). `as_rows` is idempotent: the rows it made leave
only references ({point, dims, status}) in the case's `points`.
"""

from __future__ import annotations

__all__ = [
    "as_rows",
    "is_option_point",
    "is_point_row",
    "point_case_id",
    "point_rows",
    "split_id",
    "swept_cases",
]

_FROM_CASE = ("version", "description", "baseline", "device", "frontend")


def point_case_id(case_id: str, point: str) -> str:
    """`axpy_f64[n=2^20]`: the id a point's row and its series carry."""
    return f"{case_id}[{point}]"


def split_id(case_id: str) -> tuple[str, str | None]:
    """(case id, point id or None) of a row's id: `axpy_f64[n=2^20]` -> ("axpy_f64", "n=2^20")."""
    if case_id.endswith("]") and "[" in case_id:
        head, _, point = case_id[:-1].partition("[")
        return head, point
    return case_id, None


def is_option_point(case: dict, point: str) -> bool:
    """Whether `point` of `case` is an option axis's (`clang_O=O1`: its implementation built
    another way at the case's dims), not a size: its axis is none of the case's dims."""
    axis = point.split("=", 1)[0]
    return axis in (case.get("axes") or ()) and axis not in (case.get("dims") or {})


def is_point_row(case: dict) -> bool:
    """Whether `case` is a non-headline point's row (never in a headline geomean)."""
    return "point_of" in case


def point_rows(case: dict) -> list[dict]:
    """The rows of a swept case's non-headline points (nested with their measurements)."""
    rows = []
    for point in case.get("points") or ():
        if point.get("headline") or "implementations" not in point:
            continue
        row = {k: v for k, v in point.items() if k != "point"}
        row.update({k: case[k] for k in _FROM_CASE if k in case})
        row.update(id=point_case_id(case["id"], point["point"]), point_of=case["id"])
        row["point"] = point["point"]
        rows.append(row)
    return rows


def _reference(point: dict) -> dict:
    keep = ("point", "headline", "dims", "status")
    return {k: point[k] for k in keep if k in point}


def as_rows(document: dict) -> dict:
    """`document` (not changed) with every swept case followed by its points' rows, the case's
    `points` left as references; the same document when no case is swept."""
    if not any(c.get("points") for c in document.get("cases", ())):
        return document
    cases = []
    for case in document["cases"]:
        rows = point_rows(case)
        if not rows:
            cases.append(case)
            continue
        cases.append({**case, "points": [_reference(p) for p in case["points"]]})
        cases.extend(rows)
    return {**document, "cases": cases}


def swept_cases(document: dict) -> list[tuple[dict, list[tuple[str, dict | None]]]]:
    """(case block, [(point id, its block: the case itself for the headline, its row for
    another, None where the document lacks it)]) of every swept case, points in declared order."""
    document = as_rows(document)
    by_id = {c["id"]: c for c in document["cases"]}
    found = []
    for case in document["cases"]:
        if not case.get("points") or "point_of" in case:
            continue
        blocks = [
            (
                p["point"],
                case if p.get("headline") else by_id.get(point_case_id(case["id"], p["point"])),
            )
            for p in case["points"]
        ]
        found.append((case, blocks))
    return found
