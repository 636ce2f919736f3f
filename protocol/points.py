"""A swept case's points as rows of their own: how the harness reads a sweep (stdlib only).

On the wire a swept case is one block (the headline point's measurements) with its other points
nested in `points` (sweep_block, which the runner writes with; merge_points puts a sweep dealt
point by point over a cluster back together the same way). The harness compares, stores and charts per
point, so `as_rows` gives each non-headline point a case-shaped row right after its case, with
id `case[point]` (`axpy_f64[n=2^20]`) and `point_of` naming the case: every reader that walks
`document["cases"]` then names the point, and a history series keys on it through the case id,
while the headline keeps the case's own id and so its series. A row with `point_of` is never
part of a headline geomean (protocol.headline). `as_rows` is idempotent: the rows it made leave
only references ({point, dims, status}) in the case's `points`.
"""

from __future__ import annotations

__all__ = [
    "NEAR_PARITY",
    "SWEEP_KEYS",
    "as_rows",
    "curve",
    "is_option_point",
    "is_point_row",
    "measured_at",
    "merge_points",
    "point_block",
    "point_case_id",
    "point_rows",
    "split_id",
    "sweep_block",
    "swept_cases",
]

_FROM_CASE = ("version", "description", "baseline", "device", "frontend")
SWEEP_KEYS = ("point", "axes", "points", "curve", "options")  # a swept case's, not a point's


NEAR_PARITY = 1.1  # "within 1.1x": a gap in [1/1.1, 1.1]
_CASE_ONLY = ("id", "version", "description", "baseline", "device")


def point_block(point: str, case_doc: dict) -> dict:
    """A non-headline point's block from the case document measured at it."""
    return {"point": point, **{k: v for k, v in case_doc.items() if k not in _CASE_ONLY}}


def curve(points: list[tuple[str, dict]]) -> dict:
    """{candidate: its curve} over `points` ((point id, case-shaped block), declared order,
    smallest first): min and max gap and where, the points with a gap, and `near_parity_from`,
    the first point from which every gap stays within NEAR_PARITY of 1.0 (None where none)."""
    gaps: dict[str, list[tuple[str, float]]] = {}
    for pid, block in points:
        if block.get("status") != "ok":
            continue
        for name, impl in block.get("implementations", {}).items():
            if impl.get("role") != "baseline" and impl.get("gap"):
                gaps.setdefault(name, []).append((pid, impl["gap"]["ratio_of_medians"]))
    out = {}
    for name, series in gaps.items():
        low = min(series, key=lambda pg: pg[1])
        high = max(series, key=lambda pg: pg[1])
        near = None
        for pid, g in reversed(series):
            if not 1 / NEAR_PARITY <= g <= NEAR_PARITY:
                break
            near = pid
        out[name] = {
            "min_gap": low[1],
            "min_at": low[0],
            "max_gap": high[1],
            "max_at": high[0],
            "points": len(series),
            "near_parity_from": near,
        }
    return out


def sweep_block(
    headline: str, headline_doc: dict, axes: list[str], points: list[tuple[str, dict, dict]]
) -> dict:
    """The case block: `headline_doc` (the case measured at point `headline`) with `point`,
    `axes`, `points` ((id, dims, the document measured there) in declared order; the headline's
    document is `headline_doc`) and `curve`."""
    blocks, drawn = [], []
    for pid, dims, doc in points:
        if pid == headline:
            blocks.append({"point": pid, "headline": True, "dims": dims})
            drawn.append((pid, headline_doc))
        else:
            blocks.append(point_block(pid, doc))
            drawn.append((pid, doc))
    return {
        **headline_doc,
        "point": headline,
        "axes": axes,
        "points": blocks,
        "curve": curve(drawn),
    }


def measured_at(case: dict, point: str) -> dict | None:
    """The case-shaped block of swept case `case` at `point`: the case's own fields for its
    headline, the point's block for another (with the case's ids and device), None where
    `case` does not list it."""
    if point == case.get("point"):
        return {k: v for k, v in case.items() if k not in SWEEP_KEYS}
    for entry in case.get("points") or ():
        if entry["point"] == point and not entry.get("headline"):
            ids = {k: case[k] for k in _CASE_ONLY if k in case and k not in entry}
            return {**ids, **{k: v for k, v in entry.items() if k != "point"}}
    return None


def merge_points(skeleton: dict, at: dict[str, dict]) -> dict:
    """A swept case measured point by point, one run per point (a cluster's per-point dealing),
    as one run of the whole case writes it: `skeleton` (the case as the runner records it not
    run: every selected point, in declared order) with each point of `at` ({point id: its
    case-shaped block, measured_at}) in its place; a point keeps the device it ran on, and the
    curve is drawn again (over the sizes alone where the case has an option axis, as the runner
    draws it)."""
    headline = skeleton["point"]
    head = at.get(headline) or measured_at(skeleton, headline)
    blocks, drawn = [], []
    for entry in skeleton["points"]:
        pid = entry["point"]
        if entry.get("headline"):
            blocks.append(entry)
            drawn.append((pid, head))
            continue
        measured = at.get(pid)
        block = entry if measured is None else point_block(pid, measured)
        if measured is not None and "device" in measured:
            block["device"] = measured["device"]  # a point dealt alone may run on another GPU
        blocks.append(block)
        drawn.append((pid, block))
    case = {**head, **{k: skeleton[k] for k in SWEEP_KEYS if k in skeleton}, "points": blocks}
    case["curve"] = curve(drawn)
    if "options" in skeleton:  # the size curve is drawn over sizes alone
        case["curve"] = curve(
            [(p, b) for p, b in drawn if not is_option_point(case, p) or p == headline]
        )
    return case


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
        row.update({k: case[k] for k in _FROM_CASE if k in case and k not in row})
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
