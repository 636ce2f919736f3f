"""Every error the harness raises, in one module: bad input (exit 2, `error: <message>` on
stderr through BadInput), the store, transports and the service, a stop signal.

The hierarchy is protocol.errors'; harness.cli maps bad input to exit 2 in one place (BadInput)."""

from __future__ import annotations

import signal

import click

from harness.escaping import terminal

__all__ = [
    "BadInput",
    "ClusterError",
    "ConnectError",
    "ConnectionLost",
    "DashboardError",
    "GpuMismatchError",
    "JobTimeout",
    "KernelError",
    "ManifestRefused",
    "RevisionBuildError",
    "RunFailed",
    "ServiceLost",
    "ShippingError",
    "SourceError",
    "SshTargetError",
    "StoreError",
    "SuiteTomlError",
    "Terminated",
    "TransportError",
    "TrustError",
    "VastError",
]


# bad input (exit 2 from the CLI)


class BadInput(click.ClickException):
    exit_code = 2

    def show(self, file=None):
        click.echo(f"error: {terminal(self.message, lines=True)}", err=True)


class RunFailed(BadInput):
    """The run could not produce a document: exit 2 with `error: <message>` on stderr."""


class SuiteTomlError(ValueError):
    """The manifest cannot be read or parsed; the message names the file."""


class ManifestRefused(ValueError):
    """The runner refused the manifest (or could not check it); the message is the runner's."""


class RevisionBuildError(ValueError):
    """A revision could not be checked out or built into a bundle; the message says which."""


class ShippingError(ValueError):
    """The tree cannot be assembled (a missing path, a reference leaving the shipped tree)."""


class ClusterError(ValueError):
    """The cluster cannot run the suite (unreachable, no GPU worker, a refused worker): exit 2."""


class SshTargetError(ValueError):
    """A --target that is not ssh://[user@]host[:port]."""


class TrustError(ValueError):
    """The document cannot enter the canonical history; the message says why."""


class SourceError(ValueError):
    """The file is neither a readable result document nor a bundle manifest."""


class DashboardError(ValueError):
    """The dashboard cannot be built as asked; the message says why and what to do."""


# the store


class StoreError(RuntimeError):
    """The history database cannot be used as asked; the message names the file and why."""


class GpuMismatchError(StoreError):
    """A run on another GPU model than the suite pins: refused for the canonical history."""


# transports and the service


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


class VastError(TransportError):
    """Renting, reaching or destroying a Vast.ai machine failed; the message says what to do."""


class KernelError(RuntimeError):
    """The service answered with an error; `phase` says where (load, launch, timeout, ...)."""

    def __init__(self, answer: dict):
        self.answer = answer
        self.phase = answer.get("phase")
        self.cuda_error = answer.get("cuda_error")
        super().__init__(f"{self.phase}: {answer.get('error')}")


class ServiceLost(RuntimeError):
    """The service ended or stopped answering (a dropped connection, a crashed process)."""


# stopping


class Terminated(KeyboardInterrupt):
    """A stop signal arrived: raised where the main thread is, so every `with` unwinds."""

    def __init__(self, signum: int):
        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.signum = signum
