"""The one transport interface, and the process plumbing every transport shares.

A transport runs an argv on a target (this machine, an SSH host, a rented Vast.ai machine):

    with transport:  # one connection or rental for every step
        done = transport.run(command, stdin, timeout_s=600.0, stderr_sink=sink)
        done.returncode, done.stdout

stdin (bytes or a binary file) reaches the command's stdin; the command's stderr reaches
`stderr_sink` chunk by chunk while it runs; its stdout is returned whole. Nothing is passed
through a shell unquoted.

On the target the command runs under a small guard (harness.running.transport.guard, sent as
`python -c`): it starts the command in its own process group, feeds it the framed stdin, and
kills the whole group when its own stdin reaches EOF (what the target sees when the caller times the job out or the
connection drops) or when its own deadline passes (the job limit + GUARD_GRACE_S), whichever is
first. Without it a remote job outlives its SSH session (no pty, no SIGHUP); without the deadline
it would outlive a silent network partition until the remote sshd noticed, which can take hours.

StderrTail: the remote's stderr during `harness run`, shown as it arrives, its last lines kept for error
messages, and the runner's partial-document lines kept out of sight (the last one is saved).
Control bytes other than newline and tab are shown as \\xNN: the runner already writes its lines
through protocol.progress.visible, and what a target sends besides reaches no terminal as a
command (ESC ]0;... BEL, ESC [2J)."""

from __future__ import annotations

import contextlib
import inspect
import os
import re
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import BinaryIO, Protocol

from harness.errors import ConnectError as ConnectError
from harness.errors import ConnectionLost as ConnectionLost
from harness.errors import JobTimeout as JobTimeout
from harness.errors import TransportError as TransportError
from harness.running.transport import guard
from protocol.progress import PARTIAL_DOCUMENT_PREFIX as PARTIAL_PREFIX

TAIL_LINES = 8


_CONTROL_BYTES = re.compile(rb"[\x00-\x08\x0b-\x1f\x7f]")


def _visible_bytes(data: bytes) -> bytes:
    return _CONTROL_BYTES.sub(lambda m: b"\\x%02x" % m.group()[0], data)


class StderrTail:
    """The remote's stderr: written to ours as it arrives, with the last lines kept for messages.

    Lines carrying the runner's partial document are not shown; the last one is kept, so a
    dropped connection still leaves every case measured so far on disk.
    """

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr.buffer
        self.data = b""
        self.partial: bytes | None = None
        self._pending = b""  # the start of a line that may be a partial document
        self._mid_line = False  # part of the current line was already shown: it is ordinary

    def __call__(self, chunk: bytes) -> None:
        shown = []
        data = self._pending + chunk
        self._pending = b""
        while data:
            end = data.find(b"\n")
            if end < 0:
                if not self._mid_line and (
                    data.startswith(PARTIAL_PREFIX) or PARTIAL_PREFIX.startswith(data)
                ):
                    self._pending = data  # wait for the rest of the line
                else:  # an unfinished ordinary line is shown at once (progress without a newline)
                    shown.append(data)
                    self._mid_line = True
                break
            line, data = data[: end + 1], data[end + 1 :]
            if not self._mid_line and line.startswith(PARTIAL_PREFIX):
                self.partial = line[len(PARTIAL_PREFIX) :].rstrip(b"\n")
            else:
                shown.append(line)
            self._mid_line = False
        if shown:
            text = _visible_bytes(b"".join(shown))
            self.stream.write(text)
            self.stream.flush()
            self.data = (self.data + text)[-16384:]

    def lines(self, count: int = TAIL_LINES) -> str:
        text = self.data.decode("utf-8", "replace").rstrip().splitlines()
        return "\n".join(f"  | {line}" for line in text[-count:]) or "  | (nothing on stderr)"


StderrSink = Callable[[bytes], None]


FRAME_BYTES = 1 << 16


STOP_GRACE_S = 10.0  # after EOF, how long the guard gets to stop the job before we kill it


GUARD_GRACE_S = 60.0  # the guard's own deadline is the job limit + this, so ours fires first


@dataclass(frozen=True)
class Completed:
    """A command that ran to its end on the target: its exit status and everything on its stdout."""

    returncode: int
    stdout: bytes


class Transport(Protocol):
    """One target. Open it (context manager) once; every `run` then shares that connection."""

    description: str  # for messages: "ssh://root@host:22", "local", "vast:H200 (instance 42)"

    def __enter__(self) -> Transport: ...

    def __exit__(self, *exc) -> None: ...

    def run(
        self,
        command: list[str],
        stdin: bytes | BinaryIO | None,
        *,
        timeout_s: float,
        stderr_sink: StderrSink,
    ) -> Completed: ...


GUARD_SOURCE = inspect.getsource(guard)  # the whole module is the program the target runs


def guard_deadline_s(timeout_s: float) -> float:
    """The guard's own limit for a job whose whole-job limit here is `timeout_s`."""
    return timeout_s + GUARD_GRACE_S


def guarded(python: str, command: list[str], deadline_s: float) -> list[str]:
    """argv that runs `command` under the guard with the target's `python`."""
    return [python, "-c", GUARD_SOURCE, f"{deadline_s:.3f}", *command]


def deadline_note(started_s: float, deadline_s: float) -> str:
    """When a guard started about `started_s` (time.time()) stops its job at the latest."""
    at = datetime.fromtimestamp(started_s + deadline_s, UTC)
    return (
        f"its guard's deadline, about {at:%Y-%m-%d %H:%M:%S} UTC "
        f"({deadline_s:g} s after it started)"
    )


def _frames(stdin: bytes | BinaryIO | None):
    """stdin cut into guard frames, ending with the zero-length frame."""
    if isinstance(stdin, bytes | bytearray | memoryview):
        data = memoryview(stdin)
        for start in range(0, len(data), FRAME_BYTES):
            chunk = data[start : start + FRAME_BYTES]
            yield struct.pack(">I", len(chunk)) + bytes(chunk)
    elif stdin is not None:
        while chunk := stdin.read(FRAME_BYTES):
            yield struct.pack(">I", len(chunk)) + chunk
    yield struct.pack(">I", 0)


class GuardedProcess:
    """A local process that speaks to a guard (directly, or through `ssh`), with a whole-job limit.

    Feeds the framed stdin, keeps the pipe open while the job runs (closing it stops the job),
    streams stderr to the sink as it arrives and collects stdout. After a run cut short by the
    limit, `stop_status` is the exit status the process gave after our EOF (the guard's answer
    that it stopped the job), or None when it gave none and had to be killed here.
    """

    def __init__(self, argv: list[str], stdin: bytes | BinaryIO | None, stderr_sink: StderrSink):
        self.argv = argv
        self.stdin = stdin
        self.stderr_sink = stderr_sink
        self.stdout_chunks: list[bytes] = []
        self.feed_error: BaseException | None = None
        self.fed = threading.Event()
        self.started_s = time.time()
        self.stop_status: int | None = None

    @property
    def stdout(self) -> bytes:
        return b"".join(self.stdout_chunks)

    def _feed(self, pipe) -> None:
        try:
            for frame in _frames(self.stdin):
                pipe.write(frame)
            pipe.flush()
        except (BrokenPipeError, ValueError, OSError):
            pass  # the other side ended early; its exit status says why
        except Exception as exc:  # a failing stdin source: EOF stops the job; the caller reports it
            self.feed_error = exc
            self._close(pipe)
        self.fed.set()

    def _drain(self, pipe, on_chunk: Callable[[bytes], None]) -> None:
        fd = pipe.fileno()
        while chunk := os.read(fd, FRAME_BYTES):
            on_chunk(chunk)

    @staticmethod
    def _close(pipe) -> None:
        with contextlib.suppress(OSError):
            pipe.close()

    def run(self, timeout_s: float) -> int | None:
        """The exit status, or None when the whole-job limit stopped it."""
        self.started_s = time.time()
        proc = subprocess.Popen(
            self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        threads = [
            threading.Thread(target=self._feed, args=(proc.stdin,), daemon=True),
            threading.Thread(
                target=self._drain, args=(proc.stdout, self.stdout_chunks.append), daemon=True
            ),
            threading.Thread(target=self._drain, args=(proc.stderr, self.stderr_sink), daemon=True),
        ]
        for thread in threads:
            thread.start()
        try:
            status: int | None = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            status = None
            if self.fed.is_set():  # else a close would wait on the feeding thread
                self._close(proc.stdin)  # EOF: the guard kills the job and exits
            try:
                self.stop_status = proc.wait(timeout=STOP_GRACE_S if self.fed.is_set() else 0)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self.fed.wait(timeout=STOP_GRACE_S):
            self._close(proc.stdin)
        for thread in threads[1:]:
            thread.join(timeout=STOP_GRACE_S)
        return status
