"""One launch on a context of its own: what `runner run` and `runner launch --no-service` do
once their request is checked. Load the PTX, check the .entry signature, upload the arrays,
launch once between two events on a non-default stream, read the outputs back, release it all.

Whatever fails is an error document of its phase (runner.launch.responses). numpy-free (a
Request's arrays are anything with the buffer protocol), so the process-per-launch path pays
for the driver and nothing else.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from protocol.version import RUN_PROTOCOL_VERSION
from runner.launch.launch_plan import Request, signature
from runner.launch.responses import (
    LAUNCH_ELSEWHERE,
    cuda_failure,
    error_document,
    read_outputs,
    timeout_document,
    unexpected,
)
from runner.measurement.gate import PhaseError

__all__ = ["execute"]


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
    except driver.NoGpuError as exc:
        return error_document("environment", f"{exc}; {LAUNCH_ELSEWHERE}")
    except driver.CudaError as exc:
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
    except driver.CudaError as exc:
        raise _phase(cuda_failure("load", exc)) from None
    cleanup = [module.unload]
    try:
        try:
            parsed = ptx.parse(request.ptx)
            ptx.check_signature(parsed, request.kernel, signature(request), where="request")
            kernel = module.kernel(
                request.kernel, request.grid, request.block, request.shared_bytes
            )
        except (ptx.PtxError, ptx.SignatureError) as exc:
            raise _phase(error_document("signature", str(exc))) from None
        except driver.CudaError as exc:
            raise _phase(cuda_failure("signature", exc)) from None
        try:
            elapsed_ms, outputs = _launch(request, kernel, driver, cleanup, on_timeout)
        except driver.CudaError as exc:
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
