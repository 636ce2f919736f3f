"""Shared test set-up: GPU tests carry the `gpu` marker and skip, with the reason, where no GPU is usable."""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from runner.errors import NoGpuError

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


@functools.cache
def gpu_unavailable_reason() -> str | None:
    """None when a CUDA device is usable from this process, else why not (checked once)."""
    from runner.gpu import driver

    try:
        driver.init()
    except NoGpuError as exc:
        return f"no usable NVIDIA GPU: {str(exc).split(';')[0]}"
    return None


def pytest_collection_modifyitems(config, items):
    # the marker, not a keyword: tests/runner/gpu/ is a node named "gpu" (a keyword of its tests)
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_items:
        return
    reason = gpu_unavailable_reason()
    if reason:
        for item in gpu_items:
            item.add_marker(
                pytest.mark.skip(reason=f"{reason} (run `pytest -m gpu` on the GPU box)")
            )


def services(marker: str) -> list[int]:
    """pids of `runner serve --socket` processes whose command line holds `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"--socket" in argv and any(marker.encode() in a for a in argv):
                found.append(int(entry.name))
    return found


@pytest.fixture(scope="session", autouse=True)
def session_runtime(tmp_path_factory):
    """The session's XDG_RUNTIME_DIR: every `runner launch`/`run` a test starts without its own
    `runtime` finds its launch service here, never the user's (one service for the session, as on
    WarpForth's rental), and that service (a process holding a CUDA context for 10 idle minutes)
    is ended with the session: a later GPU test that counts the processes sharing the GPU must
    not see one."""
    folder = tmp_path_factory.mktemp("runtime")
    folder.chmod(0o700)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_RUNTIME_DIR", str(folder))
        yield folder
    end_services(folder)


@pytest.fixture
def runtime(tmp_path):
    """A private XDG_RUNTIME_DIR for `runner launch`; every service started under it is ended
    afterwards."""
    folder = tmp_path / "run"
    folder.mkdir(mode=0o700)
    yield folder
    end_services(folder)


def end_services(folder: Path) -> None:
    """End every launch service started under `folder` and wait for it and its worker, which
    holds a CUDA context that the next test may count."""
    ended = []
    for pid in services(str(folder)):
        ended += [pid, *_children(pid)]
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 15
    while any(map(_alive, ended)) and time.monotonic() < deadline:
        time.sleep(0.05)
    survivors = [pid for pid in ended if _alive(pid)]
    if survivors:  # one holding a CUDA context makes the next GPU run report a shared GPU
        pytest.fail(f"launch service processes {survivors} under {folder} outlived SIGTERM by 15 s")


def _alive(pid: int) -> bool:
    """Whether a process still runs (a zombie awaiting its parent has ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _children(pid: int) -> list[int]:
    """The direct children of a process (Linux's /proc task lists), [] once it has gone."""
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        with contextlib.suppress(OSError):
            found += [int(c) for c in task.read_text().split()]
    return found
