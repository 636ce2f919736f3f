"""A swept case's block: the headline point's measurements as the case's own, every point in
`points`, and the curve each candidate's gap draws across them.

The case block stays what a case has always been (its id, version, dims and gaps are the
headline point's), so a reader that knows no sweeps, the suite's geomean and the history of the
case's single number go on unchanged. `points` lists every point in declared order: the
headline as a reference ({point, headline, dims}), every other point as a block of its own with
the fields a case has (status, dims, check_dims, launch, implementations with timing and gap).
"""

from __future__ import annotations

__all__ = ["NEAR_PARITY", "curve", "point_block", "sweep_block"]

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
