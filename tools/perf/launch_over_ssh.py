"""One launch over a reused SSH connection, the way WarpForth calls its runner (`ssh host cmd` per
test): the bare round trip, the C++ runner, `runner launch` (service) and `--no-service`.

    python tools/perf/launch_over_ssh.py [--repeats 15] [--cpp /tmp/warpforth-runner]

Starts a private sshd on 127.0.0.1 (its own host key, client key and config in a temporary
folder; sshd from PATH, /usr/sbin or /usr/local/sbin) and one OpenSSH master connection
(ControlMaster/ControlPersist) that every call reuses, so a call pays the remote command and one
channel, not a handshake. Without a GPU the launch rows end at the environment error and only
the round trip means anything. warpforth_dropin.py `measure --ssh` runs WarpForth's 37 tests
over the same kind of connection.
"""

from __future__ import annotations

import argparse
import contextlib
import getpass
import os
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
SSHD_PATHS = ("/usr/sbin/sshd", "/usr/local/sbin/sshd")


def sshd_binary() -> str | None:
    return shutil.which("sshd") or next((p for p in SSHD_PATHS if Path(p).is_file()), None)


def _keygen(path: Path) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)],
                   check=True, capture_output=True)  # fmt: skip
    return path.with_suffix(".pub").read_text().strip()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def reused_connection(folder: Path):
    """Start a private sshd and a master connection to it; yield the `ssh` argv prefix (ends
    with the host: append the remote command) whose calls reuse that connection."""
    sshd = sshd_binary()
    if sshd is None or shutil.which("ssh") is None:
        raise SystemExit("no OpenSSH here (sshd on PATH, /usr/sbin or /usr/local/sbin, and ssh): "
                         "apt-get install openssh-server openssh-client")  # fmt: skip
    host_public = _keygen(folder / "host_ed25519")
    (folder / "authorized_keys").write_text(_keygen(folder / "client_ed25519") + "\n")
    port = _free_port()
    (folder / "sshd_config").write_text("\n".join([
        "ListenAddress 127.0.0.1", f"Port {port}", f"HostKey {folder / 'host_ed25519'}",
        f"AuthorizedKeysFile {folder / 'authorized_keys'}", f"PidFile {folder / 'sshd.pid'}",
        "PasswordAuthentication no", "KbdInteractiveAuthentication no",
        "PermitRootLogin prohibit-password", "StrictModes no", "UsePAM no", "",
    ]))  # fmt: skip
    (folder / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_public}\n")
    (folder / "ssh_config").write_text("\n".join([
        "Host kg-gpu", "  HostName 127.0.0.1", f"  Port {port}", f"  User {getpass.getuser()}",
        f"  IdentityFile {folder / 'client_ed25519'}", "  IdentitiesOnly yes",
        f"  UserKnownHostsFile {folder / 'known_hosts'}", "  StrictHostKeyChecking yes",
        "  ControlMaster auto", f"  ControlPath {folder / 'master.sock'}",
        "  ControlPersist 300", "  BatchMode yes", "",
    ]))  # fmt: skip
    with contextlib.suppress(OSError):  # Debian's privilege-separation directory
        Path("/run/sshd").mkdir(exist_ok=True)
    log = (folder / "sshd.log").open("wb")
    server = subprocess.Popen([sshd, "-D", "-e", "-f", str(folder / "sshd_config")],
                              stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
    prefix = ["ssh", "-F", str(folder / "ssh_config"), "kg-gpu"]
    try:
        _wait_listening(server, port, folder / "sshd.log")
        subprocess.run([*prefix, "true"], check=True, capture_output=True, timeout=30)
        yield prefix
    finally:
        subprocess.run(["ssh", "-F", str(folder / "ssh_config"), "-O", "exit", "kg-gpu"],
                       capture_output=True, check=False)  # fmt: skip
        server.terminate()
        server.wait(timeout=10)
        log.close()


def _wait_listening(server: subprocess.Popen, port: int, log: Path) -> None:
    deadline = time.monotonic() + 20
    while True:
        if server.poll() is not None:
            raise SystemExit(f"sshd exited at start: {log.read_text()}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"sshd did not listen on port {port}: {log.read_text()}")
        time.sleep(0.05)


def runner_command(no_service: bool, runtime: Path, command: str = "launch") -> str:
    """`runner launch` (or `runner run`) as a remote shell runs it: this interpreter and
    checkout, by path, with its service under `runtime` (a login over SSH may have no
    XDG_RUNTIME_DIR)."""
    flag = " --no-service" if no_service else ""
    # this checkout first, then what this interpreter was given (a box's wheels, e.g. orjson for
    # the service): a remote shell starts with none of it
    path = os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))
    return (f"XDG_RUNTIME_DIR={shlex.quote(str(runtime))} PYTHONPATH={shlex.quote(path)} "
            f"{shlex.quote(sys.executable)} -m runner {command}{flag} \"$@\"")  # fmt: skip


def _timed(argv: list[str], repeats: int) -> tuple[list[float], subprocess.CompletedProcess]:
    runs, done = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=300)
        runs.append(time.perf_counter() - t)
    return runs, done


def main() -> None:
    import launch_startup  # the same kernel and arguments as the local figures

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument(
        "--cpp", help="the C++ runner on the (same) machine, e.g. /tmp/warpforth-runner"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as name, reused_connection(Path(name)) as ssh:
        runtime = Path(name) / "run"
        runtime.mkdir(mode=0o700)
        ptx = Path(name) / "add1.ptx"
        ptx.write_text(launch_startup.PTX)
        launch_args = " ".join(shlex.quote(a) for a in [str(ptx), *launch_startup.ARGS])
        rows = {"bare round trip (`ssh host true`)": "true"}
        if args.cpp:
            rows["C++ runner"] = f"{shlex.quote(args.cpp)} {launch_args}"
        for label, no_service in (("`runner launch` (service)", False),
                                  ("`runner launch --no-service`", True)):  # fmt: skip
            script = runner_command(no_service, runtime)
            rows[label] = f"sh -c {shlex.quote(script)} sh {launch_args}"
        subprocess.run([*ssh, rows["`runner launch` (service)"]], capture_output=True, check=False)
        print("| over one reused SSH connection | median (ms) | p95 (ms) | outcome |")
        print("| --- | ---: | ---: | --- |")
        for label, command in rows.items():
            runs, done = _timed([*ssh, command], args.repeats)
            p95 = sorted(runs)[max(0, int(0.95 * len(runs)) - 1)]
            outcome = done.stdout.strip() or (done.stderr.strip().splitlines() or [""])[0][:70]
            print(f"| {label} | {statistics.median(runs) * 1e3:.1f} | {p95 * 1e3:.1f} | "
                  f"rc {done.returncode}: {outcome} |")  # fmt: skip
        launch_startup.stop_services(runtime)  # the service it started (same machine)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONPATH", str(ROOT))
    main()
