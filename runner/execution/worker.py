"""Worker process: runs one GPU job in its own CUDA context and reports events as JSON lines.

A fault (sticky CUDA error) or a hang then costs only this process; the parent
(runner.execution.isolation) replaces it and the other cases still run. Protocol: one JSON job on
stdin; one JSON object per line on the event pipe (file descriptor $KERNELGAP_EVENT_FD, else
stdout): {"event": "phase", ...} while running and {"event": "result", "record": {...}} last.
"""

from __future__ import annotations

import contextlib
import os
import sys
import traceback

from protocol.codec import decode, encode


def _event_stream():
    fd = os.environ.get("KERNELGAP_EVENT_FD")
    return os.fdopen(int(fd), "wb", buffering=0) if fd else sys.stdout.buffer


_EVENTS = None


def _emit(event: dict) -> None:
    global _EVENTS
    if _EVENTS is None:
        _EVENTS = _event_stream()
    _EVENTS.write(encode(event) + b"\n")
    _EVENTS.flush()


def run_job(job: dict) -> dict:
    kind = job.get("job")
    if kind == "case":
        from runner.execution.case import run_case

        return run_case(job, _emit)
    if kind == "environment":
        from runner.gpu import driver
        from runner.measurement import environment

        with driver.Context(job.get("device", 0)) as ctx:
            count = int(driver.check(driver.cu().cuDeviceGetCount(), "cuDeviceGetCount"))
            return {"status": "ok", "environment": environment.capture(ctx), "device_count": count}
    raise ValueError(f"unknown worker job {kind!r}")


def main() -> int:
    from runner.gpu import driver

    # before the job arrives: a worker started ahead imports while another case runs (a failed
    # import is reported with the job, where it is needed)
    with contextlib.suppress(Exception):
        import runner.execution.case  # noqa: F401
    try:
        job = decode(sys.stdin.buffer.read(), "worker job (stdin)")
        record = run_job(job)
    except driver.NoGpuError as exc:
        record = {
            "status": "failed",
            "error": {"phase": "environment", "message": str(exc)},
            "no_gpu": True,
        }
    except Exception as exc:  # report, never die silently: the parent turns this into a case error
        record = {
            "status": "failed",
            "error": {"phase": "worker", "message": f"{type(exc).__name__}: {exc}"},
        }
        traceback.print_exc(file=sys.stderr)
    _emit({"event": "result", "record": record})
    return 0


if __name__ == "__main__":
    sys.exit(main())
