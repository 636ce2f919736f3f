"""The element test both front ends share: two numpy outputs compared element by element under
a case's tolerance, and the record of one comparison (the device's twin, kg_compare in
runner/gpu/device/kernels.cu, writes the same record: gate.timed_size.DeviceCompare).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from runner.definition.spec import CaseSpec

__all__ = ["Tolerance", "compare", "comparison", "json_scalar"]


@dataclass(frozen=True)
class Tolerance:
    rtol: float
    atol: float
    exact: bool

    @classmethod
    def of(cls, case: CaseSpec) -> Tolerance:
        return cls(case.rtol, case.atol, case.exact)

    def between_implementations(self) -> Tolerance:
        """Two implementations may each err by the tolerance, so they may differ by twice it."""
        return Tolerance(2 * self.rtol, 2 * self.atol, self.exact)

    def describe(self) -> str:
        return "exact" if self.exact else f"|out - ref| <= {self.atol:g} + {self.rtol:g} * |ref|"


def _abs_diff(out: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """|out - ref| as float64: exact for integers of any width, 0 where equal (inf == inf too)."""
    if out.dtype.kind in "iu":
        wide = np.dtype(f"u{out.itemsize}")
        hi, lo = np.maximum(out, ref), np.minimum(out, ref)
        return (hi.astype(wide) - lo.astype(wide)).astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        got, want = out.astype(np.float64), ref.astype(np.float64)
        return np.where(got == want, 0.0, np.abs(got - want))


def _class_differs(out: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """Where a float output and its expected value are not of one class: finite against
    non-finite, or infinities of opposite signs (|FLT_MAX - inf| <= rtol * inf would pass).
    Judged in the output's own dtype, where a wide reference's overflow is an infinity too."""
    if out.dtype.kind != "f":
        return np.zeros(out.shape, bool)
    with np.errstate(invalid="ignore", over="ignore"):
        want = expected.astype(out.dtype)
        same = (out == want) | (np.isnan(out) & np.isnan(want))
        return (~np.isfinite(out) | ~np.isfinite(want)) & ~same


def compare(out: np.ndarray, expected: np.ndarray, tol: Tolerance) -> dict:
    """Element-wise comparison; NaN matches only NaN, an infinity only itself, a finite value
    never a non-finite one, and under an exact tolerance -0.0 matches only -0.0. Returns errors
    and the first mismatch."""
    n = int(out.size)
    expected = np.asarray(expected)
    if (
        expected.dtype == out.dtype
        and expected.shape == out.shape
        and np.array_equal(out.view(np.uint8), expected.view(np.uint8))
    ):  # bit-identical (the usual case between implementations): one cheap pass
        return comparison(n, 0, 0.0, 0.0, 0)
    exact = tol.exact or out.dtype.kind in "iu"
    ref = expected.astype(out.dtype) if exact else expected.astype(np.float64)
    diff = _abs_diff(out, ref)
    both_nan = np.isnan(out) & np.isnan(ref) if out.dtype.kind == "f" else np.zeros(out.shape, bool)
    if exact and out.dtype.kind == "f":  # exact includes the sign of zero
        bad = ~(((out == ref) & (np.signbit(out) == np.signbit(ref))) | both_nan)
    elif exact:
        bad = ~((out == ref) | both_nan)
    else:
        with np.errstate(invalid="ignore", over="ignore"):
            bad = ~((diff <= tol.atol + tol.rtol * np.abs(ref)) | both_nan)
            bad |= _class_differs(out, expected)
    ref64 = ref.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        finite = np.isfinite(diff)
        rel = np.where(ref64 != 0, diff / np.abs(ref64), np.where(diff == 0, 0.0, np.inf))
    mismatches = int(np.count_nonzero(bad))
    first = None
    if mismatches:
        i = int(np.flatnonzero(bad)[0])
        first = (i, out[i], expected[i])
    return comparison(
        n,
        mismatches,
        float(diff[finite].max()) if finite.any() else None,
        float(rel[np.isfinite(rel)].max()) if np.isfinite(rel).any() else None,
        int(np.count_nonzero(~finite & bad)),
        first,
    )


def comparison(
    elements: int,
    mismatches: int,
    max_abs_err: float | None,
    max_rel_err: float | None,
    nonfinite_errors: int,
    first: tuple | None = None,
) -> dict:
    """The record of one comparison (compare's, and device_compare's): None for an error with no
    finite value (0.0 when there are no elements); `first` = (index, got, expected)."""
    empty = 0.0 if elements == 0 else None
    result = {
        "elements": elements,
        "mismatches": mismatches,
        "max_abs_err": empty if max_abs_err is None else max_abs_err,
        "max_rel_err": empty if max_rel_err is None else max_rel_err,
        "nonfinite_errors": nonfinite_errors,
    }
    if first is not None:
        index, got, expected = first
        result["first_mismatch"] = {
            "index": index,
            "got": json_scalar(got),
            "expected": json_scalar(expected),
        }
    return result


def json_scalar(value):
    value = value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return "nan" if np.isnan(value) else ("inf" if value > 0 else "-inf")
    return value
