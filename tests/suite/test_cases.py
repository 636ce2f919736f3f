"""The suite itself: every case version is locked to its content, and the references are right.

The references are checked against independent element-by-element computations (math.fsum,
Python integers) on the generator twin's inputs at each case's correctness size, the same
inputs the GPU gate gives the kernels.
"""

from __future__ import annotations

import math
import shutil

import numpy as np
import pytest

from runner.definition import lock, manifest
from runner.definition.reference import call_reference, load_reference
from runner.errors import LockError
from runner.gpu import generator
from tests.conftest import ROOT

SUITE = manifest.load(ROOT / "benchmarks" / "cases.toml")


def test_every_case_version_matches_its_recorded_content():
    assert lock.verify(SUITE) == []


def test_every_case_follows_the_naming_and_has_a_cuda_baseline_and_an_llvm_candidate():
    for case in SUITE.cases:
        assert case.baseline.name == "cuda" and case.baseline.toolchain == "nvcc", case.id
        llvm = case.impl("llvm")
        assert llvm.toolchain == "clang" and llvm.source == case.baseline.source, case.id


@pytest.fixture
def suite_copy(tmp_path):
    shutil.copytree(
        ROOT / "benchmarks",
        tmp_path / "benchmarks",
        ignore=shutil.ignore_patterns("perf", "__pycache__"),
    )
    return tmp_path / "benchmarks" / "cases.toml"


def test_an_edit_without_a_version_bump_fails_and_a_bump_passes(suite_copy):
    kernel = suite_copy.parent / "kernels" / "transpose_f32.cu"
    kernel.write_text(kernel.read_text().replace("#define ROWS 8", "#define ROWS 4"))
    problems = lock.verify(manifest.load(suite_copy))
    assert len(problems) == 1
    assert (
        "'transpose_f32'" in problems[0]
        and "implementation 'cuda'" in problems[0]
        and "bump its version" in problems[0]
    )
    with pytest.raises(LockError, match="bump the case's version"):
        lock.record(manifest.load(suite_copy))
    text = suite_copy.read_text()
    start = text.index('id = "transpose_f32"')
    suite_copy.write_text(text[:start] + text[start:].replace("version = 1", "version = 2", 1))
    assert "not recorded" in lock.verify(manifest.load(suite_copy))[0]
    assert lock.record(manifest.load(suite_copy)) == [("transpose_f32", 2)]
    assert lock.verify(manifest.load(suite_copy)) == []
    assert ("transpose_f32", 1) in lock.read_lock(suite_copy.with_suffix(".lock")), (
        "old versions stay recorded"
    )


@pytest.mark.parametrize(
    ("old", "new", "what"),
    [
        (
            "tolerance = { rtol = 1e-15, atol = 1e-15 }",
            "tolerance = { rtol = 1e-14, atol = 1e-15 }",
            "tolerance",
        ),
        (
            "dims = { n = 134217728, blocks = 4224 }        # 2^27",
            "dims = { n = 134217728, blocks = 4225 }        # 2^27",
            "dimensions",
        ),
        (
            '{ name = "a", type = "f64", value = 2.5 }',
            '{ name = "a", type = "f64", value = 3.5 }',
            "parameters",
        ),
    ],
)
def test_case_content_changes_are_caught(suite_copy, old, new, what):
    text = suite_copy.read_text()
    assert old in text
    suite_copy.write_text(text.replace(old, new, 1))
    problems = lock.verify(manifest.load(suite_copy))
    assert len(problems) == 1 and "'axpy_f64'" in problems[0] and what in problems[0]


def test_reference_source_changes_are_caught(suite_copy):
    ref = suite_copy.parent / "reference.py"
    ref.write_text(
        ref.read_text().replace(
            "p /= p.sum(axis=1, keepdims=True)", "p = p / p.sum(axis=1, keepdims=True)"
        )
    )
    problems = lock.verify(manifest.load(suite_copy))
    assert (
        len(problems) == 1 and "'attention_f32_naive'" in problems[0] and "reference" in problems[0]
    )


def test_a_constant_the_reference_uses_is_part_of_its_content(suite_copy):
    ref = suite_copy.parent / "reference.py"
    ref.write_text(
        ref.read_text().replace("for k in range(129)]", "for k in range(129)][:128] + [0.0]")
    )
    problems = lock.verify(manifest.load(suite_copy))
    assert len(problems) == 1 and "'polynomial_f64'" in problems[0]


def test_reformatting_or_redocumenting_a_reference_is_no_change(suite_copy):
    ref = suite_copy.parent / "reference.py"
    text = ref.read_text().replace('"""y = a * x + y', '"""Now with other prose: y = a * x + y')
    ref.write_text(
        text.replace('    return {"y": np.float64(a)', '    return  {"y" : np.float64(a)')
    )
    assert lock.verify(manifest.load(suite_copy)) == []


def test_a_new_candidate_needs_recording_but_no_version_bump(suite_copy):
    text = suite_copy.read_text()
    suite_copy.write_text(
        text + '\n[[case.impl]]\nname = "nvrtc"\nrole = "candidate"\ntoolchain = "nvrtc"\n'
        'source = "kernels/transpose_f32.cu"\nentry = "transpose_f32"\n'
    )
    problems = lock.verify(manifest.load(suite_copy))
    assert len(problems) == 1 and "['nvrtc'] are not recorded" in problems[0]
    assert lock.record(manifest.load(suite_copy)) == [("transpose_f32", 1)]
    assert lock.verify(manifest.load(suite_copy)) == []


def test_a_version_recorded_twice_is_refused(tmp_path):
    path = tmp_path / "cases.lock"
    entry = '[[version]]\ncase = "a"\nversion = 1\nsha256 = "00"\nimpls = {}\n'
    path.write_text(entry + entry)
    with pytest.raises(LockError, match="recorded twice"):
        lock.read_lock(path)


# --- references against independent computations on the twin's inputs --------------------


def _inputs(case_id: str):
    case = SUITE.case(case_id)
    geometry = case.geometry(case.check_dims)
    inputs = {
        b.name: generator.generate(
            b.dtype, b.dist, b.seed, generator.stream_id(b.name), geometry.lengths[b.name]
        )
        for b in case.buffers
        if b.dist is not None
    }
    expected = call_reference(load_reference(SUITE, case), case, geometry, dict(inputs))
    for b in case.buffers:
        if b.written:
            assert expected[b.name].size == geometry.lengths[b.name]
            assert np.all(np.isfinite(expected[b.name].astype(np.float64)))
    return geometry, inputs, expected


def test_inputs_are_the_twins_and_not_degenerate():
    _, inputs, _ = _inputs("matmul_f64_naive")
    assert not np.array_equal(inputs["a"], inputs["b"]), "each buffer has its own stream"
    assert 0.5 < inputs["a"].std() * math.sqrt(3) < 1.5  # uniform on [-1, 1)


def test_scale_i64_reference():
    g, x, want = _inputs("scale_i64")
    k, c = g.scalars["k"], g.scalars["c"]
    for i in (0, 1, 77, g.lengths["x"] - 1):
        exact = (k * int(x["x"][i]) + c + 2**63) % 2**64 - 2**63
        assert int(want["y"][i]) == exact


def test_axpy_reference():
    g, x, want = _inputs("axpy_f64")
    for i in (0, 5, g.lengths["x"] - 1):
        assert want["y"][i] == pytest.approx(
            2.5 * float(x["x"][i]) + float(x["y"][i]), rel=1e-15, abs=1e-15
        )


def test_block_sums_reference():
    g, x, want = _inputs("reduce_sum_f64")
    for b in (0, 500, g.dims["blocks"] - 1):
        assert want["out"][b] == pytest.approx(
            math.fsum(x["x"][256 * b : 256 * (b + 1)]), rel=1e-13, abs=1e-13
        )


@pytest.mark.parametrize("case_id", ["matmul_f64_naive", "matmul_f64_tiled"])
def test_matmul_reference(case_id):
    g, x, want = _inputs(case_id)
    n = g.dims["n"]
    a, b = x["a"].reshape(n, n), x["b"].reshape(n, n)
    for i, j in ((0, 0), (3, 66), (66, 1), (40, 40)):
        assert want["c"][i * n + j] == pytest.approx(
            math.fsum(a[i, k] * b[k, j] for k in range(n)), rel=1e-12, abs=1e-12
        )


def test_attention_reference():
    g, x, want = _inputs("attention_f32_naive")
    seq, d = g.dims["seq"], g.dims["d"]
    q, k, v = (x[name].astype(float).reshape(seq, d) for name in "qkv")
    for row in (0, 1, 137, seq - 1):
        scores = [
            math.fsum(q[row] * k[key]) / math.sqrt(d) if key <= row else -1e30 for key in range(seq)
        ]
        top = max(scores)
        weights = [math.exp(s - top) for s in scores]
        total = math.fsum(weights)
        for col in (0, d - 1):
            value = math.fsum(w / total * v[key, col] for key, w in enumerate(weights))
            assert want["o"][row * d + col] == pytest.approx(value, rel=1e-12, abs=1e-12)
    assert np.allclose(want["o"][:d], v[0]), "the first query sees only the first key"


def test_horner_reference():
    g, x, want = _inputs("polynomial_f64")
    c = [(-1.0) ** k / (k + 1) for k in range(129)]
    for i in (0, 9, g.lengths["x"] - 1):
        xi = float(x["x"][i])
        direct = math.fsum(ck * xi ** (len(c) - 1 - k) for k, ck in enumerate(c))
        assert want["y"][i] == pytest.approx(direct, rel=1e-10, abs=1e-10)


def test_grid_stride_cases_run_many_sweeps_at_the_check_size():
    # A loop that is never taken at the check size would let a broken back-edge through the gate.
    for case in SUITE.cases:
        if "grid-stride" in case.description:
            g = case.geometry(case.check_dims)
            threads = g.grid[0] * g.block[0]
            assert g.lengths["x"] / threads > 10, case.id


def test_transpose_reference():
    g, x, want = _inputs("transpose_f32")
    rows, cols = g.dims["rows"], g.dims["cols"]
    for r, c in ((0, 0), (0, cols - 1), (rows - 1, 0), (rows - 1, cols - 1), (30, 20)):
        assert want["out"][c * rows + r] == x["src"][r * cols + c]
