"""JSON encoding and decoding with orjson (exact float round-trips, numpy scalars allowed)."""

from __future__ import annotations

import orjson

_OPTIONS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS


def encode(document, *, pretty: bool = False) -> bytes:
    """Bytes of `document`; floats are written as the shortest text that reads back identically."""
    options = _OPTIONS | (orjson.OPT_INDENT_2 if pretty else 0)
    return orjson.dumps(document, option=options) + (b"\n" if pretty else b"")


def decode(data: bytes | str, what: str = "document"):
    """Parse JSON, naming `what` (a file name, 'stdin') in the error."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"{what}: malformed JSON: {exc}") from None
