"""`--target local`: run on this machine, through the same guard as a remote target (no shell)."""

from __future__ import annotations

from typing import BinaryIO

from harness.errors import JobTimeout, TransportError
from harness.running.transport.base import (
    Completed,
    GuardedProcess,
    StderrSink,
    guard_deadline_s,
    guarded,
)


class LocalTransport:
    """Runs commands on this machine with `python`, each in a fresh process group."""

    description = "local"

    def __init__(self, python: str = "python3"):
        self.python = python

    def __enter__(self) -> LocalTransport:
        return self

    def __exit__(self, *exc) -> None:
        return None

    def run(
        self,
        command: list[str],
        stdin: bytes | BinaryIO | None,
        *,
        timeout_s: float,
        stderr_sink: StderrSink,
    ) -> Completed:
        argv = guarded(self.python, command, guard_deadline_s(timeout_s))
        process = GuardedProcess(argv, stdin, stderr_sink)
        try:
            status = process.run(timeout_s)
        except OSError as exc:
            raise TransportError(f"local: cannot start {self.python}: {exc.strerror}") from None
        if process.feed_error is not None:
            raise TransportError(
                f"local: reading the input for {command[0]} failed: {process.feed_error}",
                process.stdout,
            )
        if status is None:
            fate = (  # the guard's exit after our EOF means it stopped the job
                "was stopped"
                if process.stop_status is not None
                else "did not stop when asked; its process group may still be running"
            )
            raise JobTimeout(
                f"local: {command[0]} ran past the job limit of {timeout_s:g} s and {fate}",
                process.stdout,
            )
        return Completed(status, process.stdout)
