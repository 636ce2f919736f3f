"""Results come from the parent, in the Python front end too (issue 13).

runner.bench times callables in the pytest process itself, so its defence is where the
document comes from: the session builds it from the samples the engine took, and writes it
(atomically, at the end) to --bench-output. Whatever a candidate prints, writes to stdout,
stderr or an inherited descriptor, or even writes to the output file while it runs, never
enters the document or the report. (A candidate that patches the runner's own objects in its
process can forge anything; run untrusted callables in a process of their own.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

from protocol.validation import validate

ROOT = Path(__file__).resolve().parents[3]
MARK = "FORGED-BY-THE-CANDIDATE"

CONFTEST = """
import pytest


@pytest.hookimpl(trylast=True)  # after the plugin's pytest_configure made its session
def pytest_configure(config):
    from tests.support.fake_callable_device import FakeCallableDevice
    from runner.bench import session

    session.current().use_device(FakeCallableDevice(default_s=1e-5))
    session.current().configure(timer="events")  # cold by events, chosen: a stand-in, no CUPTI
"""

TEST_FORGER = f"""
import json
import os
import sys
from pathlib import Path

import numpy as np

from runner import bench

MARK = {MARK!r}
FORGED = json.dumps({{
    "schema_version": "1.4.0", "kind": "kernelgap.result", "complete": True, "mark": MARK,
    "cases": [{{"id": MARK, "status": "ok", "implementations": {{"forger": {{
        "gap": {{"ratio_of_medians": 0.01}}, "timing": {{"samples_s": [1e-12]}}}}}}}}],
}})


class Vec(bench.Workload):
    name = "vec"
    rows = [bench.Row("n64", n=64)]
    dtypes = ["float64"]

    def gen_inputs(self, params, dtype, seed):
        return (np.random.default_rng(seed).standard_normal(params["n"]).astype(dtype),)

    def reference(self, x):
        return x * 2


def forger(x):
    print(FORGED)
    print("kernelgap: wrote " + os.environ["FORGE_OUT"] + " (1 comparisons)", file=sys.stderr)
    sys.stdout.write(FORGED + "\\n")
    for fd in (1, 2, int(os.environ["FORGE_FD"])):
        os.write(fd, (FORGED + "\\n").encode())
    for path in (os.environ["FORGE_OUT"], os.environ["FORGE_REPORT"]):
        Path(path).write_text(FORGED)
    return x * 2


def honest(x):
    return x * 2


def test_forger():
    (case,) = bench.cases(Vec())
    bench.Runner(honest, case).compare({{"forger": forger}})
"""


def test_what_a_candidate_prints_or_writes_never_enters_the_document(tmp_path):
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_forger.py").write_text(TEST_FORGER)
    out, report = tmp_path / "result.json", tmp_path / "report.md"
    read, write = os.pipe()
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "FORGE_FD": str(write),
        "FORGE_OUT": str(out),
        "FORGE_REPORT": str(report),
    }
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-s",
        "-p",
        "no:cacheprovider",
        "test_forger.py",
    ]
    command += ["--bench-output", str(out), "--bench-report", str(report), "--bench-budget", "0.03"]
    drained: list[str] = []  # read while it runs: a full pipe would block the candidate
    with os.fdopen(read) as pipe:
        reader = threading.Thread(target=lambda: drained.append(pipe.read()), daemon=True)
        reader.start()
        try:
            done = subprocess.run(
                command,
                cwd=tmp_path,
                env=env,
                pass_fds=(write,),
                capture_output=True,
                text=True,
                timeout=300,
            )
        finally:
            os.close(write)
        reader.join(timeout=30)
    inherited = "".join(drained)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert MARK in inherited and MARK in done.stdout and MARK in done.stderr  # it did write

    doc = json.loads(out.read_text())
    validate(doc, "result", "the document of a forging candidate")
    assert MARK not in out.read_text() and MARK not in report.read_text()
    (case,) = doc["cases"]
    assert case["id"] == "vec/n64-float64/honest" and case["status"] == "ok"
    for entry in case["implementations"].values():
        # the engine's samples: the fake device's programmed 10 us, never the forged 1e-12
        assert set(entry["timing"]["samples_s"]) == {1e-5}
    assert case["implementations"]["forger"]["gap"]["ratio_of_medians"] == 1.0
    assert f"kernelgap: wrote {out} (1 comparisons)" in done.stderr  # the session's own line
