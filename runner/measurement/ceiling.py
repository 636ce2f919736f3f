"""The fastest a row can physically move its bytes on this device: a ceiling on its achieved
memory rate, and the judgement of a rate against it.

A kernel that streams can beat a device-to-device copy (reads alone run faster than a copy's
mix), and the L2 can hold, when a kernel ends, up to its size of written lines not yet written
back, or serve up to its size of reads left from before (hot mode). So the ceiling is:

- bandwidth: the runner's own stream kernels' figure for the row's mix of accesses
  (runner.measurement.peaks.measure_stream_bandwidth): read-only for a row that only reads,
  write-only for one that only writes, and for a mix or an unknown split the most favourable of
  read, write and copy (a mix can run at any of them). Without the stream figures: the measured
  cuMemcpy bandwidth, else the nominal one;
- the L2 allowance: `l2_bytes` of the row's bytes may never reach DRAM within the timed call;
- the check: (bytes - allowance) / median time must not pass bandwidth * BANDWIDTH_MARGIN.

A row above it did not do (or did not time) all the work it declares: it is flagged with both
figures and how the ceiling was made, and it gets no gap.
"""

from __future__ import annotations

__all__ = ["BANDWIDTH_MARGIN", "bandwidth_ceiling", "judge_rate"]

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


def judge_rate(
    nbytes: float | None,
    median_s: float,
    peaks: dict,
    read_bytes: float | None = None,
    write_bytes: float | None = None,
) -> dict | None:
    """The `bound` block of a row: its achieved rate beyond the L2 against the ceiling, with
    `exceeded` and a `message` naming both figures; None when there is nothing to judge (no
    bytes, no time, no bandwidth figure)."""
    if not nbytes or not median_s or median_s <= 0:
        return None
    ceiling = bandwidth_ceiling(peaks, read_bytes, write_bytes)
    if ceiling is None:
        return None
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
            "(bytes - L2 size) / median time against the bandwidth x margin; bandwidth: "
            + ceiling["bandwidth_source"]
        ),
    }
    if block["exceeded"]:
        block["message"] = (
            f"{achieved / 1e9:.0f} GB/s is above the device's {ceiling['bandwidth_source']} "
            f"{ceiling['bandwidth_bytes_per_s'] / 1e9:.0f} GB/s (x{BANDWIDTH_MARGIN:g} allowed): "
            f"{counted:.3g} of the {float(nbytes):.3g} bytes a call counted, the "
            f"{ceiling['l2_allowance_bytes']:.3g}-byte L2 allowed for the rest"
        )
    return block
