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
    edges      : the correctness gate's second input set over a closed range [low, high]: by
                 the low 4 bits of bits(i), +0, -0, either end, either end's inner neighbour, or
                 (10 of 16) a random sign and a magnitude in a random binade of the range with
                 random mantissa bits (integers: a random bit width), clamped into the range;
                 a class the range does not allow falls through (kg_edges_* in kernels.cu).
"""

from __future__ import annotations

import dataclasses
import os
import zlib

import numpy as np

from runner.definition.spec import (
    DISTRIBUTION_KINDS,
    DTYPES,
    Distribution,
    f32_at_least,
    f32_at_most,
    full_range,
    is_float,
)

__all__ = [
    "DISTRIBUTION_KINDS",
    "DTYPES",
    "DTYPE_CODES",
    "KIND_CODES",
    "Distribution",
    "draw_input_seed",
    "full_range",
    "generate",
    "is_float",
    "launch_args",
    "reseeded",
    "stream_id",
]

# The `dtype` argument of kg_fill_random (KG_F32 ... KG_U64 in kernels.cu).
DTYPE_CODES = {"f32": 0, "f64": 1, "i32": 2, "u32": 3, "i64": 4, "u64": 5}
# The `kind` argument of kg_fill_random (KG_KIND_DRAW, KG_KIND_EDGES in kernels.cu).
KIND_CODES = {"uniform": 0, "integers": 0, "edges": 1}

GOLDEN = 0x9E3779B97F4A7C15
MIX_MULTIPLIERS = (0xBF58476D1CE4E5B9, 0x94D049BB133111EB)
MASK64 = (1 << 64) - 1
# Elements per numpy pass: bounds the temporaries at a few arrays of 32 MiB whatever n is.
CHUNK_ELEMENTS = 1 << 22


def stream_id(buffer_name: str) -> int:
    """The generator stream of a buffer: CRC-32 of its UTF-8 name (stable across runs/platforms)."""
    return zlib.crc32(buffer_name.encode("utf-8"))


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
    ilo, span, kind code with kinds u64, u64, u64, i32, f64, f64, u64, u64, i32.
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
        ("i32", KIND_CODES[dist.kind]),
    ]


def draw_input_seed() -> int:
    """A run's input seed: 53 random bits (an integer SQLite and JavaScript keep exactly), drawn
    per run so no timed launch sees inputs an earlier run or the suite's files determine (issue
    50 class 2)."""
    return int.from_bytes(os.urandom(8), "little") >> 11


def reseeded(case, input_seed: int | None):
    """`case` (a runner.definition.spec.CaseSpec) with each buffer's seed mixed with the run's
    `input_seed`, so the gate, the timed-size check and every hot input set draw this run's
    inputs; the same input_seed replays them. None: the suite's seeds as declared."""
    if input_seed is None:
        return case
    buffers = tuple(
        dataclasses.replace(b, seed=_mix64_int(b.seed ^ _mix64_int(int(input_seed) & MASK64)))
        for b in case.buffers
    )
    return dataclasses.replace(case, buffers=buffers)


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


def _spread(bits, more, mlo, mhi, float_type, uint_type, mantissa_bits: int) -> np.ndarray:
    """kg_spread_f64/f32: a random binade between those of mlo and mhi, random mantissa, clamped."""
    shift = np.uint64(mantissa_bits)
    ehi = int(np.array(mhi, float_type).view(uint_type)) >> mantissa_bits
    elo = max(int(np.array(mlo, float_type).view(uint_type)) >> mantissa_bits, 1)
    if ehi < elo:
        return np.full(bits.shape, mhi, float_type)
    e = (bits >> np.uint64(5)) % np.uint64(ehi - elo + 1) + np.uint64(elo)
    pattern = (e << shift) | (more & np.uint64((1 << mantissa_bits) - 1))
    v = pattern.astype(uint_type).view(float_type)
    return np.where(v > mhi, mhi, np.where(v < mlo, mlo, v)).astype(float_type)


def _edges_float(bits: np.ndarray, dtype: str, lo: float, hi: float) -> np.ndarray:
    if dtype == "f32":
        ft, ut, mbits = np.float32, np.uint32, 23
        lo_t, hi_t = f32_at_least(lo), f32_at_most(hi)
    else:
        ft, ut, mbits = np.float64, np.uint64, 52
        lo_t, hi_t = np.float64(lo), np.float64(hi)
    zero = ft(0.0)
    neg_ok, pos_ok = bool(lo_t < zero), bool(hi_t > zero)
    if not neg_ok and not pos_ok:
        out = np.full(bits.shape, lo_t, ft)
    else:
        more = _mix64_inplace(bits.copy())
        out = np.empty(bits.shape, ft)
        neg = np.where((bits >> np.uint64(4)) & np.uint64(1), neg_ok, not pos_ok)
        if pos_ok:
            mlo = lo_t if lo_t > zero else zero
            out[~neg] = _spread(bits[~neg], more[~neg], mlo, hi_t, ft, ut, mbits)
        if neg_ok:
            mlo = -hi_t if hi_t < zero else zero
            out[neg] = -_spread(bits[neg], more[neg], mlo, -lo_t, ft, ut, mbits)
    cls = bits & np.uint64(15)
    if lo_t <= zero and hi_t >= zero:
        out[cls == 0] = ft(0.0)
        out[cls == 1] = ft(-0.0)
    up, down = np.nextafter(lo_t, ft(np.inf)), np.nextafter(hi_t, ft(-np.inf))
    out[cls == 2] = lo_t
    out[cls == 3] = hi_t
    out[cls == 4] = hi_t if up > hi_t else up
    out[cls == 5] = lo_t if down < lo_t else down
    return out


def _edges_integers(bits: np.ndarray, dtype: str, ilo: int, span: int) -> np.ndarray:
    signed = dtype in ("i32", "i64")
    width = 32 if dtype in ("i32", "u32") else 64
    ihi = (ilo + span - 1) & MASK64
    m = _mix64_inplace(bits.copy()) >> np.uint64(64 - width)
    m >>= (bits >> np.uint64(4)) % np.uint64(width)
    if signed:
        m >>= np.uint64(1)
        v = np.where((bits >> np.uint64(10)) & np.uint64(1), np.uint64(0) - m, m)
    else:
        v = m
    cls = bits & np.uint64(15)
    top = MASK64 if signed or width == 64 else 0xFFFFFFFF
    inner_lo = ilo if ilo == ihi else (ilo + 1) & MASK64
    inner_hi = ihi if ilo == ihi else (ihi - 1) & MASK64
    for code, value in ((0, 0), (1, top), (2, ilo), (3, ihi), (4, inner_lo), (5, inner_hi)):
        v[cls == code] = np.uint64(value)
    if signed:
        s, slo, shi = v.view(np.int64), _as_i64(ilo), _as_i64(ihi)
        inside = (s >= slo) & (s <= shi)
    else:
        inside = (v >= np.uint64(ilo)) & (v <= np.uint64(ihi))
    fallback = (bits % np.uint64(span) if span else bits) + np.uint64(ilo)
    v = np.where(inside, v, fallback)
    if width == 32:
        return v.astype(np.uint32).view(DTYPES[dtype])
    return v.view(DTYPES[dtype])


def _as_i64(value: int) -> np.int64:
    return np.int64(value - (1 << 64) if value >= 1 << 63 else value)


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
            if dist.kind == "edges":
                out[offset : offset + count] = (
                    _edges_float(bits, dtype, lo, hi)
                    if is_float(dtype)
                    else _edges_integers(bits, dtype, ilo, span)
                )
            elif dtype == "f64":
                out[offset : offset + count] = _uniform_f64(bits, lo, hi)
            elif dtype == "f32":
                out[offset : offset + count] = _uniform_f32(bits, lo, hi)
            else:
                out[offset : offset + count] = _integers(bits, dtype, ilo, span)
    return out
