"""A run request (schemas/run-request.schema.json) decoded and checked into a `Request`.

`prepare()` checks a decoded request: the schema on its structure (the values are checked by
runner.launch.run_values in one pass, not element by element), then ranges and references (an
output must name an array param, a count must hold the values given, one array is at most
MAX_ARRAY_BYTES), and converts its values to numpy arrays. Every problem is a RequestError of
phase "input" naming the field and what was expected.
"""

from __future__ import annotations

import base64
import binascii

import numpy as np

from protocol import RUN_PROTOCOL_VERSION, check_version, decode, validate
from protocol.run_limits import MAX_ARRAY_BYTES, MAX_DEPTH, MAX_TIMEOUT_S, nested_deeper_than
from runner.launch.launch_plan import Output, Param, Request
from runner.launch.run_values import DTYPES, RequestError, decode_values, structure

__all__ = ["Output", "Param", "Request", "decode_json", "parse_request", "prepare"]

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
