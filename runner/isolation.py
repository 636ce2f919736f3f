"""Run a job in a fresh worker process with a deadline, so faults and hangs stay contained."""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from protocol.codec import decode, encode

# The folder holding the runner package: a checkout's root, or site-packages for a wheel. The
# worker starts there (and has it on its path) so it imports this very runner, never a `runner/`
# that happens to sit in the user's current folder.
REPO_ROOT = Path(__file__).resolve().parent.parent
EVENT_FD_VARIABLE = "KERNELGAP_EVENT_FD"


@dataclass
class WorkerOutcome:
    record: dict | None = None  # the worker's final record, None if it never sent one
    events: list[dict] = field(default_factory=list)
    last_phase: str | None = None
    timed_out: bool = False
    returncode: int | None = None
    stderr_tail: list[str] = field(default_factory=list)
    wall_s: float = 0.0


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
            print(f"    | {text}", file=sys.stderr, flush=True)


def run_worker(
    job: dict, timeout_s: float, on_event=None, echo_stderr: bool = True
) -> WorkerOutcome:
    """Run `job` in `python -m runner.worker`; kill the whole process group at the deadline."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    # Events travel on their own pipe: a kernel's printf lands on the worker's stdout, which is
    # treated as log output like its stderr, so it can never corrupt an event line.
    event_read, event_write = os.pipe()
    env[EVENT_FD_VARIABLE] = str(event_write)
    t0 = time.monotonic()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "runner.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=REPO_ROOT,
            env=env,
            start_new_session=True,
            pass_fds=(event_write,),
        )
    finally:
        os.close(event_write)
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
        outcome.events.append(event)
        if event.get("event") == "phase":
            outcome.last_phase = event.get("phase")
        elif event.get("event") == "result":
            outcome.record = event.get("record")
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
    return outcome
