"""Reference of the cheats suite: out = a * x, in float64."""

import numpy as np


def scale(x, a):
    return {"out": np.float64(a) * x}


def axpy(x, y, a):
    """out = a * x + y, in float64 (the gate cheats of issue 30)."""
    return {"out": np.float64(a) * x.astype(np.float64) + y.astype(np.float64)}


def scale_abs(x, a):
    """out = a * |x|, in float64."""
    return {"out": np.float64(a) * np.abs(x)}


def div4(x):
    """out = x / 4 truncated toward zero, as C divides (floor division, then one up where a
    negative x leaves a remainder)."""
    return {"out": x // 4 + ((x % 4 != 0) & (x < 0))}


def scale_f32(x, a):
    """out = a * x in float32, as the kernels compute it (overflowing to an infinity)."""
    with np.errstate(over="ignore"):
        return {"out": np.float32(a) * x}


def sqrt_f32(x):
    """out = sqrt(x) in float32: NaN for a negative x, as sqrtf gives."""
    with np.errstate(invalid="ignore"):
        return {"out": np.sqrt(x)}
