"""A pytest plugin that runs WarpForth's own GPU tests (gpu_test/test_kernels.py, unchanged) on
this machine instead of a rented one, through the command line its conftest builds.

WarpForth's conftest rents a Vast.ai machine (`VastSession`), uploads each PTX and runs its C++
`warpforth-runner` there over SSH, one process per test. This plugin swaps `VastSession` for
`LocalSession` when the conftest is registered: the same `scp_upload` and `ssh_run` calls, run
locally, with `/tmp/warpforth-runner` being what `KG_DROPIN_MODE` names:

- `cpp`: WarpForth's C++ runner, built here with nvcc (CUDA 13's `cuCtxCreate` takes a params
  argument: the one change);
- `service`: `python -m runner launch` (through the per-user launch service);
- `no-service`: `python -m runner launch --no-service` (a process and a context per launch);
- `no-service-late`: the same without the early driver start (KERNELGAP_EARLY_DRIVER=0: the
  driver comes up when first used), for a before/after;
- `record`: no GPU; every call answers "0", so each test compiles its kernel (to fill the PTX
  cache warpforth_dropin.py keeps) and then fails.

Each `ssh_run` (one launch) is timed and appended to `KG_DROPIN_LOG` as a JSON line. With
`KG_DROPIN_SSH` (a JSON argv prefix such as ["ssh", "-F", "config", "host"]) each command runs
over SSH to this same machine, as WarpForth runs it on a remote one.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

RUNNER = Path("/tmp/warpforth-runner")
SWITCH = "KERNELGAP_EARLY_DRIVER"  # runner.gpu.driver_start.SWITCH


class LocalSession:
    def __init__(self, api_key: str) -> None:
        self.mode = os.environ["KG_DROPIN_MODE"]
        self.log = Path(os.environ["KG_DROPIN_LOG"])
        self.runner_src = Path(os.environ["KG_DROPIN_RUNNER_SRC"])

    def __enter__(self):
        if self.mode == "cpp":
            source = Path("/tmp/warpforth-runner.cpp")
            text = self.runner_src.read_text()
            # CUDA 13: cuCtxCreate(CUcontext*, CUctxCreateParams*, unsigned int, CUdevice)
            source.write_text(
                text.replace(
                    "cuCtxCreate(&ctx, 0, device)", "cuCtxCreate(&ctx, nullptr, 0, device)"
                )
            )
            subprocess.run(
                ["nvcc", "-o", str(RUNNER), str(source), "-lcuda", "-std=c++17"], check=True
            )
        elif self.mode in ("service", "no-service", "no-service-late"):
            from launch_over_ssh import runner_command

            runtime = Path(os.environ["KG_DROPIN_RUNTIME"])
            command = runner_command(self.mode != "service", runtime)
            if self.mode == "no-service-late":
                command = f"{SWITCH}=0 {command}"
            RUNNER.write_text(f"#!/bin/sh\nexec env {command}\n")
            RUNNER.chmod(0o755)
        return self

    def __exit__(self, *_: object) -> None:
        return None

    def scp_upload(self, local_path, remote_path: str) -> None:
        shutil.copy(local_path, remote_path)

    def ssh_run(self, cmd: str, *, timeout: int = 120) -> str:
        if self.mode == "record":
            return "0"
        ssh = json.loads(os.environ.get("KG_DROPIN_SSH", "[]"))  # an argv prefix ending in the host
        argv = [*ssh, cmd] if ssh else ["sh", "-c", cmd]
        started = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        took_s = time.perf_counter() - started
        with self.log.open("a") as log:
            log.write(json.dumps({"mode": self.mode, "s": took_s, "rc": done.returncode}) + "\n")
        if done.returncode != 0:
            raise RuntimeError(f"SSH command failed (rc={done.returncode}):\n{done.stderr}")
        return done.stdout


def pytest_plugin_registered(plugin, manager) -> None:
    if hasattr(plugin, "VastSession") and hasattr(plugin, "KernelRunner"):
        plugin.VastSession = LocalSession
