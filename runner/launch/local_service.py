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
import select
import socket
import stat
import subprocess
import sys
from pathlib import Path

from protocol.input_files import MAX_TIMEOUT_S
from runner.errors import Unavailable

IDLE_TIMEOUT_S = 600.0
START_TIMEOUT_S = 120.0  # interpreter, imports, the CUDA context of the service's worker
ANSWER_GRACE_S = 60.0  # past the request's own timeout_s: the service's deadline plus a margin
MAX_ANSWER_BYTES = 1 << 31


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
        _remove_stale(path)
        return None
    except OSError as exc:
        sock.close()
        if exc.errno in (errno.ENOENT, errno.ECONNREFUSED):
            return None
        raise Unavailable(f"{path}: {exc.strerror}") from None


def _remove_stale(path: Path) -> None:
    """Remove a socket nobody answers; anything else there (a folder, a file) is Unavailable,
    never removed: the launch then runs in its own process."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(info.st_mode):
        what = "a folder" if stat.S_ISDIR(info.st_mode) else "not a socket"
        raise Unavailable(f"{path} is {what}; remove it to use the launch service")
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def _start(path: Path) -> tuple[subprocess.Popen, int]:
    """Start a detached service listening on `path`, its log beside it; with the read end of
    the pipe on which it says it listens (closed unwritten when it dies first)."""
    log = path.with_suffix(".log")
    ready_read, ready_write = os.pipe()
    try:
        with open(log, "ab") as out:
            os.chmod(log, 0o600)
            service = subprocess.Popen(
                [sys.executable, "-m", "runner", "serve", "--socket", str(path),
                 "--idle-timeout-s", str(IDLE_TIMEOUT_S), "--ready-fd", str(ready_write)],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                start_new_session=True,  # outlives this launch, and no terminal signal reaches it
                close_fds=True,
                pass_fds=(ready_write,),
            )  # fmt: skip
    except BaseException:
        os.close(ready_read)
        raise
    finally:
        os.close(ready_write)
    return service, ready_read


def _wait_listening(service: subprocess.Popen, ready_read: int, path: Path) -> None:
    """Wait for the service's ready signal on the pipe: a line once it listens, or the end of
    the pipe when it exited first; Unavailable unless it listens within START_TIMEOUT_S."""
    with os.fdopen(ready_read, "rb", buffering=0) as ready:
        readable, _, _ = select.select([ready], [], [], START_TIMEOUT_S)
        said = ready.read(64) if readable else None
    if said:
        return
    if said is None:
        raise Unavailable(f"the service did not listen on {path} within {START_TIMEOUT_S:g} s")
    try:  # the pipe closed unwritten: the service ended before it listened
        returncode = service.wait(timeout=START_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        returncode = "unknown"
    raise Unavailable(_died(returncode, path.with_suffix(".log")))


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
        _wait_listening(*_start(path), path)
        sock = _connect(path)
    if sock is None:
        raise Unavailable(f"the service said it listens on {path}, but it does not answer")
    return sock


def _died(returncode, log: Path) -> str:
    """Why a service exited before it listened: its exit status and its log's last line."""
    try:
        lines = log.read_text(errors="replace").strip().splitlines()
    except OSError:
        lines = []
    last = lines[-1][:300] if lines else "(its log is empty)"
    return f"the service exited with status {returncode} before it listened ({log}: {last})"


def ask(request: dict) -> dict:
    """Send one run request to the service and return its answer (a run-response document)."""
    return ask_line(json.dumps(request, allow_nan=False).encode(), deadline_s(request))


def ask_line(line: bytes, timeout_s: float) -> dict:
    """Send one request, already one line of JSON, and return the service's checked answer;
    an answer that is not a run response becomes an error answer saying why."""
    sock = connect()
    try:
        sock.settimeout(timeout_s + ANSWER_GRACE_S)
        sock.sendall(line + b"\n")
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
    problem = answer_problem(answer)
    if problem is None:
        return answer
    return _lost(f"the launch service's answer is not a run response ({_worded(answer, problem)})")


def deadline_s(request: dict) -> float:
    """The request's timeout_s where it is a positive number, else the default (the service
    refuses a bad one, naming the field)."""
    timeout_s = request.get("timeout_s", 60.0)
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float) or timeout_s <= 0:
        return 60.0
    return min(float(timeout_s), MAX_TIMEOUT_S)


_OUTPUT_TYPES = {"i32[]", "u32[]", "i64[]", "u64[]", "f32[]", "f64[]"}
_FLOAT_WORDS = {"nan", "inf", "-inf"}


def answer_problem(answer) -> str | None:
    """What makes `answer` something other than a run response (schemas/run-response.schema.json)
    as far as a client reads one: its status, error and phase, its outputs' param, type and
    values; None when it is one. Standard library only: a launch reads every answer with it."""
    if not isinstance(answer, dict):
        return f"expected a JSON object, got {type(answer).__name__}"
    status = answer.get("status")
    if status == "error":
        if not isinstance(answer.get("error"), str) or not isinstance(answer.get("phase"), str):
            return "an error answer without its `error` and `phase` texts"
        return None
    if status != "ok":
        return f'status: expected "ok" or "error", got {status!r}'
    outputs = answer.get("outputs")
    if not isinstance(outputs, list):
        return "an ok answer without its `outputs` list"
    for index, out in enumerate(outputs):
        if not isinstance(out, dict) or type(out.get("param")) is not int:
            return f"outputs[{index}]: expected an object with an integer `param`"
        if out.get("type") not in _OUTPUT_TYPES:
            return (
                f"outputs[{index}].type: {out.get('type')!r} is not one of {sorted(_OUTPUT_TYPES)}"
            )
        if isinstance(out.get("data_base64"), str) and "values" not in out:
            continue
        values = out.get("values")
        if not isinstance(values, list):
            return f"outputs[{index}]: expected its `values` list (or `data_base64`)"
        if not _of_type(values, out["type"][0] == "f"):
            return f"outputs[{index}].values: not all {out['type'][:-2]} values"
    return None


def _of_type(values: list, floating: bool) -> bool:
    kinds = set(map(type, values))  # one C loop for the usual case
    if kinds <= ({int, float} if floating else {int}):
        return True
    return floating and all(type(v) in (int, float) or v in _FLOAT_WORDS for v in values)


def _worded(answer, problem: str) -> str:
    """`problem` with the schema's own words for a bad answer where it has them (jsonschema
    loads only here, on the way to an error)."""
    try:
        from protocol import validate

        validate(answer, "run-response", "answer")
    except ValueError as exc:
        return f"{problem}; {exc}"
    except Exception:  # the schema check itself is unavailable: the plain words will do
        pass
    return problem


def _lost(message: str) -> dict:
    from protocol.version import RUN_PROTOCOL_VERSION

    return {"status": "error", "schema_version": RUN_PROTOCOL_VERSION, "phase": "launch",
            "error": message}  # fmt: skip
