"""Reference of the cheats suite: out = a * x, in float64."""

import numpy as np


def scale(x, a):
    return {"out": np.float64(a) * x}
