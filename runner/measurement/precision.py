"""Floating-point precisions and rounding to them: the ladder the null models of rounding use.

A kernel can pass off arithmetic in a lower precision (f16 or bf16 inside an f32 case, f32
inside an f64 one) as the real thing when its tolerance is loose enough. The null models of
both front ends (runner.measurement.gate.correctness for suite cases, gate.null_models.null_models for
Python cases) try every precision below each output's: the reference on inputs rounded to it,
and the arithmetic rounded to it. Rounding is round-to-nearest-even on the significand with
the target's exponent range (gradual underflow, overflow to infinity), done in float64
arithmetic, so numpy needs no bfloat16 type.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from runner.definition.spec import FLOAT_NAMES

__all__ = [
    "LOWER_PRECISIONS",
    "PRECISIONS",
    "Precision",
    "lower_precisions",
    "round_to",
    "short_name",
]


@dataclass(frozen=True)
class Precision:
    name: str
    significand_bits: int  # with the implicit leading bit
    min_exponent: int  # of the smallest normal value, 2^min_exponent
    max_exponent: int  # of the largest finite value's binade


PRECISIONS = {
    "f64": Precision("f64", 53, -1022, 1023),
    "f32": Precision("f32", 24, -126, 127),
    "f16": Precision("f16", 11, -14, 15),
    "bf16": Precision("bf16", 8, -126, 127),
}

# What a shortcut could round each precision to: every precision with fewer significand bits.
# Not f16 below bf16: f16 is more precise inside its range (a bf16 reference run in f16 would be
# a better answer, not a shortcut), and its loss of range shows as infinities in the comparison.
LOWER_PRECISIONS = {
    "f64": ("f32", "f16", "bf16"),
    "f32": ("f16", "bf16"),
    "f16": ("bf16",),
    "bf16": (),
}


def short_name(dtype_name: str) -> str | None:
    """'f64', 'f32', 'f16' or 'bf16' for a numpy, torch or suite dtype name; None otherwise."""
    name = FLOAT_NAMES.get(dtype_name, dtype_name)
    return name if name in PRECISIONS else None


def lower_precisions(dtype_name: str) -> tuple[str, ...]:
    """The precisions below `dtype_name` (empty for integers and unknown names)."""
    name = short_name(dtype_name)
    return LOWER_PRECISIONS[name] if name else ()


def round_to(x: np.ndarray, precision: str) -> np.ndarray:
    """`x` (a float array) with every value rounded to nearest even in `precision`, in x's dtype.

    NaN and infinities stay; a value past the precision's largest finite one becomes infinite.
    """
    p = PRECISIONS[precision]
    x = np.asarray(x)
    wide = x.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        _, exponent = np.frexp(wide)  # wide = m * 2^exponent, 0.5 <= |m| < 1
        # the quantum of the value's binade; binades below the normal range share the lowest
        quantum_exp = np.maximum(exponent - 1, p.min_exponent) - (p.significand_bits - 1)
        quantum_exp = np.where(np.isfinite(wide), quantum_exp, 0)
        scaled = np.ldexp(wide, -quantum_exp)  # exact: a power-of-two scaling in range
        rounded = np.ldexp(np.rint(scaled), quantum_exp)  # rint rounds half to even
        largest = np.ldexp(2.0 - 2.0 ** (1 - p.significand_bits), p.max_exponent)
        rounded = np.where(np.abs(rounded) > largest, np.copysign(np.inf, rounded), rounded)
        rounded = np.where(np.isfinite(wide), rounded, wide)
        rounded = np.where(wide == 0, wide, rounded)  # keeps the sign of zero
    return rounded.astype(x.dtype)
