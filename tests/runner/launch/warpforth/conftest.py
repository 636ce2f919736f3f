"""GPU test set-up shaped as WarpForth's gpu_test/conftest.py is, written from the protocol: a
`KernelRunner` whose `run()` builds a runner's input, runs the runner as one process per launch
(there over `ssh host cmd`, here on this box through a shell) and parses its answer the way
that generation of WarpForth's harness does. One runner per generation, each switched to
kernelgap by the one program name it runs:

- `launch`: the C++ `warpforth-runner` command line (`cmd_parts` joined into one shell command,
  the output a comma-separated line parsed by the output's type, any failure a non-zero exit);
- `run`: the JSON runner reading a request on stdin (`ptx_base64`), one JSON answer on stdout
  (`status`, `outputs[].values` or `error`), exit 0 either way;
- `files`: the JSON runner called as `RUNNER PTX_FILE REQUEST.json RESULT.json` (the PTX as
  warpforthc writes it, NUL-terminated; the answer read from RESULT.json; exit 1 on error).

Each switch goes through kernelgap's launch service, or launches in its own process with
`--no-service`. The requests are WarpForth's 37 test kernels
(tests/fixtures/warpforth-83c30d0-requests.json, tools/perf/warpforth_dropin.py requests).
"""

from __future__ import annotations

import base64
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

REQUESTS = ROOT / "tests" / "fixtures" / "warpforth-83c30d0-requests.json"
SWITCHES = ("launch", "run", "files")
# The one line each generation of WarpForth's harness changes: the program it runs.
RUNNER = f"{shlex.quote(sys.executable)} -m runner"


class RunnerError(Exception):
    """The runner reported a failure (WarpForth's harness raises on one, naming what it said)."""


class KernelRunner:
    """Runs one request through one switch and returns the output's values, parsed as that
    generation of WarpForth's harness parses them."""

    def __init__(self, switch: str, folder: Path, service: bool, runtime: Path):
        self.switch, self.folder, self.service = switch, folder, service
        self.env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime)}

    def _shell(self, command: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(
            command, shell=True, input=stdin, capture_output=True, timeout=120, env=self.env,
            cwd=ROOT,
        )  # fmt: skip

    def _mode(self) -> str:
        return "" if self.service else " --no-service"

    def run(self, request: dict, timeout_s: float | None = None) -> list:
        return getattr(self, f"_{self.switch}")(request, timeout_s)

    def _launch(self, request: dict, timeout_s: float | None) -> list:
        ptx = self.folder / "kernel.ptx"
        ptx.write_text(request["ptx"])
        cmd_parts = [f"{RUNNER} launch{self._mode()}", str(ptx), "--kernel", request["kernel"]]
        for param in request["params"]:
            if param["type"].endswith("[]"):
                values = ",".join(str(v) for v in param["values"])
                cmd_parts.extend(["--param", f"{param['type']}:{values}"])
            else:
                cmd_parts.extend(["--param", f"{param['type']}:{param['value']}"])
        (output,) = request["outputs"]
        cmd_parts.extend([
            "--grid", ",".join(map(str, _dim3(request["grid"]))),
            "--block", ",".join(map(str, _dim3(request["block"]))),
            "--output-param", str(output["param"]),
        ])  # fmt: skip
        if "count" in output:
            cmd_parts.extend(["--output-count", str(output["count"])])
        if timeout_s is not None:
            cmd_parts.extend(["--timeout-s", str(timeout_s)])
        done = self._shell(" ".join(cmd_parts))
        if done.returncode != 0:
            raise RunnerError(f"runner failed (rc={done.returncode}):\n{done.stderr.decode()}")
        out_type = request["params"][output["param"]]["type"]
        parse = float if out_type.startswith("f") else int
        return [parse(v) for v in done.stdout.decode().strip().split(",")]

    def _run(self, request: dict, timeout_s: float | None) -> list:
        body = {k: v for k, v in request.items() if k != "ptx"}
        body["ptx_base64"] = base64.b64encode(request["ptx"].encode()).decode()
        if timeout_s is not None:
            body["timeout_s"] = timeout_s
        done = self._shell(f"{RUNNER} run{self._mode()}", stdin=json.dumps(body).encode())
        assert done.returncode == 0, done.stderr  # the stdin runner exits 0 either way
        return _values(json.loads(done.stdout))

    def _files(self, request: dict, timeout_s: float | None) -> list:
        ptx, request_file = self.folder / "kernel.ptx", self.folder / "request.json"
        result = self.folder / "result.json"
        result.unlink(missing_ok=True)
        ptx.write_bytes(request["ptx"].encode() + b"\0")  # as warpforthc writes it
        body = {k: v for k, v in request.items() if k != "ptx"}
        if timeout_s is not None:
            body["timeout_s"] = timeout_s
        request_file.write_text(json.dumps(body))
        done = self._shell(f"{RUNNER} run{self._mode()} {ptx} {request_file} {result}")
        answer = json.loads(result.read_text())
        assert done.returncode == (0 if answer["status"] == "ok" else 1), done.stderr
        return _values(answer)


def _dim3(values: list) -> list:
    return [*values, *[1] * (3 - len(values))]


def _values(answer: dict) -> list:
    """A JSON runner's answer as WarpForth's harness reads it: the first output's values, or
    RunnerError with the answer's `error` (other fields ignored)."""
    if answer["status"] != "ok":
        raise RunnerError(answer["error"])
    return answer["outputs"][0]["values"]


@pytest.fixture(params=SWITCHES)
def switch(request) -> str:
    return request.param


@pytest.fixture(params=[True, False], ids=["service", "no-service"])
def service(request) -> bool:
    return request.param


@pytest.fixture
def kernel_runner(switch, tmp_path, session_runtime) -> KernelRunner:
    """The switch through the launch service (tests/conftest.py's session_runtime)."""
    return KernelRunner(switch, tmp_path, True, session_runtime)


@pytest.fixture(scope="session")
def warpforth_requests() -> list[dict]:
    return json.loads(REQUESTS.read_text())["requests"]
