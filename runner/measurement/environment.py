"""What every result document records about where it ran: device, live sensors, software, peaks.

`device_info` (and the peaks of runner.measurement.peaks) use the driver API and need a `driver.Context`;
`nvml_sensors` and `software` never touch CUDA, so the host side can
call them too. Sensor and version look-ups never raise: an unknown value is None.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import platform
import socket
import sys

from runner.gpu import driver
from runner.measurement.peaks import (
    measure_peak_bandwidth,
    measure_stream_bandwidth,
    nominal_peaks,
)

__all__ = [
    "capture",
    "device_info",
    "nvml_sensors",
    "package_version",
    "software",
]

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
        **_clock_lock(nvml, handle, read),
    }


def _clock_lock(nvml, handle, read) -> dict:
    """Whether the SM clock was pinned by someone (application clocks moved from their default,
    or the ApplicationsClocksSetting reason active): recorded with the run, never changed."""
    sm = nvml.NVML_CLOCK_SM
    apps = read(lambda: int(nvml.nvmlDeviceGetApplicationsClock(handle, sm)))
    default = read(lambda: int(nvml.nvmlDeviceGetDefaultApplicationsClock(handle, sm)))
    getter = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
        nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None
    )
    bits = read(lambda: int(getter(handle))) if getter else None
    known = apps is not None and default is not None
    locked = (known and apps != default) or (bits is not None and bool(bits & 0x2))
    return {
        "applications_sm_clock_mhz": apps,
        "default_applications_sm_clock_mhz": default,
        "clocks_locked": locked if (known or bits is not None) else None,
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


def _stream_peaks(ctx: driver.Context) -> dict:
    """The read, write and copy bandwidth of the runner's stream kernels, for the rate ceiling
    (runner.measurement.peaks); the error instead where they could not run."""
    try:
        stream = measure_stream_bandwidth(ctx)
    except (driver.CudaError, ValueError) as exc:
        if isinstance(exc, driver.CudaError) and exc.sticky:
            raise
        return {"measured_stream_error": str(exc)}
    return {
        "measured_read_bytes_per_s": stream["read_bytes_per_s"],
        "measured_write_bytes_per_s": stream["write_bytes_per_s"],
        "measured_copy_kernel_bytes_per_s": stream["copy_bytes_per_s"],
        "measured_stream_method": stream["method"],
    }


def capture(ctx: driver.Context, *, measure_bandwidth: bool = True) -> dict:
    """The environment block of a result document: device, sensors, software, peaks and the
    persisting-L2 limit (set to 0 here as in every timing context:
    runner.gpu.driver.set_no_persisting_l2)."""
    info = device_info(ctx)
    persisting_l2 = driver.set_no_persisting_l2(ctx)
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
        peaks.update(_stream_peaks(ctx))
    nominal = nominal_peaks(info, sensors)
    peaks.update(
        {
            "nominal_memory_bytes_per_s": nominal["memory_bytes_per_s"],
            "nominal_f64_flops_per_s": nominal["f64_flops_per_s"],
            "nominal_f32_flops_per_s": nominal["f32_flops_per_s"],
            "nominal_notes": nominal["notes"],
        }
    )
    return {
        "device": info,
        "sensors": sensors,
        "software": software(),
        "peaks": peaks,
        "persisting_l2": persisting_l2,
    }
