"""GPU: the launch service under fuzzed input with real launches between the lines, and one
KernelClient shared by eight threads, each checking its own kernel's outputs (issue 33)."""

from __future__ import annotations

import subprocess
import sys
import threading

import numpy as np
import orjson
import pytest

from harness.client import KernelClient, _array, _param
from protocol.validation import validate
from tests.conftest import ROOT
from tests.runner.launch.test_serve_gpu import AXPY, axpy
from tests.support.serve_fuzz import lines

pytestmark = pytest.mark.gpu
MAX_LINE_BYTES = 1 << 16  # an axpy request (its PTX, two arrays in base64) fits; overlong is cheap


def _axpy_request(index: int) -> tuple[bytes, np.ndarray]:
    n = 256 + 32 * (index % 9)
    x = np.arange(n, dtype=np.float64) + index
    y = np.full(n, 0.5 * index)
    a = 1.0 + (index % 5)
    request = {
        "id": f"axpy-{index}",
        "ptx": AXPY,
        "kernel": "axpy_f64",
        "grid": [max(1, n // 256) + 1],
        "block": [256],
        "params": [_param(x), _param(y), _param(("f64", a)), _param(("u64", n))],
        "outputs": [{"param": 1, "encoding": "base64"}],
    }
    return orjson.dumps(request), a * x + y


def test_real_launches_between_fuzzed_lines_stay_exact():
    """5,000 fuzzed lines with a real axpy every tenth line, through one service: every answer
    schema-valid, every axpy exact, the service alive at the end."""
    fuzzed = lines(seed=3301, count=5000, max_line_bytes=MAX_LINE_BYTES)
    sent, wanted = [], {}
    for index, line in enumerate(fuzzed):
        if index % 10 == 0:
            data, want = _axpy_request(index)
            assert len(data) < MAX_LINE_BYTES
            sent.append(data)
            wanted[f"axpy-{index}"] = want
        sent.append(line.data)
    done = subprocess.run(
        [sys.executable, "-m", "runner", "serve", "--max-line-bytes", str(MAX_LINE_BYTES)],
        input=b"".join(data + b"\n" for data in sent),
        capture_output=True,
        cwd=ROOT,
        timeout=500,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    answers = [orjson.loads(raw) for raw in done.stdout.splitlines()]
    assert len(answers) == sum(1 for data in sent if data.strip())
    checked = 0
    for answer in answers:
        validate(answer, "run-response", "serve answer")
        if answer.get("id") in wanted:
            assert answer["status"] == "ok", answer
            assert np.array_equal(_array(answer["outputs"][0]), wanted[answer["id"]]), answer["id"]
            checked += 1
    assert checked == len(wanted)
    assert answers[-1]["id"] == "final" and answers[-1]["phase"] == "signature"


def test_eight_threads_on_one_client_each_get_their_own_outputs():
    failures: list[str] = []
    with KernelClient.local() as gpu:

        def work(thread: int) -> None:
            for index in range(40):
                try:
                    got, want = axpy(gpu, 256 * (1 + thread % 3) + index, float(thread + 1))
                except Exception as exc:
                    failures.append(f"thread {thread}, launch {index}: {exc!r}")
                    return
                if not np.array_equal(got, want):
                    failures.append(f"thread {thread}, launch {index}: wrong outputs")

        threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert failures == []
