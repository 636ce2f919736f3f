"""A timed row's rates: bytes and FLOPs a second at its median, their fraction of the device's
peaks, and whether they are physically possible on it (the rate ceiling)."""

from __future__ import annotations

from runner.measurement import ceiling

__all__ = ["FLOPS_MARGIN", "impossible", "rate_bound", "throughput"]

# Margin past the nominal FLOP/s (a datasheet figure at the clock NVML reported) before a result
# is called impossible; the bandwidth ceiling and its margin are runner.measurement.ceiling's.
FLOPS_MARGIN = 1.05


def throughput(
    nbytes: float | None, flops: float | None, median_s: float, peaks: dict, flop_dtype: str | None
) -> dict:
    """Achieved rates at the median and their fraction of the device's measured or nominal peaks."""
    out = {}
    if nbytes is not None and median_s > 0:
        out["bytes"] = nbytes
        out["bytes_per_s"] = nbytes / median_s
        peak = peaks.get("measured_memory_bytes_per_s") or peaks.get("nominal_memory_bytes_per_s")
        if peak:
            out["fraction_of_peak_bandwidth"] = out["bytes_per_s"] / peak
            out["peak_bandwidth_source"] = (
                "measured" if peaks.get("measured_memory_bytes_per_s") else "nominal"
            )
    if flops is not None and median_s > 0:
        out["flops"] = flops
        out["flops_per_s"] = flops / median_s
        peak = peaks.get(f"nominal_{flop_dtype or 'f64'}_flops_per_s")
        if peak:
            out["fraction_of_peak_flops"] = out["flops_per_s"] / peak
            out["peak_flops_source"] = f"nominal {flop_dtype or 'f64'}"
    return out


def rate_bound(
    rates: dict,
    peaks: dict,
    working_set_bytes: float | None,
    split: tuple[float, float] | None = None,
) -> dict | None:
    """The `throughput.bound` block (runner.measurement.ceiling.judge_rate) of a row with these
    rates; `split` is (bytes read, bytes written) a call where known. None when there is nothing
    to judge, or when the working set fits in the L2 (no measured L2 figure to judge it by)."""
    l2 = peaks.get("l2_bytes")
    if working_set_bytes is not None and l2 and working_set_bytes <= l2:
        return None
    if not rates.get("bytes") or not rates.get("bytes_per_s"):
        return None
    read, write = split if split is not None else (None, None)
    median_s = rates["bytes"] / rates["bytes_per_s"]
    return ceiling.judge_rate(rates["bytes"], median_s, peaks, read, write)


def impossible(
    rates: dict,
    peaks: dict,
    working_set_bytes: float | None,
    split: tuple[float, float] | None = None,
) -> str | None:
    """Why a result is physically impossible on this device, naming both figures, or None: its
    memory rate beyond the L2 above the ceiling (rate_bound), or its FLOP rate above nominal."""
    bound = rate_bound(rates, peaks, working_set_bytes, split)
    if bound is not None and bound["exceeded"]:
        return bound["message"]
    fraction = rates.get("fraction_of_peak_flops")
    if fraction is not None and fraction > FLOPS_MARGIN:
        peak = rates["flops_per_s"] / fraction
        return (
            f"{rates['flops_per_s'] / 1e12:.2f} TFLOP/s is above the device's "
            f"{rates.get('peak_flops_source', 'nominal')} {peak / 1e12:.2f} TFLOP/s "
            f"(x{FLOPS_MARGIN:g} allowed)"
        )
    return None
