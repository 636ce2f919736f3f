"""The input generator: numpy twin vs the CUDA source compiled as host code, and the committed PTX."""

from __future__ import annotations

import math
import re
import shutil
import subprocess
import zlib
from pathlib import Path

import numpy as np
import pytest

import runner.gpu.device as device
from runner.explain import static
from runner.gpu import generator
from runner.gpu.generator import Distribution, generate, launch_args, stream_id

U64_MAX = 2**64 - 1
FULL_U64 = Distribution("integers", 0, U64_MAX)


def reference_bits(seed: int, stream: int, index: int) -> int:
    """bits(seed, stream, index) written out once more in plain Python ints, from the spec."""

    def mix64(z: int) -> int:
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9 % 2**64
        z = (z ^ (z >> 27)) * 0x94D049BB133111EB % 2**64
        return z ^ (z >> 31)

    golden = 0x9E3779B97F4A7C15
    key = mix64(seed ^ mix64((stream + golden) % 2**64))
    return mix64((key + index * golden) % 2**64)


# ---- determinism and golden values ---------------------------------------------------------------


def test_bits_match_the_spec_written_in_python_ints():
    for seed, stream, start in [(0, 0, 0), (1, 2, 2**40), (U64_MAX, U64_MAX, U64_MAX - 4)]:
        got = generate("u64", FULL_U64, seed, stream, 5, start)
        assert got.tolist() == [reference_bits(seed, stream, start + i) for i in range(5)]


def test_same_inputs_same_values_and_other_seed_or_stream_differ():
    dist = Distribution("uniform", 0.0, 1.0)
    a = generate("f64", dist, 7, 3, 1000)
    assert np.array_equal(a, generate("f64", dist, 7, 3, 1000))
    assert np.count_nonzero(a == generate("f64", dist, 8, 3, 1000)) < 5
    assert np.count_nonzero(a == generate("f64", dist, 7, 4, 1000)) < 5


@pytest.mark.parametrize("dtype", ["f32", "f64", "i32", "u32", "i64", "u64"])
def test_value_at_index_does_not_depend_on_n_or_start(dtype):
    uniform, integers = Distribution("uniform", -2.0, 3.0), Distribution("integers", 0, 1000)
    dist = uniform if generator.is_float(dtype) else integers
    whole = generate(dtype, dist, 11, 5, 15)
    assert np.array_equal(generate(dtype, dist, 11, 5, 10, start=5), whole[5:])
    assert np.array_equal(generate(dtype, dist, 11, 5, 3), whole[:3])


def test_chunked_generation_equals_one_pass(monkeypatch):
    dist = Distribution("integers", -50, 50)
    one_pass = generate("i64", dist, 3, 9, 100, start=17)
    monkeypatch.setattr(generator, "CHUNK_ELEMENTS", 7)
    assert np.array_equal(generate("i64", dist, 3, 9, 100, start=17), one_pass)


def test_golden_values():
    # Literals computed once: a change in the formula, constants or rounding shows up here.
    f64 = generate("f64", Distribution("uniform", -1.0, 1.0), 1, 2, 4)
    assert [float(x).hex() for x in f64] == [
        "-0x1.5159d2d5b722ep-1",
        "-0x1.bf1b6f933481cp-2",
        "-0x1.d4552210ffb84p-2",
        "0x1.feed102f75e64p-2",
    ]
    f32 = generate("f32", Distribution("uniform", 0.0, 10.0), 42, stream_id("x"), 4)
    assert f32.dtype == np.float32
    assert [float(x).hex() for x in f32] == [
        "0x1.6fd8660000000p+1",
        "0x1.dd2d800000000p+2",
        "0x1.ef77d00000000p+2",
        "0x1.24e7600000000p+2",
    ]
    i32 = generate("i32", Distribution("integers", -1000, -3), 42, stream_id("idx"), 6)
    assert i32.dtype == np.int32
    assert i32.tolist() == [-670, -141, -15, -436, -798, -750]
    u64 = generate("u64", FULL_U64, 0, 0, 3)
    assert u64.tolist() == [3746585686858627171, 6235967106033911276, 4964577235801436555]


def test_stream_id_is_crc32_of_utf8_name():
    assert stream_id("x") == 0x8CDC1683
    assert stream_id("Größe") == 0x946E9015 == zlib.crc32("Größe".encode())
    assert stream_id("a") != stream_id("b")


# ---- ranges ------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("low,high", [(0.0, 1.0), (-3.5, 0.25), (1e6, 1e6 + 1.0)])
def test_uniform_within_half_open_range_and_centred(dtype, low, high):
    n = 1 << 18
    x = generate(dtype, Distribution("uniform", low, high), 5, stream_id("u"), n).astype(np.float64)
    assert x.min() >= low and x.max() < high
    sigma = (high - low) / np.sqrt(12 * n)
    assert abs(x.mean() - (low + high) / 2) < 5 * sigma


@pytest.mark.parametrize(
    "dtype,low,high",
    [("i32", -7, 5), ("u32", 10, 13), ("i64", -(2**40), -(2**40) + 99), ("u64", 2**63, 2**63 + 2)],
)
def test_integers_within_closed_range_every_value_hit_and_centred(dtype, low, high):
    n = 1 << 16
    x = generate(dtype, Distribution("integers", low, high), 5, stream_id("i"), n)
    assert x.dtype == generator.DTYPES[dtype]
    values = sorted({int(v) for v in x})
    assert values == list(range(low, high + 1))
    span = high - low + 1
    sigma = np.sqrt((span**2 - 1) / 12 / n)
    assert abs(np.mean([int(v) - low for v in x]) - (span - 1) / 2) < 5 * sigma


def test_rounding_never_reaches_high_and_never_drops_below_low():
    ulp = 2.0**-23  # f32 spacing in [1, 2)
    # Bounds between f32 values: rounding to f32 would give 1.0 < low and 1 + 3 ulp >= high.
    low, high = 1.0 + 0.4 * ulp, 1.0 + 2.5 * ulp
    x = generate("f32", Distribution("uniform", low, high), 1, 1, 1 << 14)
    assert {float(v) for v in x} == {1.0 + ulp, 1.0 + 2 * ulp}
    # float64 rounding near 1e16 (spacing 2) would often give exactly high.
    y = generate("f64", Distribution("uniform", 1e16, 1e16 + 8.0), 1, 1, 1 << 14)
    assert y.max() < 1e16 + 8.0 and set(y.tolist()) == {1e16 + k for k in (0.0, 2.0, 4.0, 6.0)}


# ---- validation and launch arguments ---------------------------------------------------------


@pytest.mark.parametrize(
    "dtype,dist,message",
    [
        ("f16", Distribution("uniform", 0.0, 1.0), "unknown dtype 'f16'"),
        ("f32", Distribution("normal", 0.0, 1.0), "unknown distribution 'normal'"),
        ("i32", Distribution("uniform", 0.0, 1.0), "takes an 'integers' distribution"),
        ("f64", Distribution("integers", 0, 1), "takes an 'uniform' distribution"),
        ("f64", Distribution("uniform", 1.0, 1.0), "low < high"),
        ("f64", Distribution("uniform", 0.0, float("inf")), "finite number"),
        ("f64", Distribution("uniform", -1e308, 1e308), "overflows"),
        ("f32", Distribution("uniform", 0.0, 1e39), "within"),
        ("f32", Distribution("uniform", 1.0 + 2.0**-25, 1.0 + 2.0**-24), "no f32 value"),
        ("i32", Distribution("integers", 0, 2**31), "do not fit i32"),
        ("u32", Distribution("integers", -1, 3), "do not fit u32"),
        ("i64", Distribution("integers", 5, 4), "low <= high"),
        ("i64", Distribution("integers", 0.0, 4), "must be an integer"),
        ("u64", Distribution("integers", False, 4), "must be an integer"),
    ],
)
def test_validate_rejects_with_where_in_message(dtype, dist, message):
    with pytest.raises(ValueError, match=re.escape(message)) as caught:
        dist.validate(dtype, "cases.toml: case 'axpy' input 'x'")
    assert str(caught.value).startswith("cases.toml: case 'axpy' input 'x': ")


def test_validate_accepts_full_ranges_and_ints_for_uniform():
    Distribution("integers", -(2**63), 2**63 - 1).validate("i64", "here")
    Distribution("integers", np.int32(-5), np.int32(5)).validate("i32", "here")
    FULL_U64.validate("u64", "here")
    Distribution("uniform", -1, 1).validate("f32", "here")


def test_generate_rejects_bad_seed_stream_and_index_range():
    dist = Distribution("uniform", 0.0, 1.0)
    with pytest.raises(ValueError, match="seed must be an integer in"):
        generate("f64", dist, -1, 0, 4)
    with pytest.raises(ValueError, match="stream must be an integer in"):
        launch_args("f64", dist, 0, 2**64, 4)
    with pytest.raises(ValueError, match="start \\+ n must not exceed 2\\^64"):
        generate("f64", dist, 0, 0, 4, start=U64_MAX - 2)


def test_launch_args_integer_bounds_as_twos_complement_and_span():
    assert launch_args("i32", Distribution("integers", -5, 5), 9, 77, 1000) == [
        ("u64", 1000),
        ("u64", 9),
        ("u64", 77),
        ("i32", generator.DTYPE_CODES["i32"]),
        ("f64", 0.0),
        ("f64", 0.0),
        ("u64", 2**64 - 5),
        ("u64", 11),
        ("i32", 0),
    ]
    full_i64 = launch_args("i64", Distribution("integers", -(2**63), 2**63 - 1), 0, 0, 1)
    assert full_i64[6:] == [("u64", 2**63), ("u64", 0), ("i32", 0)]  # span 0 = all 2^64 values
    f32 = launch_args("f32", Distribution("uniform", -1, 2.5), 0, 0, 1)
    assert f32[3:] == [("i32", 0), ("f64", -1.0), ("f64", 2.5), ("u64", 0), ("u64", 0), ("i32", 0)]
    edges = launch_args("i32", Distribution("edges", -5, 5), 0, 0, 1)
    assert edges[6:] == [("u64", 2**64 - 5), ("u64", 11), ("i32", generator.KIND_CODES["edges"])]


def test_kind_codes_match_the_cuda_enum():
    source = device.KERNELS_CU.read_text()
    enum = re.search(r"enum \{ KG_KIND_DRAW = (\d+), KG_KIND_EDGES = (\d+) \}", source)
    assert (int(enum.group(1)), int(enum.group(2))) == (
        generator.KIND_CODES["uniform"],
        generator.KIND_CODES["edges"],
    )
    assert generator.KIND_CODES["integers"] == generator.KIND_CODES["uniform"]


# ---- the edges distribution (the correctness gate's second input set) ----------------------------


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_edges_over_the_full_range_has_zeros_both_ends_signs_and_every_scale(dtype):
    low, high = generator.full_range(dtype)
    v = generate(dtype, Distribution("edges", low, high), 3, 4, 20000)
    assert np.all(np.isfinite(v))
    zeros = v[v == 0]
    assert np.any(np.signbit(zeros)) and np.any(~np.signbit(zeros))
    assert v.min() == low and v.max() == high
    assert 0.3 < np.mean(v < 0) < 0.6
    scales = np.log2(np.abs(v[v != 0]).astype(np.float64))
    assert scales.min() < -100 and scales.max() > 100  # magnitudes across the range's binades
    assert np.count_nonzero(np.abs(v) == np.nextafter(v.dtype.type(high), v.dtype.type(0))) > 0


def test_edges_stays_inside_a_one_signed_range_and_keeps_its_zeros_out():
    v = generate("f64", Distribution("edges", 0.5, 8.0), 1, 2, 5000)
    assert v.min() == 0.5 and v.max() == 8.0
    assert np.count_nonzero(v == np.nextafter(0.5, 1.0)) > 0
    nonneg = generate("f32", Distribution("edges", 0.0, 1.0), 1, 2, 5000)
    assert np.all(nonneg >= 0) and np.all(nonneg <= 1)
    assert np.any(np.signbit(nonneg[nonneg == 0]))  # -0.0 lies in [0, 1] too


def test_edges_integers_hold_negatives_zero_minus_one_and_both_ends():
    low, high = generator.full_range("i32")
    v = generate("i32", Distribution("edges", low, high), 5, 6, 5000)
    assert {0, -1, low, high, low + 1, high - 1} <= set(v.tolist())
    assert np.mean(v < 0) > 0.3
    assert len({int(x).bit_length() for x in v}) > 25  # every bit width
    narrow = generate("i64", Distribution("edges", -5, 5), 5, 6, 2000)
    assert set(narrow.tolist()) == set(range(-5, 6))
    unsigned = generate("u32", Distribution("edges", 7, 12), 5, 6, 2000)
    assert set(unsigned.tolist()) == set(range(7, 13))


def test_edges_golden_values():
    # Literals computed once: a change in the formula, constants or rounding shows up here.
    f64 = generate("f64", Distribution("edges", -1.0, 1.0), 1, 2, 6)
    assert [float(x).hex() for x in f64] == EDGES_F64_GOLDEN
    i64 = generate("i64", Distribution("edges", -(2**63), 2**63 - 1), 1, 2, 6)
    assert i64.tolist() == EDGES_I64_GOLDEN


def test_edges_validation_names_the_field():
    where = "cases.toml: case 'c': buffers.x.valid"
    with pytest.raises(ValueError, match="edges needs low <= high"):
        Distribution("edges", 1.0, 0.0).validate("f64", where)
    with pytest.raises(ValueError, match="no f32 value lies in"):
        Distribution("edges", 1.0 + 2.0**-25, 1.0 + 2.0**-24).validate("f32", where)
    with pytest.raises(ValueError, match="do not fit i32"):
        Distribution("edges", 0, 2**31).validate("i32", where)
    with pytest.raises(ValueError, match="must be a finite number"):
        Distribution("edges", -math.inf, 0.0).validate("f64", where)


def test_dtype_codes_match_the_cuda_enum():
    source = device.KERNELS_CU.read_text()
    enum = re.search(r"enum \{([^}]*)\}", source).group(1)
    codes = {
        name.strip()[3:].lower(): int(value)
        for name, value in re.findall(r"(KG_\w+)\s*=\s*(\d+)", enum)
    }
    assert codes == generator.DTYPE_CODES


# ---- the CUDA source compiled as host code vs the numpy twin ----------------------------------

HOST_MAIN = r"""
#include "kernels.cu"
#include <stdio.h>
#include <stdlib.h>

// usage: fill OUT DTYPE LO HI ILO SPAN SEED STREAM N KIND  (LO, HI as C99 hex floats)
int main(int argc, char** argv) {
    if (argc != 11) return 2;
    int dtype = atoi(argv[2]);
    double lo = strtod(argv[3], 0), hi = strtod(argv[4], 0);
    kg_u64 ilo = strtoull(argv[5], 0, 10), span = strtoull(argv[6], 0, 10);
    kg_u64 seed = strtoull(argv[7], 0, 10), stream = strtoull(argv[8], 0, 10);
    kg_u64 n = strtoull(argv[9], 0, 10);
    int kind = atoi(argv[10]);
    size_t width = (dtype == KG_F64 || dtype == KG_I64 || dtype == KG_U64) ? 8 : 4;
    void* buf = malloc(n * width);
    kg_fill_strided(buf, n, 0, 1, seed, stream, dtype, lo, hi, ilo, span, kind);
    FILE* f = fopen(argv[1], "wb");
    if (!f || fwrite(buf, width, n, f) != n) return 3;
    fclose(f);
    free(buf);
    return 0;
}
"""

# -ffp-contract=off: the host compiler must not fuse the multiply-add (nvcc -fmad=false on device).
HOST_BUILDS = {
    "nvcc": ["-O2", "-Xcompiler", "-ffp-contract=off", "-x", "cu"],
    "g++": ["-O2", "-ffp-contract=off", "-x", "c++"],
}


@pytest.fixture(scope="module", params=list(HOST_BUILDS))
def host_fill(request, tmp_path_factory):
    compiler = request.param
    program = static.find_program(compiler) if compiler == "nvcc" else shutil.which(compiler)
    if program is None:
        pytest.skip(f"{compiler} not on PATH: cannot build the CUDA generator as host code")
    build = tmp_path_factory.mktemp(f"host_{compiler.replace('+', 'x')}")
    (build / "main.src").write_text(HOST_MAIN)
    exe = build / "fill"
    include = ["-I", str(device.KERNELS_CU.parent)]
    if compiler == "nvcc":  # NVIDIA's wheels keep cudart in lib/, a toolkit's nvcc looks in lib64/
        include += ["-L", str(Path(program).resolve().parent.parent / "lib")]
    command = [program, *HOST_BUILDS[compiler], *include, "-o", str(exe), str(build / "main.src")]
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0, f"{' '.join(command)} failed:\n{done.stderr}"

    def fill(dtype: str, dist: Distribution, seed: int, stream: int, n: int) -> bytes:
        # The kernel's own argument list, so launch_args is checked along with the formula.
        _, _, _, (_, code), (_, lo), (_, hi), (_, ilo), (_, span), (_, kind) = launch_args(
            dtype, dist, seed, stream, n
        )
        out = build / "out.bin"
        args = [str(exe), str(out), str(code), lo.hex(), hi.hex()]
        args += [str(v) for v in (ilo, span, seed, stream, n, kind)]
        subprocess.run(args, check=True)
        return out.read_bytes()

    return fill


CROSS_CASES = [
    ("f32", Distribution("uniform", -1.0, 1.0)),
    ("f32", Distribution("uniform", 0.1, 0.7)),
    ("f32", Distribution("uniform", 1.0 + 0.4 * 2.0**-23, 1.0 + 2.5 * 2.0**-23)),
    ("f64", Distribution("uniform", -1e3, 2.5e3)),
    ("f64", Distribution("uniform", 1e16, 1e16 + 64.0)),
    ("i32", Distribution("integers", -1000, -3)),
    ("i32", Distribution("integers", -(2**31), 2**31 - 1)),
    ("u32", Distribution("integers", 7, 12)),
    ("u32", Distribution("integers", 0, 2**32 - 1)),
    ("i64", Distribution("integers", -5, 5)),
    ("i64", Distribution("integers", -(2**63), 2**63 - 1)),
    ("u64", FULL_U64),
    ("u64", Distribution("integers", 2**63, U64_MAX)),
    # the gate's second input set, over full, one-signed, narrow and degenerate ranges
    ("f64", Distribution("edges", *generator.full_range("f64"))),
    ("f64", Distribution("edges", 0.0, 1e300)),
    ("f64", Distribution("edges", -1.0, 1.0)),
    ("f64", Distribution("edges", -7.5, -1e-310)),
    ("f64", Distribution("edges", 2.0, 2.0)),
    ("f32", Distribution("edges", *generator.full_range("f32"))),
    ("f32", Distribution("edges", 0.0, 1.0)),
    ("f32", Distribution("edges", -0.1, 3.3e-39)),
    ("f32", Distribution("edges", 1.0 + 0.4 * 2.0**-23, 1.0 + 2.5 * 2.0**-23)),
    ("i32", Distribution("edges", *generator.full_range("i32"))),
    ("i32", Distribution("edges", -1000, -3)),
    ("i32", Distribution("edges", 0, 2**31 - 1)),
    ("u32", Distribution("edges", *generator.full_range("u32"))),
    ("u32", Distribution("edges", 7, 12)),
    ("i64", Distribution("edges", *generator.full_range("i64"))),
    ("i64", Distribution("edges", -5, 5)),
    ("u64", Distribution("edges", *generator.full_range("u64"))),
    ("u64", Distribution("edges", 2**63, U64_MAX)),
]


@pytest.mark.parametrize(
    "dtype,dist", CROSS_CASES, ids=[f"{t}[{d.low},{d.high}]" for t, d in CROSS_CASES]
)
def test_cuda_source_as_host_code_matches_numpy_bit_for_bit(host_fill, dtype, dist):
    for seed, stream in [(0, 0), (123456789, stream_id("x")), (U64_MAX, 2**63 + 1)]:
        expected = generate(dtype, dist, seed, stream, 4099)
        raw = host_fill(dtype, dist, seed, stream, 4099)
        assert len(raw) == expected.nbytes
        unsigned = f"u{expected.itemsize}"
        got = np.frombuffer(raw, dtype=expected.dtype)
        bad = np.flatnonzero(got.view(unsigned) != expected.view(unsigned))
        assert bad.size == 0, (
            f"{dtype} {dist} seed={seed} stream={stream}: host build differs at {bad[:5]}: "
            f"{got[bad[:3]]} vs numpy {expected[bad[:3]]}"
        )


# ---- the committed PTX ---------------------------------------------------------------------------

EXPECTED_PARAM_BYTES = {
    # out, n, seed, stream, dtype, lo, hi, ilo, span, kind
    "kg_fill_random": [8, 8, 8, 8, 4, 8, 8, 8, 8, 4],
    "kg_flush_l2": [8, 8, 8],  # buf, n_words, sink
    "kg_spin": [8, 8, 8],  # flag, timeout_ns, status
    "kg_compare": [8, 8, 8, 4, 4, 8, 8, 8],  # got, want, n, dtype, exact, atol, rtol, acc
    "kg_stream_read": [8, 8, 8],  # buf, n_pairs, sink
    "kg_stream_write": [8, 8, 8],  # buf, n_pairs, value
    "kg_stream_copy": [8, 8, 8],  # src, dst, n_pairs
    "kg_poison_shared": [4],  # words
    "kg_poison_heap": [8, 8],  # chunk_bytes, heads
    "kg_free_heap": [8],  # heads
}
PTX_TYPE_BYTES = {"8": 1, "16": 2, "32": 4, "64": 8}


def ptx_entry_param_bytes(ptx: str) -> dict[str, list[int]]:
    entries = {}
    for name, params in re.findall(r"\.entry\s+(\w+)\s*\(([^)]*)\)", ptx):
        types = re.findall(r"\.param\s+\.[a-z]+(\d+)\s+\w+", params)
        entries[name] = [PTX_TYPE_BYTES[bits] for bits in types]
    return entries


def test_committed_ptx_is_built_from_the_current_source():
    assert device.recorded_sha256() == device.source_sha256()
    lines = device.KERNELS_PTX.read_text().splitlines()
    assert lines[1] == "// nvcc -ptx -arch=compute_75 -O3 -fmad=false -o kernels.ptx kernels.cu"
    assert ".target sm_75" in lines
    assert device.load_ptx().startswith("// kernelgap-source-sha256: ")


def test_committed_ptx_entries_and_parameter_sizes():
    assert ptx_entry_param_bytes(device.load_ptx()) == EXPECTED_PARAM_BYTES
    args = launch_args("f32", Distribution("uniform", 0.0, 1.0), 0, 0, 1)
    kind_bytes = {"u64": 8, "i32": 4, "f64": 8}
    assert [8] + [kind_bytes[kind] for kind, _ in args] == EXPECTED_PARAM_BYTES["kg_fill_random"]


def test_committed_ptx_assembles_for_sm_90(tmp_path):
    ptxas = static.find_program("ptxas")
    if ptxas is None:
        pytest.skip("ptxas not on PATH (CUDA toolkit absent): cannot assemble kernels.ptx")
    command = [ptxas, "-arch=sm_90", str(device.KERNELS_PTX), "-o", str(tmp_path / "k.cubin")]
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "k.cubin").stat().st_size > 0


def test_load_ptx_refuses_a_stale_ptx(tmp_path, monkeypatch):
    stale = tmp_path / "kernels.ptx"
    stale.write_text("// kernelgap-source-sha256: " + "0" * 64 + "\n.version 9.0\n")
    monkeypatch.setattr(device, "KERNELS_PTX", stale)
    with pytest.raises(RuntimeError, match=re.escape("python -m runner.gpu.device")):
        device.load_ptx()
    stale.write_text(".version 9.0\n")
    with pytest.raises(ValueError, match="line 1 should be"):
        device.recorded_sha256()


@pytest.fixture
def device_copy(tmp_path, monkeypatch):
    """runner.gpu.device pointed at a scratch copy of kernels.cu and kernels.ptx."""
    for path in (device.KERNELS_CU, device.KERNELS_PTX):
        shutil.copy(path, tmp_path / path.name)
    monkeypatch.setattr(device, "DEVICE_DIR", tmp_path)
    monkeypatch.setattr(device, "KERNELS_CU", tmp_path / "kernels.cu")
    monkeypatch.setattr(device, "KERNELS_PTX", tmp_path / "kernels.ptx")
    return tmp_path


def test_regenerate_reproduces_the_committed_ptx(device_copy):
    nvcc = static.find_program("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not on PATH (CUDA toolkit absent): cannot regenerate kernels.ptx")
    committed = device.KERNELS_PTX.read_text()
    device.KERNELS_PTX.write_text("stale\n")
    device.regenerate(nvcc)
    rebuilt = device.KERNELS_PTX.read_text()
    assert device.recorded_sha256() == device.source_sha256()
    assert ptx_entry_param_bytes(rebuilt) == EXPECTED_PARAM_BYTES
    version = re.search(r"^// Cuda compilation tools.*$", committed, re.M).group(0)
    if version in rebuilt:  # the same nvcc must give the same bytes
        assert rebuilt == committed


def test_regenerate_without_nvcc_leaves_the_ptx_alone(device_copy):
    before = device.KERNELS_PTX.read_bytes()
    with pytest.raises(RuntimeError, match="nvcc not found"):
        device.regenerate(nvcc=str(device_copy / "no-such-nvcc"))
    assert device.KERNELS_PTX.read_bytes() == before


EDGES_F64_GOLDEN = [
    "0x1.77f277b38e3a1p-247",
    "-0x1.fffffffffffffp-1",
    "-0x1.ebb8b2cbccee1p-347",
    "0x0.0p+0",
    "0x1.7ef1f615616bcp-222",
    "-0x0.0p+0",
]
EDGES_I64_GOLDEN = [37030444846707143, -9223372036854775807, -324526, 0, -1412861, -1]
