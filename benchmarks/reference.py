"""numpy references of the suite's cases, in float64 where that applies.

Each function takes the case's input buffers, scalar parameters and dimensions by name
(only those it names) and returns {output buffer name: expected array}.
"""

from __future__ import annotations

import numpy as np


def axpy(x, y, a):
    """y = a * x + y (computed in float64; the kernels may fuse the multiply-add)."""
    return {"y": np.float64(a) * x.astype(np.float64) + y.astype(np.float64)}
