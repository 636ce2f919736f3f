"""Reference of the GPU test suite."""

import numpy as np


def scale(x, a):
    return {"out": np.float64(a) * x}
