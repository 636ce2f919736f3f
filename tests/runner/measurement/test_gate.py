"""The CPU side of the correctness gate: element-wise comparison and the poison bookkeeping."""

from __future__ import annotations

import numpy as np
import pytest

from runner.gpu import generator
from runner.measurement.gate.correctness import (
    POISON_BYTES,
    Tolerance,
    compare,
    poison_pattern,
    unwritten,
)

CLOSE = Tolerance(rtol=1e-6, atol=1e-9, exact=False)
EXACT = Tolerance(rtol=0.0, atol=0.0, exact=True)


# --- compare: floats -----------------------------------------------------------------------


def test_floats_within_tolerance_pass():
    ref = np.array([1.0, -2.0, 0.0, 1e6])
    out = (ref + np.array([5e-7, -1e-6, 1e-9, 0.5])).astype(np.float64)
    found = compare(out, ref, CLOSE)
    assert found["mismatches"] == 0 and found["elements"] == 4
    assert "first_mismatch" not in found
    assert found["max_abs_err"] == pytest.approx(0.5)
    assert found["max_rel_err"] == pytest.approx(5e-7)


def test_floats_outside_tolerance_fail_at_the_first_mismatch():
    ref = np.array([1.0, 2.0, 3.0, 4.0])
    out = np.array([1.0, 2.001, 3.0, 3.5], dtype=np.float32)
    found = compare(out, ref, CLOSE)
    assert found["mismatches"] == 2
    first = found["first_mismatch"]
    assert first["index"] == 1 and first["expected"] == 2.0
    assert first["got"] == pytest.approx(2.001, rel=1e-6)
    assert found["max_abs_err"] == pytest.approx(0.5)
    assert found["max_rel_err"] == pytest.approx(0.125)  # 0.5 / 4


def test_hand_computed_errors():
    ref = np.array([2.0, -4.0, 0.0, 10.0])
    out = np.array([2.5, -4.0, 0.25, 9.0])
    found = compare(out, ref, Tolerance(rtol=0.5, atol=0.3, exact=False))
    # |diff| = 0.5, 0, 0.25, 1; rel = 0.25, 0, inf (ref 0, left out), 0.1
    assert found["max_abs_err"] == 1.0 and found["max_rel_err"] == 0.25
    assert found["mismatches"] == 0  # 0.5 <= 0.3 + 1; 0.25 <= 0.3; 1 <= 0.3 + 5


def test_nan_in_output_fails():
    found = compare(np.array([1.0, np.nan], np.float32), np.array([1.0, 2.0]), CLOSE)
    assert found["mismatches"] == 1 and found["nonfinite_errors"] == 1
    assert found["first_mismatch"] == {"index": 1, "got": "nan", "expected": 2.0}


def test_nan_where_the_reference_has_a_number_fails_and_vice_versa():
    assert compare(np.array([3.0]), np.array([np.nan]), CLOSE)["mismatches"] == 1
    assert compare(np.array([np.nan]), np.array([3.0]), EXACT)["mismatches"] == 1


@pytest.mark.parametrize("tol", [CLOSE, EXACT])
def test_nan_in_both_passes(tol):
    found = compare(np.array([np.nan, 1.0], np.float32), np.array([np.nan, 1.0]), tol)
    assert found["mismatches"] == 0 and found["nonfinite_errors"] == 0


# gate.compare's exact path computes inf - inf outside np.errstate (reported to the lead)
@pytest.mark.filterwarnings("ignore:invalid value encountered in subtract:RuntimeWarning")
def test_equal_infinities_pass_exactly():
    inf = np.array([np.inf, -np.inf, 1.0])
    assert compare(inf.astype(np.float32), inf, EXACT)["mismatches"] == 0
    found = compare(inf, np.array([-np.inf, -np.inf, 1.0]), EXACT)
    assert found["mismatches"] == 1 and found["first_mismatch"]["got"] == "inf"


def test_equal_infinities_pass_within_tolerance():
    inf = np.array([np.inf, -np.inf, 1.0])
    assert compare(inf, inf, CLOSE)["mismatches"] == 0


def test_exact_floats_differ_by_one_ulp():
    ref = np.array([1.0, 2.0])
    out = np.array([1.0, np.nextafter(2.0, 3.0)])
    found = compare(out, ref, EXACT)
    assert found["mismatches"] == 1 and found["first_mismatch"]["index"] == 1
    assert compare(out, ref, CLOSE)["mismatches"] == 0


# --- compare: integers ---------------------------------------------------------------------


def test_integers_compare_exactly_even_with_a_loose_tolerance():
    ref = np.array([-7, 0, 2_000_000_000, -2_147_483_648], dtype=np.int64)
    out = np.array([-7, 0, 2_000_000_000, -2_147_483_648], dtype=np.int32)
    assert compare(out, ref, Tolerance(rtol=0.5, atol=10.0, exact=False))["mismatches"] == 0
    out[0] = -8
    found = compare(out, ref, Tolerance(rtol=0.5, atol=10.0, exact=False))
    assert found["mismatches"] == 1
    assert found["first_mismatch"] == {"index": 0, "got": -8, "expected": -7}
    assert found["max_abs_err"] == 1.0 and found["max_rel_err"] == pytest.approx(1 / 7)


def test_uint64_max_round_trips():
    top = np.iinfo(np.uint64).max
    ref = np.array([top, 0, top - 1], dtype=np.uint64)
    assert compare(ref.copy(), ref, EXACT)["mismatches"] == 0
    out = np.array([top, 0, top], dtype=np.uint64)
    found = compare(out, ref, EXACT)
    assert found["mismatches"] == 1
    assert found["first_mismatch"] == {"index": 2, "got": int(top), "expected": int(top - 1)}


def test_uint64_error_is_exact_near_the_top():
    top = np.iinfo(np.uint64).max
    found = compare(np.array([top], np.uint64), np.array([top - 1], np.uint64), EXACT)
    assert found["max_abs_err"] == 1.0


def test_zero_length_arrays():
    for dtype in (np.float32, np.int32, np.uint64):
        found = compare(np.zeros(0, dtype), np.zeros(0, dtype), CLOSE)
        assert found == {
            "elements": 0,
            "mismatches": 0,
            "max_abs_err": 0.0,
            "max_rel_err": 0.0,
            "nonfinite_errors": 0,
        }


def test_tolerance_describe():
    assert EXACT.describe() == "exact"
    assert Tolerance(1e-15, 1e-12, False).describe() == "|out - ref| <= 1e-12 + 1e-15 * |ref|"


# --- poison --------------------------------------------------------------------------------


def test_poison_bytes_and_patterns():
    assert POISON_BYTES == (0xFF, 0x5A)
    assert np.isnan(poison_pattern("f64", 0xFF)[0]) and np.isnan(poison_pattern("f32", 0xFF)[0])
    assert poison_pattern("i32", 0xFF)[0] == -1
    assert poison_pattern("u64", 0xFF)[0] == np.iinfo(np.uint64).max
    assert poison_pattern("i32", 0x5A)[0] == 0x5A5A5A5A
    for dtype in generator.DTYPES:
        for byte in POISON_BYTES:
            pattern = poison_pattern(dtype, byte)
            assert pattern.dtype == np.dtype(generator.DTYPES[dtype]) and pattern.size == 1
            assert pattern.tobytes() == bytes([byte]) * pattern.itemsize


def poisoned(dtype: str, byte: int, n: int) -> np.ndarray:
    """What a buffer of `n` elements holds after the gate filled it with `byte`."""
    itemsize = np.dtype(generator.DTYPES[dtype]).itemsize
    return np.frombuffer(bytes([byte]) * (n * itemsize), dtype=generator.DTYPES[dtype]).copy()


@pytest.mark.parametrize("dtype", ["f64", "f32", "i32", "u64"])
def test_unwritten_counts_elements_left_poisoned_in_both_runs(dtype):
    runs = [poisoned(dtype, byte, 6) for byte in POISON_BYTES]
    assert unwritten(runs, dtype) == 6  # a kernel that wrote nothing
    for run in runs:
        run[[0, 2, 5]] = 1  # elements 0, 2 and 5 written in both runs
    assert unwritten(runs, dtype) == 3
    runs[1][1] = 7  # written only in the second run: some thread did write it
    assert unwritten(runs, dtype) == 2


@pytest.mark.parametrize("dtype", ["f64", "f32", "i32", "u64"])
def test_a_value_equal_to_one_poison_is_not_unwritten(dtype):
    # The kernel legitimately writes the all-ones value (-1, NaN, max): run 1 looks poisoned,
    # run 2 does not, so the element was written.
    ones = poison_pattern(dtype, 0xFF)[0]
    runs = [poisoned(dtype, byte, 3) for byte in POISON_BYTES]
    runs[0][:] = ones
    runs[1][:] = ones
    assert unwritten(runs, dtype) == 0
    fives = poison_pattern(dtype, 0x5A)[0]  # and the 0x5A pattern, written in both runs
    runs[0][:] = fives
    runs[1][:] = fives
    assert unwritten(runs, dtype) == 0


def test_unwritten_of_empty_output():
    assert unwritten([np.zeros(0, np.float32), np.zeros(0, np.float32)], "f32") == 0
