"""The suite's primary candidate: the one the summary, the exports and the dashboard lead with.

A suite names its headline candidate in `[suite] primary` of its cases.toml (checked by the
manifest loader: it must be some case's candidate), which a result document carries as
`suite.primary` (since result schema 1.2.0). It comes from the suite alone: a document without
one (a suite that declares none, or an older document) has no primary, and every reader keeps
its existing order.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["lead_first", "primary_candidate"]


def primary_candidate(document: dict) -> str | None:
    """The headline candidate's name, `suite.primary`, or None where the suite declares none. A
    named primary that this run lacks (a `--case` subset, a skipped compiler) still leads:
    readers then say it has no gap rather than quietly promote another."""
    return (document.get("suite") or {}).get("primary") or None


def lead_first(names: Iterable[str], primary: str | None) -> list[str]:
    """`names` in their order with `primary` moved to the front (unchanged when it is absent)."""
    names = list(names)
    if primary not in names:
        return names
    return [primary, *(n for n in names if n != primary)]
