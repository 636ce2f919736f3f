"""The per-user, per-GPU launch service behind `runner launch`: where it listens, how a launch
reaches it, how it is started.

A compiler's test suite that calls a runner program once per test pays for a process, a CUDA
context and a module load every time. `runner launch` instead hands its request to one `runner
serve --socket` of this user for this GPU selection and this kernelgap: a Unix socket in a
folder only the user can enter (`$XDG_RUNTIME_DIR/kernelgap/`, else `/tmp/kernelgap-<uid>/`,
mode 0700, refused when another user owns it or others can enter it). The first launch starts
the service (a detached process; its log beside the socket) under a lock, so parallel test
workers start one; a socket nobody answers is stale and replaced; the service ends itself after
`IDLE_TIMEOUT_S` without a request. The key folds in CUDA_VISIBLE_DEVICES (one service per GPU
selection) and this kernelgap's location and files, so an upgraded kernelgap never talks to
an old service. Standard library only.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

IDLE_TIMEOUT_S = 600.0
START_TIMEOUT_S = 120.0  # interpreter, imports, the CUDA context of the service's worker
ANSWER_GRACE_S = 60.0  # past the request's own timeout_s: the service's deadline plus a margin
MAX_ANSWER_BYTES = 1 << 31


class Unavailable(Exception):
    """No service could be reached or started; the caller launches in its own process."""


def folder() -> Path:
    """The user's private folder for the socket, made if needed; Unavailable when unsafe."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    base = Path(runtime) / "kernelgap" if runtime else Path("/tmp") / f"kernelgap-{os.getuid()}"
    try:
        base.mkdir(mode=0o700, parents=bool(runtime), exist_ok=True)
        info = base.lstat()
    except OSError as exc:
        raise Unavailable(f"{base}: {exc.strerror}") from None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise Unavailable(f"{base} is not a folder of this user's")
    if info.st_mode & 0o077:
        raise Unavailable(f"{base} can be entered by other users (mode {info.st_mode & 0o777:o})")
    return base


def key() -> str:
    """What one service serves: this GPU selection with this kernelgap (its location and the
    state of the files the service runs, so an upgrade in place starts a new one) and this
    Python. No importlib.metadata: it would be a third of a launch's own start-up."""
    launch = Path(__file__).resolve().parent
    stamps = [f"{p.name}:{p.stat().st_mtime_ns}:{p.stat().st_size}"
              for p in sorted(launch.glob("*.py"))]  # fmt: skip
    text = "|".join(
        [os.environ.get("CUDA_VISIBLE_DEVICES", "*"), str(launch), sys.executable, *stamps]
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def socket_path() -> Path:
    return folder() / f"launch-{key()}.sock"


def _connect(path: Path) -> socket.socket | None:
    """A connection to the service at `path`, or None when there is none (no file, stale)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(path))
        return sock
    except FileNotFoundError:
        sock.close()
        return None
    except ConnectionRefusedError:  # a socket file left by a service that ended: stale
        sock.close()
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return None
    except OSError as exc:
        sock.close()
        if exc.errno in (errno.ENOENT, errno.ECONNREFUSED):
            return None
        raise Unavailable(f"{path}: {exc.strerror}") from None


def _start(path: Path) -> subprocess.Popen:
    """Start a detached service listening on `path`; its log goes beside it."""
    log = path.with_suffix(".log")
    with open(log, "ab") as out:
        os.chmod(log, 0o600)
        return subprocess.Popen(
            [sys.executable, "-m", "runner", "serve", "--socket", str(path),
             "--idle-timeout-s", str(IDLE_TIMEOUT_S)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            start_new_session=True,  # outlives this launch, and no terminal signal reaches it
            close_fds=True,
        )  # fmt: skip


def connect() -> socket.socket:
    """A connection to this user's service, started first when none is running."""
    path = socket_path()
    sock = _connect(path)
    if sock is not None:
        return sock
    lock_path = path.with_suffix(".lock")
    with open(lock_path, "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # parallel launches start one service
        sock = _connect(path)
        if sock is not None:
            return sock
        service = _start(path)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            sock = _connect(path)
            if sock is not None:
                return sock
            if service.poll() is not None:  # it died starting: say why now, not at the deadline
                raise Unavailable(_died(service.returncode, path.with_suffix(".log")))
            time.sleep(0.02)
    raise Unavailable(f"the service did not listen on {path} within {START_TIMEOUT_S:g} s")


def _died(returncode: int, log: Path) -> str:
    """Why a service exited before it listened: its exit status and its log's last line."""
    try:
        lines = log.read_text(errors="replace").strip().splitlines()
    except OSError:
        lines = []
    last = lines[-1][:300] if lines else "(its log is empty)"
    return f"the service exited with status {returncode} before it listened ({log}: {last})"


def ask(request: dict) -> dict:
    """Send one run request to the service and return its answer (a run-response document)."""
    sock = connect()
    timeout_s = float(request.get("timeout_s") or 60.0)
    try:
        sock.settimeout(timeout_s + ANSWER_GRACE_S)
        sock.sendall(json.dumps(request, allow_nan=False).encode() + b"\n")
        sock.shutdown(socket.SHUT_WR)
        chunks, size = [], 0
        while True:
            chunk = sock.recv(1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if chunk.endswith(b"\n") or size > MAX_ANSWER_BYTES:
                break
    except OSError as exc:
        return _lost(f"the launch service's connection failed: {exc}")
    finally:
        sock.close()
    line = b"".join(chunks).strip()
    if not line:
        return _lost("the launch service closed the connection without an answer")
    try:
        answer = json.loads(line)
    except ValueError:
        return _lost("the launch service's answer was not JSON")
    return answer if isinstance(answer, dict) else _lost("the answer was not a JSON object")


def _lost(message: str) -> dict:
    return {"status": "error", "phase": "launch", "error": message}
