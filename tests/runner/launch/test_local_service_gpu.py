"""GPU: `runner launch` through the per-user launch service gives what the process-per-launch
path gives, survives a fault and a hang (each answered as the C++ runner would: `Error: ...`,
status 1), and keeps answering after them from one service."""

from __future__ import annotations

import pytest

from tests.conftest import services
from tests.runner.launch.test_local_service import launch
from tests.runner.launch.test_serve_gpu import AXPY, FAULTS

pytestmark = pytest.mark.gpu


def test_the_service_answers_as_the_process_path_does_and_outlives_a_fault_and_a_hang(
    runtime, tmp_path
):
    axpy = tmp_path / "axpy.ptx"
    axpy.write_text(AXPY)
    faults = tmp_path / "faults.ptx"
    faults.write_text(FAULTS)
    args = (axpy, "--kernel", "axpy_f64", "--param", "f64[]:1,2,3,0.1",
            "--param", "f64[]:0.5,0.5,0.5,0", "--param", "f64:2.5", "--param", "u64:4",
            "--grid", "1,1,1", "--block", "32,1,1", "--output-param", "1", "--output-count", "4")  # fmt: skip
    served = launch(runtime, *args)
    alone = launch(runtime, *args, "--no-service")
    assert (served.returncode, served.stdout) == (0, "3,5.5,8,0.25\n"), served.stderr
    assert (alone.returncode, alone.stdout) == (0, served.stdout), alone.stderr
    (pid,) = services(str(runtime))
    fault = launch(runtime, faults, "--kernel", "fault", "--param", "i64[]:0")
    assert fault.returncode == 1 and fault.stdout == ""
    assert fault.stderr.startswith("Error: launch: ") and "ILLEGAL_ADDRESS" in fault.stderr
    hang = launch(runtime, faults, "--kernel", "spin", "--param", "i64[]:0", "--timeout-s", "2")
    assert hang.returncode == 1 and hang.stderr.startswith("Error: timeout: ")
    again = launch(runtime, *args)
    assert (again.returncode, again.stdout) == (0, "3,5.5,8,0.25\n"), again.stderr
    assert services(str(runtime)) == [pid]  # the same service, with a fresh worker inside
