"""runner.measurement.gate.timed_size: kg_compare's element test (kernels.cu, built here as host
code) against gate.compare on the values that matter (NaN, infinities, signed zeros, integer
extremes), its PTX through ptxas, and its record read back from the accumulator words. The
kernel's own reduction runs in tests/runner/measurement/test_device_compare_gpu.py."""

from __future__ import annotations

import ctypes
import shutil
import subprocess

import numpy as np
import pytest

from runner.gpu import device, generator, ptx
from runner.measurement.gate import correctness as gate
from runner.measurement.gate import timed_size as device_compare

HOST_FOLD = r"""
#include "kernels.cu"
extern "C" void kg_compare_host(const void* got, const void* want, kg_u64 n, int dtype,
                                int exact, double atol, double rtol, kg_u64* acc) {
    for (int k = 0; k < KG_CMP_WORDS; ++k) acc[k] = k == KG_CMP_FIRST ? ~0ULL : 0;
    for (kg_u64 i = 0; i < n; ++i) {
        kg_cmp_t r = kg_cmp_at(got, want, i, dtype, exact, atol, rtol);
        kg_u64 abs_bits, rel_bits;
        memcpy(&abs_bits, &r.abs_err, 8);
        memcpy(&rel_bits, &r.rel_err, 8);
        acc[KG_CMP_BITS_DIFFER] += r.bits_differ;
        acc[KG_CMP_MISMATCHES] += r.bad;
        acc[KG_CMP_NONFINITE] += r.bad && !r.finite_abs;
        acc[KG_CMP_FINITE_ABS] += r.finite_abs;
        acc[KG_CMP_FINITE_REL] += r.finite_rel;
        if (r.bad && i < acc[KG_CMP_FIRST]) acc[KG_CMP_FIRST] = i;
        if (r.finite_abs && abs_bits > acc[KG_CMP_MAX_ABS]) acc[KG_CMP_MAX_ABS] = abs_bits;
        if (r.finite_rel && rel_bits > acc[KG_CMP_MAX_REL]) acc[KG_CMP_MAX_REL] = rel_bits;
    }
}
"""


@pytest.fixture(scope="module")
def host_compare(tmp_path_factory):
    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("g++ not on PATH: cannot build kg_compare's element test as host code")
    build = tmp_path_factory.mktemp("device_compare")
    (build / "fold.cc").write_text(HOST_FOLD)
    library = build / "fold.so"
    command = [gxx, "-O2", "-ffp-contract=off", "-shared", "-fPIC", "-x", "c++"]
    command += ["-I", str(device.KERNELS_CU.parent), "-o", str(library), str(build / "fold.cc")]
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0, f"{' '.join(command)} failed:\n{done.stderr}"
    fold = ctypes.CDLL(str(library)).kg_compare_host
    fold.argtypes = [ctypes.c_void_p] * 2 + [ctypes.c_uint64, ctypes.c_int, ctypes.c_int]
    fold.argtypes += [ctypes.c_double, ctypes.c_double, ctypes.c_void_p]

    def compare(got: np.ndarray, want: np.ndarray, tol: gate.Tolerance) -> dict:
        dtype = next(k for k, v in generator.DTYPES.items() if np.dtype(v) == got.dtype)
        words = np.zeros(device_compare.WORDS, dtype=np.uint64)
        fold(
            got.ctypes.data,
            want.ctypes.data,
            got.size,
            generator.DTYPE_CODES[dtype],
            int(tol.exact),
            tol.atol,
            tol.rtol,
            words.ctypes.data,
        )
        return device_compare.comparison_of(words, got.size, lambda i: (got[i], want[i]))

    return compare


LOOSE, EXACT = gate.Tolerance(1e-12, 1e-12, False), gate.Tolerance(0.0, 0.0, True)
SPECIAL = [0.0, -0.0, 1.0, -1.0, 1e-30, np.inf, -np.inf, np.nan, 1e30, 3.5]


def float_pairs(dtype) -> tuple[np.ndarray, np.ndarray]:
    """Every pair of the special values, and random values near each other."""
    rng = np.random.default_rng(7)
    a, b = np.meshgrid(np.array(SPECIAL, dtype), np.array(SPECIAL, dtype))
    x = rng.uniform(-1, 1, 500).astype(dtype)
    y = x.copy()
    y[::3] = np.nextafter(y[::3], dtype(2))
    y[::7] += dtype(1e-6)
    return np.concatenate([a.ravel(), x]), np.concatenate([b.ravel(), y])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("tol", [LOOSE, EXACT], ids=["loose", "exact"])
def test_floats_compare_as_gate_compare(host_compare, dtype, tol):
    got, want = float_pairs(dtype)
    found = host_compare(got, want, tol)
    assert found == gate.compare(got, want, tol) and found["mismatches"] > 0


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.int64, np.uint64])
def test_integers_compare_exactly_as_gate_compare(host_compare, dtype):
    info = np.iinfo(dtype)
    edges = np.array([info.min, info.max, 0, 1, info.max // 3], dtype=dtype)
    got, want = (v.ravel() for v in np.meshgrid(edges, edges))
    found = host_compare(got, want, EXACT)
    assert found == gate.compare(got, want, EXACT) and found["first_mismatch"]["index"] == 1


def test_identical_outputs_answer_as_the_quick_path(host_compare):
    got = np.array([np.nan, 1.0, -0.0, np.inf])
    assert host_compare(got, got.copy(), LOOSE) == gate.compare(got, got.copy(), LOOSE)
    assert host_compare(got[:0], got[:0], LOOSE) == gate.compare(got[:0], got[:0], LOOSE)


def test_kg_compare_declares_what_device_compare_passes_and_ptxas_takes_it(tmp_path):
    entry = ptx.parse(device.load_ptx()).entries["kg_compare"]
    assert [p.ptx_type for p in entry.params] == ["u64"] * 3 + ["u32"] * 2 + ["f64"] * 2 + ["u64"]
    ptxas = shutil.which("ptxas")
    if ptxas is None:
        pytest.skip("ptxas not on PATH")
    done = subprocess.run(
        [ptxas, "-arch=sm_90", str(device.KERNELS_PTX), "-o", str(tmp_path / "k.cubin")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_non_finite_values_compare_by_class_on_host_and_device_alike(host_compare, dtype):
    """Issue 50 class 6: |FLT_MAX - inf| = inf <= rtol * inf held; now a finite value never
    matches a non-finite one and an infinity matches only itself, however loose the tolerance."""
    big = np.finfo(dtype).max
    got = np.array([big, -big, np.inf, 0.0, np.nan, 1.0, np.inf, np.nan, 2.0], dtype)
    want = np.array([np.inf, -np.inf, -np.inf, np.nan, 0.0, np.inf, np.inf, np.nan, 2.5], dtype)
    loose = gate.Tolerance(1.0, 1.0, False)
    found = host_compare(got, want, loose)
    assert found == gate.compare(got, want, loose)
    assert found["mismatches"] == 6 and found["first_mismatch"]["expected"] == "inf"
