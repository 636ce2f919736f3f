"""The device's peaks that throughput is judged against: the memory bandwidth measured with one
device-to-device copy and with the runner's read-only, write-only and copy kernels (as BabelStream
and nvbench measure it), the nominal (datasheet-style) figures from clocks and unit counts, and
the ceiling on a row's memory rate built from them (bandwidth_ceiling, judge_rate)."""

from __future__ import annotations

from runner.gpu import driver

__all__ = [
    "BANDWIDTH_MARGIN",
    "FMA_LANES_PER_SM",
    "bandwidth_ceiling",
    "judge_rate",
    "measure_peak_bandwidth",
    "measure_stream_bandwidth",
    "nominal_peaks",
]

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
    from runner.measurement.timing import own_launches

    best_s = float("inf")
    for attempt in range(repeats + 1):
        start.record(stream)
        for _ in range(STREAM_LAUNCHES):
            with own_launches.launching():  # the runner's own: never counted in a CUPTI window
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
    from runner.measurement.timing import own_launches

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
        own_launches.register(functions)
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
        own_launches.forget(functions)
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
    or, with the footprint unknown, the L2's size once."""
    if footprint_bytes and footprint_bytes > 0:
        return float(nbytes) * min(1.0, float(l2_bytes) / float(footprint_bytes))
    return min(float(l2_bytes), float(nbytes))


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
            + ("bytes x L2 / footprint" if footprint_bytes else "the L2's size once")
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
