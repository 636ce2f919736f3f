"""Run a job in a fresh worker process with a deadline, so faults and hangs stay contained.

Between keep_ahead() and stop_ahead() (a `runner bench` run), each job starts the next job's
worker as it takes its own: that worker imports the runner while the current job runs, then
waits on its stdin; it creates no CUDA context until it
has its job, and it still runs one job only, so every case keeps a process of its own.

What every worker process of the runner shares: where the code is and its answer pipe.

Kept free of heavy imports (no jsonschema, numpy or CUDA), so a supervisor can start a worker
before it loads anything else (runner serve's start-up).

The worker process (`python -m runner.execution.isolation`, `main()`): runs one GPU job in its own
CUDA context and reports events as JSON lines. A fault (sticky CUDA error) or a hang then costs
only that process; the parent replaces it and the other cases still run. Protocol: one JSON job on
stdin; one JSON object per line on the event pipe (file descriptor $KERNELGAP_EVENT_FD, else
stdout): {"event": "phase", ...} while running and {"event": "result", "record": {...}} last."""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from protocol.codec import decode, encode
from protocol.progress import visible
from runner.errors import NoGpuError

# The folder holding the runner package: a checkout's root, or site-packages for a wheel. A
# worker starts there (and has it on its path) so it imports this very runner, never a `runner/`
# that happens to sit in the user's current folder.
REPO_ROOT = Path(__file__).resolve().parents[2]


# The answer (event) pipe's file descriptor in the worker's environment: a kernel's printf lands
# on the worker's stdout, which is only log output, so it can never corrupt an answer.
EVENT_FD_VARIABLE = "KERNELGAP_EVENT_FD"
# The pid of the process that spawned a worker: a worker whose parent is no longer that one ends
# itself (end_with_parent), since its own session keeps every signal of the parent's away.
PARENT_PID_VARIABLE = "KERNELGAP_PARENT_PID"
PARENT_POLL_S = 0.2


def spawn_worker(module: str, stderr=subprocess.PIPE) -> tuple[subprocess.Popen, int]:
    """`python -m module` in its own process group, with stdin and stdout piped and the read end
    of its answer pipe returned beside it (the worker writes to $KERNELGAP_EVENT_FD)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    read_fd, write_fd = os.pipe()
    env[EVENT_FD_VARIABLE] = str(write_fd)
    env[PARENT_PID_VARIABLE] = str(os.getpid())
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", module],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            cwd=REPO_ROOT,
            env=env,
            start_new_session=True,
            pass_fds=(write_fd,),
        )
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)
    return proc, read_fd


def end_with_parent() -> None:
    """In a worker: kill this worker's process group once the process that spawned it is gone,
    even while the main thread is in a hung kernel and never reads its stdin's end. A thread
    polls the parent's pid (PR_SET_PDEATHSIG would fire when the spawning thread ends, and the
    launch service spawns workers from connection threads that end with their connection)."""
    expected = os.environ.get(PARENT_PID_VARIABLE)
    if expected is None:
        return  # started by hand, not by spawn_worker

    def watch() -> None:
        while os.getppid() == int(expected):
            time.sleep(PARENT_POLL_S)
        os.killpg(os.getpgid(0), signal.SIGKILL)

    threading.Thread(target=watch, daemon=True, name="end-with-parent").start()


WORKER_MODULE = "runner.execution.isolation"  # its main() below


class _Waiting:
    """Workers started ahead of their jobs (this module imports, then reads stdin)."""

    lock = threading.Lock()
    enabled = False  # each run_worker starts the next job's worker
    started: ClassVar[list[tuple[subprocess.Popen, int]]] = []


def start_ahead() -> None:
    """Start a worker now for a later run_worker to take."""
    started = spawn_worker(WORKER_MODULE)
    with _Waiting.lock:
        _Waiting.started.append(started)


def _take() -> tuple[subprocess.Popen, int]:
    """A worker started ahead that is still alive, else a new one."""
    with _Waiting.lock:
        while _Waiting.started:
            proc, event_read = _Waiting.started.pop(0)
            if proc.poll() is None:
                return proc, event_read
            os.close(event_read)
    return spawn_worker(WORKER_MODULE)


def keep_ahead() -> None:
    """From now on, each run_worker starts the next job's worker (until stop_ahead)."""
    _Waiting.enabled = True


def stop_ahead() -> None:
    """Start no more workers ahead, and end every one still waiting for a job."""
    with _Waiting.lock:
        _Waiting.enabled = False
        waiting, _Waiting.started = _Waiting.started, []
    for proc, event_read in waiting:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        os.close(event_read)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            stream.close()


@dataclass
class WorkerOutcome:
    record: dict | None = None  # the worker's final record, None if it never sent one
    events: list[dict] = field(default_factory=list)
    last_phase: str | None = None
    timed_out: bool = False
    returncode: int | None = None
    stderr_tail: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    start_s: float | None = None  # from the spawn to the worker's first event (its start-up)
    exit_s: float | None = None  # from its result to its exit (teardown, process end)


def _pump_events(stream, events: queue.Queue) -> None:
    for line in stream:
        line = line.strip()
        if line:
            try:
                events.put(decode(line, "worker event"))
            except ValueError:
                events.put({"event": "garbage", "text": line[:500].decode(errors="replace")})
    events.put(None)


def _pump_log(stream, tail: deque, echo: bool) -> None:
    for raw in stream:
        text = raw.decode(errors="replace").rstrip("\n")
        tail.append(text)
        if echo:
            print(f"    | {visible(text)}", file=sys.stderr, flush=True)  # a kernel's printf


def run_worker(
    job: dict, timeout_s: float, on_event=None, echo_stderr: bool = True
) -> WorkerOutcome:
    """Run `job` in `python -m runner.execution.isolation` (one started ahead where there is one;
    after keep_ahead, the next job's is started now); kill the whole process group at the
    deadline."""
    # Events travel on their own pipe: a kernel's printf lands on the worker's stdout, which is
    # treated as log output like its stderr, so it can never corrupt an event line.
    t0 = time.monotonic()
    proc, event_read = _take()
    if _Waiting.enabled:
        start_ahead()
    outcome = WorkerOutcome()
    events: queue.Queue = queue.Queue()
    tail: deque = deque(maxlen=40)
    readers = [
        threading.Thread(
            target=_pump_events, args=(os.fdopen(event_read, "rb"), events), daemon=True
        ),
        threading.Thread(target=_pump_log, args=(proc.stdout, tail, echo_stderr), daemon=True),
        threading.Thread(target=_pump_log, args=(proc.stderr, tail, echo_stderr), daemon=True),
    ]
    for reader in readers:
        reader.start()
    try:
        proc.stdin.write(encode(job))
        proc.stdin.close()
    except BrokenPipeError:
        pass
    deadline = t0 + timeout_s
    result_at = t0
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            outcome.timed_out = True
            break
        try:
            event = events.get(timeout=remaining)
        except queue.Empty:
            outcome.timed_out = True
            break
        if event is None:
            break
        if outcome.start_s is None:
            outcome.start_s = time.monotonic() - t0
        outcome.events.append(event)
        if event.get("event") == "phase":
            outcome.last_phase = event.get("phase")
        elif event.get("event") == "result":
            outcome.record = event.get("record")
            result_at = time.monotonic()
        if on_event is not None:
            on_event(event)
    if outcome.timed_out:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    try:
        outcome.returncode = proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        outcome.returncode = proc.wait()
    for reader in readers:
        reader.join(timeout=5)
    outcome.stderr_tail = list(tail)
    outcome.wall_s = time.monotonic() - t0
    if outcome.record is not None:
        outcome.exit_s = time.monotonic() - result_at
    return outcome


def _event_stream():
    fd = os.environ.get(EVENT_FD_VARIABLE)
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

    # before the job arrives: a worker started ahead imports while another case runs (a failed
    # import is reported with the job, where it is needed)
    with contextlib.suppress(Exception):
        import runner.execution.case  # noqa: F401
    try:
        job = decode(sys.stdin.buffer.read(), "worker job (stdin)")
        record = run_job(job)
    except NoGpuError as exc:
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
