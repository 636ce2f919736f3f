"""A run request (schemas/run-request.schema.json) decoded and checked into a `Request`, its
values as numpy arrays and back, exact in both directions.

`prepare()` checks a decoded request: the schema on its structure (the values are checked in one
pass, not element by element), then ranges and references (an output must name an array param, a
count must hold the values given, one array is at most MAX_ARRAY_BYTES), and converts its values
to numpy arrays. Floats round-trip exactly: f64 values are Python floats, f32 values are rounded
once to np.float32 on input and written back as the Python float of that f32; NaN and infinities
travel as the strings "nan", "inf", "-inf"; integers must lie in their kind's range. Every
problem is a RequestError of phase "input" naming the field (`params[i].values[j]`) and what was
expected. The command line's own requests take the numpy-free way (runner.launch.launch_plan).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable

import numpy as np

from protocol import RUN_PROTOCOL_VERSION, check_version, decode, validate
from protocol.input_files import MAX_ARRAY_BYTES, MAX_DEPTH, MAX_TIMEOUT_S, nested_deeper_than
from runner.errors import RequestError
from runner.gpu import generator
from runner.launch.launch_plan import (
    NON_FINITE,
    Output,
    Param,
    Request,
    decode_float,
    encode_float,
    json_values,
)

__all__ = [
    "DTYPES",
    "Output",
    "Param",
    "Request",
    "decode_float",
    "decode_json",
    "decode_values",
    "encode_float",
    "encode_values",
    "parse_request",
    "prepare",
    "structure",
]


# ---- values, exact both ways --------------------------------------------------------------------

DTYPES = {kind: np.dtype(t) for kind, t in generator.DTYPES.items()}


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


# ---- the full check -----------------------------------------------------------------------------

REQUEST_SCHEMA = "run-request"
DEFAULT_TIMEOUT_S = 60.0


def decode_json(raw: bytes) -> dict:
    if not raw.strip():
        raise RequestError(
            "input",
            "stdin: empty input; expected one JSON run request (schemas/run-request.schema.json)",
        )
    try:
        document = decode(raw, "stdin")
    except ValueError as exc:
        raise RequestError("input", str(exc)) from None
    if nested_deeper_than(document):  # before the schema check recurses into it
        raise RequestError(
            "input", f"stdin: nested more than {MAX_DEPTH} levels deep (a run request nests 4)"
        )
    if not isinstance(document, dict):
        raise RequestError(
            "input", f"stdin: expected a JSON object (a run request), got {type(document).__name__}"
        )
    return document


def _check_ptx_fields(request: dict) -> None:
    # Checked before the schema so the message stays short (the schema's would quote the PTX).
    given = [key for key in ("ptx", "ptx_base64") if key in request]
    if len(given) != 1:
        problem = "both were given" if given else "neither was given"
        raise RequestError(
            "input",
            f"request: give exactly one of `ptx` (PTX text) or `ptx_base64` (base64 of it); {problem}",
        )


def _ptx_text(request: dict) -> str:
    if "ptx" in request:
        return request["ptx"]
    try:
        return base64.b64decode(request["ptx_base64"], validate=True).decode("utf-8")
    except (binascii.Error, ValueError) as exc:
        message = f"request.ptx_base64: not base64 of UTF-8 PTX text: {exc}"
        raise RequestError("input", message) from None


def _dim3(values: list[int]) -> tuple[int, int, int]:
    return (*values, *(1,) * (3 - len(values)))


def _param(index: int, spec: dict) -> Param:
    where = f"params[{index}]"
    type_name = spec["type"]
    kind = type_name.removesuffix("[]")
    if not type_name.endswith("[]"):
        value = decode_values(kind, [spec["value"]], f"{where}.value", scalar=True)
        return Param(kind, value=value[0].item())
    if "data_base64" in spec:
        values = _array_from_base64(kind, spec["data_base64"], f"{where}.data_base64")
    else:
        values = spec.get("values", [])
    count = spec.get("count", len(values))
    if count < len(values):
        raise RequestError(
            "input", f"{where}.count: {count} is less than the {len(values)} values given"
        )
    if count * DTYPES[kind].itemsize > MAX_ARRAY_BYTES:
        raise RequestError(
            "input",
            f"{where}.count: {count} {kind} values ({count * DTYPES[kind].itemsize:.3g} bytes) is "
            f"past the limit of {MAX_ARRAY_BYTES:.3g} bytes for one array",
        )
    try:
        array = np.zeros(count, dtype=DTYPES[kind])
    except MemoryError:
        raise RequestError(
            "input", f"{where}.count: no host memory for {count} {kind} values"
        ) from None
    if isinstance(values, np.ndarray):
        array[: len(values)] = values
    else:
        array[: len(values)] = decode_values(kind, values, f"{where}.values")
    return Param(kind, array=array)


def _array_from_base64(kind: str, text: str, where: str) -> np.ndarray:
    """Raw little-endian bytes of `kind` elements, base64: exact in both directions."""
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise RequestError("input", f"{where}: not base64: {exc}") from None
    itemsize = DTYPES[kind].itemsize
    if len(raw) % itemsize:
        raise RequestError(
            "input",
            f"{where}: {len(raw)} bytes is not a whole number of {kind} elements "
            f"({itemsize} bytes each)",
        )
    return np.frombuffer(raw, dtype=DTYPES[kind].newbyteorder("<"))


def _output(index: int, spec: dict, params: tuple[Param, ...]) -> Output:
    where = f"outputs[{index}]"
    number = spec["param"]
    if number >= len(params):
        raise RequestError(
            "input",
            f"{where}.param: {number} is out of range (the request has {len(params)} params)",
        )
    param = params[number]
    if param.array is None:
        raise RequestError(
            "input",
            f"{where}.param: params[{number}] is a scalar ({param.kind}); "
            "only array params (T[]) can be outputs",
        )
    count = spec.get("count", len(param.array))
    if count > len(param.array):
        raise RequestError(
            "input",
            f"{where}.count: {count} is more than the {len(param.array)} elements of params[{number}]",
        )
    return Output(number, count, spec.get("encoding", "list") == "base64")


def prepare(request: dict) -> Request:
    """Validate a decoded request (schema, then ranges and references) and convert its values."""
    if not isinstance(request, dict):
        raise RequestError(
            "input", f"request: expected a JSON object, got {type(request).__name__}"
        )
    _check_ptx_fields(request)
    try:
        validate(structure(request), REQUEST_SCHEMA, "request")
        if "schema_version" in request:
            check_version(request["schema_version"], RUN_PROTOCOL_VERSION, "request")
    except ValueError as exc:
        raise RequestError("input", str(exc)) from None
    timeout_s = float(request.get("timeout_s", DEFAULT_TIMEOUT_S))
    if not 0 < timeout_s <= MAX_TIMEOUT_S:  # the schema's bound, kept here for the watchdog's sake
        raise RequestError(
            "input", f"request.timeout_s: {timeout_s:g} is outside (0, {MAX_TIMEOUT_S:g}] seconds"
        )
    ptx = _ptx_text(request)
    params = tuple(_param(i, spec) for i, spec in enumerate(request.get("params", [])))
    outputs = tuple(_output(i, spec, params) for i, spec in enumerate(request.get("outputs", [])))
    return Request(
        ptx=ptx,
        kernel=request["kernel"],
        grid=_dim3(request["grid"]),
        block=_dim3(request["block"]),
        shared_bytes=request.get("shared_bytes", 0),
        timeout_s=timeout_s,
        params=params,
        outputs=outputs,
    )


def parse_request(raw: bytes) -> dict:
    """Decode and fully check a request; raise RequestError naming the field and what was expected."""
    request = decode_json(raw)
    prepare(request)
    return request
