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
- `run`, `run-no-service`: the stdin JSON runner's generation: each C++ command line becomes
  its run request (`ptx_base64`) on the stdin of `python -m runner run`, and the JSON answer
  the output line the test parses;
- `files`, `files-no-service`: the request-file runner's generation: `python -m runner run
  PTX_FILE REQUEST.json RESULT.json` with the uploaded PTX (NUL-terminated as warpforthc writes
  it) and the request without it, the answer read from RESULT.json;
- `record`: no GPU; every call answers "0", so each test compiles its kernel (to fill the PTX
  cache warpforth_dropin.py keeps) and then fails.

Each `ssh_run` (one launch: the runner's process alone, not the translation) is timed and appended to `KG_DROPIN_LOG` as a JSON line. With
`KG_DROPIN_SSH` (a JSON argv prefix such as ["ssh", "-F", "config", "host"]) each command runs
over SSH to this same machine, as WarpForth runs it on a remote one.
"""

from __future__ import annotations

import base64
import json
import os
import shlex
import shutil
import subprocess
import time
from pathlib import Path

RUNNER = Path("/tmp/warpforth-runner")
JSON_MODES = ("run", "run-no-service", "files", "files-no-service")
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
        elif self.mode in JSON_MODES:
            from launch_over_ssh import runner_command

            runtime = Path(os.environ["KG_DROPIN_RUNTIME"])
            command = runner_command(self.mode.endswith("no-service"), runtime, "run")
            RUNNER.write_text(f"#!/bin/sh\nexec env {command}\n")
            RUNNER.chmod(0o755)
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
        argv, stdin, result = self._json_call(cmd) if self.mode in JSON_MODES else (cmd, None, None)
        ssh = json.loads(os.environ.get("KG_DROPIN_SSH", "[]"))  # an argv prefix ending in the host
        line = argv if isinstance(argv, str) else " ".join(shlex.quote(a) for a in argv)
        argv = [*ssh, line] if ssh else ["sh", "-c", line]
        started = time.perf_counter()
        done = subprocess.run(argv, input=stdin, capture_output=True, timeout=timeout)
        took_s = time.perf_counter() - started
        with self.log.open("a") as log:
            log.write(json.dumps({"mode": self.mode, "s": took_s, "rc": done.returncode}) + "\n")
        if self.mode in JSON_MODES:
            return self._json_answer(done, result)
        if done.returncode != 0:
            raise RuntimeError(
                f"SSH command failed (rc={done.returncode}):\n{done.stderr.decode()}"
            )
        return done.stdout.decode()

    def _json_call(self, cmd: str):
        """The C++ command line as the JSON runners' input: (argv, stdin, result file)."""
        from runner.launch import launch_command

        words = shlex.split(cmd)
        args = launch_command.parse(words[1:])
        request = launch_command.request(args, "")
        del request["ptx"], request["timeout_s"]
        if self.mode.startswith("run"):
            ptx = Path(args.ptx_file).read_bytes().rstrip(b"\0")
            stdin = json.dumps({**request, "ptx_base64": base64.b64encode(ptx).decode()}).encode()
            return [str(RUNNER)], stdin, None
        request_file, result = Path("/tmp/kg-request.json"), Path("/tmp/kg-result.json")
        request_file.write_text(json.dumps(request))
        result.unlink(missing_ok=True)
        return [str(RUNNER), args.ptx_file, str(request_file), str(result)], None, result

    def _json_answer(self, done: subprocess.CompletedProcess, result: Path | None) -> str:
        """The JSON answer as the C++ runner's output line (what the unchanged tests parse)."""
        from runner.launch.launch_command import format_values

        text = result.read_bytes() if result is not None and result.exists() else done.stdout
        try:
            answer = json.loads(text)
        except ValueError:
            raise RuntimeError(
                f"no JSON answer (rc={done.returncode}): {done.stderr.decode()}"
            ) from None
        expected_rc = 0 if result is None or answer.get("status") == "ok" else 1
        if done.returncode != expected_rc or answer.get("status") != "ok":
            raise RuntimeError(f"runner failed (rc={done.returncode}): {answer.get('error')}")
        return format_values(answer["outputs"][0]["values"]) + "\n"


def pytest_plugin_registered(plugin, manager) -> None:
    if hasattr(plugin, "VastSession") and hasattr(plugin, "KernelRunner"):
        plugin.VastSession = LocalSession
