"""Outputs at the timed size, kept where they were computed and compared there.

The timed-size cross-check, the verification after timed launches and the hot audits compare
whole outputs of a candidate with the baseline's at the timed size. Each baseline output is
snapshotted into a device buffer of its own and each comparison runs on the device
(runner.measurement.device_compare), with only a few words read back. Where the device has no
room for a snapshot, it is read back to the host and compared there by gate.compare, as before.
"""

from __future__ import annotations

import numpy as np

from runner.definition.spec import CaseSpec, Geometry
from runner.gpu import driver, generator
from runner.measurement import gate
from runner.measurement.device_compare import DeviceCompare


class TimedOutputs:
    """Snapshots of the written buffers of `case` at `geometry`, and comparisons of them under
    the tolerance between implementations, on `stream` of the context of `internal` (the
    runner's kernels, timing.cuda.InternalKernels). Without `internal`, everything is read back
    and compared on the host."""

    def __init__(
        self,
        case: CaseSpec,
        geometry: Geometry | None = None,
        internal=None,
        stream: driver.Stream | None = None,
    ):
        self.case, self.geometry, self.stream = case, geometry, stream
        self.tol = gate.Tolerance.of(case).between_implementations()
        self.written = [b.name for b in case.buffers if b.written]
        self.device = None if internal is None else DeviceCompare(internal, stream)
        self._owned: list[driver.Buffer] = []
        self.on_host = 0  # snapshots read back to the host (no comparer, or no room)

    def snapshot(self, buffers: gate.DeviceBuffers) -> dict:
        """{written buffer: a copy of what it holds now}: a device buffer, or an array without
        a device comparer or where the device is out of memory."""
        copies = {}
        for name in self.written:
            copy = self._device_copy(buffers.buffers[name]) if self.device is not None else None
            if copy is None:
                if self.stream is not None:
                    self.stream.synchronize()
                copies[name] = buffers.download(name)
                self.on_host += 1
            else:
                copies[name] = copy
        if self.stream is not None:
            self.stream.synchronize()
        return copies

    def _device_copy(self, source: driver.Buffer) -> driver.Buffer | None:
        try:
            copy = driver.Buffer(source.nbytes)
        except driver.CudaError as exc:
            if exc.name != "CUDA_ERROR_OUT_OF_MEMORY":
                raise
            return None
        self._owned.append(copy)
        copy.copy_from(source, self.stream)
        return copy

    def readable(self, name: str, buffer: driver.Buffer):
        """What an audit compares of a copy `buffer` of `name`: the buffer itself where the
        device compares, else its contents read back."""
        if self.device is not None:
            return buffer
        return buffer.download(
            generator.DTYPES[self.case.buffer(name).dtype], self.geometry.lengths[name]
        )

    def reader(self, copies: dict):
        """read(name, start, count): elements [start, start + count) of a snapshot."""

        def read(name: str, start: int, count: int) -> np.ndarray:
            copy = copies[name]
            if not isinstance(copy, driver.Buffer):
                return copy[start : start + count]
            dtype = generator.DTYPES[self.case.buffer(name).dtype]
            size = np.dtype(dtype).itemsize
            self.stream.synchronize()
            return copy.view(start * size, count * size).download(dtype, count)

        return read

    def compare(self, name: str, got, want) -> dict:
        """gate.compare's record of buffer `name`: `got` and `want` are device buffers (compared
        on the device) or arrays (a device buffer among them is read back)."""
        spec = self.case.buffer(name)
        count = None if self.geometry is None else self.geometry.lengths[name]
        on_device = isinstance(got, driver.Buffer) and isinstance(want, driver.Buffer)
        if on_device and self.device is not None:
            return self.device.compare(got, want, spec.dtype, count, self.tol)
        if self.stream is not None:
            self.stream.synchronize()
        got, want = (
            v.download(generator.DTYPES[spec.dtype], count) if isinstance(v, driver.Buffer) else v
            for v in (got, want)
        )
        return gate.compare(np.asarray(got), np.asarray(want), self.tol)

    def differ(self, got: dict, expected: dict) -> str | None:
        """Where one launch's outputs differ from another's on the same inputs, naming buffer,
        element, expected and got; None where they agree."""
        for name, want in expected.items():
            found = self.compare(name, got[name], want)
            if found["mismatches"]:
                first = found["first_mismatch"]
                return (
                    f"{name} differs in {found['mismatches']} of {found['elements']} elements, "
                    f"first at element {first['index']}: expected {first['expected']}, "
                    f"got {first['got']}"
                )
        return None

    def close(self) -> None:
        for copy in self._owned:
            copy.free()
        self._owned.clear()
        if self.device is not None:
            self.device.close()
