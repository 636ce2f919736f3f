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
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import queue
import shlex
import subprocess
import sys
import threading
from collections import deque

import numpy as np
import orjson

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


class KernelError(RuntimeError):
    """The service answered with an error; `phase` says where (load, launch, timeout, ...)."""

    def __init__(self, answer: dict):
        self.answer = answer
        self.phase = answer.get("phase")
        self.cuda_error = answer.get("cuda_error")
        super().__init__(f"{self.phase}: {answer.get('error')}")


class ServiceLost(RuntimeError):
    """The service ended or stopped answering (a dropped connection, a crashed process)."""


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


class KernelClient:
    """One `runner serve` process reached through `argv`; requests are answered in order."""

    def __init__(self, argv: list[str], description: str = "runner serve"):
        self.argv, self.description = argv, description
        self._ids = itertools.count(1)
        self._answers: queue.Queue = queue.Queue()
        self._log: deque = deque(maxlen=30)
        self.proc: subprocess.Popen | None = None

    @classmethod
    def local(cls, python: str = sys.executable) -> KernelClient:
        return cls([python, "-m", "runner", "serve"], "runner serve (local)")

    @classmethod
    def over_ssh(cls, transport, remote_dir: str | None = None) -> KernelClient:
        """A session on an open SshTransport (its master connection and host-key checking)."""
        command = shlex.join([transport.python, "-m", "runner", "serve"])
        if remote_dir:
            command = f"cd {shlex.quote(remote_dir)} && {command}"
        argv = [
            transport.ssh, "-o", "ControlMaster=no", *transport.options(),
            "--", transport.target.host, command,
        ]  # fmt: skip
        return cls(argv, f"runner serve on {transport.description}")

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
        self.proc = subprocess.Popen(
            self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_log, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            if line.strip():
                self._answers.put(line)
        self._answers.put(None)

    def _read_log(self) -> None:
        for line in self.proc.stderr:
            self._log.append(line.decode(errors="replace").rstrip())

    def request(self, document: dict) -> dict:
        """Send one run request (an `id` is added) and return its answer, whatever its status."""
        if self.proc is None:
            raise ServiceLost(f"{self.description}: not started (use `with`)")
        ident = next(self._ids)
        try:
            self.proc.stdin.write(orjson.dumps({**document, "id": ident}) + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            raise ServiceLost(f"{self.description}: the service is gone ({self._tail()})") from None
        limit_s = float(document.get("timeout_s", DEFAULT_TIMEOUT_S)) + GRACE_S
        try:
            line = self._answers.get(timeout=limit_s)
        except queue.Empty:
            raise ServiceLost(f"{self.description}: no answer within {limit_s:g} s") from None
        if line is None:
            raise ServiceLost(f"{self.description}: the service ended ({self._tail()})")
        answer = orjson.loads(line)
        if answer.get("id") != ident:
            raise ServiceLost(
                f"{self.description}: answer for id {answer.get('id')!r}, expected {ident}"
            )
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
