"""The device generator against its numpy twin, on the GPU, bit for bit for every dtype."""

from __future__ import annotations

import numpy as np
import pytest

from runner.gpu import driver, generator
from runner.gpu.generator import Distribution
from runner.measurement.timing.cuda import InternalKernels

pytestmark = pytest.mark.gpu

CASES = [
    ("f64", Distribution("uniform", -1.0, 1.0)),
    ("f32", Distribution("uniform", 0.1, 7.5)),
    ("i32", Distribution("integers", -1000, 1000)),
    ("u32", Distribution("integers", 0, 2**32 - 1)),
    ("i64", Distribution("integers", -(2**62), 2**62)),
    ("u64", Distribution("integers", 0, 2**64 - 1)),
    # the correctness gate's second input set (edges), full and narrow ranges
    ("f64-edges", Distribution("edges", *generator.full_range("f64"))),
    ("f64-edges", Distribution("edges", 0.0, 1.0)),
    ("f32-edges", Distribution("edges", *generator.full_range("f32"))),
    ("f32-edges", Distribution("edges", -0.1, 3.3e-39)),
    ("i32-edges", Distribution("edges", *generator.full_range("i32"))),
    ("u32-edges", Distribution("edges", 7, 12)),
    ("i64-edges", Distribution("edges", *generator.full_range("i64"))),
    ("u64-edges", Distribution("edges", *generator.full_range("u64"))),
]


@pytest.fixture(scope="module")
def device():
    ctx = driver.Context(0)
    internal = InternalKernels(ctx)
    stream = driver.Stream()
    yield internal, stream
    stream.destroy()
    internal.close()
    ctx.close()


@pytest.mark.parametrize(
    ("dtype", "dist"), CASES, ids=[f"{c[0]}[{c[1].low},{c[1].high}]" for c in CASES]
)
def test_device_fill_equals_numpy_twin(device, dtype, dist):
    internal, stream = device
    dtype = dtype.removesuffix("-edges")
    n = (1 << 20) + 3  # several grid-stride sweeps and a ragged tail
    np_dtype = generator.DTYPES[dtype]
    buffer = driver.Buffer(n * np.dtype(np_dtype).itemsize)
    try:
        tail = generator.launch_args(dtype, dist, 42, generator.stream_id("x"), n)
        internal.fill_random(stream, buffer, n, tail)
        stream.synchronize()
        got = buffer.download(np_dtype, n)
    finally:
        buffer.free()
    want = generator.generate(dtype, dist, 42, generator.stream_id("x"), n)
    assert got.tobytes() == want.tobytes()


def test_blocking_kernel_holds_the_stream_until_released(device):
    internal, stream = device
    start, end = driver.Event(), driver.Event()
    internal.block(stream)
    start.record(stream)
    end.record(stream)
    import time

    time.sleep(0.05)  # the stream must not have moved while the host waited
    assert driver.cu().cuEventQuery(end.handle)[0] != 0
    internal.release()
    end.synchronize()
    internal.check_blocker()
    assert end.elapsed_s(start) < 0.001  # host latency stayed outside the events
