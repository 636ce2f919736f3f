"""What every result document records about where it ran: device, live sensors, software, peaks.

`device_info` and `measure_peak_bandwidth` use the driver API and need a `driver.Context`;
`nvml_sensors`, `software`, `git_commit` and `utc_now` never touch CUDA, so the host side can
call them too. Sensor and version look-ups never raise: an unknown value is None.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import platform
import socket
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from runner import driver

__all__ = [
    "FMA_LANES_PER_SM",
    "capture",
    "device_info",
    "git_commit",
    "measure_peak_bandwidth",
    "nominal_peaks",
    "nvml_sensors",
    "package_version",
    "software",
    "utc_now",
]

# (FP64, FP32) FMA lanes per SM by compute capability, from the CUDA C++ Programming Guide's
# "arithmetic instructions" throughput table.
FMA_LANES_PER_SM = {
    "7.0": (32, 64),
    "7.5": (2, 64),
    "8.0": (32, 64),
    "8.6": (2, 128),
    "8.9": (2, 128),
    "9.0": (64, 128),
    "10.0": (64, 128),
    "12.0": (2, 128),
}

# Below this a "nominal memory bandwidth" is a misread clock, not a GPU (any CUDA GPU beats 100 GB/s).
PLAUSIBLE_MEMORY_BYTES_PER_S = 1e11

GIT_TIMEOUT_S = 10.0
UUID_GROUPS = (4, 2, 2, 2, 6)  # bytes per dash-separated group, as nvidia-smi prints it


def format_uuid(raw: bytes) -> str:
    """16 UUID bytes -> "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (nvidia-smi's spelling)."""
    if len(raw) != 16:
        raise ValueError(f"a device UUID has 16 bytes (got {len(raw)})")
    groups, start = [], 0
    for size in UUID_GROUPS:
        groups.append(raw[start : start + size].hex())
        start += size
    return "GPU-" + "-".join(groups)


def _optional_attribute(ctx: driver.Context, name: str) -> int | None:
    """The attribute, or None where this driver/bindings version no longer has or answers it."""
    try:
        return ctx.attribute(name)
    except (AttributeError, driver.CudaError):
        return None


def device_info(ctx: driver.Context) -> dict:
    """Static facts about the context's device, from the driver API only."""
    d = driver.cu()
    raw_name = driver.check(d.cuDeviceGetName(256, ctx.device), "cuDeviceGetName")
    uuid = driver.check(d.cuDeviceGetUuid(ctx.device), "cuDeviceGetUuid")
    major = ctx.attribute("COMPUTE_CAPABILITY_MAJOR")
    minor = ctx.attribute("COMPUTE_CAPABILITY_MINOR")
    version = int(driver.check(d.cuDriverGetVersion(), "cuDriverGetVersion"))
    ecc = _optional_attribute(ctx, "ECC_ENABLED")
    return {
        "name": bytes(raw_name).split(b"\0", 1)[0].decode(errors="replace").strip(),
        "uuid": format_uuid(bytes(uuid.bytes)),
        "ordinal": ctx.ordinal,
        "compute_capability": f"{major}.{minor}",
        "arch": f"sm_{major}{minor}",
        "sm_count": ctx.attribute("MULTIPROCESSOR_COUNT"),
        "memory_bytes": int(driver.check(d.cuDeviceTotalMem(ctx.device), "cuDeviceTotalMem")),
        "l2_bytes": ctx.attribute("L2_CACHE_SIZE"),
        # opt-in maximum: what a kernel can get with cuFuncSetAttribute, not the 48 KiB default
        "max_shared_bytes_per_block": ctx.attribute("MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
        # SM limits, for the theoretical occupancy of runner.explain (cuda_occupancy.h's inputs)
        "max_registers_per_sm": _optional_attribute(ctx, "MAX_REGISTERS_PER_MULTIPROCESSOR"),
        "max_threads_per_sm": _optional_attribute(ctx, "MAX_THREADS_PER_MULTIPROCESSOR"),
        "max_blocks_per_sm": _optional_attribute(ctx, "MAX_BLOCKS_PER_MULTIPROCESSOR"),
        "max_shared_bytes_per_sm": _optional_attribute(ctx, "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR"),
        "reserved_shared_bytes_per_block": _optional_attribute(
            ctx, "RESERVED_SHARED_MEMORY_PER_BLOCK"
        ),
        "memory_bus_width_bits": _optional_attribute(ctx, "GLOBAL_MEMORY_BUS_WIDTH"),
        "clock_rate_khz": _optional_attribute(ctx, "CLOCK_RATE"),
        "memory_clock_rate_khz": _optional_attribute(ctx, "MEMORY_CLOCK_RATE"),
        "driver_version": version,
        "driver_version_string": f"{version // 1000}.{version % 1000 // 10}",
        "ecc_enabled": None if ecc is None else bool(ecc),
    }


def _text(value) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _reason_names(nvml) -> dict[int, str]:
    """Bit -> name for clocks-event (formerly throttle) reasons, from pynvml's own constants."""
    names: dict[int, str] = {}
    for prefix in ("nvmlClocksEventReason", "nvmlClocksThrottleReason"):  # newer names win
        for attr in dir(nvml):
            suffix = attr[len(prefix) :]
            if attr.startswith(prefix) and suffix not in ("All", "None"):
                bit = getattr(nvml, attr)
                if isinstance(bit, int) and bit and bit & (bit - 1) == 0:
                    names.setdefault(bit, suffix)
    return names


def _active_reasons(nvml, handle) -> list[str]:
    # renamed in NVML 12.535; older pynvml only has the throttle spelling
    getter = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
    getter = getter or nvml.nvmlDeviceGetCurrentClocksThrottleReasons
    mask = int(getter(handle))
    names = _reason_names(nvml)
    return [names.get(1 << i, f"0x{1 << i:x}") for i in range(64) if mask >> i & 1]


def _device_sensors(nvml, handle) -> dict:
    """Each reading on its own: a NotSupported (or any NVML failure) there is None, not an error."""

    def read(fn):
        try:
            return fn()
        except Exception:
            return None

    def pstate():
        state = int(nvml.nvmlDeviceGetPerformanceState(handle))
        return None if state == getattr(nvml, "NVML_PSTATE_UNKNOWN", 32) else f"P{state}"

    sm, mem = nvml.NVML_CLOCK_SM, nvml.NVML_CLOCK_MEM
    return {
        "sm_clock_mhz": read(lambda: int(nvml.nvmlDeviceGetClockInfo(handle, sm))),
        "memory_clock_mhz": read(lambda: int(nvml.nvmlDeviceGetClockInfo(handle, mem))),
        "max_sm_clock_mhz": read(lambda: int(nvml.nvmlDeviceGetMaxClockInfo(handle, sm))),
        "max_memory_clock_mhz": read(lambda: int(nvml.nvmlDeviceGetMaxClockInfo(handle, mem))),
        "temperature_c": read(
            lambda: int(nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU))
        ),
        "power_w": read(lambda: nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0),  # NVML gives mW
        "power_limit_w": read(lambda: nvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000.0),
        "persistence_mode": read(lambda: bool(nvml.nvmlDeviceGetPersistenceMode(handle))),
        "pstate": read(pstate),
        "throttle_reasons": read(lambda: _active_reasons(nvml, handle)),
    }


def nvml_sensors(index: int = 0, *, uuid: str | None = None) -> dict:
    """Live clocks, temperature, power and throttle reasons of one GPU through NVML.

    The device is the one with `uuid` (as `device_info` spells it) when NVML knows it, else NVML
    index `index` (NVML's order need not be CUDA's). Never raises and never creates a CUDA
    context; without NVML: {"source": "unavailable", "reason": ...}.
    """
    try:
        import pynvml as nvml
    except Exception as exc:
        return {
            "source": "unavailable",
            "reason": f"pynvml is not importable ({exc}); install it with `pip install nvidia-ml-py`",
        }
    try:
        nvml.nvmlInit()
    except Exception as exc:
        return {
            "source": "unavailable",
            "reason": f"nvmlInit failed: {_text(exc) or type(exc).__name__}",
        }
    try:
        handle, matched_by = None, "index"
        if uuid:
            try:
                handle, matched_by = nvml.nvmlDeviceGetHandleByUUID(uuid), "uuid"
            except Exception:
                handle = None
        if handle is None:
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
        try:
            driver_version = _text(nvml.nvmlSystemGetDriverVersion())
        except Exception:
            driver_version = None
        try:
            nvml_uuid = _text(nvml.nvmlDeviceGetUUID(handle))
        except Exception:
            nvml_uuid = None
        return {
            "source": "nvml",
            "driver_version": driver_version,
            "device_index": None if matched_by == "uuid" else index,
            "uuid": nvml_uuid,
            "matched_by": matched_by,
            **_device_sensors(nvml, handle),
        }
    except Exception as exc:
        return {"source": "unavailable", "reason": f"NVML device query failed: {_text(exc)}"}
    finally:
        with contextlib.suppress(Exception):  # a failed shutdown must not undo the readings
            nvml.nvmlShutdown()


def package_version(name: str) -> str | None:
    """The installed version of distribution `name`, or None."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def software() -> dict:
    """Versions of Python and of the packages that shape a measurement, plus the host."""
    cuda_bindings = package_version("cuda-bindings")
    if cuda_bindings is None:
        try:
            import cuda.bindings

            cuda_bindings = str(cuda.bindings.__version__)
        except Exception:
            cuda_bindings = None
    return {
        "python": platform.python_version(),
        "python_implementation": sys.implementation.name,
        "cuda_bindings": cuda_bindings,
        "numpy": package_version("numpy"),
        "orjson": package_version("orjson"),
        "jsonschema": package_version("jsonschema"),
        "nvidia_ml_py": package_version("nvidia-ml-py"),
        "kernelgap": package_version("kernelgap") or "0.1.0+source",
        "platform": platform.platform(),
        "hostname": socket.gethostname(),
    }


def measure_peak_bandwidth(ctx: driver.Context, *, nbytes: int = 1 << 30, repeats: int = 5) -> dict:
    """Achievable device-memory bandwidth: one device-to-device copy, timed with events.

    bytes_per_s = 2 * nbytes / best_s (each byte is read once and written once), best of
    `repeats` copies after one untimed warm-up. nbytes shrinks to a quarter of free memory
    (two buffers: half of it) when needed.
    """
    if repeats < 1:
        raise ValueError(f"measure_peak_bandwidth: repeats must be >= 1 (got {repeats})")
    free_bytes, _total = driver.check(driver.cu().cuMemGetInfo(), "cuMemGetInfo")
    nbytes = int(min(nbytes, int(free_bytes) // 4))
    if nbytes <= 0:
        raise ValueError(f"measure_peak_bandwidth: no device memory free ({free_bytes} bytes)")
    buffers, stream, events = [], None, []
    try:
        buffers = [driver.Buffer(nbytes)]
        buffers.append(driver.Buffer(nbytes))
        src, dst = buffers
        stream = driver.Stream()
        events = [driver.Event()]
        events.append(driver.Event())
        start, stop = events
        dst.copy_from(src, stream)  # warm-up: first-touch and clock ramp stay out of the timing
        stream.synchronize()
        best_s = float("inf")
        for _ in range(repeats):
            start.record(stream)
            dst.copy_from(src, stream)
            stop.record(stream)
            stop.synchronize()
            best_s = min(best_s, stop.elapsed_s(start))
    finally:
        for event in events:
            event.destroy()
        if stream is not None:
            stream.destroy()
        for buffer in buffers:
            buffer.free()
    return {
        "bytes_per_s": 2 * nbytes / best_s,
        "nbytes": nbytes,
        "best_s": best_s,
        "repeats": repeats,
        "method": f"cuMemcpyDtoD, read+write bytes, best of {repeats}",
    }


def nominal_peaks(info: dict, sensors: dict) -> dict:
    """Datasheet-style peaks from clocks and unit counts (None where an input is unknown).

    memory_bytes_per_s = 2 * max memory clock (Hz) * bus width / 8 (double data rate);
    f64/f32_flops_per_s = SMs * max SM clock (Hz) * 2 (an FMA is 2 flops) * FMA lanes per SM.
    Clocks come from NVML's maximum when known, else the driver's clock attributes.
    """
    notes: list[str] = []

    def clock_hz(sensor_mhz: str, attribute_khz: str, what: str) -> float | None:
        if sensors.get(sensor_mhz):
            notes.append(f"{what} clock: NVML {sensor_mhz} = {sensors[sensor_mhz]} MHz")
            return sensors[sensor_mhz] * 1e6
        if info.get(attribute_khz):
            notes.append(
                f"{what} clock: driver attribute {attribute_khz} = {info[attribute_khz]} kHz"
            )
            return info[attribute_khz] * 1e3
        notes.append(f"{what} clock unknown (neither NVML {sensor_mhz} nor driver {attribute_khz})")
        return None

    memory_hz = clock_hz("max_memory_clock_mhz", "memory_clock_rate_khz", "memory")
    bus_bits = info.get("memory_bus_width_bits")
    memory_bytes_per_s = None
    if memory_hz and bus_bits:
        memory_bytes_per_s = 2 * memory_hz * bus_bits / 8
        if memory_bytes_per_s < PLAUSIBLE_MEMORY_BYTES_PER_S:
            notes.append(
                f"nominal memory bandwidth {memory_bytes_per_s:.3g} B/s is implausible (< 1e11): "
                "the reported memory clock is probably not the effective one (HBM); dropped"
            )
            memory_bytes_per_s = None
    elif not bus_bits:
        notes.append("memory bus width unknown: no nominal memory bandwidth")

    sm_hz = clock_hz("max_sm_clock_mhz", "clock_rate_khz", "SM")
    lanes = FMA_LANES_PER_SM.get(info.get("compute_capability"))
    sm_count = info.get("sm_count")
    if lanes is None:
        notes.append(
            f"no FMA-lanes entry for compute capability {info.get('compute_capability')!r}: "
            "no nominal flops"
        )
    f64 = f32 = None
    if lanes and sm_hz and sm_count:
        f64 = sm_count * sm_hz * 2 * lanes[0]
        f32 = sm_count * sm_hz * 2 * lanes[1]
    return {
        "memory_bytes_per_s": memory_bytes_per_s,
        "f64_flops_per_s": f64,
        "f32_flops_per_s": f32,
        "notes": notes,
    }


def capture(ctx: driver.Context, *, measure_bandwidth: bool = True) -> dict:
    """The environment block of a result document: device, sensors, software and peaks."""
    info = device_info(ctx)
    sensors = nvml_sensors(uuid=info["uuid"])  # read before the copy below warms the GPU
    peaks: dict = {
        "measured_memory_bytes_per_s": None,
        "measured_memory_method": None,
        "measured_memory_error": None,
    }
    if measure_bandwidth:
        try:
            measured = measure_peak_bandwidth(ctx)
            peaks["measured_memory_bytes_per_s"] = measured["bytes_per_s"]
            peaks["measured_memory_method"] = measured["method"]
        except driver.CudaError as exc:
            if exc.sticky:  # the context is gone: nothing after this can run in it
                raise
            peaks["measured_memory_error"] = str(exc)
    nominal = nominal_peaks(info, sensors)
    peaks.update(
        {
            "nominal_memory_bytes_per_s": nominal["memory_bytes_per_s"],
            "nominal_f64_flops_per_s": nominal["f64_flops_per_s"],
            "nominal_f32_flops_per_s": nominal["f32_flops_per_s"],
            "nominal_notes": nominal["notes"],
        }
    )
    return {"device": info, "sensors": sensors, "software": software(), "peaks": peaks}


def git_commit(path: str | Path) -> dict:
    """{"commit": sha, "dirty": bool} of the git checkout holding `path`, else both None."""
    target = Path(path)
    directory = target if target.is_dir() else target.parent
    unknown = {"commit": None, "dirty": None}
    try:
        head = subprocess.run(
            ["git", "-C", str(directory), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
        )
        status = subprocess.run(
            ["git", "-C", str(directory), "status", "--porcelain"],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
        )
    except (OSError, subprocess.SubprocessError):
        return unknown
    sha = head.stdout.strip()
    if head.returncode != 0 or status.returncode != 0 or not sha:
        return unknown
    return {"commit": sha, "dirty": bool(status.stdout.strip())}


def utc_now() -> str:
    """Now in UTC as ISO 8601 with microseconds and a Z: 2025-01-31T12:34:56.123456Z."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
