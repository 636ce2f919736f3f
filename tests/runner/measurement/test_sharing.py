"""A shared GPU is noticed: other compute contexts, MPS, MIG or a vGPU, read through NVML when
none of the run's own workers holds a context, recorded in the document and refused by a trusted
ingest (runner.measurement.environment, harness.running.trust)."""

from __future__ import annotations

import os
import sys
import types
from pathlib import Path

import pytest

from harness.errors import TrustError
from harness.running.trust import Canon, check
from protocol.validation import validate
from runner.measurement import environment
from tests.support.harness_docs import small_run


def fake_nvml(monkeypatch, pids=(), mig=0, virtualization=0, compute_mode=0, fail=None):
    module = types.SimpleNamespace(
        nvmlInit=lambda: None,
        nvmlShutdown=lambda: None,
        nvmlDeviceGetHandleByUUID=lambda uuid: "handle",
        nvmlDeviceGetHandleByIndex=lambda index: "handle",
        nvmlDeviceGetComputeRunningProcesses=lambda h: [
            types.SimpleNamespace(pid=p, usedGpuMemory=1 << 20) for p in pids
        ],
        nvmlDeviceGetMigMode=lambda h: (mig, mig),
        nvmlDeviceGetComputeMode=lambda h: compute_mode,
        nvmlDeviceGetVirtualizationMode=lambda h: virtualization,
    )
    if fail:
        module.nvmlInit = fail
    monkeypatch.setitem(sys.modules, "pynvml", module)
    monkeypatch.setattr(environment, "_mps_running", lambda: False)


def test_a_gpu_of_its_own_is_not_shared(monkeypatch):
    fake_nvml(monkeypatch)
    found = environment.sharing_verdict(
        [environment.observe_sharing("GPU-x"), environment.observe_sharing("GPU-x")]
    )
    assert found["checked"] and found["shared"] is False and found["other_pids"] == []


def test_the_reading_processs_own_context_is_not_another_process(monkeypatch):
    """A process that made a context before the run (pytest after other GPU tests, a Python API
    caller) lists itself: it is not sharing the GPU with itself; a second pid still is."""
    fake_nvml(monkeypatch, pids=(os.getpid(),))
    assert environment.sharing_verdict([environment.observe_sharing()])["shared"] is False
    fake_nvml(monkeypatch, pids=(os.getpid(), os.getpid() + 1))
    found = environment.sharing_verdict([environment.observe_sharing()])
    assert found["shared"] is True and found["other_pids"] == [os.getpid() + 1]


@pytest.mark.parametrize(
    ("settings", "words"),
    [
        ({"pids": (4242,)}, "1 other process(es) held a compute context: pids [4242]"),
        ({"mig": 1}, "MIG mode is on"),
        ({"virtualization": 3}, "virtualised (vGPU)"),
    ],
)
def test_other_contexts_mig_and_vgpu_are_named(monkeypatch, settings, words):
    fake_nvml(monkeypatch, **settings)
    found = environment.sharing_verdict([environment.observe_sharing("GPU-x")])
    assert found["shared"] is True and words in found["why"]


def test_mps_is_named(monkeypatch):
    fake_nvml(monkeypatch)
    monkeypatch.setattr(environment, "_mps_running", lambda: True)
    assert "MPS" in environment.sharing_verdict([environment.observe_sharing()])["why"]


def test_without_nvml_the_verdict_says_the_check_was_not_made(monkeypatch):
    def broken():
        raise RuntimeError("no driver")

    fake_nvml(monkeypatch, fail=broken)
    found = environment.sharing_verdict([environment.observe_sharing()])
    assert found == {"checked": False, "shared": None, "why": found["why"]}
    assert "NVML could not be read: RuntimeError: no driver" in found["why"]


def test_a_shared_run_is_recorded_and_refused_for_the_canonical_history(monkeypatch):
    fake_nvml(monkeypatch, pids=(77,))
    document = small_run(0, suite_gpu="NVIDIA H200")
    document["environment"]["sharing"] = environment.sharing_verdict(
        [environment.observe_sharing("GPU-x")]
    )
    validate(document, "result", "a shared run")
    canon = Canon("benchmarks/cases.toml", "NVIDIA H200")
    with pytest.raises(TrustError, match=r"the GPU was shared while it ran \(1 other process"):
        check(document, canon, "run.json")
    document["environment"]["sharing"]["shared"] = False
    check(document, canon, "run.json")  # the same run on a GPU of its own passes


def commands(verdict: dict) -> dict[int, str]:
    """The command lines of the other processes a verdict saw (what left a context behind)."""
    found = {}
    for pid in verdict.get("other_pids", []):
        try:
            found[pid] = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError as exc:
            found[pid] = f"({exc.strerror})"
    return found


@pytest.mark.gpu
def test_on_the_gpu_another_process_with_a_context_is_seen_and_none_is_not():
    import subprocess
    import time

    from tests.conftest import gpu_unavailable_reason

    if (why := gpu_unavailable_reason()) is not None:
        pytest.skip(why)
    alone = environment.sharing_verdict([environment.observe_sharing()])
    holder = subprocess.Popen(
        [sys.executable, "-c", "from runner.gpu import driver; driver.Context(); "
         "import sys; print('up', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "up"
        time.sleep(0.5)
        busy = environment.sharing_verdict([environment.observe_sharing()])
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
    assert alone["checked"] and alone["shared"] is False, (alone, commands(alone))
    assert busy["shared"] is True and busy["other_pids"], busy
