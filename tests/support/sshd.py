"""A real OpenSSH server on 127.0.0.1 for tests (its own host key, client key, config and port),
and a look into /proc for the processes it leaves behind."""

from __future__ import annotations

import contextlib
import getpass
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

SSHD_PATHS = ("/usr/sbin/sshd", "/usr/local/sbin/sshd")
START_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class SshServer:
    port: int
    user: str
    identity: Path  # the client's private key
    known_hosts: Path  # "[127.0.0.1]:PORT <host key>"
    host_public_key: str
    log: Path

    @property
    def url(self) -> str:
        return f"ssh://{self.user}@127.0.0.1:{self.port}"


def running_with(marker: str) -> list[int]:
    """Pids of processes whose command line contains `marker` (pytest's own excluded)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmdline and b"pytest" not in cmdline:
                found.append(int(entry.name))
    return found


def wait_gone(marker: str, limit_s: float = 15.0) -> list[int]:
    """`running_with(marker)` once it is empty, or when `limit_s` has passed."""
    deadline = time.monotonic() + limit_s
    while (left := running_with(marker)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def sshd_binary() -> str | None:
    return shutil.which("sshd") or next((p for p in SSHD_PATHS if Path(p).is_file()), None)


def skip_without_ssh() -> None:
    missing = [name for name in ("ssh", "ssh-keygen") if shutil.which(name) is None]
    if sshd_binary() is None:
        missing.append("sshd")
    if missing:
        pytest.skip(
            f"OpenSSH ({', '.join(missing)}) is not installed; "
            "apt-get install openssh-server openssh-client (.ci/run does)"
        )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _keygen(path: Path) -> str:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", path.name, "-f", str(path)],
        check=True,
        capture_output=True,
    )
    return path.with_suffix(".pub").read_text().strip()


@contextlib.contextmanager
def running_sshd(directory: Path, extra_config: tuple[str, ...] = ()):
    """Start `sshd -D -e` with a config of its own in `directory` (plus `extra_config` lines,
    e.g. a ForceCommand); yield an SshServer; stop it."""
    skip_without_ssh()
    directory.mkdir(parents=True, exist_ok=True)
    host_key = directory / "host_ed25519"
    client_key = directory / "client_ed25519"
    host_public = _keygen(host_key)
    (directory / "authorized_keys").write_text(_keygen(client_key) + "\n")
    port = _free_port()
    config = directory / "sshd_config"
    config.write_text(
        "\n".join(
            [
                "ListenAddress 127.0.0.1",
                f"Port {port}",
                f"HostKey {host_key}",
                f"AuthorizedKeysFile {directory / 'authorized_keys'}",
                f"PidFile {directory / 'sshd.pid'}",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "PubkeyAuthentication yes",
                "PermitRootLogin prohibit-password",  # tests run as root here and in CI
                "StrictModes no",
                "UsePAM no",
                "LogLevel INFO",  # "Accepted publickey" lines count connections
                *extra_config,
                "",
            ]
        )
    )
    with contextlib.suppress(OSError):  # Debian's privilege-separation directory
        Path("/run/sshd").mkdir(exist_ok=True)
    known_hosts = directory / "known_hosts"
    known_hosts.write_text(f"[127.0.0.1]:{port} {host_public}\n")
    log = directory / "sshd.log"
    with log.open("wb") as log_file:
        server = subprocess.Popen(
            [sshd_binary(), "-D", "-e", "-f", str(config)],
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if server.poll() is not None:
                raise RuntimeError(f"sshd exited at start: {log.read_text()}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"sshd did not listen on port {port}: {log.read_text()}")
            time.sleep(0.05)
        yield SshServer(
            port=port,
            user=getpass.getuser(),
            identity=client_key,
            known_hosts=known_hosts,
            host_public_key=host_public,
            log=log,
        )
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
