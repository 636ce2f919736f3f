"""gate.compare on the device: two outputs compared where they are, without copying them out.

kg_compare (runner/gpu/device/kernels.cu, the twin of gate.compare element by element) counts
the mismatches and non-finite errors, the largest finite absolute and relative errors and the
first mismatch's index into a few words; only those words, and the two elements of the first
mismatch, are read back. The record is gate.compare's, so the gate's reports read the same
whichever side compared. The timed-size cross-check, the verification of timed launches and the
hot audits compare whole outputs at the timed size; copied out and compared by numpy, that took
seconds per comparison (benchmarks/perf/RESULTS.md).
"""

from __future__ import annotations

import numpy as np

from runner.gpu import driver, generator
from runner.measurement import gate
from runner.measurement.timing import own_launches

# the accumulator's words (KG_CMP_* in kernels.cu)
MISMATCHES, NONFINITE, MAX_ABS, MAX_REL, FIRST, FINITE_ABS, FINITE_REL, BITS_DIFFER = range(8)
WORDS = 8
BLOCK = 256
NONE = (1 << 64) - 1  # KG_CMP_FIRST before any mismatch


class DeviceCompare:
    """Compares device buffers on `stream` with the runner's kg_compare (from `internal`, the
    timing.cuda.InternalKernels of the context); registered as one of the runner's own
    launches, so a CUPTI window never counts it as measured work."""

    def __init__(self, internal, stream: driver.Stream):
        self.stream = stream
        self.kernel = internal.module.kernel(
            "kg_compare", (internal.sm_count * 8, 1, 1), (BLOCK, 1, 1)
        )
        own_launches.register([self.kernel.function])
        self.acc = driver.Buffer(8 * WORDS)

    def compare(
        self, got: driver.Buffer, want: driver.Buffer, dtype: str, count: int, tol: gate.Tolerance
    ) -> dict:
        """gate.compare of the first `count` elements of `got` with `want` (both of `dtype`, a
        manifest dtype such as "f64"), queued on the stream and waited for."""
        for buffer in (got, want):
            if buffer.nbytes < count * np.dtype(generator.DTYPES[dtype]).itemsize:
                raise ValueError(
                    f"{count} {dtype} elements do not fit a {buffer.nbytes}-byte buffer"
                )
        self.acc.fill_bytes(0, self.stream)
        self.acc.view(8 * FIRST, 8).fill_bytes(0xFF, self.stream)
        args = driver.KernelArgs(
            [
                ("ptr", got.ptr),
                ("ptr", want.ptr),
                ("u64", count),
                ("i32", generator.DTYPE_CODES[dtype]),
                ("i32", int(tol.exact)),
                ("f64", tol.atol),
                ("f64", tol.rtol),
                ("ptr", self.acc.ptr),
            ]
        )
        if count:
            with own_launches.launching():
                self.kernel.launch(self.stream, args)
        self.stream.synchronize()
        words = self.acc.download(np.uint64, WORDS)
        return comparison_of(
            words, count, lambda i: (element(got, dtype, i), element(want, dtype, i))
        )

    def close(self) -> None:
        own_launches.forget([self.kernel.function])
        self.acc.free()


def comparison_of(words: np.ndarray, count: int, elements_at) -> dict:
    """gate.compare's record from kg_compare's accumulator `words` over `count` elements;
    `elements_at(index)` -> (got, expected) there, read only for the first mismatch."""
    if int(words[BITS_DIFFER]) == 0:  # bit-identical: gate.compare's quick answer
        return gate.comparison(count, 0, 0.0, 0.0, 0)
    first = None
    if int(words[MISMATCHES]):
        index = int(words[FIRST])
        first = (index, *elements_at(index))
    as_float = words.view(np.float64)
    return gate.comparison(
        count,
        int(words[MISMATCHES]),
        float(as_float[MAX_ABS]) if int(words[FINITE_ABS]) else None,
        float(as_float[MAX_REL]) if int(words[FINITE_REL]) else None,
        int(words[NONFINITE]),
        first,
    )


def element(buffer: driver.Buffer, dtype: str, index: int):
    """Element `index` of a device buffer of `dtype`, as a numpy scalar."""
    size = np.dtype(generator.DTYPES[dtype]).itemsize
    return buffer.view(index * size, size).download(generator.DTYPES[dtype], 1)[0]
