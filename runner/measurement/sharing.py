"""Whether the GPU was shared while the suite ran: other processes with a context on it, MPS,
MIG, a compute mode or virtualisation that time-slices it.

A timing taken while another context runs kernels on the same GPU measures the other work too,
and nothing in the samples says so. NVML lists the processes that hold a compute context on a
device; the runner reads that list from its own process at the start of the run, before any
worker, and at the end, after the last: any process listed then, other than the reader itself
(which holds no context in `runner bench`, but may where a caller made one), is someone else's. Work that comes and goes between the two readings is not seen (the samples' noise and
the clocks per sample are what remain for it). Never raises: without NVML the verdict says the
check was not made.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

__all__ = ["observe", "verdict"]

MPS_PROGRAMS = ("nvidia-cuda-mps-server", "nvidia-cuda-mps-control")


def _mps_running() -> bool:
    """An MPS control daemon or server on this machine (by process name; NVML does not say)."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if (entry / "comm").read_text().strip().startswith(MPS_PROGRAMS):
                    return True
    return False


def observe(uuid: str | None = None, index: int = 0) -> dict:
    """One reading of the device's sharing state (NVML; no CUDA context is made)."""
    try:
        import pynvml as nvml

        nvml.nvmlInit()
    except Exception as exc:
        return {"source": "unavailable", "reason": f"{type(exc).__name__}: {exc}"}
    try:
        handle = None
        if uuid:
            with contextlib.suppress(Exception):
                handle = nvml.nvmlDeviceGetHandleByUUID(uuid)
        if handle is None:
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
        reading: dict = {"source": "nvml", "pid": os.getpid()}
        try:
            procs = nvml.nvmlDeviceGetComputeRunningProcesses(handle)
            reading["compute_processes"] = [
                {"pid": int(p.pid), "used_memory_bytes": _memory(p)} for p in procs
            ]
        except Exception as exc:
            reading["compute_processes_error"] = f"{type(exc).__name__}: {exc}"
        for key, call in (
            ("mig_mode", lambda: nvml.nvmlDeviceGetMigMode(handle)[0]),
            ("compute_mode", lambda: nvml.nvmlDeviceGetComputeMode(handle)),
            ("virtualization_mode", lambda: nvml.nvmlDeviceGetVirtualizationMode(handle)),
        ):
            try:
                reading[key] = int(call())
            except Exception:
                reading[key] = None
        reading["mps"] = _mps_running()
        return reading
    except Exception as exc:
        return {"source": "unavailable", "reason": f"{type(exc).__name__}: {exc}"}
    finally:
        with contextlib.suppress(Exception):
            nvml.nvmlShutdown()


def _memory(process) -> int | None:
    used = getattr(process, "usedGpuMemory", None)
    return int(used) if isinstance(used, int) and used >= 0 else None


# NVML enum values that mean the device is shared or carved up
EXCLUSIVE_PROCESS = 3  # NVML_COMPUTEMODE_EXCLUSIVE_PROCESS: no other context can be made
PASSTHROUGH_OR_NONE = (0, 1)  # NVML_GPU_VIRTUALIZATION_MODE_NONE, _PASSTHROUGH


def verdict(readings: list[dict]) -> dict:
    """What the readings, each taken when no worker of this run held a context, say: `shared`
    is True when another process held a context, MPS or MIG was on, or the GPU is a vGPU. The
    reading process's own context (a caller that made one before the run) is not another's."""
    usable = [r for r in readings if r.get("source") == "nvml"]
    if not usable:
        why = "; ".join(r.get("reason", "no reading") for r in readings) or "no reading"
        return {"checked": False, "shared": None, "why": f"NVML could not be read: {why}"}
    others = sorted(
        {p["pid"] for r in usable for p in r.get("compute_processes", []) if p["pid"] != r["pid"]}
    )
    reasons = []
    if others:
        reasons.append(f"{len(others)} other process(es) held a compute context: pids {others}")
    if any(r.get("mps") for r in usable):
        reasons.append("an MPS server or control daemon was running")
    if any(r.get("mig_mode") == 1 for r in usable):
        reasons.append("MIG mode is on (the timed GPU is a slice)")
    if any(r.get("virtualization_mode") not in (None, *PASSTHROUGH_OR_NONE) for r in usable):
        reasons.append("the GPU is virtualised (vGPU): its time may be sliced with other VMs")
    listed = all("compute_processes" in r for r in usable)
    return {
        "checked": listed,
        "shared": bool(reasons),
        "why": "; ".join(reasons) or ("no other context at the start or end of the run"
                                       if listed else "the process list could not be read"),
        "other_pids": others,
        "exclusive_process_mode": any(r.get("compute_mode") == EXCLUSIVE_PROCESS for r in usable),
        "readings": usable,
    }  # fmt: skip
