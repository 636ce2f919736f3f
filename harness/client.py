"""KernelClient: launch kernels on a GPU through one `runner serve` session (local or SSH).

    with KernelClient.local() as gpu:                      # python -m runner serve here
        (y,) = gpu.launch(ptx, "axpy", grid=4, block=256,
                          params=[x, y0, ("f64", 2.5), ("i64", n)], outputs=[1])

    with SshTransport(SshTarget.parse("ssh://me@gpu-host"), known_hosts=...) as ssh, \\
            KernelClient.over_ssh(ssh, remote_dir="kernelgap") as gpu:
        ...

    with VastTransport("H200", identity=key, max_price=4.0) as rental, \\
            KernelClient.over(rental, remote_dir=...) as gpu:   # kernelgap must be there
        ...

One process (and, over SSH, one session on the transport's one master connection) answers
every request of a test session, so the CUDA context is paid for once. Arrays travel as raw
little-endian bytes in base64 (exact, compact); scalars as typed JSON values. An error answer
raises KernelError with its phase (input, environment, load, signature, launch, timeout) and
CUDA error name; a service that stops answering raises ServiceLost. The harness never imports
CUDA: the GPU work happens in the service.

The service is started with a random `--ready-token`; what the remote shell prints before the
service's `{"ready": TOKEN}` line (a login banner, an rc file's echo) is skipped, kept in
`preamble` and reported on stderr. One client may be shared by threads: a request holds a lock
from sending to its answer, so each thread gets the answer to its own id.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import queue
import secrets
import shlex
import subprocess
import sys
import threading
from collections import deque

import numpy as np
import orjson

from harness.errors import KernelError, ServiceLost
from protocol.input_files import MAX_TIMEOUT_S

TYPE_OF_DTYPE = {
    np.dtype(np.int32): "i32",
    np.dtype(np.uint32): "u32",
    np.dtype(np.int64): "i64",
    np.dtype(np.uint64): "u64",
    np.dtype(np.float32): "f32",
    np.dtype(np.float64): "f64",
}
DTYPE_OF_TYPE = {v: k for k, v in TYPE_OF_DTYPE.items()}
GRACE_S = 90.0  # past a request's timeout: the service's own deadline is timeout + 30 s
DEFAULT_TIMEOUT_S = 60.0
READY_TIMEOUT_S = 180.0  # to the service's ready line: the connection and an interpreter start
PREAMBLE_LINES = 50  # lines kept of what came before the ready line


def _param(value) -> dict:
    if isinstance(value, dict):
        return value  # already in the request's form
    if isinstance(value, np.ndarray):
        kind = TYPE_OF_DTYPE.get(value.dtype.newbyteorder("="))
        if kind is None:
            raise TypeError(
                f"arrays of {value.dtype} cannot be sent (use one of {sorted(DTYPE_OF_TYPE)})"
            )
        data = np.ascontiguousarray(value, dtype=value.dtype.newbyteorder("<")).tobytes()
        return {"type": f"{kind}[]", "data_base64": base64.b64encode(data).decode()}
    if isinstance(value, tuple) and len(value) == 2:
        kind, scalar = value
        if isinstance(scalar, float) and not np.isfinite(scalar):
            scalar = "nan" if scalar != scalar else ("inf" if scalar > 0 else "-inf")
        return {"type": kind, "value": scalar}
    if isinstance(value, bool):
        raise TypeError("a bool parameter is ambiguous: pass ('i32', 1) or ('i64', 1)")
    if isinstance(value, int):
        return {"type": "i64", "value": value}
    if isinstance(value, float):
        return _param(("f64", value))
    raise TypeError(
        f"a parameter must be a numpy array, (type, value), int or float; got {value!r}"
    )


def _dim3(value) -> list[int]:
    return [value] if isinstance(value, int) else list(value)


def _array(output: dict) -> np.ndarray:
    kind = output["type"].removesuffix("[]")
    dtype = DTYPE_OF_TYPE[kind].newbyteorder("<")
    if "data_base64" in output:
        return np.frombuffer(base64.b64decode(output["data_base64"]), dtype=dtype).astype(
            DTYPE_OF_TYPE[kind]
        )
    values = [float(v) if isinstance(v, str) else v for v in output["values"]]
    return np.array(values, dtype=DTYPE_OF_TYPE[kind])


def _answer_limit_s(timeout_s) -> float:
    """How long to wait for an answer: the request's timeout (bounded as the service bounds it,
    the default where it is not a positive number) plus the service's own grace."""
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float) or timeout_s <= 0:
        timeout_s = DEFAULT_TIMEOUT_S
    return min(float(timeout_s), MAX_TIMEOUT_S) + GRACE_S


class KernelClient:
    """One `runner serve` process reached through `argv`; requests are answered in order.

    `ready_token`: the token `argv` passes to `runner serve --ready-token`; lines before the
    service's ready line are skipped (kept in `preamble`). Without it every stdout line is an
    answer.
    """

    def __init__(
        self, argv: list[str], description: str = "runner serve", ready_token: str | None = None
    ):
        self.argv, self.description, self.ready_token = argv, description, ready_token
        self.preamble: list[str] = []
        self._ids = itertools.count(1)
        self._answers: queue.Queue = queue.Queue()
        self._ready = threading.Event()
        self._ready_seen = False
        self._lock = threading.Lock()
        self._log: deque = deque(maxlen=30)
        self.proc: subprocess.Popen | None = None

    @classmethod
    def local(cls, python: str = sys.executable) -> KernelClient:
        token = secrets.token_hex(16)
        argv = [python, "-m", "runner", "serve", "--ready-token", token]
        return cls(argv, "runner serve (local)", token)

    @classmethod
    def over_ssh(cls, transport, remote_dir: str | None = None) -> KernelClient:
        """A session on an open SshTransport (its master connection and host-key checking)."""
        token = secrets.token_hex(16)
        command = shlex.join([transport.python, "-m", "runner", "serve", "--ready-token", token])
        if remote_dir:
            command = f"cd {shlex.quote(remote_dir)} && {command}"
        argv = [
            transport.ssh, "-o", "ControlMaster=no", *transport.options(),
            "--", transport.target.host, command,
        ]  # fmt: skip
        return cls(argv, f"runner serve on {transport.description}", token)

    @classmethod
    def over(cls, transport, remote_dir: str | None = None) -> KernelClient:
        """A client on an open transport of `harness run`: local, SSH, or a Vast rental (its
        SSH connection, made when the rental was entered)."""
        if getattr(transport, "ssh", None) is not None and hasattr(transport, "gpu_model"):
            return cls.over_ssh(transport.ssh, remote_dir)  # a Vast rental
        if hasattr(transport, "target"):
            return cls.over_ssh(transport, remote_dir)
        return cls.local(getattr(transport, "python", sys.executable))

    def __enter__(self) -> KernelClient:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self) -> None:
        """Start the service; with a ready token, wait for its ready line (ServiceLost if the
        service ends or stays silent first)."""
        self.proc = subprocess.Popen(
            self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        threading.Thread(target=self._read, daemon=True).start()
        self._log_reader = threading.Thread(target=self._read_log, daemon=True)
        self._log_reader.start()
        if self.ready_token is None:
            return
        if not self._ready.wait(READY_TIMEOUT_S):
            self.close()
            raise ServiceLost(
                f"{self.description}: no ready line within {READY_TIMEOUT_S:g} s "
                f"({self._preamble_text()})"
            )
        if not self._ready_seen:
            self.close()
            self._log_reader.join(timeout=5)  # its last words on stderr
            raise ServiceLost(
                f"{self.description}: the service ended before its ready line "
                f"({self._tail()}; before it: {self._preamble_text()})"
            )
        if self.preamble:
            print(
                f"kernelgap: {self.description}: skipped {len(self.preamble)} line(s) printed "
                f"before the service started: {self._preamble_text()}",
                file=sys.stderr,
                flush=True,
            )

    def _read(self) -> None:
        expected = None if self.ready_token is None else orjson.dumps({"ready": self.ready_token})
        for line in self.proc.stdout:
            if expected is not None and not self._ready.is_set():
                if line.strip() == expected:
                    self._ready_seen = True
                    self._ready.set()
                elif len(self.preamble) < PREAMBLE_LINES:
                    self.preamble.append(line.decode(errors="replace").rstrip()[:200])
                continue
            if line.strip():
                self._answers.put(line)
        self._answers.put(None)
        self._ready.set()  # start() stops waiting; the None says the service ended

    def _read_log(self) -> None:
        for line in self.proc.stderr:
            self._log.append(line.decode(errors="replace").rstrip())

    def request(self, document: dict) -> dict:
        """Send one run request (an `id` is added) and return its answer, whatever its status.
        Safe from several threads: one request at a time is in flight."""
        with self._lock:
            return self._request(document)

    def _request(self, document: dict) -> dict:
        if self.proc is None:
            raise ServiceLost(f"{self.description}: not started (use `with`)")
        ident = next(self._ids)
        try:
            self.proc.stdin.write(orjson.dumps({**document, "id": ident}) + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            raise ServiceLost(f"{self.description}: the service is gone ({self._tail()})") from None
        limit_s = _answer_limit_s(document.get("timeout_s", DEFAULT_TIMEOUT_S))
        while True:
            try:
                line = self._answers.get(timeout=limit_s)
            except queue.Empty:
                raise ServiceLost(f"{self.description}: no answer within {limit_s:g} s") from None
            if line is None:
                self._answers.put(None)  # every later request learns it too
                raise ServiceLost(f"{self.description}: the service ended ({self._tail()})")
            try:
                answer = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise ServiceLost(
                    f"{self.description}: not an answer ({exc}): {line[:200]!r}"
                ) from None
            got = answer.get("id") if isinstance(answer, dict) else None
            if isinstance(got, int) and not isinstance(got, bool) and got < ident:
                continue  # the late answer of an earlier request that gave up waiting
            if got != ident:
                raise ServiceLost(f"{self.description}: answer for id {got!r}, expected {ident}")
            return answer

    def launch(
        self,
        ptx: str,
        kernel: str,
        grid,
        block,
        params: list,
        outputs: list,
        *,
        shared_bytes: int = 0,
        timeout_s: float | None = None,
    ) -> list[np.ndarray]:
        """Launch once; the arrays of `outputs` (param indices, or (index, count) pairs)."""
        document = {
            "ptx": ptx,
            "kernel": kernel,
            "grid": _dim3(grid),
            "block": _dim3(block),
            "shared_bytes": shared_bytes,
            "params": [_param(p) for p in params],
            "outputs": [
                {"param": o, "encoding": "base64"}
                if isinstance(o, int)
                else {"param": o[0], "count": o[1], "encoding": "base64"}
                for o in outputs
            ],
        }
        if timeout_s is not None:
            document["timeout_s"] = timeout_s
        answer = self.request(document)
        if answer["status"] != "ok":
            raise KernelError(answer)
        return [_array(o) for o in answer["outputs"]]

    def _tail(self) -> str:
        return " / ".join(list(self._log)[-3:]) or "no message"

    def _preamble_text(self) -> str:
        return " / ".join(self.preamble[:5]) or "nothing on stdout"

    def close(self) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(BrokenPipeError, ValueError, OSError):
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None
