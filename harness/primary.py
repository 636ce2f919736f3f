"""The suite's primary candidate: the one the summary, the exports and the dashboard lead with.

A suite names its headline candidate in `[suite] primary` (the document's `suite.primary`, since
result schema 1.2.0). Older documents lack it; for them the candidate named FALLBACK leads when
the run has one, and otherwise nothing leads and every reader keeps its existing order.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["FALLBACK", "lead_first", "primary_candidate"]

FALLBACK = "warpforth"  # the first compiler kernelgap was built to measure (DESIGN.md)


def primary_candidate(document: dict) -> str | None:
    """The headline candidate's name: `suite.primary`, else FALLBACK if a case has it as a
    candidate, else None. A named primary that this run lacks (a `--case` subset, a skipped
    compiler) still leads: readers then say it has no gap rather than quietly promote another."""
    named = (document.get("suite") or {}).get("primary")
    if named:
        return named
    for case in document.get("cases") or ():
        impl = (case.get("implementations") or {}).get(FALLBACK)
        if impl and impl.get("role") == "candidate":
            return FALLBACK
    return None


def lead_first(names: Iterable[str], primary: str | None) -> list[str]:
    """`names` in their order with `primary` moved to the front (unchanged when it is absent)."""
    names = list(names)
    if primary not in names:
        return names
    return [primary, *(n for n in names if n != primary)]
