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


def sines(x):
    """out = sum over k = 1..16 of sin(k x) / k, in float64 (the fast-math control)."""
    x = x.astype(np.float64)
    return {"out": sum(np.sin(k * x) / k for k in range(1, 17))}


def matmul(a, b, n):
    """c = a @ b for row-major n x n matrices, in float64."""
    return {"c": (a.reshape(n, n) @ b.reshape(n, n)).reshape(-1)}


def block_sums(x, blocks):
    """out[b] = the sum of the b-th run of 256 elements, in float64."""
    return {"out": x.reshape(blocks, 256).sum(axis=1)}


def scale_y(y, a):
    """y = a * y in place, in float64."""
    return {"y": np.float64(a) * y}


def sqrt_f32(x):
    """out = sqrt(x) in float32: NaN for a negative x, as sqrtf gives."""
    with np.errstate(invalid="ignore"):
        return {"out": np.sqrt(x)}
