"""`runner launch` as a drop-in for the C++ runner: its command line read as that runner reads
it, and the per-user launch service it hands launches to (runner.launch.local_service): one
service per user and GPU selection, a private socket, started once under a lock, a stale socket
replaced, an unsafe folder refused (the launch then runs in its own process), ended when idle.

Without a GPU every launch is answered with the environment error; what these tests check is
the way there, which is the same with a GPU (tests/runner/launch/test_local_service_gpu.py checks outputs).
"""

from __future__ import annotations

import os
import re
import socket
import stat
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from runner.launch import launch_command
from tests.conftest import ROOT, gpu_unavailable_reason, services

needs_no_gpu = pytest.mark.skipif(
    gpu_unavailable_reason() is None, reason="checks the no-GPU answers; this machine has a GPU"
)
PTX = ".version 7.0\n.target sm_70\n.address_size 64\n.visible .entry k(.param .u64 p)\n{\n\tret;\n}\n"


def launch(runtime: Path, *args, env=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "runner", "launch", *map(str, args)],
        cwd=ROOT,
        env={
            **os.environ,
            "XDG_RUNTIME_DIR": str(runtime),
            "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH")))),
            **(env or {}),
        },
        capture_output=True,
        text=True,
        timeout=180,
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], launch_command.USAGE),
        (["k.ptx"], "Error: --kernel NAME is required"),
        (["k.ptx", "--kernel", "k"], "Error: at least one --param is required"),
        (["k.ptx", "--bogus"], "Error: unknown option --bogus"),
        (["k.ptx", "--grid"], "Error: --grid requires a value"),
        (["--param", "f64:abc", "--bogus"], "Error: invalid float value 'abc' in --param f64:abc"),
        (["k.ptx", "--kernel", "k", "--param", "i64:1"], "Error: output-param 0 is a scalar (cannot read back)"),
        (["k.ptx", "--kernel", "k", "--param", "i64[]:1", "--output-param", "2"],
         "Error: output-param 2 out of range (have 1 params)"),
        (["k.ptx", "--kernel", "k", "--param", "i64[]:1", "--grid", "1,1"],
         "Error: expected 3 comma-separated values, got: 1,1"),
        (["k.ptx", "--kernel", "k", "--param", "i64[]:1", "--timeout-s", "1e300"],
         "Error: --timeout-s expects seconds above 0, got: 1e300"),
    ],
)  # fmt: skip
def test_the_command_line_is_read_as_the_cpp_runner_reads_it(tmp_path, argv, message):
    done = launch(tmp_path, *argv)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.strip() == message
    assert not (tmp_path / "kernelgap").exists()  # nothing started for a refused command line


def test_a_missing_ptx_file_is_named_before_any_service(tmp_path):
    done = launch(tmp_path, tmp_path / "none.ptx", "--kernel", "k", "--param", "i64[]:1")
    assert done.returncode == 1 and done.stderr.startswith(f"Error: cannot open {tmp_path}")
    assert not (tmp_path / "kernelgap").exists()


@needs_no_gpu
def test_launches_share_one_private_service_and_answer_as_the_process_path_does(runtime, tmp_path):
    ptx = tmp_path / "k.ptx"
    ptx.write_text(PTX)
    argv = (ptx, "--kernel", "k", "--param", "i64[]:1,2")
    first = launch(runtime, *argv)
    folder = runtime / "kernelgap"
    (sock,) = folder.glob("launch-*.sock")
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_ISSOCK(sock.stat().st_mode) and stat.S_IMODE(sock.stat().st_mode) == 0o600
    (pid,) = services(str(runtime))
    second = launch(runtime, *argv)
    assert services(str(runtime)) == [pid]  # the same service answered again
    alone = launch(runtime, *argv, "--no-service")
    for done in (first, second, alone):
        assert (done.returncode, done.stdout) == (1, "")
        assert done.stderr.startswith("Error: environment: ")
        assert "ssh gpu-host python3 -m runner run" in done.stderr
    # one answer whichever path, but for the driver's own words in the parentheses, which
    # cuda-python 12.x words differently on a second attempt in one process
    same = {re.sub(r"\([^)]*\)", "(...)", d.stderr, count=1) for d in (first, second, alone)}
    assert len(same) == 1, same


@needs_no_gpu
def test_parallel_first_launches_start_one_service(runtime, tmp_path):
    ptx = tmp_path / "k.ptx"
    ptx.write_text(PTX)
    with ThreadPoolExecutor(8) as pool:
        done = list(
            pool.map(
                lambda _: launch(runtime, ptx, "--kernel", "k", "--param", "i64[]:1"), range(8)
            )
        )
    assert all(d.returncode == 1 and d.stderr.startswith("Error: environment: ") for d in done)
    assert len(services(str(runtime))) == 1


def socket_path_under(runtime: Path) -> str:
    """Where a launch under this XDG_RUNTIME_DIR looks for its service (its folder made)."""
    (runtime / "kernelgap").mkdir(mode=0o700, exist_ok=True)
    env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime)}
    return subprocess.run(
        [sys.executable, "-c", "from runner.launch import local_service as s; print(s.socket_path())"],
        cwd=ROOT, env=env, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip


@needs_no_gpu
def test_a_stale_socket_is_replaced(runtime, tmp_path):
    # the launch waits on the service's ready signal (a pipe it writes once it listens), never
    # on polls of the path against a clock (issue 53 item 4)
    path = socket_path_under(runtime)
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(path)  # a service that ended without removing its socket
    dead.close()
    ptx = tmp_path / "k.ptx"
    ptx.write_text(PTX)
    done = launch(runtime, ptx, "--kernel", "k", "--param", "i64[]:1")
    assert done.stderr.startswith("Error: environment: ") and "unavailable" not in done.stderr
    assert len(services(str(runtime))) == 1


def test_a_folder_others_can_enter_is_refused_and_the_launch_runs_here(runtime, tmp_path):
    (runtime / "kernelgap").mkdir(mode=0o755)
    (runtime / "kernelgap").chmod(0o755)
    ptx = tmp_path / "k.ptx"
    ptx.write_text(PTX)
    done = launch(runtime, ptx, "--kernel", "k", "--param", "i64[]:1")
    assert "launch service unavailable" in done.stderr and "other users (mode 755)" in done.stderr
    assert not services(str(runtime))
    assert done.returncode in (0, 1)  # launched in this process: the GPU's answer or its error


def test_a_service_that_dies_starting_is_named_at_once_and_the_launch_runs_here(runtime, tmp_path):
    """A service that cannot start (here its JSON codec fails to import, as on a box whose
    environment lacks orjson) is reported from its exit status and log as soon as it exits,
    not after START_TIMEOUT_S, and the launch runs in this process (it needs no orjson)."""
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "orjson.py").write_text("raise ImportError('orjson is broken here (test)')\n")
    ptx = tmp_path / "k.ptx"
    ptx.write_text(PTX)
    pythonpath = os.pathsep.join(
        filter(None, (str(broken), str(ROOT), os.environ.get("PYTHONPATH")))
    )
    done = launch(
        runtime, ptx, "--kernel", "k", "--param", "i64[]:1", env={"PYTHONPATH": pythonpath}
    )
    assert "launch service unavailable (the service exited with status 1 before it listened" in (
        done.stderr
    ), done.stderr
    assert "orjson is broken here (test)" in done.stderr and "launching here" in done.stderr
    assert not services(str(runtime))
    assert done.returncode in (0, 1)  # launched in this process: the GPU's answer or its error


def test_the_service_ends_when_idle_and_removes_its_socket(tmp_path):
    path = tmp_path / "s.sock"
    ready_read, ready_write = os.pipe()
    service = subprocess.Popen(
        [sys.executable, "-m", "runner", "serve", "--socket", str(path), "--idle-timeout-s", "1",
         "--ready-fd", str(ready_write)],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, pass_fds=(ready_write,),
    )  # fmt: skip
    os.close(ready_write)
    with os.fdopen(ready_read, "rb") as ready:
        assert ready.readline() == b"listening\n"  # its ready signal, not a poll of the path
    assert stat.S_ISSOCK(path.stat().st_mode)
    assert service.wait(timeout=60) == 0
    assert not path.exists() and b"idle for 1 s, ending" in service.stderr.read()


def test_a_folder_at_the_socket_path_is_left_and_the_launch_runs_here(runtime, tmp_path):
    # issue 52: IsADirectoryError was a traceback; it is an unusable socket like the others
    Path(socket_path_under(runtime)).mkdir()
    ptx = tmp_path / "k.ptx"
    ptx.write_text(PTX)
    done = launch(runtime, ptx, "--kernel", "k", "--param", "i64[]:1")
    assert "Traceback" not in done.stderr, done.stderr
    assert "launch service unavailable" in done.stderr and "is a folder" in done.stderr
    assert done.returncode in (0, 1) and Path(socket_path_under(runtime)).is_dir()


def answering(path: str, answer: bytes) -> threading.Thread:
    """A stand-in service at `path` that answers one connection with `answer` (a real service
    never sends a bad answer, so one cannot be had otherwise)."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)

    def serve_one():
        with listener, listener.accept()[0] as conn, conn.makefile("rb") as lines:
            lines.readline()
            conn.sendall(answer + b"\n")

    thread = threading.Thread(target=serve_one, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        (b'{"status": "ok"}', "an ok answer without its `outputs` list"),
        (b'{"status": "ok", "schema_version": "1.1.0", "outputs": [{"param": 0, "type": "q64[]", '
         b'"values": [1]}], "elapsed_ms": 1, "load_ms": 1, "ptx": {"version": null, "target": null}}',
         "'q64[]' is not one of"),
        (b'{"status": "ok", "schema_version": "1.1.0", "outputs": [], "elapsed_ms": 1, '
         b'"load_ms": 1, "ptx": {"version": null, "target": null}}', "holds no output values"),
        (b'["ok"]', "expected a JSON object"),
    ],
)  # fmt: skip
def test_an_answer_that_is_not_a_run_response_is_an_error_naming_what_is_wrong(
    runtime, tmp_path, answer, words
):
    # issue 52: `{"status": "ok"}` was a KeyError traceback, an unknown type was printed, exit 0
    service = answering(socket_path_under(runtime), answer)
    ptx = tmp_path / "k.ptx"
    ptx.write_text(PTX)
    done = launch(runtime, ptx, "--kernel", "k", "--param", "i64[]:1")
    service.join(timeout=60)
    assert (done.returncode, done.stdout) == (1, ""), done.stderr
    assert done.stderr.startswith("Error: launch: ") and words in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
