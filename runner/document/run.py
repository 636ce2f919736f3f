"""The run's document: its cases under one envelope, with the summary and headline gaps."""

from __future__ import annotations

from protocol.headline import candidate_headlines
from protocol.version import RESULT_SCHEMA_VERSION

__all__ = ["document", "point_counts", "summary"]


def summary(cases: list[dict]) -> dict:
    """Counts, and per candidate the headline: its geometric-mean gap over the fixed set of
    cases it is in, with an interval, the cases missing from it and the unstable ones in it
    (protocol.headline)."""
    ok = [c for c in cases if c["status"] == "ok"]
    return {
        "cases": len(cases),
        "ok": len(ok),
        "failed": sum(c["status"] == "failed" for c in cases),
        "skipped": sum(c["status"] == "skipped" for c in cases),
        "unstable": sum(
            any(i.get("gap") and not i["gap"]["stable"] for i in c["implementations"].values())
            for c in ok
        ),
        "geomean_gap": candidate_headlines(cases),
        **({"points": counts} if (counts := point_counts(cases)) else {}),
    }


def point_counts(cases: list[dict]) -> dict | None:
    """With swept cases: how many, their points and how each ended (the headline, a reference
    in `points`, with its case's status); None without."""
    swept = [c for c in cases if c.get("points")]
    if not swept:
        return None
    statuses = [
        c["status"] if p.get("headline") else p["status"] for c in swept for p in c["points"]
    ]
    return {
        "cases": len(swept),
        "points": len(statuses),
        **{s: statuses.count(s) for s in ("ok", "failed", "skipped")},
    }


def document(
    suite_block: dict,
    environment: dict,
    options: dict,
    cases: list[dict],
    started: str,
    finished: str | None,
) -> dict:
    """The result document (schemas/result.schema.json); `finished` None while it is partial."""
    return {
        "schema_version": RESULT_SCHEMA_VERSION,
        "kind": "kernelgap.result",
        "complete": finished is not None,
        "suite": suite_block,
        "options": options,
        "environment": environment,
        "started_utc": started,
        "finished_utc": finished,
        "cases": cases,
        "summary": summary(cases),
    }
