"""Reading a result document from bytes (decode, version check, schema validation, in that order),
and its summary of the cases (the runner writes it; the harness recomputes it when it merges
cases run apart, harness.running.model_documents)."""

from __future__ import annotations

from protocol.codec import decode
from protocol.headline import candidate_headlines
from protocol.points import as_rows
from protocol.validation import validate
from protocol.version import RESULT_SCHEMA_VERSION, check_version

__all__ = ["load_result", "point_counts", "summary"]


def load_result(data: bytes, what: str) -> dict:
    """The result document in `data`; ValueError naming `what` (a file, 'stdin', a host) if it is
    malformed JSON, of a major version this tool does not read, or not valid against the schema.
    A swept case's points come as rows of their own (protocol.points.as_rows)."""
    document = decode(data, what)
    if isinstance(document, dict) and "schema_version" in document:
        check_version(document["schema_version"], RESULT_SCHEMA_VERSION, what)
    validate(document, "result", what)
    return as_rows(document)


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
