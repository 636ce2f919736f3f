"""`runner serve`: a launch service for a compiler's test suite, JSON lines in and out.

Each line on stdin is one run request (schemas/run-request.schema.json, plus an optional `id`);
each answer is one line on stdout (schemas/run-response.schema.json) carrying the request's
`id`, in request order. EOF ends the service with status 0.

This process never touches CUDA: a worker process (runner.launch.serve_worker) holds the one CUDA
context and its caches across requests, and answers on its own pipe, so nothing a kernel prints
can reach stdout. When a request breaks the context (a sticky fault) or hangs past its
timeout_s, the worker answers and ends (or is ended at the supervisor's deadline), and a fresh
worker is started at once, so the next request finds a ready context. A line that is not a JSON
object, or a request that does not validate, gets an error answer naming its line number.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import orjson

from protocol.input_files import MAX_DEPTH, MAX_TIMEOUT_S, nested_deeper_than
from protocol.progress import visible
from runner.execution.isolation import spawn_worker
from runner.launch.fresh_context import private_stdout

# ---- lines read with a bounded buffer -----------------------------------------------------------

CHUNK_BYTES = 1 << 20


@dataclass(frozen=True)
class Line:
    """One line: its bytes (None when it was longer than the limit) and its length in bytes,
    the newline left out."""

    data: bytearray | None
    length: int

    @property
    def blank(self) -> bool:
        return self.data is not None and not self.data.strip()


def bounded_lines(stream: BinaryIO, limit: int, chunk: int = CHUNK_BYTES) -> Iterator[Line]:
    """Each line of `stream` (the last one may lack its newline); a line longer than `limit`
    bytes comes back as Line(None, length) once all of it has been read and dropped."""
    while True:
        buffer, length, kept = bytearray(), 0, True
        while True:
            piece = stream.readline(chunk)
            if not piece:
                break
            ends = piece.endswith(b"\n")
            length += len(piece) - ends
            if kept and length <= limit:
                buffer += piece[: len(piece) - ends]
            elif kept:
                buffer, kept = bytearray(), False  # past the limit: drop what was kept
            if ends:
                break
        if not piece and length == 0 and not buffer:
            return  # end of stream (a final newline-less empty line is nothing)
        yield Line(buffer if kept else None, length)
        if not piece:
            return


# ---- the supervisor and its worker --------------------------------------------------------------

# Only stdlib and orjson at import: the worker (CUDA context, numpy, jsonschema) is started
# first and loads while this process reads its first line.

READY_TIMEOUT_S = 120.0  # a fresh worker: interpreter, imports, the CUDA context
GRACE_S = 30.0  # past a request's timeout_s: module load (JIT) and copies take time too
DEFAULT_TIMEOUT_S = 60.0
MAX_LINE_BYTES = 1 << 30


def encode(document: dict) -> bytes:
    return orjson.dumps(document)


def decode(raw: bytes, what: str):
    from protocol.codec import decode as protocol_decode  # its messages name line and column

    return protocol_decode(raw, what)


def _error(phase: str, message: str, ident=None, cuda_error: str | None = None) -> dict:
    from protocol import RUN_PROTOCOL_VERSION

    document = {
        "status": "error",
        "schema_version": RUN_PROTOCOL_VERSION,
        "phase": phase,
        "error": message,
        "id": ident,
    }
    if cuda_error:
        document["cuda_error"] = cuda_error
    return document


# How long a closing service lets its idle worker end at its stdin's end before killing it.
CLOSE_GRACE_S = 2.0


class Worker:
    """One runner.launch.serve_worker process: frames go to its stdin, answers come on a pipe."""

    def __init__(self):
        self.proc, read_fd = spawn_worker("runner.launch.serve_worker", stderr=subprocess.STDOUT)
        self.answers: queue.Queue = queue.Queue()
        self.log: deque = deque(maxlen=20)
        threading.Thread(target=self._pump, args=(os.fdopen(read_fd, "rb"),), daemon=True).start()
        threading.Thread(target=self._echo, daemon=True).start()

    def wait_ready(self) -> None:
        self.ready = self.next_answer(READY_TIMEOUT_S)

    def _pump(self, stream) -> None:
        for line in stream:
            if line.strip():
                try:
                    self.answers.put(decode(line, "worker answer"))
                except ValueError:
                    self.answers.put({"garbage": line[:200].decode(errors="replace")})
        self.answers.put(None)  # the worker is gone

    def _echo(self) -> None:
        for raw in self.proc.stdout:  # a kernel's printf and the worker's own messages
            text = raw.decode(errors="replace").rstrip("\n")
            self.log.append(text)
            print(f"    | {visible(text)}", file=sys.stderr, flush=True)

    def next_answer(self, timeout_s: float) -> dict | None:
        """The next answer; None if the worker exited first; TimeoutError past the deadline."""
        try:
            return self.answers.get(timeout=timeout_s)
        except queue.Empty:
            raise TimeoutError from None

    def send(self, ident, line: int, raw: bytes | bytearray) -> bool:
        """Frame the request's own JSON text (checked by the caller), without encoding it again."""
        head = b'{"id":' + encode(ident) + b',"line":' + str(line).encode() + b',"request":'
        try:
            for piece in (head, raw, b"}\n"):
                self.proc.stdin.write(piece)
            self.proc.stdin.flush()
            return True
        except (BrokenPipeError, ValueError):
            return False

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def close(self, timeout_s: float = 10.0) -> None:
        with contextlib.suppress(BrokenPipeError, ValueError):
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()


class Supervisor:
    """Keeps one ready worker and runs each request on it under a deadline."""

    def __init__(self):
        self.worker: Worker | None = None
        self.restarts = 0
        self.started: list[Worker] = []  # every worker, so close() ends one still starting too
        self.closed = False
        self.lock = threading.RLock()  # close() may run in a signal handler inside _start

    def ensure_worker(self) -> Worker:
        if self.worker is not None and not self.worker.alive():
            self.worker.close()
            self.worker, self.restarts = None, self.restarts + 1
        if self.worker is None:
            self.worker = self._start()
        return self.worker

    def _start(self) -> Worker:
        with self.lock:
            if self.closed:
                raise RuntimeError("the service is ending")
            worker = Worker()
            self.started = [w for w in self.started if w.alive()] + [worker]
        try:
            worker.wait_ready()
        except TimeoutError:
            worker.kill()
            raise RuntimeError(
                f"the service's worker was not ready within {READY_TIMEOUT_S:g} s"
            ) from None
        return worker

    def ask(self, line: int, ident, raw: bytes | bytearray, request: dict) -> dict:
        try:
            worker = self.ensure_worker()
        except (RuntimeError, OSError) as exc:
            return _error("environment", f"line {line}: {exc}", ident)
        timeout_s = _deadline_timeout_s(request)
        if not worker.send(ident, line, raw):
            return self._lost(worker, line, ident)
        try:
            answer = worker.next_answer(float(timeout_s) + GRACE_S)
        except TimeoutError:
            worker.kill()
            return _error(
                "timeout",
                f"line {line}: no answer within timeout_s + {GRACE_S:g} s = "
                f"{float(timeout_s) + GRACE_S:g} s; the worker was ended and a fresh one started",
                ident,
            )
        if answer is None or "status" not in answer:
            return self._lost(worker, line, ident)
        if answer["status"] == "error" and answer["phase"] == "input":
            answer["error"] = f"line {line}: {answer['error']}"
        if answer["status"] == "error" and answer["phase"] in ("launch", "timeout"):
            with contextlib.suppress(subprocess.TimeoutExpired):
                worker.proc.wait(timeout=0.5)  # a broken context: the worker ends after answering
        return answer

    def _lost(self, worker: Worker, line: int, ident) -> dict:
        worker.kill()
        tail = " / ".join(list(worker.log)[-3:]) or "no output"
        return _error(
            "launch",
            f"line {line}: the service's worker exited with status {worker.proc.returncode} "
            f"without an answer ({tail}); a fresh one is started for the next request",
            ident,
        )

    def prewarm(self) -> None:
        """Replace a worker that ended, so the next request does not wait for a context."""
        if self.worker is not None and not self.worker.alive():
            with contextlib.suppress(RuntimeError, OSError):
                self.ensure_worker()

    def close(self) -> None:
        """End every worker this supervisor started (one still starting too) and wait for it."""
        with self.lock:
            self.closed = True
            workers = list(self.started)
        for worker in filter(Worker.alive, workers):
            if worker is self.worker:
                worker.close(CLOSE_GRACE_S)  # a busy or hung one is killed: the service is ending
            else:
                worker.kill()


def _deadline_timeout_s(request: dict) -> float:
    """The request's timeout_s for the supervisor's deadline, before the worker has checked it:
    a value that is not a positive number gets the default, and none goes past MAX_TIMEOUT_S
    (the worker refuses such a request, naming the field)."""
    timeout_s = request.get("timeout_s", DEFAULT_TIMEOUT_S)
    if not isinstance(timeout_s, int | float) or isinstance(timeout_s, bool) or timeout_s <= 0:
        return DEFAULT_TIMEOUT_S
    return min(float(timeout_s), MAX_TIMEOUT_S)


def _frame(raw: bytearray | None, line: int, length: int, limit: int = MAX_LINE_BYTES):
    """(id, request, None) for a usable line, or (id, None, error answer)."""
    if raw is None:
        message = f"line {line}: {length} bytes is longer than the limit of {limit} bytes per line"
        return None, None, _error("input", message)
    try:
        request = decode(raw, f"line {line}")
    except ValueError as exc:
        return None, None, _error("input", str(exc))
    if nested_deeper_than(request):
        message = f"line {line}: nested more than {MAX_DEPTH} levels deep (a run request nests 4)"
        return None, None, _error("input", message)
    if not isinstance(request, dict):
        kind = type(request).__name__
        return (
            None,
            None,
            _error("input", f"line {line}: expected a JSON object (a run request), got {kind}"),
        )
    ident = request.get("id")
    if isinstance(ident, bool) or not isinstance(ident, str | int | None):
        return (
            None,
            None,
            _error("input", f"line {line}: id: expected a string, an integer or null"),
        )
    return ident, request, None


def _answer(supervisor: Supervisor, data: bytearray | None, line: int, length: int, limit: int):
    """One line's answer; an unexpected exception becomes the answer, never the service's end."""
    try:
        ident, request, answer = _frame(data, line, length, limit)
    except Exception as exc:  # a service bug: this line is answered, the next ones still run
        return _error("input", f"line {line}: unexpected {type(exc).__name__}: {exc}")
    if answer is not None:
        return answer
    try:
        return supervisor.ask(line, ident, data, request)
    except Exception as exc:
        return _error("launch", f"line {line}: unexpected {type(exc).__name__}: {exc}", ident)


def ready_line(token: str) -> bytes:
    """The first stdout line under `--ready-token`: what comes before it is not the service's."""
    return encode({"ready": token}) + b"\n"


def main(
    stdin: BinaryIO,
    stdout: BinaryIO,
    *,
    max_line_bytes: int = MAX_LINE_BYTES,
    ready_token: str | None = None,
) -> int:
    """Answer every non-blank line of `stdin` on `stdout`, in order; 0 at EOF."""
    if ready_token is not None:
        stdout.write(ready_line(ready_token))
        stdout.flush()
    supervisor = Supervisor()
    started = time.monotonic()
    with contextlib.suppress(RuntimeError, OSError):
        supervisor.ensure_worker()  # the context is ready before the first request arrives
    print(
        f"kernelgap serve: ready in {time.monotonic() - started:.2f} s", file=sys.stderr, flush=True
    )
    try:
        answer_stream(supervisor, stdin, stdout, max_line_bytes)
    except (BrokenPipeError, KeyboardInterrupt):
        pass
    finally:
        supervisor.close()
    return 0


def answer_stream(
    supervisor: Supervisor,
    stdin: BinaryIO,
    stdout: BinaryIO,
    max_line_bytes: int,
    turn: threading.Lock | None = None,
) -> None:
    """Answer every non-blank line of one stream, in order. `turn` is held while a request
    runs when several streams share the supervisor (SocketService)."""
    for line, read in enumerate(bounded_lines(stdin, max_line_bytes), 1):
        if read.blank:
            continue
        with turn or contextlib.nullcontext():
            answer = _answer(supervisor, read.data, line, read.length, max_line_bytes)
            supervisor.prewarm()
        stdout.write(encode(answer) + b"\n")
        stdout.flush()


# ---- on a Unix socket ------------------------------------------------------------------------

POLL_S = 1.0


class SocketService:
    """`runner serve --socket`: the service above on a Unix socket, for `runner launch` and
    `runner run`. Each connection sends JSON lines and gets one answer line per request, in
    order; connections may come at once and take the one context in turn. The socket is made
    with mode 0600 in a folder only the user can enter (runner.launch.local_service) and removed
    when the service ends: at SIGTERM, or after `idle_timeout_s` with no connection open."""

    def __init__(self, path: Path, idle_timeout_s: float, max_line_bytes: int):
        self.path = path
        self.idle_timeout_s = idle_timeout_s
        self.max_line_bytes = max_line_bytes
        self.supervisor = Supervisor()
        self.gpu = threading.Lock()  # one context: requests take it in turn
        self.state = threading.Lock()
        self.open_connections = 0
        self.last_activity = time.monotonic()
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)

    def bind(self) -> None:
        old_mask = os.umask(0o177)  # the socket file is made 0600, never briefly wider
        try:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()  # a stale file: the caller holds the start lock
            self.listener.bind(str(self.path))
        finally:
            os.umask(old_mask)
        self.listener.listen(64)
        self.listener.settimeout(POLL_S)

    def serve_connection(self, conn: socket.socket) -> None:
        with self.state:
            self.open_connections += 1
        try:
            with conn, conn.makefile("rb") as lines, conn.makefile("wb") as out:
                answer_stream(self.supervisor, lines, out, self.max_line_bytes, self.gpu)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client went away; the next one is served as usual
        finally:
            with self.state:
                self.open_connections -= 1
                self.last_activity = time.monotonic()

    def idle(self) -> bool:
        with self.state:
            quiet_s = time.monotonic() - self.last_activity
            return self.open_connections == 0 and quiet_s >= self.idle_timeout_s

    def run(self, ready_fd: int | None = None) -> int:
        self.bind()
        if ready_fd is not None:  # the starting launch waits on this, not on polls of the path
            with contextlib.suppress(OSError):
                os.write(ready_fd, b"listening\n")
            with contextlib.suppress(OSError):
                os.close(ready_fd)
        with contextlib.suppress(RuntimeError, OSError):
            self.supervisor.ensure_worker()  # the context is ready before the first request
        print(f"kernelgap serve: listening on {self.path}", file=sys.stderr, flush=True)
        try:
            while not self.idle():
                try:
                    conn, _ = self.listener.accept()
                except TimeoutError:
                    continue
                with self.state:
                    self.last_activity = time.monotonic()
                conn.settimeout(None)
                threading.Thread(target=self.serve_connection, args=(conn,), daemon=True).start()
            print(f"kernelgap serve: idle for {self.idle_timeout_s:g} s, ending", file=sys.stderr)
        finally:
            self.close()
        return 0

    def close(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        self.listener.close()
        self.supervisor.close()


def run_socket(
    path: Path, idle_timeout_s: float, *, max_line_bytes: int = MAX_LINE_BYTES, ready_fd=None
) -> int:
    """`runner serve --socket PATH`: serve until SIGTERM, SIGHUP or idle."""
    service = SocketService(path, idle_timeout_s, max_line_bytes)

    def stop(signum, frame):
        service.close()
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGHUP, stop)
    return service.run(ready_fd)


def _options(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m runner serve",
        description="Answer run requests, one JSON line each on stdin, one JSON line each on stdout.",
    )
    parser.add_argument(
        "--max-line-bytes",
        type=int,
        default=MAX_LINE_BYTES,
        help=f"refuse (and skip) a line longer than this (default {MAX_LINE_BYTES})",
    )
    parser.add_argument(
        "--ready-token",
        help='write {"ready": TOKEN} as the first stdout line, before any answer',
    )
    parser.add_argument(
        "--socket",
        help="listen on this Unix socket instead of stdin (what `runner launch` reaches)",
    )
    parser.add_argument(
        "--idle-timeout-s",
        type=float,
        default=600.0,
        help="with --socket: end after this long with no connection open (default 600)",
    )
    parser.add_argument("--ready-fd", type=int, help=argparse.SUPPRESS)  # local_service's start
    options = parser.parse_args(argv)
    if not 0 < options.idle_timeout_s <= 1e7:
        parser.error(f"--idle-timeout-s: expected seconds above 0, got {options.idle_timeout_s}")
    if options.max_line_bytes < 1:
        parser.error(f"--max-line-bytes: expected a positive integer, got {options.max_line_bytes}")
    return options


def run(argv: list[str] | None = None) -> int:
    """`python -m runner serve`: stdin's lines answered on the process's private stdout."""
    options = _options(sys.argv[2:] if argv is None else argv)
    if options.socket is not None:
        return run_socket(
            Path(options.socket),
            options.idle_timeout_s,
            max_line_bytes=options.max_line_bytes,
            ready_fd=options.ready_fd,
        )
    return main(
        sys.stdin.buffer,
        private_stdout(),
        max_line_bytes=options.max_line_bytes,
        ready_token=options.ready_token,
    )
