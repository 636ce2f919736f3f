"""The one transport interface, and the process plumbing every transport shares.

A transport runs an argv on a target (this machine, an SSH host, a rented Vast.ai machine):

    with transport:  # one connection or rental for every step
        done = transport.run(command, stdin, timeout_s=600.0, stderr_sink=sink)
        done.returncode, done.stdout

stdin (bytes or a binary file) reaches the command's stdin; the command's stderr reaches
`stderr_sink` chunk by chunk while it runs; its stdout is returned whole. Nothing is passed
through a shell unquoted.

On the target the command runs under a small guard (`guard_main`, sent as `python -c`): it starts
the command in its own process group, feeds it the framed stdin, and kills the whole group when
its own stdin reaches EOF, which is what the target sees when the caller times the job out or the
connection drops. Without it a remote job outlives its SSH session (no pty, no SIGHUP).
"""

from __future__ import annotations

import contextlib
import inspect
import os
import struct
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import BinaryIO, Protocol

StderrSink = Callable[[bytes], None]
FRAME_BYTES = 1 << 16
STOP_GRACE_S = 10.0  # after EOF, how long the guard gets to stop the job before we kill it


@dataclass(frozen=True)
class Completed:
    """A command that ran to its end on the target: its exit status and everything on its stdout."""

    returncode: int
    stdout: bytes


class TransportError(RuntimeError):
    """The target could not be reached, or the job was cut short. `stdout` holds what did arrive."""

    def __init__(self, message: str, stdout: bytes = b""):
        super().__init__(message)
        self.stdout = stdout


class ConnectError(TransportError):
    """No session could be opened (unreachable host, refused key, unknown or changed host key)."""


class ConnectionLost(TransportError):
    """The connection dropped while a job was running."""


class JobTimeout(TransportError):
    """The job ran past its whole-job limit and was stopped."""


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


def guard_main() -> None:
    """The guard, run on the target as `python -c <this source> ARGV...` (standard library only).

    stdin carries frames: a 4-byte big-endian length, then that many bytes for ARGV's stdin; a
    zero length closes ARGV's stdin. EOF on the guard's stdin at any point means the caller is
    gone: the guard then kills ARGV's process group (SIGTERM, SIGKILL 5 s later). Exit status:
    ARGV's, or 128 + signal number when a signal ended it.
    """
    import contextlib
    import os
    import queue as queue_module
    import signal
    import struct
    import subprocess
    import sys
    import threading

    try:
        child = subprocess.Popen(
            sys.argv[1:], stdin=subprocess.PIPE, bufsize=0, start_new_session=True
        )
    except OSError as exc:
        print(f"kernelgap guard: cannot start {sys.argv[1]!r}: {exc}", file=sys.stderr)
        sys.exit(127)
    finished = threading.Event()

    def read_exact(count):
        data = b""
        while len(data) < count:
            chunk = os.read(0, count - len(data))
            if not chunk:
                return None
            data += chunk
        return data

    def kill_group(sig):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(child.pid, sig)

    def feed(queue):  # a separate writer, so stdin is read to its EOF even if ARGV stops reading
        sink = child.stdin
        while (data := queue.get()) is not None:
            view = memoryview(data)
            try:
                while view:  # a raw pipe may take part of a write
                    view = view[sink.write(view) :]
            except BrokenPipeError:
                pass
        with contextlib.suppress(BrokenPipeError):
            sink.close()

    def pump():
        queue = queue_module.SimpleQueue()
        threading.Thread(target=feed, args=(queue,), daemon=True).start()
        payload_open = True
        while True:
            header = read_exact(4)
            if header is None:
                break
            (length,) = struct.unpack(">I", header)
            data = read_exact(length) if length else b""
            if data is None:
                break
            if payload_open:
                queue.put(data if length else None)
                payload_open = length > 0
        if payload_open:
            queue.put(None)
        if not finished.is_set():  # EOF before the command ended: the caller went away
            kill_group(signal.SIGTERM)
            try:
                child.wait(5)
            except subprocess.TimeoutExpired:
                kill_group(signal.SIGKILL)

    threading.Thread(target=pump, daemon=True).start()
    status = child.wait()
    finished.set()
    kill_group(signal.SIGKILL)  # stragglers the command left in its group (worker processes)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status if status >= 0 else 128 - status)


GUARD_SOURCE = inspect.getsource(guard_main) + "\nguard_main()\n"


def guarded(python: str, command: list[str]) -> list[str]:
    """argv that runs `command` under the guard with the target's `python`."""
    return [python, "-c", GUARD_SOURCE, *command]


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
    streams stderr to the sink as it arrives and collects stdout.
    """

    def __init__(self, argv: list[str], stdin: bytes | BinaryIO | None, stderr_sink: StderrSink):
        self.argv = argv
        self.stdin = stdin
        self.stderr_sink = stderr_sink
        self.stdout_chunks: list[bytes] = []
        self.feed_error: BaseException | None = None
        self.fed = threading.Event()

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
                proc.wait(timeout=STOP_GRACE_S if self.fed.is_set() else 0)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self.fed.wait(timeout=STOP_GRACE_S):
            self._close(proc.stdin)
        for thread in threads[1:]:
            thread.join(timeout=STOP_GRACE_S)
        return status
