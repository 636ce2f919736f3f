"""numpy references of the suite's cases, in float64 where that applies.

Each function takes the case's input buffers, scalar parameters and dimensions by name
(only those it names) and returns {output buffer name: expected array}. They are written
for clarity, not speed: they run only at the small correctness sizes.
"""

from __future__ import annotations

import numpy as np


def axpy(x, y, a):
    """y = a * x + y (computed in float64; the kernels may fuse the multiply-add)."""
    return {"y": np.float64(a) * x.astype(np.float64) + y.astype(np.float64)}


def scale_i64(x, k, c):
    """y = k * x + c in int64 with two's-complement wrap-around, as the kernels compute it."""
    with np.errstate(over="ignore"):
        return {"y": x * np.int64(k) + np.int64(c)}


def block_sums(x, blocks):
    """out[b] = sum of the b-th run of 256 elements (float64; the kernels sum as a tree)."""
    return {"out": x.astype(np.float64).reshape(blocks, 256).sum(axis=1)}


def matmul(a, b, n):
    """c = a @ b for row-major n x n matrices."""
    return {
        "c": (a.reshape(n, n).astype(np.float64) @ b.reshape(n, n).astype(np.float64)).reshape(-1)
    }


def causal_attention(q, k, v, seq, d):
    """o = softmax(q k^T / sqrt(d), keys after the query masked to -1e30) v, in float64."""
    q, k, v = (t.astype(np.float64).reshape(seq, d) for t in (q, k, v))
    scores = q @ k.T / np.sqrt(np.float64(d))
    scores[np.triu_indices(seq, 1)] = -1e30
    p = np.exp(scores - scores.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    return {"o": (p @ v).reshape(-1)}


HORNER_COEFFICIENTS = [(-1.0 if k % 2 else 1.0) / (k + 1) for k in range(129)]


def horner_128(x):
    """y = sum c_k x^(128-k), c_k = (-1)^k / (k+1), by Horner's rule in float64 (as the kernels)."""
    acc = np.full_like(x, HORNER_COEFFICIENTS[0], dtype=np.float64)
    for c in HORNER_COEFFICIENTS[1:]:
        acc = acc * x + c
    return {"y": acc}


def transpose(src, rows, cols):
    """out = src^T for a row-major rows x cols matrix (exact)."""
    return {"out": src.reshape(rows, cols).T.reshape(-1).copy()}
