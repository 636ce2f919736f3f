"""Counter-based input generator: the numpy twin of `kg_fill_random` in runner/gpu/device/kernels.cu.

Every value depends only on (seed, stream, index), so the device fill, this CPU twin, every
implementation and every GPU see the same numbers, and element i does not depend on how many
elements were generated or where generation started.

    mix64(z)   = splitmix64 finalizer (z ^= z>>30; z *= 0xBF58476D1CE4E5B9; z ^= z>>27;
                 z *= 0x94D049BB133111EB; z ^= z>>31), uint64 wrapping
    key        = mix64(seed ^ mix64(stream + G)),  G = 0x9E3779B97F4A7C15
    bits(i)    = mix64(key + i * G)
    uniform    : u = (bits >> 11) * 2^-53 in [0, 1); v = lo + (hi - lo) * u, each operation
                 rounded to nearest, never fused; v == hi (rounding) steps one ulp down.
                 f32 = v rounded to nearest f32, stepped one f32 ulp back inside [lo, hi) where
                 the rounding crossed a bound.
    integers   : v = ilo + (bits mod span if span else bits) mod 2^64, low 32 bits for i32/u32;
                 ilo = low mod 2^64, span = (high - low + 1) mod 2^64 (0: all 2^64 values).
                 The modulo bias is below span / 2^64, negligible for the spans benchmarks use.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass

import numpy as np

__all__ = [
    "DISTRIBUTION_KINDS",
    "DTYPES",
    "DTYPE_CODES",
    "Distribution",
    "generate",
    "is_float",
    "launch_args",
    "stream_id",
]

DTYPES = {
    "f32": np.float32,
    "f64": np.float64,
    "i32": np.int32,
    "u32": np.uint32,
    "i64": np.int64,
    "u64": np.uint64,
}
# The `dtype` argument of kg_fill_random (KG_F32 ... KG_U64 in kernels.cu).
DTYPE_CODES = {"f32": 0, "f64": 1, "i32": 2, "u32": 3, "i64": 4, "u64": 5}
DISTRIBUTION_KINDS = ("uniform", "integers")

GOLDEN = 0x9E3779B97F4A7C15
MIX_MULTIPLIERS = (0xBF58476D1CE4E5B9, 0x94D049BB133111EB)
MASK64 = (1 << 64) - 1
# Elements per numpy pass: bounds the temporaries at a few arrays of 32 MiB whatever n is.
CHUNK_ELEMENTS = 1 << 22
F32_MAX = float(np.finfo(np.float32).max)


def _check_dtype(dtype: str, where: str) -> None:
    if dtype not in DTYPES:
        raise ValueError(f"{where}: unknown dtype {dtype!r}; expected one of {', '.join(DTYPES)}")


def is_float(dtype: str) -> bool:
    """True for f32 and f64, False for the integer dtypes; ValueError for an unknown name."""
    _check_dtype(dtype, "is_float")
    return dtype in ("f32", "f64")


def stream_id(buffer_name: str) -> int:
    """The generator stream of a buffer: CRC-32 of its UTF-8 name (stable across runs/platforms)."""
    return zlib.crc32(buffer_name.encode("utf-8"))


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
        _check_dtype(dtype, where)
        if self.kind not in DISTRIBUTION_KINDS:
            raise ValueError(
                f"{where}: unknown distribution {self.kind!r}; expected 'uniform' (f32, f64) "
                "or 'integers' (i32, u32, i64, u64)"
            )
        expected = "uniform" if is_float(dtype) else "integers"
        if self.kind != expected:
            raise ValueError(
                f"{where}: a {dtype} buffer takes an {expected!r} distribution, got {self.kind!r}"
            )
        if expected == "uniform":
            self._validate_uniform(dtype, where)
        else:
            self._validate_integers(dtype, where)

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


def _params(dtype: str, dist: Distribution) -> tuple[float, float, int, int]:
    """(lo, hi, ilo, span) as the kernel takes them; the unused pair is zero."""
    if is_float(dtype):
        return float(dist.low), float(dist.high), 0, 0
    low, high = int(dist.low), int(dist.high)
    return 0.0, 0.0, low & MASK64, (high - low + 1) & MASK64


def _check_call(dtype: str, dist: Distribution, seed: int, stream: int, n: int, start: int) -> None:
    where = f"generator ({dtype} {dist.kind})"
    dist.validate(dtype, where)
    for name, value in (("seed", seed), ("stream", stream), ("n", n), ("start", start)):
        if not isinstance(value, int | np.integer) or not 0 <= int(value) <= MASK64:
            raise ValueError(f"{where}: {name} must be an integer in [0, 2^64), got {value!r}")
    if int(start) + int(n) > MASK64 + 1:
        raise ValueError(f"{where}: start + n must not exceed 2^64, got {start} + {n}")


def launch_args(
    dtype: str, dist: Distribution, seed: int, stream: int, n: int
) -> list[tuple[str, int | float]]:
    """kg_fill_random's arguments AFTER its `out` pointer, as (kind, value) for driver.KernelArgs.

    The caller prepends ("ptr", device address of out): n, seed, stream, dtype code, lo, hi,
    ilo, span with kinds u64, u64, u64, i32, f64, f64, u64, u64.
    """
    _check_call(dtype, dist, seed, stream, n, 0)
    lo, hi, ilo, span = _params(dtype, dist)
    return [
        ("u64", int(n)),
        ("u64", int(seed)),
        ("u64", int(stream)),
        ("i32", DTYPE_CODES[dtype]),
        ("f64", lo),
        ("f64", hi),
        ("u64", ilo),
        ("u64", span),
    ]


def _mix64_int(z: int) -> int:
    z ^= z >> 30
    z = (z * MIX_MULTIPLIERS[0]) & MASK64
    z ^= z >> 27
    z = (z * MIX_MULTIPLIERS[1]) & MASK64
    return z ^ (z >> 31)


def _mix64_inplace(z: np.ndarray) -> np.ndarray:
    z ^= z >> np.uint64(30)
    z *= np.uint64(MIX_MULTIPLIERS[0])
    z ^= z >> np.uint64(27)
    z *= np.uint64(MIX_MULTIPLIERS[1])
    z ^= z >> np.uint64(31)
    return z


def _bits(key: int, first: int, count: int) -> np.ndarray:
    """bits(first), ..., bits(first + count - 1) for one (seed, stream) key."""
    z = np.arange(count, dtype=np.uint64)
    z += np.uint64(first)
    z *= np.uint64(GOLDEN)
    z += np.uint64(key)
    return _mix64_inplace(z)


def _uniform_f64(bits: np.ndarray, lo: float, hi: float) -> np.ndarray:
    v = (bits >> np.uint64(11)).astype(np.float64)
    v *= 2.0**-53
    v *= hi - lo  # Python float subtraction: IEEE double, round to nearest, like __dsub_rn
    v += lo
    over = v >= hi
    v[over] = np.nextafter(v[over], -np.inf)
    return v


def _uniform_f32(bits: np.ndarray, lo: float, hi: float) -> np.ndarray:
    f = _uniform_f64(bits, lo, hi).astype(np.float32)
    over = f.astype(np.float64) >= hi
    f[over] = np.nextafter(f[over], np.float32(-np.inf))
    under = f.astype(np.float64) < lo
    f[under] = np.nextafter(f[under], np.float32(np.inf))
    return f


def _integers(bits: np.ndarray, dtype: str, ilo: int, span: int) -> np.ndarray:
    v = bits % np.uint64(span) if span else bits
    v += np.uint64(ilo)
    if dtype in ("i32", "u32"):
        return v.astype(np.uint32).view(DTYPES[dtype])
    return v.view(DTYPES[dtype])


def generate(
    dtype: str, dist: Distribution, seed: int, stream: int, n: int, start: int = 0
) -> np.ndarray:
    """Elements start .. start + n - 1 of (seed, stream), bit-identical to kg_fill_random."""
    _check_call(dtype, dist, seed, stream, n, start)
    lo, hi, ilo, span = _params(dtype, dist)
    key = _mix64_int(int(seed) ^ _mix64_int((int(stream) + GOLDEN) & MASK64))
    out = np.empty(int(n), dtype=DTYPES[dtype])
    with np.errstate(over="ignore"):  # uint64 arithmetic is meant to wrap
        for offset in range(0, int(n), CHUNK_ELEMENTS):
            count = min(CHUNK_ELEMENTS, int(n) - offset)
            bits = _bits(key, int(start) + offset, count)
            if dtype == "f64":
                out[offset : offset + count] = _uniform_f64(bits, lo, hi)
            elif dtype == "f32":
                out[offset : offset + count] = _uniform_f32(bits, lo, hi)
            else:
                out[offset : offset + count] = _integers(bits, dtype, ilo, span)
    return out
