"""JSON values of run requests and responses (schemas/run-request.schema.json) as numpy arrays
and back, exact in both directions.

Floats round-trip exactly: f64 values are Python floats, f32 values are rounded once to
np.float32 on input and written back as the Python float of that f32 (exact). NaN and
infinities travel as the strings "nan", "inf", "-inf" because JSON has no such numbers.
Integers must lie in their kind's range. A value that cannot be taken is a RequestError naming
where it is (`params[i].values[j]`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from runner.gpu import generator
from runner.launch.host_arrays import NON_FINITE, decode_float, encode_float, json_values

__all__ = [
    "DTYPES",
    "RequestError",
    "decode_float",
    "decode_values",
    "encode_float",
    "encode_values",
    "structure",
]

DTYPES = {kind: np.dtype(t) for kind, t in generator.DTYPES.items()}


class RequestError(ValueError):
    """A request that cannot be run as given; `phase` is where it was found ("input")."""

    def __init__(self, phase: str, message: str):
        super().__init__(message)
        self.phase = phase
        self.message = message


def decode_values(
    kind: str, values: list, where: str = "values", *, scalar: bool = False
) -> np.ndarray:
    """JSON values of element kind `kind` as a numpy array, range-checked.

    Integers must lie in the kind's range; floats are rounded once to the kind's precision and a
    finite value that overflows f32 is refused (it would silently become inf). Errors name
    `where[j]`, or `where` alone for a `scalar` (a list of one value).
    """

    def label(index: int) -> str:
        return where if scalar else f"{where}[{index}]"

    dtype = DTYPES[kind]
    _check_value_types(kind, values, label)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        _check_exact_integers(kind, values, label)
        ints = [int(v) for v in values]  # integral floats such as 3.0 are allowed by the schema
        if ints and (min(ints) < info.min or max(ints) > info.max):
            index = next(i for i, v in enumerate(ints) if not info.min <= v <= info.max)
            raise RequestError(
                "input",
                f"{label(index)}: {ints[index]} is out of range for {kind} "
                f"(expected {info.min} to {info.max})",
            )
        return np.array(ints, dtype=dtype)
    wide = np.array([decode_float(v) for v in values], dtype=np.float64)
    with np.errstate(over="ignore"):
        array = wide.astype(dtype)
    overflow = np.flatnonzero(np.isfinite(wide) & ~np.isfinite(array))
    if overflow.size:
        index = int(overflow[0])
        raise RequestError(
            "input",
            f"{label(index)}: {values[index]!r} overflows {kind} "
            f"(largest finite {kind} is {float(np.finfo(dtype).max)!r})",
        )
    return array


# Past 2**53 a float no longer holds every integer: a JSON parser reads an integer it cannot
# hold exactly (-2**63 - 1 for i64, 2**64 for u64) as the nearest float, so such a float may
# stand for another integer than the one written.
_EXACT_FLOAT_INT = 2**53


def _check_exact_integers(kind: str, values: list, label: Callable[[int], str]) -> None:
    """Refuse a float past 2**53 for an integer kind: it may be a rounded integer."""
    if float not in set(map(type, values)):
        return
    for index, value in enumerate(values):
        if isinstance(value, float) and abs(value) > _EXACT_FLOAT_INT:
            raise RequestError(
                "input",
                f"{label(index)}: {value!r} is not an exact {kind} value (an integer that does "
                f"not fit a 64-bit integer is read as a float, which may be rounded; write "
                f"integers from {np.iinfo(DTYPES[kind]).min} to {np.iinfo(DTYPES[kind]).max})",
            )


def _check_value_types(kind: str, values: list, label: Callable[[int], str]) -> None:
    """Each value's JSON type, checked in one pass over the types (the schema checks only the
    structure of a request: per element it costs seconds for 10^5 values)."""
    integral = DTYPES[kind].kind in "iu"
    allowed = (int,) if integral else (int, float)
    types = set(map(type, values))
    if types <= {int} or (not integral and types <= {int, float}):
        return
    for index, value in enumerate(values):
        if isinstance(value, bool) or not isinstance(value, (*allowed, float, str)):
            ok = False
        elif isinstance(value, float):
            ok = not integral or value.is_integer()
        elif isinstance(value, str):
            ok = not integral and value in NON_FINITE
        else:
            ok = True
        if not ok:
            expected = "an integer" if integral else 'a number or one of "nan", "inf", "-inf"'
            raise RequestError(
                "input", f"{label(index)}: {value!r} is not an {kind} value (expected {expected})"
            )


def structure(document: dict) -> dict:
    """A shallow copy of a request or response with every `values` list emptied, for the schema
    check of its structure; the values themselves are checked by decode_values or come from
    numpy arrays."""
    copy = dict(document)
    for key in ("params", "outputs"):
        items = document.get(key)
        if isinstance(items, list):
            copy[key] = [
                {**item, "values": []}
                if isinstance(item, dict) and isinstance(item.get("values"), list)
                else item
                for item in items
            ]
    return copy


def encode_values(array: np.ndarray) -> list:
    """A numpy array as JSON values: Python ints, or floats with non-finite ones as strings."""
    # tolist(): float32 -> the exact Python float, uint64 -> the exact Python int
    return json_values(array.tolist(), array.dtype.kind == "f")
