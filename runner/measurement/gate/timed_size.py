"""The checks at the timed size: outputs compared where they were computed, and the reference
sampled on windows.

The timed-size cross-check, the verification after timed launches and the hot audits compare
whole outputs of a candidate with the baseline's at the timed size. Each baseline output is
snapshotted into a device buffer of its own and compared on the device by kg_compare
(runner/gpu/device/kernels.cu, the twin of correctness.compare element by element: DeviceCompare),
with only a few words read back; where the device has no room for a snapshot, it is read back
and compared on the host (TimedOutputs). Copied out and compared by numpy, a comparison took
seconds (benchmarks/perf/RESULTS.md).

The numpy reference over a whole timed-size output takes seconds to minutes, so the gate runs it
at check_dims; here it is also run at the timed size on a few windows of the baseline's outputs
(sample): a dim the windows cut is one along which every buffer's length grows in
proportion (`n`, `blocks`); a window of `w` units of it at unit `s` is the elements
[s*u, (s+w)*u) of each buffer of u elements a unit, whose inputs the counter-based generator
gives directly (its `start`). At check_dims the reference run on two windows must give, bit
for bit, the slices of its run on the whole; where it does not (a matmul, causal attention),
the timed size is not sampled, and the check says so.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass

import numpy as np

from runner.definition.spec import CaseSpec, Geometry
from runner.errors import CudaError
from runner.gpu import driver, generator
from runner.measurement.gate import correctness as gate
from runner.measurement.gate import elements
from runner.measurement.timing import cupti

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
        cupti.register([self.kernel.function])
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
            with cupti.launching():
                self.kernel.launch(self.stream, args)
        self.stream.synchronize()
        words = self.acc.download(np.uint64, WORDS)
        return comparison_of(
            words, count, lambda i: (element(got, dtype, i), element(want, dtype, i))
        )

    def close(self) -> None:
        cupti.forget([self.kernel.function])
        self.acc.free()


def comparison_of(words: np.ndarray, count: int, elements_at) -> dict:
    """gate.compare's record from kg_compare's accumulator `words` over `count` elements;
    `elements_at(index)` -> (got, expected) there, read only for the first mismatch."""
    if int(words[BITS_DIFFER]) == 0:  # bit-identical: gate.compare's quick answer
        return elements.comparison(count, 0, 0.0, 0.0, 0)
    first = None
    if int(words[MISMATCHES]):
        index = int(words[FIRST])
        first = (index, *elements_at(index))
    as_float = words.view(np.float64)
    return elements.comparison(
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


class TimedOutputs:
    """Snapshots of the written buffers of `case` at `geometry`, and comparisons of them under
    the tolerance between implementations, on `stream` of the context of `internal` (the
    runner's kernels, timing.cuda.InternalKernels). Without `internal`, everything is read back
    and compared on the host.

    Snapshots are sealed: kept on the host, and uploaded into a scratch buffer only for one
    comparison, after which the scratch holds output_dependence.POISON_BYTE again. A device copy of the
    baseline's outputs alive through the timed launches was an answer any kernel could reach by
    pointer arithmetic and copy instead of computing (issue 50 class 1)."""

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
        self._scratch: dict[tuple[str, int], driver.Buffer] = {}
        self.on_host = 0  # snapshots read back to the host (all of them: sealed)

    def snapshot(self, buffers: gate.DeviceBuffers) -> dict:
        """{written buffer: a host copy of what it holds now} (sealed: see the class doc)."""
        if self.stream is not None:
            self.stream.synchronize()
        copies = {name: buffers.download(name) for name in self.written}
        self.on_host += len(copies)
        return copies

    def _on_device(self, name: str, value, slot: int):
        """`value` as a device buffer for one comparison: a host array goes into scratch `slot`
        of `name` (None where the device has no room: compared on the host)."""
        if isinstance(value, driver.Buffer):
            return value
        array = np.ascontiguousarray(value)
        scratch = self._scratch.get((name, slot))
        if scratch is None or scratch.nbytes < array.nbytes:
            try:
                scratch = driver.Buffer(array.nbytes)
            except CudaError as exc:
                if exc.name != "CUDA_ERROR_OUT_OF_MEMORY":
                    raise
                return None
            if (name, slot) in self._scratch:
                self._scratch[(name, slot)].free()
            self._scratch[(name, slot)] = scratch
        self.stream.synchronize()  # the last seal of this scratch is done before the upload
        scratch.upload(array)
        return scratch

    def _seal(self) -> None:
        from runner.measurement.gate.output_dependence import POISON_BYTE

        for scratch in self._scratch.values():
            scratch.fill_bytes(POISON_BYTE, self.stream)
        if self._scratch:
            self.stream.synchronize()

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
        if self.device is not None and isinstance(got, driver.Buffer | np.ndarray):
            pair = [self._on_device(name, v, slot) for slot, v in enumerate((got, want))]
            if None not in pair:
                try:
                    return self.device.compare(*pair, spec.dtype, count, self.tol)
                finally:
                    self._seal()
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
        for copy in self._scratch.values():
            copy.free()
        self._scratch.clear()
        if self.device is not None:
            self.device.close()


WINDOWS = 4  # windows at the timed size: three at random, the last one at the end
WINDOW_ELEMENTS = 1 << 14  # at most, of each buffer, per window


@dataclass(frozen=True)
class Slicing:
    """Windows along `dim`: each buffer holds `unit[buffer]` elements per unit of it."""

    dim: str
    unit: dict[str, int]


def _units(case: CaseSpec, dim: str) -> dict[str, int] | None:
    """{buffer: elements per unit of `dim`} where every length is that many times `dim`, the
    same with the other dims at check_dims and at the timed dims; else None."""
    found = []
    for dims in (case.check_dims, case.dims):
        try:
            at = {k: case.geometry({**dims, dim: k}).lengths for k in (1, 2, 3)}
        except Exception:  # a dim that cannot take these values (ranges, launch limits)
            return None
        units = {}
        for b in case.buffers:
            one = at[1][b.name]
            if one == 0 or at[2][b.name] != 2 * one or at[3][b.name] != 3 * one:
                return None
            units[b.name] = one
        found.append(units)
    return found[0] if found[0] == found[1] else None


def timed_width(case: CaseSpec, slicing: Slicing) -> int:
    """Units of slicing.dim a window at the timed size takes."""
    size = case.dims[slicing.dim]
    return max(1, min(size, WINDOW_ELEMENTS // max(slicing.unit.values())))


def window_inputs(case: CaseSpec, slicing: Slicing, start: int, width: int) -> dict:
    """The declared inputs of units [start, start + width) of slicing.dim (generator.generate)."""
    return {
        b.name: generator.generate(
            b.dtype,
            b.inputs("declared"),
            b.seed,
            generator.stream_id(b.name),
            slicing.unit[b.name] * width,
            start=slicing.unit[b.name] * start,
        )
        for b in case.buffers
        if b.dist is not None
    }


def window_outputs(case, reference, slicing: Slicing, dims: dict, start: int, width: int):
    """The reference's outputs on the window, {written buffer: array}."""
    geometry = case.geometry({**dims, slicing.dim: width})
    inputs = window_inputs(case, slicing, start, width)
    return gate.expected_outputs(case, geometry, reference, inputs)


def slicing_of(case: CaseSpec, reference) -> Slicing | str:
    """How the reference can be sampled at the timed size, or why it cannot."""
    dims = [d for d in case.dims if d in case.check_dims and _units(case, d) is not None]
    if not dims:
        return "no dim along which every buffer's length grows in proportion"
    for dim in dims:
        slicing = Slicing(dim, _units(case, dim))
        size = case.check_dims[dim]
        width = max(1, size // 4)
        whole = window_outputs(case, reference, slicing, case.check_dims, 0, size)
        if all(
            _same_as_slice(case, reference, slicing, whole, start, width)
            for start in {min(1, size - width), size - width}
        ):
            try:  # a window's launch geometry at the timed size (its reference takes dims)
                case.geometry({**case.dims, dim: timed_width(case, slicing)})
            except Exception as exc:
                return f"a window of {dim} at the timed size is no geometry of the case ({exc})"
            return slicing
    return (
        f"the reference on windows of {' or '.join(dims)} is not its run on the whole at "
        "check_dims (it does not compute a window on its own)"
    )


def _same_as_slice(case, reference, slicing: Slicing, whole: dict, start: int, width: int) -> bool:
    part = window_outputs(case, reference, slicing, case.check_dims, start, width)
    for name, array in part.items():
        u = slicing.unit[name]
        expected = whole[name][start * u : (start + width) * u]
        if not np.array_equal(np.asarray(array).view(np.uint8), expected.view(np.uint8)):
            return False
    return True


def sample(case: CaseSpec, reference, slicing: Slicing, read, seed: int | None = None) -> dict:
    """{written buffer: gate.compare's record} of the baseline's outputs at the timed size
    against the reference on WINDOWS windows; `read(buffer, start, count)` returns elements
    [start, start + count) of the baseline's output. A first mismatch's index is the
    buffer's. Records say how they were sampled."""
    size, width = case.dims[slicing.dim], timed_width(case, slicing)
    seed = int.from_bytes(os.urandom(8), "little") if seed is None else seed
    rng = random.Random(seed)
    starts = sorted({rng.randrange(size - width + 1) for _ in range(WINDOWS - 1)} | {size - width})
    got: dict[str, list] = {}
    expected: dict[str, list] = {}
    where: dict[str, list] = {}
    for start in starts:
        outputs = window_outputs(case, reference, slicing, case.dims, start, width)
        for name, array in outputs.items():
            u = slicing.unit[name]
            got.setdefault(name, []).append(read(name, start * u, width * u))
            expected.setdefault(name, []).append(np.asarray(array))
            where.setdefault(name, []).append(np.arange(start * u, (start + width) * u))
    records = {}
    tol = gate.Tolerance.of(case)
    for name in got:
        found = gate.compare(np.concatenate(got[name]), np.concatenate(expected[name]), tol)
        if found["mismatches"]:
            first = found["first_mismatch"]
            first["index"] = int(np.concatenate(where[name])[first["index"]])
        found["sampled"] = (
            f"{len(starts)} windows of {width} {slicing.dim} (units {starts}, the last at the "
            f"end; drawn from seed {seed:#x}) of {size}"
        )
        records[name] = found
    return records
