"""One-shot kernel launch: one JSON run request on stdin, one JSON response on stdout.

A compiler's correctness tests use this (`python -m runner run`) to launch one kernel on a remote
GPU over SSH without building a C++ runner there. Request and response follow
schemas/run-request.schema.json and schemas/run-response.schema.json; the request is decoded and
checked by runner.launch.run_request, its values by runner.launch.run_values (both also imported from here,
the protocol's face: floats and integers round-trip exactly); here are the response documents,
the launch on a fresh context and the process around it.

Whatever happens (malformed input, no GPU, PTX that does not load, a signature mismatch, a fault,
a hang) the process writes exactly one JSON document. Exit status: 0 ok, 1 the kernel or a CUDA
call failed (phases load, signature, launch, timeout), 2 bad input or no GPU/driver.
"""

from __future__ import annotations

import base64
import os
import threading
from collections.abc import Callable
from typing import BinaryIO

import numpy as np

from protocol import RUN_PROTOCOL_VERSION, encode, validate
from runner.execution.processes import private_stdout  # noqa: F401  (runner run, runner serve)
from runner.launch.run_request import Output, Param, Request, decode_json, parse_request
from runner.launch.run_request import prepare as _prepare
from runner.launch.run_values import (
    DTYPES,
    RequestError,
    decode_float,
    decode_values,
    encode_float,
    encode_values,
    structure,
)

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

RESPONSE_SCHEMA = "run-response"
# Bounds the JSON text read from stdin, so a request's cost stays predictable.
MAX_REQUEST_BYTES = 1 << 30
PHASES = ("input", "environment", "load", "signature", "launch", "timeout")


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


# What a compiler's test can do on a machine without a GPU (docs/service.md).
LAUNCH_ELSEWHERE = (
    "send the request to a GPU box with kernelgap installed: `ssh gpu-host python3 -m runner run "
    "< request.json`, or one `runner serve` for a whole test session through "
    "harness.client.KernelClient.over_ssh"
)


def _execute(request: Request, on_timeout: Callable[[dict], None] | None) -> dict:
    from runner.gpu import driver, ptx

    try:
        context = driver.Context()
    except driver.NoGpuError as exc:
        return error_document("environment", f"{exc}; {LAUNCH_ELSEWHERE}")
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
        response = handle(decode_json(_read_bounded(stdin)), on_timeout=answer.timeout_and_exit)
    except RequestError as exc:
        response = error_document(exc.phase, exc.message)
    except Exception as exc:
        response = _unexpected("input", exc)
    response = _checked(response)
    answer.write(response)
    return exit_status(response)
