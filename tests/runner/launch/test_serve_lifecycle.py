"""The launch service's worker never outlives the service: ended with it at SIGTERM, and gone
within seconds when the service is killed (SIGKILL) or dies, even while the worker is hung (as in
a kernel) and never reads its stdin's end.

Without a GPU the worker still starts and answers (with the environment error), so the lifecycle
is the real one. A hang is stood in for by a sitecustomize that keeps the worker alone from
ending after its stdin's end (an atexit handler that sleeps)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, _alive, _children

HANG_AT_EXIT = """\
import atexit, os, sys, time
if os.environ.get("KERNELGAP_EVENT_FD") and "runner.launch.serve_worker" in sys.orig_argv:
    atexit.register(time.sleep, 3600)
"""
GONE_WITHIN_S = 5.0


def _worker_of(service: subprocess.Popen) -> int:
    """The pid of the service's worker once it has started (the service starts one at once)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for pid in _children(service.pid):
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"runner.launch.serve_worker" in argv:
                return pid
        assert service.poll() is None, f"the service ended with status {service.returncode}"
        time.sleep(0.05)
    raise AssertionError("the service started no worker within 60 s")


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not _alive(pid)


@pytest.fixture
def hung_service(runtime, tmp_path):
    """A `runner serve --socket` in a private folder whose worker hangs once told to end."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(HANG_AT_EXIT)
    path = str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")
    service = subprocess.Popen(
        [sys.executable, "-m", "runner", "serve", "--socket", str(runtime / "s.sock")],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(site), path)))},
        stderr=subprocess.DEVNULL,
    )
    worker = _worker_of(service)
    yield service, worker
    service.kill()
    service.wait()
    if _alive(worker):
        os.killpg(worker, signal.SIGKILL)  # what the old code left behind: never leak it


def test_sigterm_ends_the_service_and_its_hung_worker(hung_service):
    service, worker = hung_service
    service.send_signal(signal.SIGTERM)
    service.wait(timeout=30)
    assert _gone_within(worker, GONE_WITHIN_S), f"worker {worker} outlived its service"


def test_a_killed_service_takes_its_hung_worker_with_it(hung_service):
    service, worker = hung_service
    service.kill()
    service.wait()
    assert _gone_within(worker, GONE_WITHIN_S), f"worker {worker} outlived its service"
