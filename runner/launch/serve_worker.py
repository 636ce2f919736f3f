"""The process behind `runner serve` that holds the CUDA context: one request after another.

Started by runner.launch.serve (the supervisor, which never touches CUDA). It reads framed requests on
stdin, one JSON line each (`{"line": N, "request": {...}}`), and writes one JSON response line
per request on the answer pipe ($KERNELGAP_EVENT_FD); its own stdout and stderr (where a
kernel's printf lands) are only log output. What it keeps across requests: the context, one
stream and two events, the modules (by PTX sha256, the least recently used unloaded past
MODULE_CACHE), and device buffers (a freed buffer is reused by a later array that fits it).

It exits, after answering, when the context can no longer be trusted: a launch whose error is
sticky (an illegal address, a trap: cuCtxSynchronize fails afterwards), or a kernel that ran
past its timeout_s (a watchdog answers and ends the process, which is the only way to stop a
hung kernel). The supervisor then starts a fresh worker for the next request.
"""

from __future__ import annotations

import hashlib
import os
import sys
import threading
from collections import OrderedDict

from runner.execution.isolation import end_with_parent
from runner.gpu import driver_start

# Started as the service's worker: the driver loads and the context comes up in a thread while
# cuda.bindings, numpy and jsonschema import below (a third of the start-up to the first answer).
if __name__ == "__main__":
    end_with_parent()  # before the context exists: a worker never outlives its service
    driver_start.start()

from protocol import RUN_PROTOCOL_VERSION, decode, encode
from runner.errors import CudaError, NoGpuError, PtxError, RequestError, SignatureError
from runner.gpu import driver
from runner.launch import oneshot
from runner.launch.fresh_context import (
    LAUNCH_ELSEWHERE,
    cuda_failure,
    error_document,
    read_outputs,
    timeout_document,
    unexpected,
)
from runner.launch.launch_plan import Request, signature

MODULE_CACHE = 64
BROKEN_EXIT = 3  # the context is broken (sticky error): start a fresh worker
TIMEOUT_EXIT = 4  # a kernel ran past its timeout: the process ended it


class Answers:
    """The answer pipe; one lock so the watchdog and the main thread never interleave lines."""

    def __init__(self):
        fd = os.environ.get("KERNELGAP_EVENT_FD")
        self.stream = os.fdopen(int(fd), "wb", buffering=0) if fd else sys.stdout.buffer
        self.lock = threading.Lock()

    def write(self, document: dict) -> None:
        with self.lock:
            self.stream.write(encode(document) + b"\n")
            self.stream.flush()


class Pool:
    """Device buffers kept between requests: a request takes the smallest free one that fits
    (and is no more than 4 times too large), else allocates; release() returns them all."""

    def __init__(self, driver):
        self.driver = driver
        self.free: list = []
        self.used: list = []

    def take(self, nbytes: int):
        fits = [b for b in self.free if nbytes <= b.nbytes <= max(4 * nbytes, 4096)]
        if fits:
            buffer = min(fits, key=lambda b: b.nbytes)
            self.free.remove(buffer)
        else:
            buffer = self.driver.Buffer(nbytes)
        self.used.append(buffer)
        return buffer

    def release(self) -> None:
        self.free.extend(self.used)
        self.used.clear()


class Service:
    """The context and what is cached in it; `answer(request)` runs one request."""

    def __init__(self, answers: Answers):
        from runner.gpu import ptx

        self.driver, self.ptx, self.answers = driver, ptx, answers
        self.context = driver.Context()
        self.stream = driver.Stream()
        self.start, self.stop = driver.Event(), driver.Event()
        self.modules: OrderedDict[str, tuple] = OrderedDict()  # sha256 -> (Module, parsed PTX)
        self.pool = Pool(driver)
        self.broken = False

    def module(self, text: str):
        key = hashlib.sha256(text.encode()).hexdigest()
        if key in self.modules:
            self.modules.move_to_end(key)
            return self.modules[key], 0.0
        module = self.driver.Module(text, label="request")
        self.modules[key] = (module, self.ptx.parse(text))
        while len(self.modules) > MODULE_CACHE:
            old, _ = self.modules.popitem(last=False)[1]
            old.unload()
        return self.modules[key], module.load_s

    def answer(self, request: Request, identity: dict) -> dict:
        d, ptx = self.driver, self.ptx
        try:
            (module, parsed), load_s = self.module(request.ptx)
        except CudaError as exc:
            return cuda_failure("load", exc)
        except PtxError as exc:
            return error_document("signature", str(exc))
        try:
            ptx.check_signature(parsed, request.kernel, signature(request), where="request")
            kernel = module.kernel(
                request.kernel, request.grid, request.block, request.shared_bytes
            )
        except (PtxError, SignatureError) as exc:
            return error_document("signature", str(exc))
        except CudaError as exc:
            return cuda_failure("signature", exc)
        try:
            return self._launch(request, kernel, parsed, load_s, identity)
        except CudaError as exc:
            self.broken = d.cu().cuCtxSynchronize()[0] != 0  # sticky: every later call fails
            return cuda_failure("launch", exc)
        finally:
            self.pool.release()

    def _launch(self, request: Request, kernel, parsed, load_s: float, identity: dict) -> dict:
        d = self.driver
        buffers, args = {}, []
        for index, param in enumerate(request.params):
            if param.array is None:
                args.append((param.kind, param.value))
                continue
            buffers[index] = buffer = self.pool.take(param.nbytes)
            buffer.upload(param.array)
            args.append(("ptr", buffer.ptr))
        kernel_args = d.KernelArgs(args)
        d.check(d.cu().cuCtxSynchronize(), "cuCtxSynchronize")  # pageable uploads are done
        watchdog = threading.Timer(request.timeout_s, self._timed_out, args=(request, identity))
        watchdog.daemon = True
        watchdog.start()
        try:
            self.start.record(self.stream)
            kernel.launch(self.stream, kernel_args)
            self.stop.record(self.stream)
            self.stop.synchronize()
        finally:
            watchdog.cancel()
        outputs = read_outputs(request, buffers)
        return {
            "status": "ok",
            "schema_version": RUN_PROTOCOL_VERSION,
            "outputs": outputs,
            "elapsed_ms": self.stop.elapsed_s(self.start) * 1e3,
            "load_ms": load_s * 1e3,
            "ptx": {"version": parsed.version, "target": parsed.target},
        }

    def _timed_out(self, request: Request, identity: dict) -> None:
        document = timeout_document(request)
        document["error"] += "; the service starts a fresh context for the next request"
        self.answers.write({**document, **identity})
        os._exit(TIMEOUT_EXIT)


def main() -> int:
    answers = Answers()
    service, unusable = None, None
    try:
        service = Service(answers)
    except NoGpuError as exc:
        unusable = error_document("environment", f"{exc}; {LAUNCH_ELSEWHERE}")
    except CudaError as exc:
        unusable = cuda_failure("environment", exc)
    answers.write({"ready": True, "gpu": unusable is None})
    for raw in sys.stdin.buffer:
        try:  # the supervisor frames checked JSON; a frame that is not one is answered, not fatal
            frame = decode(raw, "serve frame")
            identity = {"id": frame["id"]}
            request = frame["request"]
        except (ValueError, TypeError, KeyError) as exc:
            answers.write({**unexpected("input", exc), "id": None})
            continue
        try:
            request = oneshot._prepare(request)
        except RequestError as exc:
            response = error_document(exc.phase, exc.message)
        except Exception as exc:
            response = unexpected("input", exc)
        else:
            if unusable is not None:
                response = dict(unusable)
            else:
                try:
                    response = service.answer(request, identity)
                except Exception as exc:
                    response = unexpected("launch", exc)
        answers.write({**oneshot._checked(response), **identity})
        if service is not None and service.broken:
            return BROKEN_EXIT
    return 0


if __name__ == "__main__":
    sys.exit(main())
