"""A real Dask scheduler and GPU workers on 127.0.0.1 (processes, logical GPU resources), and
the stand-in runner tree they run (stand_in_runner.py: the one fake, since a CPU cannot time)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("distributed", reason="the cluster tests need the cluster extra (dask)")

ROOT = Path(__file__).resolve().parents[3]
H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-80GB"
CASES = ("scale_i64", "axpy_f64", "reduce_sum_f64", "matmul_f64_naive", "polynomial_f64")

SUITE = """\
[suite]
name = "cluster-test"
version = 3
gpu = "NVIDIA H100 80GB HBM3"
"""
CASE = """
[[case]]
id = "{id}"
version = 2
description = "{id} as the stand-in runs it"
dims = {{ n = 1024 }}

[[case.impl]]
name = "cuda"
role = "baseline"
toolchain = "nvcc"
source = "kernels/{id}.cu"
entry = "{id}"

[[case.impl]]
name = "llvm"
role = "candidate"
toolchain = "clang"
source = "kernels/{id}.cu"
entry = "{id}"
"""


class Cluster:
    """A scheduler and its workers, started as processes; `add` starts one more worker."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.control = folder / "control.json"
        self.marks = folder / "marks"
        self.marks.mkdir()
        self.scheduler_file = folder / "scheduler.json"
        self.processes: list[subprocess.Popen] = []
        self.set_control()
        env = {**os.environ, "DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "0"}
        self._start(["scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                     "--scheduler-file", str(self.scheduler_file)], env, "scheduler")  # fmt: skip
        self.address = self._address(time.monotonic() + 60)

    def _address(self, deadline: float) -> str:
        """The scheduler's address, once its file is whole."""
        while True:
            try:
                return json.loads(self.scheduler_file.read_text())["address"]
            except (OSError, ValueError, KeyError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def _start(self, args: list[str], env: dict, name: str) -> subprocess.Popen:
        log = open(self.folder / f"{name}.log", "wb")  # noqa: SIM115 (open while it runs)
        process = subprocess.Popen(
            [sys.executable, "-m", "dask", *args],
            env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=self.folder,
            start_new_session=True,
        )  # fmt: skip
        self.processes.append(process)
        return process

    def add(self, name: str, ordinal: str, model: str, **env_extra: str):
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": ordinal, "STAND_IN_GPU": model,
               "STAND_IN_CONTROL": str(self.control), **env_extra}  # fmt: skip
        return self._start(["worker", "--scheduler-file", str(self.scheduler_file),
                            "--nthreads", "1", "--resources", "GPU=1", "--name", name,
                            "--no-dashboard"], env, name)  # fmt: skip

    def wait_for(self, count: int) -> None:
        from distributed import Client

        with Client(self.address, timeout=30) as client:
            client.wait_for_workers(count, timeout=90)

    def settle(self, count: int) -> None:
        """Wait until the scheduler lists exactly `count` workers (one stopped has left it)."""
        from distributed import Client

        with Client(self.address, timeout=30) as client:
            deadline = time.monotonic() + 60
            while len(client.scheduler_info(n_workers=-1)["workers"]) != count:
                assert time.monotonic() < deadline, f"the cluster did not settle at {count} workers"
                time.sleep(0.2)

    def set_control(self, **control) -> None:
        self.control.write_text(json.dumps({"marks": str(self.marks), **control}))

    def stop(self, process: subprocess.Popen) -> None:
        """End one process this fixture started, and its nanny's children (its session)."""
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()

    def close(self) -> None:
        for process in reversed(self.processes):
            self.stop(process)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Three H100 workers (GPUs 0, 1, 2) of one scheduler on 127.0.0.1."""
    made = Cluster(tmp_path_factory.mktemp("cluster"))
    try:
        for ordinal in "012":
            made.add(f"gpu{ordinal}", ordinal, H100)
        made.wait_for(3)
        yield made
    finally:
        made.close()


SWEPT = "sweep_f64"
SWEPT_POINTS = ("n=256", "n=512", "n=1024", "n=2048")  # n=1024 the headline (its dims)
SWEPT_CASE = CASE.format(id=SWEPT).replace(
    "dims = { n = 1024 }\n",
    "dims = { n = 1024 }\npoints = [{ n = 256 }, { n = 512 }, { n = 1024 }, { n = 2048 }]\n",
)


@pytest.fixture
def stand_in(tmp_path):
    """A suite of five cases and the stand-in runner's tree: (suite path, shipment)."""
    return _stand_in(tmp_path, SUITE + "".join(CASE.format(id=c) for c in CASES))


@pytest.fixture
def swept_stand_in(tmp_path):
    """A suite of a swept case (four points) and a plain one, and the stand-in runner's tree."""
    return _stand_in(tmp_path, SUITE + SWEPT_CASE + CASE.format(id="scale_i64"))


def _stand_in(tmp_path: Path, manifest: str):
    from harness.running import shipping

    root = tmp_path / "tree"
    (root / "runner").mkdir(parents=True)
    (root / "runner" / "__init__.py").write_text("")
    shutil.copy(Path(__file__).with_name("stand_in_runner.py"), root / "runner" / "__main__.py")
    fixture = json.loads((ROOT / "tests/fixtures/result-1.2.0-h200-warpforth.json").read_text())
    (root / "runner" / "fixture.json").write_text(json.dumps(fixture))
    (root / "protocol").symlink_to(ROOT / "protocol")
    suite = tmp_path / "suite" / "cases.toml"
    suite.parent.mkdir()
    suite.write_text(manifest)
    return suite, shipping.plan(suite, root=root)
