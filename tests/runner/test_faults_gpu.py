"""GPU: faults that need a device (issue 12): a case too large for the device is refused
before any allocation, naming the buffer and its length expression; the run still ends with a
valid document."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import orjson
import pytest

from protocol.validation import validate
from tests.conftest import ROOT

pytestmark = pytest.mark.gpu


def test_a_case_larger_than_the_device_fails_in_inputs_naming_the_buffer(tmp_path):
    shutil.copytree(
        ROOT / "benchmarks", tmp_path / "suite", ignore=shutil.ignore_patterns("perf", "ops")
    )
    cases = tmp_path / "suite" / "cases.toml"
    text = cases.read_text()
    # 2^36 int64 values: 512 GiB a buffer, under the manifest's 1 TiB limit, past any GPU of today
    text = text.replace(
        "dims = { n = 134217728, blocks = 4224 }", "dims = { n = 68719476736, blocks = 4224 }", 1
    )
    cases.write_text(re.sub(r"(?m)^axes = .*\n", "", text, count=1))  # one size: no sweep
    out = tmp_path / "result.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "runner",
            "bench",
            str(cases),
            "--case",
            "scale_i64",
            "-o",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1, done.stderr[-3000:]
    doc = orjson.loads(out.read_bytes())
    validate(doc, "result", "oversized run")
    (case,) = doc["cases"]
    assert case["status"] == "failed" and case["error"]["phase"] == "inputs"
    message = case["error"]["message"]
    assert "free" in message and "buffers.x (length 'n' = 68719476736 i64 values" in message
    assert all(
        i.get("check", {}).get("status") in ("passed", None)
        for i in case["implementations"].values()
    )
