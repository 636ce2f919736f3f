"""A launch as the runner executes it, and the part of reading a run request that needs no
numpy: `Request`, its `Param`s and `Output`s; typed host arrays with the standard library alone
(`pack`, `values`: little-endian, exact both ways, NaN and infinities as "nan", "inf", "-inf");
and `quick()`, the check of a command line's request that accepts only what the full check
(runner.launch.run_request) accepts, with the same values, and returns None for anything else,
which the full check then words. The process-per-launch path (`--no-service`) holds and checks a
launch with this module alone, never importing numpy or jsonschema.
"""

from __future__ import annotations

import math
import struct
import sys
from array import array
from dataclasses import dataclass

from protocol.input_files import MAX_ARRAY_BYTES, MAX_TIMEOUT_S

__all__ = [
    "ITEMSIZE",
    "NON_FINITE",
    "Output",
    "Param",
    "Request",
    "decode_float",
    "encode_float",
    "json_values",
    "pack",
    "pack_scalar",
    "quick",
    "signature",
    "values",
]


# ---- a checked launch ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Param:
    """One kernel parameter: a scalar (`value`) or a device array (`array`, allocated whole:
    its host contents, a numpy array or little-endian bytes, anything with the buffer
    protocol)."""

    kind: str
    value: int | float | None = None
    array: object | None = None

    @property
    def type_name(self) -> str:
        return f"{self.kind}[]" if self.array is not None else self.kind

    @property
    def nbytes(self) -> int:
        return memoryview(self.array).nbytes


@dataclass(frozen=True)
class Output:
    param: int
    count: int
    base64: bool = False  # encoding = "base64": raw little-endian bytes in data_base64


@dataclass(frozen=True)
class Request:
    ptx: str
    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int
    timeout_s: float
    params: tuple[Param, ...]
    outputs: tuple[Output, ...]


def signature(request: Request) -> list[tuple[str, str]]:
    """The .entry signature the request's params imply (a pointer for each array)."""
    return [
        (f"params[{i}]", "ptr" if p.array is not None else p.kind)
        for i, p in enumerate(request.params)
    ]


# ---- host arrays without numpy ------------------------------------------------------------------

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


# ---- the quick check of a command line's request ------------------------------------------------

# The keys a command line's request has; any other (ptx_base64, counts, encodings, ids) is
# left to the full check.
_REQUEST_KEYS = frozenset(("ptx", "kernel", "grid", "block", "params", "outputs", "timeout_s"))
_DIM_MAX = 2**31 - 1  # schemas/run-request.schema.json's dim3


def _dim3(values) -> tuple[int, int, int] | None:
    if not isinstance(values, list) or not 1 <= len(values) <= 3:
        return None
    if not all(type(v) is int and 1 <= v <= _DIM_MAX for v in values):
        return None
    return (*values, *(1,) * (3 - len(values)))


def _param(spec) -> Param | None:
    if not isinstance(spec, dict) or not isinstance(spec.get("type"), str):
        return None
    kind = spec["type"].removesuffix("[]")
    if kind not in ITEMSIZE:
        return None
    if spec["type"].endswith("[]"):
        items = spec.get("values")
        if spec.keys() != {"type", "values"} or not isinstance(items, list):
            return None
        if len(items) * ITEMSIZE[kind] > MAX_ARRAY_BYTES:
            return None
        data = pack(kind, items)
        return None if data is None else Param(kind, array=data)
    if spec.keys() != {"type", "value"}:
        return None
    value = pack_scalar(kind, spec["value"])
    return None if value is None else Param(kind, value=value)


def _output(spec, params: tuple[Param, ...]) -> Output | None:
    if not isinstance(spec, dict) or not spec.keys() <= {"param", "count"}:
        return None
    number, count = spec.get("param"), spec.get("count")
    if type(number) is not int or not 0 <= number < len(params):
        return None
    param = params[number]
    if param.array is None:
        return None
    length = param.nbytes // ITEMSIZE[param.kind]
    if count is None:
        count = length
    if type(count) is not int or not 0 <= count <= length:
        return None
    return Output(number, count)


def quick(request: dict) -> Request | None:
    """The checked Request, or None where the full check must judge the request."""
    if not isinstance(request, dict) or not request.keys() <= _REQUEST_KEYS:
        return None
    ptx, kernel, timeout_s = request.get("ptx"), request.get("kernel"), request.get("timeout_s")
    if not (isinstance(ptx, str) and ptx and isinstance(kernel, str) and kernel):
        return None
    if type(timeout_s) is not float or not 0 < timeout_s <= MAX_TIMEOUT_S:
        return None
    grid, block = _dim3(request.get("grid")), _dim3(request.get("block"))
    specs, out_specs = request.get("params", []), request.get("outputs", [])
    if grid is None or block is None or not isinstance(specs, list):
        return None
    params = tuple(_param(spec) for spec in specs)
    if any(p is None for p in params) or not isinstance(out_specs, list):
        return None
    outputs = tuple(_output(spec, params) for spec in out_specs)
    if any(o is None for o in outputs):
        return None
    return Request(ptx, kernel, grid, block, 0, timeout_s, params, outputs)
