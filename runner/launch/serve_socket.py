"""`runner serve --socket PATH`: the launch service on a Unix socket, for `runner launch`.

The same service as `runner serve` on stdin (runner.launch.serve: one supervisor, one worker
process holding the CUDA context), reached through a socket instead: each connection sends JSON
lines and gets one answer line per request, in order. Connections may come at once (a test
suite's parallel workers); their requests take the one context in turn. The socket is made
with mode 0600 in a folder only the user can enter (runner.launch.local_service), and removed
when the service ends: at SIGTERM, or after `idle_timeout_s` with no connection open.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path

from runner.launch import serve

POLL_S = 1.0


class SocketService:
    def __init__(self, path: Path, idle_timeout_s: float, max_line_bytes: int):
        self.path = path
        self.idle_timeout_s = idle_timeout_s
        self.max_line_bytes = max_line_bytes
        self.supervisor = serve.Supervisor()
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
                serve.answer_stream(self.supervisor, lines, out, self.max_line_bytes, self.gpu)
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

    def run(self) -> int:
        self.bind()
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


def run(path: Path, idle_timeout_s: float, *, max_line_bytes: int = serve.MAX_LINE_BYTES) -> int:
    service = SocketService(path, idle_timeout_s, max_line_bytes)

    def stop(signum, frame):
        service.close()
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGHUP, stop)
    return service.run()
