"""kg_compare on the GPU (runner.measurement.gate.timed_size): an exact copy passes, a planted
mismatch and a planted NaN are found where they are, and its records are gate.compare's."""

from __future__ import annotations

import numpy as np
import pytest

from runner.gpu import driver, generator
from runner.measurement.gate import correctness as gate

pytestmark = pytest.mark.gpu

N = (1 << 20) + 3  # more elements than threads: every thread loops, the last sweep partial
LOOSE = gate.Tolerance(2e-15, 2e-15, False)


@pytest.fixture(scope="module")
def on_device():
    from runner.measurement.gate.timed_size import DeviceCompare
    from runner.measurement.timing.cuda import InternalKernels

    with driver.Context(0) as ctx:
        stream = driver.Stream()
        internal = InternalKernels(ctx)
        comparer = DeviceCompare(internal, stream)
        owned = []

        def compare(got: np.ndarray, want: np.ndarray, tol: gate.Tolerance) -> dict:
            buffers = []
            for array in (got, want):
                buffer = driver.Buffer(array.nbytes)
                buffer.upload(array)
                owned.append(buffer)
                buffers.append(buffer)
            dtype = next(k for k, v in generator.DTYPES.items() if np.dtype(v) == got.dtype)
            return comparer.compare(*buffers, dtype, got.size, tol)

        yield compare
        for buffer in owned:
            buffer.free()
        comparer.close()
        internal.close()
        stream.destroy()


def arrays(dtype) -> np.ndarray:
    rng = np.random.default_rng(11)
    if np.dtype(dtype).kind == "f":
        return rng.uniform(-1, 1, N).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, N, dtype=dtype, endpoint=True)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int32, np.int64, np.uint64])
def test_an_exact_copy_passes(on_device, dtype):
    want = arrays(dtype)
    found = on_device(want.copy(), want, LOOSE)
    assert found == gate.compare(want.copy(), want, LOOSE)
    assert found["mismatches"] == 0 and found["elements"] == N


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64, np.int32])
def test_a_planted_mismatch_is_found_where_it_is(on_device, dtype):
    want = arrays(dtype)
    got = want.copy()
    got[N - 5] += dtype(3)
    got[777_777] += dtype(1)
    found = on_device(got, want, LOOSE)
    assert found == gate.compare(got, want, LOOSE)
    assert found["mismatches"] == 2 and found["first_mismatch"]["index"] == 777_777


def test_a_planted_nan_and_ulp_noise_read_as_gate_compare(on_device):
    want = arrays(np.float64)
    got = want.copy()
    got[::3] = np.nextafter(got[::3], 2.0)  # within the tolerance, as FMA differences are
    got[123_457] = np.nan
    found = on_device(got, want, LOOSE)
    assert found == gate.compare(got, want, LOOSE)
    assert found["mismatches"] == 1 and found["nonfinite_errors"] == 1
    assert found["first_mismatch"] == {"index": 123_457, "got": "nan", "expected": want[123_457]}
