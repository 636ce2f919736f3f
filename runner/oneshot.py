"""One-shot kernel launch: one JSON run request on stdin, one JSON response on stdout.

A compiler's correctness tests use this (`python -m runner run`) to launch one kernel on a remote
GPU over SSH without building a C++ runner there. Request and response follow
schemas/run-request.schema.json and schemas/run-response.schema.json.

Whatever happens (malformed input, no GPU, PTX that does not load, a signature mismatch, a fault,
a hang) the process writes exactly one JSON document. Exit status: 0 ok, 1 the kernel or a CUDA
call failed (phases load, signature, launch, timeout), 2 bad input or no GPU/driver.

Floats round-trip exactly: f64 values are Python floats, f32 values are rounded once to
np.float32 on input and written back as the Python float of that f32 (exact). NaN and
infinities travel as the strings "nan", "inf", "-inf" because JSON has no such numbers.
"""

from __future__ import annotations

import base64
import binascii
import math
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import BinaryIO

import numpy as np

from protocol import RUN_PROTOCOL_VERSION, check_version, decode, encode, validate
from runner import generator
from runner.processes import private_stdout  # noqa: F401  (runner run, runner serve)

__all__ = [
    "DTYPES",
    "PHASES",
    "RequestError",
    "decode_float",
    "decode_values",
    "encode_float",
    "encode_values",
    "error_document",
    "exit_status",
    "handle",
    "main",
    "parse_request",
]

REQUEST_SCHEMA = "run-request"
RESPONSE_SCHEMA = "run-response"
DEFAULT_TIMEOUT_S = 60.0
# Bounds that keep a request's cost predictable: the JSON text read from stdin, and one array's
# host copy (a device array is allocated whole, so `count` alone can ask for any size).
MAX_REQUEST_BYTES = 1 << 30
MAX_ARRAY_BYTES = 1 << 36
PHASES = ("input", "environment", "load", "signature", "launch", "timeout")

DTYPES = {kind: np.dtype(t) for kind, t in generator.DTYPES.items()}
_NON_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


class RequestError(ValueError):
    """A request that cannot be run as given; `phase` is where it was found ("input")."""

    def __init__(self, phase: str, message: str):
        super().__init__(message)
        self.phase = phase
        self.message = message


# ---- value codecs ---------------------------------------------------------------------------


def decode_float(value: float | int | str) -> float:
    """A JSON float value (number or "nan"/"inf"/"-inf") as a Python float."""
    if isinstance(value, str):
        return _NON_FINITE[value]
    return float(value)


def encode_float(value: float) -> float | str:
    """A Python float as JSON: itself when finite, else "nan"/"inf"/"-inf"."""
    if math.isfinite(value):
        return value
    if math.isnan(value):
        return "nan"
    return "inf" if value > 0 else "-inf"


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
            ok = not integral and value in _NON_FINITE
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
    values = array.tolist()  # float32 -> the exact Python float, uint64 -> exact Python int
    if array.dtype.kind == "f" and not np.isfinite(array).all():
        return [encode_float(v) for v in values]
    return values


# ---- request ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Param:
    """One kernel parameter: a scalar (`value`) or a device array (`array`, allocated whole)."""

    kind: str
    value: int | float | None = None
    array: np.ndarray | None = None

    @property
    def type_name(self) -> str:
        return f"{self.kind}[]" if self.array is not None else self.kind


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


def _decode_json(raw: bytes) -> dict:
    if not raw.strip():
        raise RequestError(
            "input",
            "stdin: empty input; expected one JSON run request (schemas/run-request.schema.json)",
        )
    try:
        document = decode(raw, "stdin")
    except ValueError as exc:
        raise RequestError("input", str(exc)) from None
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


def _prepare(request: dict) -> Request:
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
    ptx = _ptx_text(request)
    params = tuple(_param(i, spec) for i, spec in enumerate(request.get("params", [])))
    outputs = tuple(_output(i, spec, params) for i, spec in enumerate(request.get("outputs", [])))
    return Request(
        ptx=ptx,
        kernel=request["kernel"],
        grid=_dim3(request["grid"]),
        block=_dim3(request["block"]),
        shared_bytes=request.get("shared_bytes", 0),
        timeout_s=float(request.get("timeout_s", DEFAULT_TIMEOUT_S)),
        params=params,
        outputs=outputs,
    )


def parse_request(raw: bytes) -> dict:
    """Decode and fully check a request; raise RequestError naming the field and what was expected."""
    request = _decode_json(raw)
    _prepare(request)
    return request


# ---- response --------------------------------------------------------------------------------


def error_document(phase: str, message: str, cuda_error: str | None = None) -> dict:
    document = {
        "status": "error",
        "schema_version": RUN_PROTOCOL_VERSION,
        "phase": phase,
        "error": message or "(no message)",
    }
    if cuda_error:
        document["cuda_error"] = cuda_error
    return document


def exit_status(response: dict) -> int:
    """0 ok; 2 bad input or environment; 1 any other failure (load, signature, launch, timeout)."""
    if response["status"] == "ok":
        return 0
    return 2 if response["phase"] in ("input", "environment") else 1


def _cuda_failure(phase: str, exc: Exception) -> dict:
    return error_document(phase, str(exc), getattr(exc, "name", None))


def _unexpected(phase: str, exc: BaseException) -> dict:
    return error_document(phase, f"unexpected {type(exc).__name__}: {exc}")


# ---- execution -------------------------------------------------------------------------------


class _Phase(Exception):
    """Carries a finished error document out of the execution steps."""

    def __init__(self, document: dict):
        super().__init__(document["error"])
        self.document = document


def _timeout_document(request: Request) -> dict:
    return error_document(
        "timeout",
        f"kernel {request.kernel!r} did not finish within timeout_s={request.timeout_s:g} s; "
        "the runner process was ended to free the GPU",
    )


def _execute(request: Request, on_timeout: Callable[[dict], None] | None) -> dict:
    from runner import driver, ptx

    try:
        context = driver.Context()
    except driver.NoGpuError as exc:
        return error_document("environment", str(exc))
    except driver.CudaError as exc:
        return _cuda_failure("environment", exc)
    try:
        return _run_in_context(request, driver, ptx, on_timeout)
    except _Phase as failure:
        return failure.document
    finally:
        context.close()


def signature(request: Request) -> list[tuple[str, str]]:
    """The .entry signature the request's params imply (a pointer for each array)."""
    return [
        (f"params[{i}]", "ptr" if p.array is not None else p.kind)
        for i, p in enumerate(request.params)
    ]


def _run_in_context(request: Request, driver, ptx, on_timeout) -> dict:
    try:
        module = driver.Module(request.ptx, label="request")
    except driver.CudaError as exc:
        raise _Phase(_cuda_failure("load", exc)) from None
    cleanup = [module.unload]
    try:
        try:
            parsed = ptx.parse(request.ptx)
            ptx.check_signature(parsed, request.kernel, signature(request), where="request")
            kernel = module.kernel(
                request.kernel, request.grid, request.block, request.shared_bytes
            )
        except (ptx.PtxError, ptx.SignatureError) as exc:
            raise _Phase(error_document("signature", str(exc))) from None
        except driver.CudaError as exc:
            raise _Phase(_cuda_failure("signature", exc)) from None
        try:
            elapsed_ms, outputs = _launch(request, kernel, driver, cleanup, on_timeout)
        except driver.CudaError as exc:
            raise _Phase(_cuda_failure("launch", exc)) from None
        return {
            "status": "ok",
            "schema_version": RUN_PROTOCOL_VERSION,
            "outputs": outputs,
            "elapsed_ms": elapsed_ms,
            "load_ms": module.load_s * 1e3,
            "ptx": {"version": parsed.version, "target": parsed.target},
        }
    finally:
        # Unchecked releases: after a sticky fault they fail, and the context goes anyway.
        for release in reversed(cleanup):
            release()


def _launch(request: Request, kernel, driver, cleanup: list, on_timeout) -> tuple[float, list]:
    """Upload arrays, launch once between two events on a non-default stream, download outputs."""
    buffers = {}
    args = []
    for index, param in enumerate(request.params):
        if param.array is None:
            args.append((param.kind, param.value))
            continue
        buffers[index] = buffer = driver.Buffer(param.array.nbytes)
        cleanup.append(buffer.free)
        buffer.upload(param.array)
        args.append(("ptr", buffer.ptr))
    kernel_args = driver.KernelArgs(args)
    stream = driver.Stream()
    cleanup.append(stream.destroy)
    start, stop = driver.Event(), driver.Event()
    cleanup.extend((start.destroy, stop.destroy))
    # Pageable uploads may still be in flight on the legacy stream, which a non-blocking
    # stream does not wait for.
    driver.check(driver.cu().cuCtxSynchronize(), "cuCtxSynchronize")
    watchdog = None
    if on_timeout is not None:
        document = _timeout_document(request)
        watchdog = threading.Timer(request.timeout_s, on_timeout, args=(document,))
        watchdog.daemon = True
        watchdog.start()
    try:
        start.record(stream)
        kernel.launch(stream, kernel_args)
        stop.record(stream)
        stop.synchronize()
    finally:
        if watchdog is not None:
            watchdog.cancel()
    elapsed_ms = stop.elapsed_s(start) * 1e3
    outputs = []
    for out in request.outputs:
        param = request.params[out.param]
        array = buffers[out.param].download(DTYPES[param.kind], out.count)
        outputs.append(output_document(out, param, array))
    return elapsed_ms, outputs


def output_document(out: Output, param: Param, array: np.ndarray) -> dict:
    """One output of a response: JSON values, or with encoding = base64 the raw bytes."""
    document = {"param": out.param, "type": param.type_name}
    if out.base64:
        little = array.astype(array.dtype.newbyteorder("<"), copy=False)
        document["data_base64"] = base64.b64encode(little.tobytes()).decode()
    else:
        document["values"] = encode_values(array)
    return document


def handle(request: dict, *, on_timeout: Callable[[dict], None] | None = None) -> dict:
    """Run one decoded request and return the response document (ok or error); no I/O.

    `on_timeout(document)` is called from a watchdog thread when the kernel runs past the
    request's timeout_s; it must end the process (a hung kernel cannot be cancelled). Without it
    there is no watchdog.
    """
    try:
        prepared = _prepare(request)
    except RequestError as exc:
        return error_document(exc.phase, exc.message)
    except Exception as exc:
        return _unexpected("input", exc)
    try:
        response = _execute(prepared, on_timeout)
    except Exception as exc:
        return _unexpected("launch", exc)
    return _checked(response)


def _checked(response: dict) -> dict:
    """The response if it matches its schema, else an error document saying why (a runner bug)."""
    try:
        validate(structure(response), RESPONSE_SCHEMA, "response")
    except ValueError as exc:
        return error_document("launch", f"internal error: {exc}")
    return response


# ---- process entry point ---------------------------------------------------------------------


class _SingleAnswer:
    """Writes at most one document to `stdout`, whichever thread (main or watchdog) comes first."""

    def __init__(self, stdout: BinaryIO):
        self._stdout = stdout
        self._lock = threading.Lock()
        self._written = False

    def write(self, document: dict) -> bool:
        with self._lock:
            if self._written:
                return False
            self._written = True
            self._stdout.write(encode(document) + b"\n")
            self._stdout.flush()
            return True

    def timeout_and_exit(self, document: dict) -> None:
        """Watchdog: answer with the timeout document and end the process (tears the context down)."""
        if self.write(_checked(document)):
            os._exit(1)


def _read_bounded(stdin: BinaryIO) -> bytes:
    raw = stdin.read(MAX_REQUEST_BYTES + 1)
    if len(raw) > MAX_REQUEST_BYTES:
        raise RequestError(
            "input",
            f"stdin: the request is larger than {MAX_REQUEST_BYTES} bytes; send large arrays "
            "with `count` (zero-filled) or split the launch",
        )
    return raw


def main(stdin: BinaryIO, stdout: BinaryIO) -> int:
    """Read one request from `stdin`, write one response to `stdout`, return the exit status."""
    answer = _SingleAnswer(stdout)
    try:
        response = handle(_decode_json(_read_bounded(stdin)), on_timeout=answer.timeout_and_exit)
    except RequestError as exc:
        response = error_document(exc.phase, exc.message)
    except Exception as exc:
        response = _unexpected("input", exc)
    response = _checked(response)
    answer.write(response)
    return exit_status(response)
