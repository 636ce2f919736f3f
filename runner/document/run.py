"""The run's document: its cases under one envelope, with the summary and headline gaps (the
summary is protocol.documents', which the harness also uses to merge a cluster's cases)."""

from __future__ import annotations

from protocol.documents import point_counts, summary
from protocol.version import RESULT_SCHEMA_VERSION

__all__ = ["document", "point_counts", "summary"]


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
