"""What every result document records about where it ran: device, live sensors, software, peaks.

`device_info` and the measured peaks use the driver API and need a `driver.Context`;
`nvml_sensors` and `software` never touch CUDA, so the host side can call them too. Sensor and
version look-ups never raise: an unknown value is None.

The device's peaks that throughput is judged against (`nominal_peaks`, `measure_peak_bandwidth`,
`measure_stream_bandwidth`): the memory bandwidth measured with one device-to-device copy and with
the runner's read-only, write-only and copy kernels (as BabelStream and nvbench measure it), the
nominal (datasheet-style) figures from clocks and unit counts, and the ceiling on a row's memory
rate built from them (`bandwidth_ceiling`, `judge_rate`).

Whether the GPU was shared while the suite ran (`observe_sharing`, `sharing_verdict`): other
processes with a context on it, MPS, MIG, a compute mode or virtualisation that time-slices it.
A timing taken while another context runs kernels on the same GPU measures the other work too,
and nothing in the samples says so. NVML lists the processes that hold a compute context on a
device; the runner reads that list from its own process at the start of the run, before any
worker, and at the end, after the last: any process listed then, other than the reader itself
(which holds no context in `runner bench`, but may where a caller made one), is someone else's.
Work that comes and goes between the two readings is not seen (the samples' noise and the clocks
per sample are what remain for it). Never raises: without NVML the verdict says the check was not
made."""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import platform
import socket
import sys
from pathlib import Path

from runner.errors import CudaError
from runner.gpu import driver

__all__ = [
    "BANDWIDTH_MARGIN",
    "FMA_LANES_PER_SM",
    "bandwidth_ceiling",
    "capture",
    "device_info",
    "judge_rate",
    "measure_peak_bandwidth",
    "measure_stream_bandwidth",
    "nominal_peaks",
    "nvml_sensors",
    "observe_sharing",
    "package_version",
    "sharing_verdict",
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
    except (AttributeError, CudaError):
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
    (runner.measurement.environment); the error instead where they could not run."""
    try:
        stream = measure_stream_bandwidth(ctx)
    except (CudaError, ValueError) as exc:
        if isinstance(exc, CudaError) and exc.sticky:
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
        except CudaError as exc:
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


STREAM_MIN_BYTES = 256 << 20  # each stream buffer: at least this, and 4 times the L2
STREAM_BLOCK = 256
STREAM_PAIR_BYTES = 16  # the kernels move 16-byte words
STREAM_LAUNCHES = 10  # launches a timing: a fraction of a millisecond of reads at 256 MiB

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


def _best_of(kernel, args, stream, start, stop, repeats: int) -> float:
    """Best seconds a launch over `repeats` timings of STREAM_LAUNCHES back-to-back launches
    between events, after one untimed warm-up: the host's latency to queue the first launch,
    which the start event does not wait for, is spread over all of them."""
    from runner.measurement.timing import cupti

    best_s = float("inf")
    for attempt in range(repeats + 1):
        start.record(stream)
        for _ in range(STREAM_LAUNCHES):
            with cupti.launching():  # the runner's own: never counted in a CUPTI window
                kernel.launch(stream, args)
        stop.record(stream)
        stop.synchronize()
        if attempt:
            best_s = min(best_s, stop.elapsed_s(start) / STREAM_LAUNCHES)
    return best_s


def measure_stream_bandwidth(ctx: driver.Context, *, repeats: int = 5) -> dict:
    """Achievable device-memory bandwidth by kind of access, with the runner's stream kernels
    (kg_stream_read, kg_stream_write, kg_stream_copy in runner/gpu/device/kernels.cu): 16-byte
    words, one a thread, over buffers of max(4 x L2, 256 MiB) so the L2 holds a small part.

    read_bytes_per_s = nbytes / best_s of the read; write_bytes_per_s likewise; copy_bytes_per_s
    = 2 * nbytes / best_s (each byte read once and written once); best_s is the best of
    `repeats` timings of STREAM_LAUNCHES launches each, by events, after one untimed warm-up. A buffer shrinks to a quarter of free
    memory when needed (the copy takes two).
    """
    from runner.gpu.device import load_ptx
    from runner.measurement.timing import cupti

    if repeats < 1:
        raise ValueError(f"measure_stream_bandwidth: repeats must be >= 1 (got {repeats})")
    l2_bytes = ctx.attribute("L2_CACHE_SIZE")
    free_bytes, _total = driver.check(driver.cu().cuMemGetInfo(), "cuMemGetInfo")
    nbytes = min(max(4 * l2_bytes, STREAM_MIN_BYTES), int(free_bytes) // 4)
    nbytes -= nbytes % (STREAM_PAIR_BYTES * STREAM_BLOCK)
    if nbytes <= 0:
        raise ValueError(f"measure_stream_bandwidth: no device memory free ({free_bytes} bytes)")
    pairs = nbytes // STREAM_PAIR_BYTES
    grid = (pairs // STREAM_BLOCK, 1, 1)
    block = (STREAM_BLOCK, 1, 1)
    module, buffers, stream, events, functions = None, [], None, [], []
    try:
        module = driver.Module(load_ptx(), "kernelgap stream kernels")
        kernels = {
            k: module.kernel(f"kg_stream_{k}", grid, block) for k in ("read", "write", "copy")
        }
        functions = [k.function for k in kernels.values()]
        cupti.register(functions)
        buffers = [driver.Buffer(nbytes), driver.Buffer(nbytes), driver.Buffer(8)]
        src, dst, sink = buffers
        stream = driver.Stream()
        events = [driver.Event(), driver.Event()]
        src.fill_bytes(0x3C, stream)
        stream.synchronize()
        args = {
            "read": driver.KernelArgs([("ptr", src.ptr), ("u64", pairs), ("ptr", sink.ptr)]),
            "write": driver.KernelArgs([("ptr", dst.ptr), ("u64", pairs), ("u64", 7)]),
            "copy": driver.KernelArgs([("ptr", src.ptr), ("ptr", dst.ptr), ("u64", pairs)]),
        }
        best = {k: _best_of(kernels[k], args[k], stream, *events, repeats) for k in kernels}
    finally:
        cupti.forget(functions)
        for event in events:
            event.destroy()
        if stream is not None:
            stream.destroy()
        for buffer in buffers:
            buffer.free()
        if module is not None:
            module.unload()
    return {
        "read_bytes_per_s": nbytes / best["read"],
        "write_bytes_per_s": nbytes / best["write"],
        "copy_bytes_per_s": 2 * nbytes / best["copy"],
        "nbytes": nbytes,
        "repeats": repeats,
        "method": (
            f"kg_stream_read/write/copy kernels over {nbytes} bytes (16-byte words, one a thread), "
            f"events around {STREAM_LAUNCHES} launches, best of {repeats}; copy counts read+write "
            "bytes"
        ),
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


# The rate ceiling: the fastest a row can physically move its bytes on this device. A kernel
# that streams can beat a device-to-device copy, and the L2 can hold up to its size of written
# lines not yet written back, or serve up to its size of reads left from before; so the
# ceiling is the stream kernels' figure for the row's mix of accesses (read-only, write-only,
# or the most favourable of read, write and copy; else the cuMemcpy figure, else the nominal
# one), times BANDWIDTH_MARGIN, with the bytes that may never reach DRAM allowed: every access
# to a line that can stay resident, so bytes x L2 / footprint where the row's distinct footprint
# is known (an in-place buffer in the L2 saves its read and its write), else the L2's size once
# (issue 50 item 11: once refused an honest in-place kernel at 0.8-0.9 of the L2 wherever the
# L2 / DRAM bandwidth ratio is 2.5 or more).
# A row above it did not do (or did not time) all the work it declares: it is flagged with
# both figures, and it gets no gap.


BANDWIDTH_MARGIN = 1.10  # clocks and measurement noise of the bandwidth figures


def bandwidth_ceiling(
    peaks: dict, read_bytes: float | None = None, write_bytes: float | None = None
) -> dict | None:
    """{"bandwidth_bytes_per_s", "bandwidth_source", "l2_allowance_bytes"} for a row that
    reads `read_bytes` and writes `write_bytes` a call (None: split unknown); None without any
    bandwidth figure."""
    read = peaks.get("measured_read_bytes_per_s")
    write = peaks.get("measured_write_bytes_per_s")
    copy = peaks.get("measured_copy_kernel_bytes_per_s")
    split_known = read_bytes is not None and write_bytes is not None
    if read and write and copy:
        if split_known and write_bytes == 0 and read_bytes > 0:
            bandwidth, source = read, "measured read-only (the row only reads)"
        elif split_known and read_bytes == 0 and write_bytes > 0:
            bandwidth, source = write, "measured write-only (the row only writes)"
        else:
            figures = {"read-only": read, "write-only": write, "copy": copy}
            best = max(figures, key=figures.get)
            why = "reads and writes" if split_known else "a split of reads and writes unknown"
            bandwidth, source = figures[best], f"measured {best}, the most favourable ({why})"
    elif peaks.get("measured_memory_bytes_per_s"):
        bandwidth, source = peaks["measured_memory_bytes_per_s"], "measured (cuMemcpyDtoD copy)"
    elif peaks.get("nominal_memory_bytes_per_s"):
        bandwidth, source = peaks["nominal_memory_bytes_per_s"], "nominal"
    else:
        return None
    return {
        "bandwidth_bytes_per_s": bandwidth,
        "bandwidth_source": source,
        "l2_allowance_bytes": float(peaks.get("l2_bytes") or 0),
    }


def l2_allowance(nbytes: float, l2_bytes: float, footprint_bytes: float | None = None) -> float:
    """Bytes of `nbytes` a call that may be served by the L2 and never reach DRAM: every access
    to the share of its distinct `footprint_bytes` the L2 can hold (all of them where it fits),
    or, with the footprint unknown, twice the L2's size: at most its size of reads left from
    before and as much written into it and not yet written back (an in-place buffer that fits
    does both), so no honest row is refused whatever its footprint."""
    if footprint_bytes and footprint_bytes > 0:
        return float(nbytes) * min(1.0, float(l2_bytes) / float(footprint_bytes))
    return min(2.0 * float(l2_bytes), float(nbytes))


def judge_rate(
    nbytes: float | None,
    median_s: float,
    peaks: dict,
    read_bytes: float | None = None,
    write_bytes: float | None = None,
    footprint_bytes: float | None = None,
) -> dict | None:
    """The `bound` block of a row: its achieved rate beyond the L2 against the ceiling, with
    `exceeded` and a `message` naming both figures; None when there is nothing to judge (no
    bytes, no time, no bandwidth figure). `footprint_bytes`: the distinct bytes a call touches
    (l2_allowance)."""
    if not nbytes or not median_s or median_s <= 0:
        return None
    ceiling = bandwidth_ceiling(peaks, read_bytes, write_bytes)
    if ceiling is None:
        return None
    ceiling["l2_allowance_bytes"] = l2_allowance(
        nbytes, ceiling["l2_allowance_bytes"], footprint_bytes
    )
    counted = max(float(nbytes) - ceiling["l2_allowance_bytes"], 0.0)
    achieved = counted / median_s
    limit = ceiling["bandwidth_bytes_per_s"] * BANDWIDTH_MARGIN
    block = {
        **ceiling,
        "bytes": float(nbytes),
        "counted_bytes": counted,
        "achieved_bytes_per_s": achieved,
        "ceiling_bytes_per_s": limit,
        "margin": BANDWIDTH_MARGIN,
        "exceeded": achieved > limit,
        "method": (
            "(bytes - what the L2 may serve: "
            + (
                "bytes x L2 / footprint"
                if footprint_bytes
                else "twice the L2's size, the footprint unknown"
            )
            + ") / median time against the bandwidth x margin; bandwidth: "
            + ceiling["bandwidth_source"]
        ),
    }
    if block["exceeded"]:
        block["message"] = (
            f"{achieved / 1e9:.0f} GB/s is above the device's {ceiling['bandwidth_source']} "
            f"{ceiling['bandwidth_bytes_per_s'] / 1e9:.0f} GB/s (x{BANDWIDTH_MARGIN:g} allowed): "
            f"{counted:.3g} of the {float(nbytes):.3g} bytes a call counted, "
            f"{ceiling['l2_allowance_bytes']:.3g} allowed to the L2"
        )
    return block


MPS_PROGRAMS = ("nvidia-cuda-mps-server", "nvidia-cuda-mps-control")


def _mps_running() -> bool:
    """An MPS control daemon or server on this machine (by process name; NVML does not say)."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if (entry / "comm").read_text().strip().startswith(MPS_PROGRAMS):
                    return True
    return False


def observe_sharing(uuid: str | None = None, index: int = 0) -> dict:
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


def sharing_verdict(readings: list[dict]) -> dict:
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
