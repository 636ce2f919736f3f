"""The inputs a suite declares, with no GPU: the dtypes a buffer may have and the distribution
its values are drawn from, validated against the dtype (ValueError naming where).

The generator that draws them (runner.gpu.generator, on the device and its CPU twin) reads
these descriptions; the suite definition needs only this module.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = [
    "DISTRIBUTION_KINDS",
    "DTYPES",
    "Distribution",
    "check_dtype",
    "f32_at_least",
    "f32_at_most",
    "full_range",
    "is_float",
]

DTYPES = {
    "f32": np.float32,
    "f64": np.float64,
    "i32": np.int32,
    "u32": np.uint32,
    "i64": np.int64,
    "u64": np.uint64,
}
DISTRIBUTION_KINDS = ("uniform", "integers", "edges")
F32_MAX = float(np.finfo(np.float32).max)


def check_dtype(dtype: str, where: str) -> None:
    if dtype not in DTYPES:
        raise ValueError(f"{where}: unknown dtype {dtype!r}; expected one of {', '.join(DTYPES)}")


def is_float(dtype: str) -> bool:
    """True for f32 and f64, False for the integer dtypes; ValueError for an unknown name."""
    check_dtype(dtype, "is_float")
    return dtype in ("f32", "f64")


def _is_number(value: object) -> bool:
    return isinstance(value, int | float | np.integer | np.floating) and not isinstance(
        value, bool | np.bool_
    )


@dataclass(frozen=True)
class Distribution:
    """Values of one input buffer: "uniform" floats in [low, high), or "integers" in [low, high]."""

    kind: str
    low: float | int
    high: float | int

    def validate(self, dtype: str, where: str) -> None:
        """Raise ValueError, naming `where`, unless this distribution fits `dtype`."""
        check_dtype(dtype, where)
        if self.kind not in DISTRIBUTION_KINDS:
            raise ValueError(
                f"{where}: unknown distribution {self.kind!r}; expected 'uniform' (f32, f64) "
                "or 'integers' (i32, u32, i64, u64)"
            )
        expected = "uniform" if is_float(dtype) else "integers"
        if self.kind not in (expected, "edges"):
            raise ValueError(
                f"{where}: a {dtype} buffer takes an {expected!r} distribution, got {self.kind!r}"
            )
        if self.kind == "edges" and is_float(dtype):
            self._validate_edges(dtype, where)
        elif expected == "uniform":
            self._validate_uniform(dtype, where)
        else:
            self._validate_integers(dtype, where)

    def _validate_edges(self, dtype: str, where: str) -> None:
        for name, value in (("low", self.low), ("high", self.high)):
            if not _is_number(value) or not math.isfinite(value):
                raise ValueError(f"{where}: edges {name} must be a finite number, got {value!r}")
        low, high = float(self.low), float(self.high)
        if not low <= high:
            raise ValueError(f"{where}: edges needs low <= high, got low={low!r} high={high!r}")
        if dtype == "f32":
            if max(abs(low), abs(high)) > F32_MAX:
                raise ValueError(
                    f"{where}: f32 bounds must lie within +-{F32_MAX!r}, "
                    f"got low={low!r} high={high!r}"
                )
            if f32_at_least(low) > f32_at_most(high):
                raise ValueError(f"{where}: no f32 value lies in [{low!r}, {high!r}]")

    def _validate_uniform(self, dtype: str, where: str) -> None:
        for name, value in (("low", self.low), ("high", self.high)):
            if not _is_number(value) or not math.isfinite(value):
                raise ValueError(f"{where}: uniform {name} must be a finite number, got {value!r}")
        low, high = float(self.low), float(self.high)
        if not low < high:
            raise ValueError(f"{where}: uniform needs low < high, got low={low!r} high={high!r}")
        if not math.isfinite(high - low):
            raise ValueError(
                f"{where}: uniform high - low overflows float64 (low={low!r} high={high!r})"
            )
        if dtype == "f32":
            if max(abs(low), abs(high)) > F32_MAX:
                raise ValueError(
                    f"{where}: f32 uniform bounds must lie within +-{F32_MAX!r}, "
                    f"got low={low!r} high={high!r}"
                )
            first = np.float32(low)  # the smallest f32 >= low must still be below high
            if float(first) < low:
                first = np.nextafter(first, np.float32(np.inf))
            if not float(first) < high:
                raise ValueError(
                    f"{where}: no f32 value lies in [{low!r}, {high!r}); widen the range"
                )

    def _validate_integers(self, dtype: str, where: str) -> None:
        for name, value in (("low", self.low), ("high", self.high)):
            if not isinstance(value, int | np.integer) or isinstance(value, bool | np.bool_):
                raise ValueError(f"{where}: integers {name} must be an integer, got {value!r}")
        info = np.iinfo(DTYPES[dtype])
        low, high = int(self.low), int(self.high)
        if not low <= high:
            raise ValueError(f"{where}: integers needs low <= high, got low={low} high={high}")
        if low < info.min or high > info.max:
            raise ValueError(
                f"{where}: integers [{low}, {high}] do not fit {dtype} "
                f"([{int(info.min)}, {int(info.max)}])"
            )


def full_range(dtype: str) -> tuple[float, float] | tuple[int, int]:
    """The finite values of `dtype` as (lowest, highest)."""
    check_dtype(dtype, "full_range")
    if is_float(dtype):
        top = float(np.finfo(DTYPES[dtype]).max)
        return -top, top
    info = np.iinfo(DTYPES[dtype])
    return int(info.min), int(info.max)


def f32_at_least(low: float) -> np.float32:
    """The smallest f32 at or above `low`."""
    f = np.float32(low)
    return np.nextafter(f, np.float32(np.inf)) if float(f) < low else f


def f32_at_most(high: float) -> np.float32:
    """The largest f32 at or below `high`."""
    f = np.float32(high)
    return np.nextafter(f, np.float32(-np.inf)) if float(f) > high else f
