"""The reference at the timed size, on windows: sampled where the reference allows it.

Running the numpy reference over a whole timed-size output takes seconds to minutes, so the
gate runs it at check_dims, and at the timed size compares every candidate with the baseline
(on the device). This adds the reference at the timed size on a few windows of the baseline's
outputs: a dim the windows cut is one along which every buffer's length grows in proportion
(`n`, `blocks`); a window of `w` units of it at unit `s` is the elements [s*u, (s+w)*u) of each
buffer of u elements a unit, whose inputs the counter-based generator gives directly (its
`start`). Whether the reference computes a window on its own is not assumed: at check_dims the
reference run on two windows must give, bit for bit, the slices of its run on the whole; where
it does not (a matmul, causal attention), the timed size is not sampled, and the check says so.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass

import numpy as np

from runner.definition.spec import CaseSpec
from runner.gpu import generator
from runner.measurement import gate

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
