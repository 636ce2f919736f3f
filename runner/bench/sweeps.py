"""A swept workload's rows as the points of one case (runner.document.points), as `runner bench`
writes a suite's swept case: the headline row's comparison is the case block, every other row
one of its points. Rows of workloads without `sweep = True` stay cases of their own."""

from __future__ import annotations

from runner.document import sweep_block

__all__ = ["group_rows"]


def group_rows(cases: list[dict]) -> list[dict]:
    """`cases` (a session's case documents) with each swept workload's rows folded into one
    case block per op and dtype, in the place of its first row."""
    groups: dict[str, list[dict]] = {}
    out: list[dict | str] = []
    for doc in cases:
        sweep = doc.get("sweep")
        if sweep is None:
            out.append(doc)
            continue
        if sweep["case"] not in groups:
            groups[sweep["case"]] = []
            out.append(sweep["case"])
        groups[sweep["case"]].append(doc)
    return [item if isinstance(item, dict) else _block(item, groups[item]) for item in out]


def _block(case_id: str, docs: list[dict]) -> dict:
    docs = sorted(docs, key=lambda d: d["sweep"]["order"])
    headline = docs[0]["sweep"]["headline"]
    points = [(d["sweep"]["point"], d["dims"], _bare(d)) for d in docs]
    lead = next((d for pid, _, d in points if pid == headline), None)
    if lead is None:  # the headline row was not compared: the last row leads, marked
        headline, lead = points[-1][0], points[-1][2]
    head = {**lead, "id": case_id, "description": f"{lead['op']} on {lead['workload']}, by row"}
    return sweep_block(headline, head, ["row"], [(p, dims, d) for p, dims, d in points])


def _bare(doc: dict) -> dict:
    return {k: v for k, v in doc.items() if k != "sweep"}
