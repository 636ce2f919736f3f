"""The wire contract between the runner (GPU box) and the harness (host).

Documents are JSON (encoded with orjson) and validated against the JSON Schemas in
the repository's top-level `schemas/` folder (package data `protocol/schemas/` in a wheel)
before they are written or after they are read.
"""

from protocol.codec import decode, encode
from protocol.documents import load_result
from protocol.validation import SCHEMA_DIR, DocumentError, validate
from protocol.version import (
    RESULT_SCHEMA_VERSION,
    RUN_PROTOCOL_VERSION,
    check_version,
    package_version,
)

__all__ = [
    "RESULT_SCHEMA_VERSION",
    "RUN_PROTOCOL_VERSION",
    "SCHEMA_DIR",
    "DocumentError",
    "check_version",
    "decode",
    "encode",
    "load_result",
    "package_version",
    "validate",
]
