"""Typed host arrays of a launch with the standard library alone (`struct`, `array`), no numpy.

The process-per-launch path (`runner launch --no-service`) packs its few values and reads its
output with these, so it never imports numpy; every launch path reads outputs through
`values()`. Bytes are the device's: little-endian. Values are exact both ways: an f32 is
rounded once to nearest (what numpy's astype does), an integer must fit its kind, NaN and the
infinities travel in JSON as "nan", "inf", "-inf".
"""

from __future__ import annotations

import math
import struct
import sys
from array import array

__all__ = ["ITEMSIZE", "NON_FINITE", "decode_float", "encode_float", "json_values", "pack",
           "pack_scalar", "values"]  # fmt: skip

# Element kind -> struct code with '<' (4 and 8 bytes everywhere) and array typecode (the
# platform's sizes, the same on every platform CUDA runs on: checked in the tests).
CODES = {"i32": "i", "u32": "I", "i64": "q", "u64": "Q", "f32": "f", "f64": "d"}
ITEMSIZE = {kind: struct.calcsize("<" + code) for kind, code in CODES.items()}
NON_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def decode_float(value: float | int | str) -> float:
    """A JSON float value (number or "nan"/"inf"/"-inf") as a Python float."""
    if isinstance(value, str):
        return NON_FINITE[value]
    return float(value)


def encode_float(value: float) -> float | str:
    """A Python float as JSON: itself when finite, else "nan"/"inf"/"-inf"."""
    if math.isfinite(value):
        return value
    if math.isnan(value):
        return "nan"
    return "inf" if value > 0 else "-inf"


def json_values(values: list, floating: bool) -> list:
    """Host values as JSON values: non-finite floats as strings, the rest unchanged."""
    # A NaN or an infinity makes the sum non-finite, so one C loop clears the usual case.
    if floating and not math.isfinite(sum(values)):
        return [encode_float(v) for v in values]
    return values


def values(kind: str, raw: bytes | bytearray | memoryview) -> list:
    """Little-endian device bytes of `kind` elements as JSON values (exact)."""
    host = array(CODES[kind])
    host.frombytes(raw)
    if sys.byteorder == "big":
        host.byteswap()
    return json_values(host.tolist(), kind[0] == "f")


def _exact(kind: str, items: list) -> list | None:
    """The Python numbers for JSON values of `kind`, or None where one is not plainly of it."""
    if kind[0] in "iu":
        return items if all(type(v) is int for v in items) else None
    if all(type(v) is float or type(v) is int or v in NON_FINITE for v in items):
        return [decode_float(v) for v in items]
    return None


def pack(kind: str, items: list, count: int | None = None) -> bytearray | None:
    """JSON values of `kind` as `count` (default: as many) little-endian elements, zero-filled
    past them; None when a value is not exactly one of `kind` (an integer out of range, a
    float for an integer kind, a finite value past f32's range): the full check
    (runner.launch.run_request) then says which and why."""
    try:
        numbers = _exact(kind, items)
    except OverflowError:  # an integer past any float, given for a float kind
        return None
    count = len(items) if count is None else count
    if numbers is None or count < len(items):
        return None
    data = bytearray(count * ITEMSIZE[kind])
    try:  # struct refuses an integer out of range and an f32 overflow; rounds f32 to nearest
        struct.pack_into(f"<{len(numbers)}{CODES[kind]}", data, 0, *numbers)
    except (struct.error, OverflowError):
        return None
    return data


def pack_scalar(kind: str, value) -> int | float | None:
    """A scalar parameter's value as the launch passes it (an f32 rounded once), or None."""
    data = pack(kind, [value])
    if data is None:
        return None
    return struct.unpack("<" + CODES[kind], data)[0]
