"""A CPU stand-in for the device memory the correctness gate uses, so the whole gate
(runner.measurement.gate.correctness.check_impl: guard bands, poisons, input sets, rounding models) runs on
the CPU with "kernels" written in numpy.

FakeBuffer replaces runner.gpu.driver.Buffer (patch it into gate.driver), FakeInternal the
runner's generator kernel (it runs the numpy twin on the decoded launch arguments). A kernel is
a function of a Memory, which hands out each buffer as a writable numpy view, or a view that
reaches `extra` elements past the end (into the guard band) for an out-of-bounds read.
"""

from __future__ import annotations

import numpy as np

from runner.gpu import generator
from runner.measurement.gate import correctness as gate

CODES = {code: name for name, code in generator.DTYPE_CODES.items()}


class FakeStream:
    def synchronize(self) -> None:
        pass


class FakeBuffer:
    def __init__(self, nbytes: int, base: np.ndarray | None = None, offset: int = 0):
        self.nbytes = int(nbytes)
        self.base = np.zeros(max(self.nbytes, 1), np.uint8) if base is None else base
        self.offset, self.ptr = offset, offset

    @property
    def mem(self) -> np.ndarray:
        return self.base[self.offset : self.offset + self.nbytes]

    def fill_bytes(self, byte: int, stream=None) -> None:
        self.mem[:] = byte

    def fill_words(self, word: int, stream) -> None:
        assert self.nbytes % 4 == 0 and self.offset % 4 == 0
        self.mem.view(np.uint32)[:] = word

    def download(self, dtype, count: int | None = None) -> np.ndarray:
        dtype = np.dtype(dtype)
        count = self.nbytes // dtype.itemsize if count is None else count
        return np.frombuffer(self.mem[: count * dtype.itemsize].tobytes(), dtype=dtype)

    def view(self, offset: int, nbytes: int) -> FakeBuffer:
        return FakeBuffer(nbytes, self.base, self.offset + offset)

    def free(self) -> None:
        pass


class FakeInternal:
    """kg_fill_random on the CPU: the launch arguments decoded back into a Distribution."""

    def fill_random(self, stream, buffer: FakeBuffer, n: int, tail: list) -> None:
        values = [v for _, v in tail]
        _, seed, stream_id, code, lo, hi, ilo, span, kind = values
        dtype = CODES[code]
        if generator.is_float(dtype):
            dist = generator.Distribution("edges" if kind else "uniform", lo, hi)
        else:
            low = ilo - (1 << 64) if dtype in ("i32", "i64") and ilo >= 1 << 63 else ilo
            high = low + (span or 1 << 64) - 1
            dist = generator.Distribution("edges" if kind else "integers", low, high)
        data = generator.generate(dtype, dist, seed, stream_id, n)
        buffer.mem[: data.nbytes] = data.view(np.uint8)


class Memory:
    """What a fake kernel sees: each buffer of the case as a writable numpy array."""

    def __init__(self, buffers: gate.DeviceBuffers):
        self.buffers = buffers

    def __getitem__(self, name: str) -> np.ndarray:
        return self.reach(name, 0)

    def reach(self, name: str, extra: int) -> np.ndarray:
        """Buffer `name` and `extra` elements past its end (the guard band)."""
        spec = self.buffers.case.buffer(name)
        dtype = np.dtype(generator.DTYPES[spec.dtype])
        n = self.buffers.geometry.lengths[name] + extra
        view = self.buffers.buffers[name]
        return view.base[view.offset : view.offset + n * dtype.itemsize].view(dtype)

    def scalar(self, name: str):
        return self.buffers.geometry.scalars[name]


def run_gate(case, reference, kernel, guard_bytes: int = 64, monkeypatch=None):
    """check_impl of `kernel(memory)` on every input set of `case` at its check size."""
    if monkeypatch is not None:
        monkeypatch.setattr(gate.driver, "Buffer", FakeBuffer)
    geometry = case.geometry(case.check_dims)
    tol = gate.Tolerance.of(case)
    sets = gate.input_sets(case, geometry, reference, tol)
    buffers = gate.DeviceBuffers(case, geometry, FakeInternal(), FakeStream(), guard_bytes)
    memory = Memory(buffers)
    record, _ = gate.check_impl(case, buffers, lambda: kernel(memory), sets, tol)
    return record
