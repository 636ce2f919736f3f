"""One launch on a context of its own, and the answers every launch path gives.

`execute()` is what `runner run` and the `--no-service` paths do once their request is checked:
load the PTX, check the .entry signature, upload the arrays, launch once between two events on
a non-default stream, read the outputs back, release it all. The answer documents
(schemas/run-response.schema.json: outputs, an error by phase, and the exit status each means)
are shared with the service's worker; `private_stdout()` keeps a kernel's printf (file
descriptor 1) out of an answer written on stdout. numpy-free (a Request's arrays are anything
with the buffer protocol), so the process-per-launch path pays for the driver and nothing else.
"""

from __future__ import annotations

import base64
import os
import sys
import threading
from collections.abc import Callable
from typing import BinaryIO

from protocol.version import RUN_PROTOCOL_VERSION
from runner.errors import CudaError, NoGpuError, PhaseError, PtxError, SignatureError
from runner.launch import launch_plan
from runner.launch.launch_plan import Output, Param, Request, signature

__all__ = [
    "LAUNCH_ELSEWHERE",
    "PHASES",
    "SingleAnswer",
    "cuda_failure",
    "error_document",
    "execute",
    "exit_status",
    "output_document",
    "private_stdout",
    "read_outputs",
    "timeout_document",
    "unexpected",
]


# ---- the answer documents -----------------------------------------------------------------------

PHASES = ("input", "environment", "load", "signature", "launch", "timeout")
# What a compiler's test can do on a machine without a GPU (docs/service.md).
LAUNCH_ELSEWHERE = (
    "send the request to a GPU box with kernelgap installed: `ssh gpu-host python3 -m runner run "
    "< request.json`, or one `runner serve` for a whole test session through "
    "harness.client.KernelClient.over_ssh"
)


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


def cuda_failure(phase: str, exc: Exception) -> dict:
    return error_document(phase, str(exc), getattr(exc, "name", None))


def unexpected(phase: str, exc: BaseException) -> dict:
    return error_document(phase, f"unexpected {type(exc).__name__}: {exc}")


def timeout_document(request: Request) -> dict:
    return error_document(
        "timeout",
        f"kernel {request.kernel!r} did not finish within timeout_s={request.timeout_s:g} s; "
        "the runner process was ended to free the GPU",
    )


def output_document(out: Output, param: Param, data) -> dict:
    """One output of a response from its host copy (`data`: the device's little-endian bytes,
    or a numpy array of them): JSON values, or with encoding = base64 the raw bytes."""
    raw = memoryview(data).cast("B")
    document = {"param": out.param, "type": param.type_name}
    if out.base64:
        document["data_base64"] = base64.b64encode(raw).decode()
    else:
        document["values"] = launch_plan.values(param.kind, raw)
    return document


def read_outputs(request: Request, buffers: dict) -> list[dict]:
    """The outputs a request asks for, read back from its device buffers (by param index)."""
    outputs = []
    for out in request.outputs:
        param = request.params[out.param]
        raw = buffers[out.param].download_bytes(out.count * launch_plan.ITEMSIZE[param.kind])
        outputs.append(output_document(out, param, raw))
    return outputs


class SingleAnswer:
    """Writes at most one answer document to `out`, whichever thread (main or watchdog) comes
    first; `status` is the exit status an answer means (the timeout path ends the process with
    it) and `check` what an answer goes through before it is written."""

    def __init__(
        self,
        out: BinaryIO,
        status: Callable[[dict], int] = exit_status,
        check: Callable[[dict], dict] = lambda document: document,
    ):
        self._out, self._status, self._check = out, status, check
        self._lock = threading.Lock()
        self._written = False

    def write(self, document: dict) -> bool:
        from protocol.codec import encode  # orjson: not on the command line's own path

        with self._lock:
            if self._written:
                return False
            self._written = True
            self._out.write(encode(document) + b"\n")
            self._out.flush()
            return True

    def timeout_and_exit(self, document: dict) -> None:
        """Watchdog: answer with the timeout document and end the process (tears the context down)."""
        document = self._check(document)
        if self.write(document):
            os._exit(self._status(document))


# ---- the answer's stdout ------------------------------------------------------------------------


def private_stdout() -> BinaryIO:
    """The process's stdout for the response alone: file descriptor 1 then points at stderr, so a
    kernel's printf (written to fd 1 by the driver) can never land in the JSON answer."""
    sys.stdout.flush()
    response = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    return response


# ---- one launch on a context of its own ---------------------------------------------------------


def _phase(document: dict) -> PhaseError:
    """A PhaseError carrying a finished error document out of the execution steps."""
    phase, message = document["phase"], document["error"]
    return PhaseError(phase, message, document.get("cuda_error"), document)


def execute(request: Request, on_timeout: Callable[[dict], None] | None) -> dict:
    """The response to a checked request (ok or an error of its phase); no other I/O.

    `on_timeout(document)` is called from a watchdog thread when the kernel runs past the
    request's timeout_s; it must end the process (a hung kernel cannot be cancelled). Without it
    there is no watchdog.
    """
    try:
        return _execute(request, on_timeout)
    except Exception as exc:
        return unexpected("launch", exc)


def _execute(request: Request, on_timeout: Callable[[dict], None] | None) -> dict:
    from runner.gpu import driver, ptx

    try:
        context = driver.Context()
    except NoGpuError as exc:
        return error_document("environment", f"{exc}; {LAUNCH_ELSEWHERE}")
    except CudaError as exc:
        return cuda_failure("environment", exc)
    try:
        return _run_in_context(request, driver, ptx, on_timeout)
    except PhaseError as failure:
        return failure.document
    finally:
        context.close()


def _run_in_context(request: Request, driver, ptx, on_timeout) -> dict:
    try:
        module = driver.Module(request.ptx, label="request")
    except CudaError as exc:
        raise _phase(cuda_failure("load", exc)) from None
    cleanup = [module.unload]
    try:
        try:
            parsed = ptx.parse(request.ptx)
            ptx.check_signature(parsed, request.kernel, signature(request), where="request")
            kernel = module.kernel(
                request.kernel, request.grid, request.block, request.shared_bytes
            )
        except (PtxError, SignatureError) as exc:
            raise _phase(error_document("signature", str(exc))) from None
        except CudaError as exc:
            raise _phase(cuda_failure("signature", exc)) from None
        try:
            elapsed_ms, outputs = _launch(request, kernel, driver, cleanup, on_timeout)
        except CudaError as exc:
            raise _phase(cuda_failure("launch", exc)) from None
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
        buffers[index] = buffer = driver.Buffer(param.nbytes)
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
        document = timeout_document(request)
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
    return elapsed_ms, read_outputs(request, buffers)
