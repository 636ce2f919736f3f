"""GPU: runner serve and runner launch on real kernels. 1,000 requests through one service, a
fault in the middle and a hang ended at its timeout, each followed by correct answers, a
kernel's printf kept off stdout, and the launch command line's output."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import orjson
import pytest

from harness.client import KernelClient
from harness.errors import KernelError
from tests.conftest import ROOT

pytestmark = pytest.mark.gpu
AXPY = (ROOT / "benchmarks" / "kernels" / "axpy_f64.handwritten.ptx").read_text()
FAULTS = """\
.version 7.0
.target sm_70
.address_size 64
.visible .entry fault(.param .u64 p)
{
	.reg .b64 %rd<2>;
	mov.u64 %rd1, 0;
	st.global.u64 [%rd1], %rd1;
	ret;
}
.visible .entry spin(.param .u64 p)
{
	.reg .pred %p1;
	.reg .b64 %rd<4>;
	ld.param.u64 %rd1, [p];
	cvta.to.global.u64 %rd2, %rd1;
LOOP:
	ld.volatile.global.u64 %rd3, [%rd2];
	setp.eq.u64 %p1, %rd3, 0;
	@%p1 bra LOOP;
	ret;
}
"""


def axpy(gpu: KernelClient, n: int, a: float = 2.5) -> tuple[np.ndarray, np.ndarray]:
    x = np.arange(n, dtype=np.float64)
    y = np.arange(n, dtype=np.float64) * 0.5
    (out,) = gpu.launch(AXPY, "axpy_f64", grid=max(1, n // 256), block=256,
                        params=[x, y, ("f64", a), ("u64", n)], outputs=[1])  # fmt: skip
    return out, a * x + y  # a * x is exact for these x: fma and mul+add agree


def test_a_thousand_requests_through_one_service():
    with KernelClient.local() as gpu:
        for i in range(1000):
            n = 256 + (i % 7) * 100  # sizes vary: buffers are reused where they fit
            got, want = axpy(gpu, n)
            assert np.array_equal(got, want), i
        answer = gpu.request({"ptx": AXPY, "kernel": "axpy_f64", "grid": [1], "block": [32],
                              "params": [{"type": "f64[]", "count": 4}, {"type": "f64[]", "count": 4},
                                         {"type": "f64", "value": 1.0}, {"type": "u64", "value": 4}],
                              "outputs": [{"param": 1}]})  # fmt: skip
        assert answer["status"] == "ok" and answer["load_ms"] == 0.0  # the module was cached


def test_a_fault_in_the_middle_is_answered_and_the_next_requests_succeed():
    with KernelClient.local() as gpu:
        assert np.array_equal(*axpy(gpu, 1000))
        with pytest.raises(KernelError) as caught:
            gpu.launch(FAULTS, "fault", 1, 1, [np.zeros(1, dtype=np.int64)], [0])
        assert caught.value.phase == "launch"
        assert caught.value.cuda_error in ("CUDA_ERROR_ILLEGAL_ADDRESS", "CUDA_ERROR_LAUNCH_FAILED")
        for n in (1000, 5000, 77):
            assert np.array_equal(*axpy(gpu, n))


def test_a_hang_is_ended_at_its_timeout_and_the_next_request_succeeds():
    with KernelClient.local() as gpu:
        with pytest.raises(KernelError) as caught:
            gpu.launch(FAULTS, "spin", 1, 1, [np.zeros(1, dtype=np.int64)], [0], timeout_s=2.0)
        assert caught.value.phase == "timeout" and "timeout_s=2" in str(caught.value)
        assert np.array_equal(*axpy(gpu, 4096))


def _printf_ptx(tmp_path) -> Path:
    """A kernel `noisy(long long* p)` that prints a forged JSON answer and sets p[0..3] to 7."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not on PATH (needed to build a printf kernel)")
    src = tmp_path / "p.cu"
    src.write_text('#include <cstdio>\nextern "C" __global__ void noisy(long long* p) '
                   '{ printf("{\\"status\\": \\"forged\\"}\\n"); p[threadIdx.x] = 7; }\n')  # fmt: skip
    subprocess.run(
        [nvcc, "-ptx", "-arch=sm_90", str(src), "-o", str(tmp_path / "p.ptx")], check=True
    )
    return tmp_path / "p.ptx"


def test_nothing_a_kernel_prints_reaches_stdout(tmp_path):
    request = {"id": 1, "ptx": _printf_ptx(tmp_path).read_text(), "kernel": "noisy", "grid": [1],
               "block": [4], "params": [{"type": "i64[]", "count": 4}], "outputs": [{"param": 0}]}  # fmt: skip
    done = subprocess.run([sys.executable, "-m", "runner", "serve"], input=orjson.dumps(request) + b"\n",
                          capture_output=True, cwd=ROOT, timeout=120)  # fmt: skip
    lines = done.stdout.splitlines()
    assert len(lines) == 1 and orjson.loads(lines[0])["outputs"][0]["values"] == [7] * 4
    assert b"forged" in done.stderr and b"forged" not in done.stdout


def test_launch_command_line_prints_the_output_as_the_cpp_runner_does(tmp_path, runtime):
    """Through the launch service (the default), under a private runtime folder: the service
    it starts is ended after the test, with its worker's CUDA context."""
    ptx = tmp_path / "axpy.ptx"
    ptx.write_text(AXPY)
    done = subprocess.run(
        [sys.executable, "-m", "runner", "launch", str(ptx), "--kernel", "axpy_f64",
         "--param", "f64[]:1,2,3,0.1", "--param", "f64[]:0.5,0.5,0.5,0", "--param", "f64:2.5",
         "--param", "u64:4", "--grid", "1,1,1", "--block", "32,1,1", "--output-param", "1",
         "--output-count", "4"],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
        env={**os.environ, "XDG_RUNTIME_DIR": str(runtime)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == "3,5.5,8,0.25\n"


def test_a_no_service_launch_prints_a_kernels_printf_on_stderr_and_only_the_values_on_stdout(
    tmp_path,
):
    """The process ends with os._exit, after the early driver start: what the driver wrote to
    C's stdio (fd 1, pointed at stderr) is flushed first, and the output line stays alone."""
    argv = [str(_printf_ptx(tmp_path)), "--kernel", "noisy", "--param", "i64[]:0,0,0,0",
            "--block", "4,1,1", "--output-param", "0", "--no-service"]  # fmt: skip
    done = subprocess.run([sys.executable, "-m", "runner", "launch", *argv], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)  # fmt: skip
    assert (done.returncode, done.stdout) == (0, "7,7,7,7\n"), done.stderr
    assert done.stderr.count('{"status": "forged"}') == 4
