"""`--target ssh://user@host[:port]`: the system's OpenSSH client, one connection per session.

Opening the transport starts one master connection (`ssh -M`, host-key checking on, batch mode,
connect timeout, keep-alives); every `run` is then one `ssh` invocation multiplexed over it, whose
remote command line is built with `shlex.join` from the guard's argv, so the remote shell sees
every piece (paths, case ids, options) as one quoted word and interprets none of them.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO
from urllib.parse import urlsplit

from harness.errors import ConnectError, ConnectionLost, JobTimeout, SshTargetError, TransportError
from harness.running.transport.base import (
    Completed,
    GuardedProcess,
    StderrSink,
    deadline_note,
    guard_deadline_s,
    guarded,
)

SSH_FAILED = 255  # ssh's own exit status for connection, authentication and host-key failures
SERVER_ALIVE_INTERVAL_S = 15
SERVER_ALIVE_COUNT = 4  # a silent server is declared gone after interval x count
STDERR_TAIL_BYTES = 4096
CLOSE_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class SshTarget:
    host: str
    user: str | None = None
    port: int | None = None

    @classmethod
    def parse(cls, text: str) -> SshTarget:
        """From `ssh://[user@]host[:port]` (IPv6 hosts in brackets)."""
        parts = urlsplit(text)
        if parts.scheme != "ssh" or not parts.hostname or parts.path not in ("", "/"):
            raise SshTargetError(
                f"--target {text!r}: expected ssh://user@host or ssh://user@host:port"
            )
        if parts.query or parts.fragment or parts.password is not None:
            raise SshTargetError(f"--target {text!r}: no query, fragment or password allowed")
        try:
            port = parts.port
        except ValueError:
            raise SshTargetError(f"--target {text!r}: port must be 1-65535") from None
        if parts.hostname.startswith("-") or (parts.username or "").startswith("-"):
            raise SshTargetError(f"--target {text!r}: host and user may not start with '-'")
        return cls(host=parts.hostname, user=parts.username or None, port=port)

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        user = f"{self.user}@" if self.user else ""
        port = f":{self.port}" if self.port else ""
        return f"ssh://{user}{host}{port}"


def config_path(path: str | Path, what: str) -> str:
    """A path as the value of an ssh `-o` option, meaning exactly that file.

    ssh splits option values into words (quotes and backslashes are its syntax), expands
    `%` tokens, `${VAR}` and a leading `~`. So: made absolute (no `~`), `%` doubled, then
    double-quoted with `\\` and `"` backslash-escaped (spaces, tabs and `'` stay literal
    inside). `${` has no escape in ssh, and a line break ends the option: a path holding
    either is refused, SshTargetError naming the option and what to do.
    """
    text = os.path.abspath(str(path))
    for bad, name in (("${", "'${'"), ("\n", "a line break"), ("\r", "a carriage return")):
        if bad in text:
            raise SshTargetError(
                f"{what} {text!r}: ssh cannot take a file name holding {name} (it expands "
                "${VAR} in file names and has no escape for it); use a path without it, "
                "e.g. a link to the file"
            )
    text = text.replace("%", "%%").replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'


class _Tail:
    """Forwards stderr chunks to a sink and keeps the last few KiB for error messages."""

    def __init__(self, sink: StderrSink):
        self.sink = sink
        self.data = b""

    def __call__(self, chunk: bytes) -> None:
        self.data = (self.data + chunk)[-STDERR_TAIL_BYTES:]
        self.sink(chunk)

    def last_line(self) -> str:
        lines = self.data.decode("utf-8", "replace").strip().splitlines()
        return lines[-1] if lines else "(no message)"


class SshTransport:
    """Runs commands on an SSH host with its `python`, over one master connection.

    Host keys are checked strictly against `known_hosts` (or the user's files when None).
    `accept_new_host_key` is for a freshly rented machine only (the Vast provider): with a fresh,
    empty `known_hosts` file it records the first key seen and holds every later use to it.
    """

    def __init__(
        self,
        target: SshTarget,
        *,
        identity: Path | None = None,
        known_hosts: Path | None = None,
        connect_timeout_s: float = 15.0,
        python: str = "python3",
        accept_new_host_key: bool = False,
        ssh: str = "ssh",
    ):
        self.target = target
        for path, what in ((identity, "--identity"), (known_hosts, "--known-hosts")):
            if path is not None:
                config_path(path, what)  # refused here, before any connection
        self.identity = identity
        self.known_hosts = known_hosts
        self.connect_timeout_s = connect_timeout_s
        self.python = python
        self.accept_new_host_key = accept_new_host_key
        self.ssh = ssh
        self.description = str(target)
        self._workdir: Path | None = None
        self._master: subprocess.Popen | None = None

    @property
    def control_path(self) -> Path:
        if self._workdir is None:
            raise TransportError(f"{self.description}: the transport is not open (use `with`)")
        return self._workdir / "master"

    def options(self) -> list[str]:
        """ssh options shared by the master and every session on it."""
        checking = "accept-new" if self.accept_new_host_key else "yes"
        opts = [
            "-T",
            "-o", "BatchMode=yes",
            "-o", f"StrictHostKeyChecking={checking}",
            "-o", f"ConnectTimeout={max(1, round(self.connect_timeout_s))}",
            "-o", f"ServerAliveInterval={SERVER_ALIVE_INTERVAL_S}",
            "-o", f"ServerAliveCountMax={SERVER_ALIVE_COUNT}",
            "-o", f"ControlPath={config_path(self.control_path, 'control path')}",
        ]  # fmt: skip
        if self.known_hosts is not None:
            opts += [
                "-o", f"UserKnownHostsFile={config_path(self.known_hosts, '--known-hosts')}",
                "-o", "GlobalKnownHostsFile=/dev/null",
            ]  # fmt: skip
        if self.identity is not None:  # not -i: ssh checks its raw name, then expands it
            identity = config_path(self.identity, "--identity")
            opts += ["-o", f"IdentityFile={identity}", "-o", "IdentitiesOnly=yes"]
        if self.target.port is not None:
            opts += ["-p", str(self.target.port)]
        if self.target.user is not None:
            opts += ["-l", self.target.user]
        return opts

    def __enter__(self) -> SshTransport:
        if shutil.which(self.ssh) is None:
            raise ConnectError(
                f"{self.description}: the OpenSSH client `{self.ssh}` is not installed "
                "(Debian/Ubuntu: apt-get install openssh-client)"
            )
        if self.identity is not None and not Path(self.identity).is_file():
            raise ConnectError(f"--identity {self.identity}: no such file")
        if self.known_hosts is not None and not Path(self.known_hosts).is_file():
            raise ConnectError(f"--known-hosts {self.known_hosts}: no such file")
        self._workdir = Path(tempfile.mkdtemp(prefix="kg-ssh-"))
        try:
            self._open_master()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _open_master(self) -> None:
        log = self._workdir / "master.log"
        argv = [self.ssh, "-M", "-N", "-o", "ControlPersist=no", *self.options(), "--"]
        with log.open("wb") as log_file:
            self._master = subprocess.Popen(
                [*argv, self.target.host],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log_file,
            )
        # the socket appears once the master has authenticated; ConnectTimeout bounds the TCP part
        wait_s = 2 * self.connect_timeout_s + 10.0
        deadline = time.monotonic() + wait_s
        while not self.control_path.exists():
            if self._master.poll() is not None:
                message = log.read_text(errors="replace").strip() or "(ssh printed nothing)"
                raise ConnectError(f"{self.description}: cannot connect: {message}")
            if time.monotonic() > deadline:
                raise ConnectError(
                    f"{self.description}: no session after {wait_s:g} s "
                    f"(connect timeout {self.connect_timeout_s:g} s): "
                    f"{log.read_text(errors='replace').strip() or 'no answer'}"
                )
            time.sleep(0.05)

    def __exit__(self, *exc) -> None:
        if self._master is not None:
            if self._master.poll() is None and not self.control_path.exists():
                self._master.terminate()  # still connecting: nothing to close politely
            elif self._master.poll() is None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    subprocess.run(
                        [self.ssh, "-O", "exit", *self.options(), "--", self.target.host],
                        stdin=subprocess.DEVNULL,
                        capture_output=True,
                        timeout=CLOSE_TIMEOUT_S,
                    )
            try:
                self._master.wait(timeout=CLOSE_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self._master.kill()
                self._master.wait()
            self._master = None
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None

    def remote_command(self, command: list[str], deadline_s: float) -> str:
        """The one string the remote shell runs: every word quoted, nothing interpolated."""
        return shlex.join(guarded(self.python, command, deadline_s))

    def run(
        self,
        command: list[str],
        stdin: bytes | BinaryIO | None,
        *,
        timeout_s: float,
        stderr_sink: StderrSink,
    ) -> Completed:
        deadline_s = guard_deadline_s(timeout_s)
        argv = [
            self.ssh,
            "-o", "ControlMaster=no",
            *self.options(),
            "--",
            self.target.host,
            self.remote_command(command, deadline_s),
        ]  # fmt: skip
        tail = _Tail(stderr_sink)
        process = GuardedProcess(argv, stdin, tail)
        status = process.run(timeout_s)
        if process.feed_error is not None:
            raise TransportError(
                f"{self.description}: reading the input for {command[0]} failed: "
                f"{process.feed_error}",
                process.stdout,
            )
        until = deadline_note(process.started_s, deadline_s)
        if status is None:
            # only the guard's own exit status, relayed by ssh, says the job is gone
            known = process.stop_status not in (None, SSH_FAILED)
            fate = (
                "the remote job was stopped"
                if known
                else f"the remote job may still be running until {until}"
            )
            raise JobTimeout(
                f"{self.description}: {command[0]} ran past the job limit of {timeout_s:g} s; "
                f"{fate}",
                process.stdout,
            )
        if status == SSH_FAILED:
            raise ConnectionLost(
                f"{self.description}: the connection failed or dropped (ssh exit status 255): "
                f"{tail.last_line()}; the remote job stops when the server notices, at the "
                f"latest at {until}",
                process.stdout,
            )
        return Completed(status, process.stdout)
