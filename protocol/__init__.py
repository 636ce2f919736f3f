"""The wire contract between the runner (GPU box) and the harness (host).

Documents are JSON (encoded with orjson) and validated against the JSON Schemas in
the repository's top-level `schemas/` folder (package data `protocol/schemas/` in a wheel)
before they are written or after they are read.
"""

import importlib

# Names load on first use (PEP 562), so a reader that needs only the codec or the versions (the
# launch service's supervisor, on the path to its first answer) never imports jsonschema.
_WHERE = {
    "decode": "protocol.codec",
    "encode": "protocol.codec",
    "load_result": "protocol.validation",
    "SCHEMA_DIR": "protocol.validation",
    "DocumentError": "protocol.errors",
    "validate": "protocol.validation",
    "RESULT_SCHEMA_VERSION": "protocol.version",
    "RUN_PROTOCOL_VERSION": "protocol.version",
    "check_version": "protocol.version",
    "package_version": "protocol.version",
}


def __getattr__(name: str):
    if name in _WHERE:
        value = getattr(importlib.import_module(_WHERE[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'protocol' has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), *_WHERE])


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
