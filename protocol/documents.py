"""Reading a result document from bytes: decode, version check, schema validation, in that order."""

from __future__ import annotations

from protocol.codec import decode
from protocol.points import as_rows
from protocol.validation import validate
from protocol.version import RESULT_SCHEMA_VERSION, check_version


def load_result(data: bytes, what: str) -> dict:
    """The result document in `data`; ValueError naming `what` (a file, 'stdin', a host) if it is
    malformed JSON, of a major version this tool does not read, or not valid against the schema.
    A swept case's points come as rows of their own (protocol.points.as_rows)."""
    document = decode(data, what)
    if isinstance(document, dict) and "schema_version" in document:
        check_version(document["schema_version"], RESULT_SCHEMA_VERSION, what)
    validate(document, "result", what)
    return as_rows(document)
