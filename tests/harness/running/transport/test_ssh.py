"""The SSH transport against a real sshd on 127.0.0.1: shipping, quoting, host keys, timeouts."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from harness.errors import ConnectError, ConnectionLost, JobTimeout, SshTargetError
from harness.running import shipping
from harness.running.transport import base
from harness.running.transport.base import GUARD_SOURCE
from harness.running.transport.guard import GUARD_DEADLINE_EXIT
from harness.running.transport.ssh import SshTarget, SshTransport
from tests.conftest import ROOT
from tests.support.sshd import running_sshd, running_with, wait_gone

PY = sys.executable


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    with running_sshd(tmp_path_factory.mktemp("sshd")) as server:
        yield server


def transport(server, **changes) -> SshTransport:
    settings = {
        "identity": server.identity,
        "known_hosts": server.known_hosts,
        "python": PY,
        "connect_timeout_s": 10.0,
        **changes,
    }
    return SshTransport(SshTarget.parse(server.url), **settings)


class Collect:
    """A stderr sink that keeps every chunk."""

    def __init__(self):
        self.chunks: list[bytes] = []

    def __call__(self, chunk: bytes) -> None:
        self.chunks.append(chunk)

    @property
    def text(self) -> str:
        return b"".join(self.chunks).decode()


def test_target_urls_parse_and_bad_ones_are_refused():
    assert SshTarget.parse("ssh://root@gpu-host:2222") == SshTarget("gpu-host", "root", 2222)
    assert SshTarget.parse("ssh://gpu-host") == SshTarget("gpu-host")
    assert str(SshTarget.parse("ssh://u@[::1]:22")) == "ssh://u@[::1]:22"
    for bad in ("gpu-host", "ssh://", "ssh://u@h:99999", "ssh://u@h/path", "ssh://-oProxy=x@h"):
        with pytest.raises(SshTargetError, match="--target"):
            SshTarget.parse(bad)


def test_ssh_options_check_host_keys_and_never_disable_it(sshd):
    with transport(sshd) as ssh:
        opts = ssh.options()
    joined = " ".join(opts)
    assert "StrictHostKeyChecking=yes" in joined and "BatchMode=yes" in joined
    assert f'UserKnownHostsFile="{sshd.known_hosts}"' in joined
    assert "ConnectTimeout=10" in joined and "ServerAliveInterval=" in joined
    assert opts[opts.index("-p") + 1] == str(sshd.port)
    assert f'IdentityFile="{sshd.identity}"' in joined and "IdentitiesOnly=yes" in joined
    assert "StrictHostKeyChecking=no" not in joined


def test_runner_check_runs_remotely_from_the_shipped_tree(sshd):
    plan = shipping.plan(ROOT / "benchmarks" / "cases.toml")
    errors = Collect()
    command = shipping.in_shipped_tree(PY, [PY, "-m", "runner", "check", plan.cases])
    with transport(sshd) as ssh:
        done = ssh.run(command, plan.stream(), timeout_s=600, stderr_sink=errors)
    out = errors.text  # the report is on stderr; stdout carries documents only
    assert "benchmarks/cases.toml:" in out and "axpy_f64/cuda" in out, out
    # the shipped tree checks exactly as the checkout does (the suite may be mid-edit)
    here = subprocess.run(
        [PY, "-m", "runner", "check", "benchmarks/cases.toml"], cwd=ROOT, capture_output=True
    )
    assert (done.returncode, done.stdout, out) == (here.returncode, b"", here.stderr.decode())


def test_stdin_reaches_the_remote_command_and_stdout_comes_back_whole(sshd):
    payload = os.urandom(300_000)  # several frames, binary
    with transport(sshd) as ssh:
        done = ssh.run(["cat"], payload, timeout_s=60, stderr_sink=Collect())
        again = ssh.run(["sh", "-c", "exit 7"], None, timeout_s=60, stderr_sink=Collect())
    assert done.returncode == 0 and done.stdout == payload
    assert again.returncode == 7


def test_arguments_reach_the_remote_verbatim_and_nothing_executes(sshd, tmp_path):
    canaries = [tmp_path / f"canary{i}" for i in range(4)]
    nasty = [
        f"case id; touch {canaries[0]}",
        f"$(touch {canaries[1]})",
        f"`touch {canaries[2]}`",
        f'it\'s "quoted" && touch {canaries[3]} | cat > /dev/null',
        "spaces   and\ttabs\nand a newline",
        "$HOME ${PATH} * ? [a-z] ~ # !",
        "",
    ]
    echo = "import json, sys; sys.stdout.write(json.dumps(sys.argv[1:]))"
    with transport(sshd) as ssh:
        done = ssh.run([PY, "-c", echo, *nasty], None, timeout_s=60, stderr_sink=Collect())
    import json

    assert done.returncode == 0
    assert json.loads(done.stdout) == nasty
    assert not [c for c in canaries if c.exists()]


PTX_SUITE = """
[suite]
name = "quoting"
version = 1

[[case]]
id = "axpy_f64"
version = 1
description = "axpy from hand-written PTX only (nvcc itself runs source paths through a shell)"
dims = { n = 1000 }
grid = "ceil_div(n, 256)"
block = 256
reference = "reference.py:axpy"
tolerance = { rtol = 1e-15, atol = 1e-15 }
buffers = [
  { name = "x", dtype = "f64", length = "n", role = "input", init = { dist = "uniform", low = -1.0, high = 1.0 } },
  { name = "y", dtype = "f64", length = "n", role = "inout", init = { dist = "uniform", low = -1.0, high = 1.0 } },
]
params = [
  { name = "x", buffer = "x" },
  { name = "y", buffer = "y" },
  { name = "a", type = "f64", value = 2.5 },
  { name = "n", type = "i64", value = "n" },
]

[[case.impl]]
name = "handptx"
role = "baseline"
toolchain = "ptx"
source = "kernels/axpy_f64.handwritten.ptx"
entry = "axpy_f64"
"""


def test_a_suite_path_with_shell_syntax_is_shipped_and_checked_without_executing(sshd, tmp_path):
    canary = f"kg-canary-{uuid.uuid4().hex}"
    root = tmp_path / "repo"
    root.mkdir()
    for name in shipping.RUNNER_TREE:
        (root / name).symlink_to(ROOT / name)
    folder = root / f"suite dir; touch {canary} $(touch {canary}) `touch {canary}` 'q\" x"
    (folder / "kernels").mkdir(parents=True)
    (folder / "cases.toml").write_text(PTX_SUITE)
    shutil.copy(ROOT / "benchmarks" / "reference.py", folder)
    shutil.copy(ROOT / "benchmarks" / "kernels" / "axpy_f64.handwritten.ptx", folder / "kernels")
    plan = shipping.plan(folder / "cases.toml", root=root)
    assert plan.cases == f"{folder.name}/cases.toml"
    errors = Collect()
    command = shipping.in_shipped_tree(PY, [PY, "-m", "runner", "check", plan.cases])
    with transport(sshd) as ssh:
        done = ssh.run(command, plan.stream(), timeout_s=300, stderr_sink=errors)
    assert done.returncode == 0, errors.text + done.stdout.decode()
    assert f"{plan.cases}: 1 case(s), 0 failure(s)" in errors.text
    for place in (Path.home(), Path.cwd(), Path("/"), Path("/tmp")):
        assert not (place / canary).exists()


def test_an_unknown_host_key_is_refused(sshd, tmp_path):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    with pytest.raises(ConnectError, match="Host key verification failed"):
        transport(sshd, known_hosts=empty).__enter__()
    assert empty.read_text() == ""  # nothing was accepted silently


def test_a_wrong_host_key_is_refused(sshd, tmp_path):
    other = tmp_path / "other_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    wrong = tmp_path / "known_hosts"
    wrong.write_text(f"[127.0.0.1]:{sshd.port} {other.with_suffix('.pub').read_text()}")
    before = wrong.read_text()
    with pytest.raises(ConnectError) as failure:
        transport(sshd, known_hosts=wrong).__enter__()
    message = str(failure.value)
    assert "REMOTE HOST IDENTIFICATION HAS CHANGED" in message
    assert "Host key verification failed" in message
    assert wrong.read_text() == before


def test_a_refused_client_key_fails_to_connect(sshd, tmp_path):
    stranger = tmp_path / "stranger"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(stranger)], check=True)
    with pytest.raises(ConnectError, match="Permission denied"):
        transport(sshd, identity=stranger).__enter__()


def test_a_job_timeout_kills_the_remote_job(sshd):
    marker = f"{30 + uuid.uuid4().int % 1000 / 1000:.3f}"  # `sleep 30.xyz`: findable in /proc
    with transport(sshd) as ssh:
        start = time.monotonic()
        with pytest.raises(
            JobTimeout, match=r"job limit of 2 s; the remote job was stopped$"
        ) as failure:
            ssh.run(["sh", "-c", 'echo before; exec sleep "$0"', marker], None, timeout_s=2,
                    stderr_sink=Collect())  # fmt: skip
        assert time.monotonic() - start < 25  # stopped, not waited out
        assert failure.value.stdout == b"before\n"
        assert wait_gone(f"sleep\0{marker}") == []
        # the session survives a stopped job
        assert ssh.run(["true"], None, timeout_s=30, stderr_sink=Collect()).returncode == 0


def test_stderr_streams_while_the_remote_runs(sshd, tmp_path):
    """The remote waits for a file that only our sink creates on seeing its first line."""
    flag = tmp_path / "seen-first-line"
    script = (
        "import os, sys, time\n"
        "print('first', file=sys.stderr, flush=True)\n"
        "deadline = time.time() + 30\n"
        "while not os.path.exists(sys.argv[1]) and time.time() < deadline: time.sleep(0.05)\n"
        "print('second', file=sys.stderr, flush=True)\n"
        "sys.exit(0 if os.path.exists(sys.argv[1]) else 3)\n"
    )
    seen = Collect()

    def sink(chunk: bytes) -> None:
        seen(chunk)
        if b"first" in b"".join(seen.chunks):
            flag.touch()

    with transport(sshd) as ssh:
        done = ssh.run([PY, "-c", script, str(flag)], None, timeout_s=60, stderr_sink=sink)
    assert done.returncode == 0, "stderr arrived only after the remote ended"
    assert seen.text.index("first") < seen.text.index("second")


def test_a_dropped_connection_is_reported_with_the_partial_stdout(sshd, tmp_path):
    marker = f"{40 + uuid.uuid4().int % 1000 / 1000:.3f}"
    script = 'echo "measured so far"; echo ready >&2; exec sleep "$0"'
    with transport(sshd) as ssh:

        def sink(chunk: bytes) -> None:
            if b"ready" in chunk:
                ssh._master.kill()  # the connection dies under the running job

        with pytest.raises(ConnectionLost, match="connection failed or dropped") as failure:
            ssh.run(["sh", "-c", script, marker], None, timeout_s=60, stderr_sink=sink)
    assert failure.value.stdout == b"measured so far\n"
    assert wait_gone(f"sleep\0{marker}") == []
    deadline = r"at the latest at its guard's deadline, about [-\d]{10} [:\d]{8} UTC \(120 s "
    assert re.search(deadline, str(failure.value)), str(failure.value)


def test_the_guard_stops_its_job_at_its_deadline_even_while_its_stdin_stays_open():
    """A silent partition: the caller never closes the guard's stdin, and nobody notices."""
    marker = f"{60 + uuid.uuid4().int % 1000 / 1000:.3f}"
    guard = subprocess.Popen(
        [PY, "-c", GUARD_SOURCE, "2", "sh", "-c", 'exec sleep "$0"', marker],
        stdin=subprocess.PIPE,  # kept open, never written, never closed until the end
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 10
        while not running_with(f"sleep\0{marker}") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert running_with(f"sleep\0{marker}"), "the job never started"
        assert guard.wait(timeout=20) == GUARD_DEADLINE_EXIT
        assert wait_gone(f"sleep\0{marker}", limit_s=1.0) == []
        assert b"stopped the job at its 2 s deadline" in guard.stderr.read()
    finally:
        guard.stdin.close()
        if guard.poll() is None:
            guard.kill()
            guard.wait()


def test_a_timeout_the_guard_does_not_answer_is_not_reported_as_stopped(
    sshd, tmp_path, monkeypatch
):
    """A remote `python` that ignores its stdin stands in for a guard cut off from us."""
    marker = f"{30 + uuid.uuid4().int % 1000 / 1000:.3f}"
    deaf = tmp_path / "deaf-python"
    deaf.write_text(f"#!/bin/sh\nexec sleep {marker}\n")
    deaf.chmod(0o755)
    monkeypatch.setattr(base, "STOP_GRACE_S", 1.0)
    try:
        with transport(sshd, python=str(deaf)) as ssh, pytest.raises(JobTimeout) as failure:
            ssh.run(["true"], None, timeout_s=1, stderr_sink=Collect())
        message = str(failure.value)
        assert "was stopped" not in message
        assert re.search(
            r"the remote job may still be running until its guard's deadline, "
            r"about [-\d]{10} [:\d]{8} UTC \(61 s after it started\)$",
            message,
        ), message
    finally:
        for pid in running_with(f"sleep\0{marker}"):  # the stand-in we started, by its id
            os.kill(pid, signal.SIGKILL)
