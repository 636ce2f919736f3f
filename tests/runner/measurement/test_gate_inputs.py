"""The correctness gate end to end on the CPU (tests/support/fake_gate_device.py): the second input set
(edges of the valid range), the null models of rounding and the canaries that poison reads past
a buffer. Honest kernels (the suite's references, an FMA-contracted axpy) pass every input set;
each shortcut is refused with a message naming what was found."""

from __future__ import annotations

import numpy as np
import pytest

from runner.definition import manifest
from runner.definition.reference import load_reference
from runner.measurement.gate import correctness as gate
from runner.measurement.precision import round_to
from tests.conftest import ROOT
from tests.support.fake_gate_device import FakeBuffer, run_gate

SUITE = manifest.load(ROOT / "benchmarks" / "cases.toml")


def honest(case, reference):
    """A kernel that writes the reference's outputs, rounded to the buffers' dtypes."""

    def kernel(memory):
        geometry = memory.buffers.geometry
        inputs = {b.name: memory[b.name].copy() for b in case.buffers if b.dist is not None}
        for name, values in gate.expected_outputs(case, geometry, reference, inputs).items():
            memory[name][:] = values.astype(memory[name].dtype)

    return kernel


@pytest.mark.parametrize("case_id", [c.id for c in SUITE.cases])
def test_every_suite_case_passes_both_input_sets_with_its_reference(case_id, monkeypatch):
    case = SUITE.case(case_id)
    reference = load_reference(SUITE, case)
    record = run_gate(case, reference, honest(case, reference), monkeypatch=monkeypatch)
    assert record["status"] == "passed", record["problems"]
    assert record["inputs_passed"] == ["declared", "edges"]
    assert record["rounding_shortcuts"] == []
    assert "tolerance_admits" not in record
    assert {c["inputs"] for c in record["against"]} == {"declared", "edges"}


def fused_axpy(memory):
    """y = fma(a, x, y): a*x exact in extended precision, one rounding (nvcc's contraction)."""
    x, y = memory["x"], memory["y"]
    a = np.longdouble(memory.scalar("a"))
    memory["y"][:] = (a * x.astype(np.longdouble) + y.astype(np.longdouble)).astype(np.float64)


def test_an_fma_contracted_axpy_passes_both_input_sets(monkeypatch):
    case = SUITE.case("axpy_f64")
    record = run_gate(case, load_reference(SUITE, case), fused_axpy, monkeypatch=monkeypatch)
    assert record["status"] == "passed", record["problems"]
    assert record["inputs_passed"] == ["declared", "edges"]


# ---- cheats ---------------------------------------------------------------------------------------


def edited_suite(tmp_path, old: str, new: str) -> manifest.Suite:
    import shutil

    shutil.copytree(
        ROOT / "benchmarks", tmp_path / "s", ignore=shutil.ignore_patterns("perf", "ops")
    )
    cases = tmp_path / "s" / "cases.toml"
    text = cases.read_text()
    assert old in text
    cases.write_text(text.replace(old, new, 1))
    return manifest.load(cases)


def axpy_through(precision: str):
    """axpy with x and y loaded into `precision`, a*x and the sum each rounded to it."""

    def kernel(memory):
        x, y = (round_to(memory[n].astype(np.float64), precision) for n in ("x", "y"))
        prod = round_to(memory.scalar("a") * x, precision)
        memory["y"][:] = round_to(prod + y, precision)

    return kernel


@pytest.mark.parametrize(
    ("precision", "tolerance"),
    [("f32", "{ rtol = 1e-6, atol = 1e-6 }"), ("f16", "{ rtol = 1e-2, atol = 1e-2 }")],
)
def test_a_loose_tolerance_admits_a_rounding_shortcut_and_the_gate_still_refuses_it(
    tmp_path, monkeypatch, precision, tolerance
):
    suite = edited_suite(
        tmp_path, "tolerance = { rtol = 1e-15, atol = 1e-15 }", f"tolerance = {tolerance}"
    )
    case = suite.case("axpy_f64")
    reference = load_reference(suite, case)
    record = run_gate(case, reference, axpy_through(precision), monkeypatch=monkeypatch)
    assert record["status"] == "failed"
    named = {s["null_model"] for s in record["rounding_shortcuts"]}
    assert (
        f"the reference computed in {precision} (inputs and result rounded to {precision})" in named
    )
    assert any(
        f"resembles the null model 'the reference computed in {precision}" in p
        for p in record["problems"]
    )
    assert any(precision in what for what in record["tolerance_admits"])
    honest_record = run_gate(case, reference, fused_axpy, monkeypatch=monkeypatch)
    assert honest_record["status"] == "passed", honest_record["problems"]
    assert honest_record["rounding_shortcuts"] == []


def test_attention_through_bf16_is_refused_and_named(monkeypatch):
    case = SUITE.case("attention_f32_naive")
    reference = load_reference(SUITE, case)

    def kernel(memory):
        geometry = memory.buffers.geometry
        inputs = {n: round_to(memory[n].copy(), "bf16") for n in ("q", "k", "v")}
        out = gate.expected_outputs(case, geometry, reference, inputs)["o"]
        memory["o"][:] = round_to(out, "bf16").astype(np.float32)

    record = run_gate(case, reference, kernel, monkeypatch=monkeypatch)
    assert record["status"] == "failed"
    assert any("bf16" in s["null_model"] for s in record["rounding_shortcuts"])


def test_a_shortcut_exact_only_for_the_declared_range_fails_on_the_edges(tmp_path, monkeypatch):
    # transpose's inputs are declared in [-1, 1); a kernel that clamps to that range is exact there
    case = SUITE.case("transpose_f32")
    reference = load_reference(SUITE, case)

    def kernel(memory):
        rows, cols = memory.buffers.geometry.dims["rows"], memory.buffers.geometry.dims["cols"]
        src = np.clip(memory["src"], -1.0, 1.0)
        memory["out"][:] = src.reshape(rows, cols).T.reshape(-1)

    record = run_gate(case, reference, kernel, monkeypatch=monkeypatch)
    assert record["status"] == "failed"
    assert record["inputs_passed"] == ["declared"]
    assert any("on the edges inputs" in p for p in record["problems"]), record["problems"]


def test_a_shortcut_wrong_only_for_negative_zero_fails_on_the_edges(monkeypatch):
    case = SUITE.case("transpose_f32")
    reference = load_reference(SUITE, case)

    def kernel(memory):
        rows, cols = memory.buffers.geometry.dims["rows"], memory.buffers.geometry.dims["cols"]
        src = memory["src"] + np.float32(0.0)  # -0.0 + 0.0 = +0.0: the sign of zero is lost
        memory["out"][:] = src.reshape(rows, cols).T.reshape(-1)

    record = run_gate(case, reference, kernel, monkeypatch=monkeypatch)
    assert record["status"] == "failed" and record["inputs_passed"] == ["declared"]
    assert any("got 0.0, expected -0.0" in p for p in record["problems"]), record["problems"]


def test_a_shortcut_wrong_only_for_zero_fails_on_the_edges(monkeypatch):
    case = SUITE.case("axpy_f64")

    def kernel(memory):  # x / x * a * x + y: NaN where x is zero, right everywhere else
        x, y = memory["x"], memory["y"]
        with np.errstate(invalid="ignore"):
            memory["y"][:] = x / x * (memory.scalar("a") * x) + y

    record = run_gate(case, load_reference(SUITE, case), kernel, monkeypatch=monkeypatch)
    assert record["status"] == "failed" and record["inputs_passed"] == ["declared"]
    assert any("on the edges inputs" in p and "got nan" in p for p in record["problems"])


def test_an_integer_shortcut_wrong_only_for_negative_values_fails_on_the_edges(
    tmp_path, monkeypatch
):
    suite = edited_suite(
        tmp_path,
        'init = { dist = "integers", low = -2147483648, high = 2147483647 } }',
        'init = { dist = "integers", low = 0, high = 2147483647 } }',
    )
    case = suite.case("scale_i64")
    reference = load_reference(suite, case)

    def kernel(memory):  # k*x + c computed on |x|: right for every declared (non-negative) x
        x = np.abs(memory["x"])
        with np.errstate(over="ignore"):
            memory["y"][:] = x * np.int64(memory.scalar("k")) + np.int64(memory.scalar("c"))

    record = run_gate(case, reference, kernel, monkeypatch=monkeypatch)
    assert record["status"] == "failed"
    assert record["inputs_passed"] == ["declared"]


def test_a_valid_range_keeps_the_edges_inside_what_the_reference_holds_for(tmp_path, monkeypatch):
    # sqrt-like: a kernel right for x >= 0 only passes when the case says x >= 0 is all it holds for
    suite = edited_suite(
        tmp_path,
        'init = { dist = "integers", low = -2147483648, high = 2147483647 } }',
        'init = { dist = "integers", low = 0, high = 2147483647 }, valid = { min = 0 } }',
    )
    case = suite.case("scale_i64")
    reference = load_reference(suite, case)

    def kernel(memory):
        with np.errstate(over="ignore"):
            memory["y"][:] = np.abs(memory["x"]) * np.int64(3) + np.int64(-7)

    record = run_gate(case, reference, kernel, monkeypatch=monkeypatch)
    assert record["status"] == "passed", record["problems"]


# ---- canaries -------------------------------------------------------------------------------------


def test_the_canary_reads_as_nan_for_floats_and_huge_for_integers():
    band = np.tile(gate.GUARD_PATTERN, 4)
    assert np.all(np.isnan(band.view(np.float32))) and np.all(np.isnan(band.view(np.float64)))
    assert band.view(np.float64)[0] != band.view(np.float64)[0]
    assert np.all(band.view(np.int32) > 2**30) and np.all(band.view(np.int64) > 2**62)
    assert np.all(band.view(np.uint32) > 2**30) and np.all(band.view(np.uint64) > 2**62)


def neighbour_sum(memory):
    """transpose that also adds 0 * src[i + 1]: reads one element past the end of src."""
    geometry = memory.buffers.geometry
    rows, cols = geometry.dims["rows"], geometry.dims["cols"]
    src = memory.reach("src", 1)
    with np.errstate(invalid="ignore"):
        mixed = src[:-1] + np.float32(0.0) * src[1:]
    memory["out"][:] = mixed.reshape(rows, cols).T.reshape(-1)


def test_a_read_one_element_past_the_end_poisons_the_output(monkeypatch):
    case = SUITE.case("transpose_f32")
    record = run_gate(case, load_reference(SUITE, case), neighbour_sum, monkeypatch=monkeypatch)
    assert record["status"] == "failed"
    assert any("got nan" in p for p in record["problems"]), record["problems"]
    assert record["out_of_bounds_writes"] == {}


def test_an_integer_read_past_the_end_is_visibly_wrong(monkeypatch):
    case = SUITE.case("scale_i64")

    def kernel(memory):
        x = memory.reach("x", 1)
        with np.errstate(over="ignore"):
            # |neighbour| >> 40 is 0 for every declared value (|x| <= 2^31), not for the canary
            memory["y"][:] = x[:-1] * np.int64(3) + np.int64(-7) + (np.abs(x[1:]) >> np.int64(40))

    record = run_gate(case, load_reference(SUITE, case), kernel, monkeypatch=monkeypatch)
    assert record["status"] == "failed"
    last = next(c for c in record["against"] if c["mismatches"])
    assert last["mismatches"] == 1 and last["first_mismatch"]["index"] == 100002


def test_writes_into_the_guard_band_are_still_caught(monkeypatch):
    case = SUITE.case("scale_i64")
    reference = load_reference(SUITE, case)

    def kernel(memory):
        honest(case, reference)(memory)
        memory.reach("y", 1)[-1] = 0

    record = run_gate(case, reference, kernel, monkeypatch=monkeypatch)
    assert record["status"] == "failed"
    assert record["out_of_bounds_writes"] == {"y": {"bytes_before": 0, "bytes_after": 8}}


def test_guard_bands_must_hold_whole_words(monkeypatch):
    monkeypatch.setattr(gate.driver, "Buffer", FakeBuffer)
    case = SUITE.case("scale_i64")
    with pytest.raises(ValueError, match="multiple of 8"):
        gate.DeviceBuffers(case, case.geometry(case.check_dims), None, None, 12)


# ---- the record -----------------------------------------------------------------------------------


def check_record_errors(record: dict) -> list[str]:
    import json

    from jsonschema import Draft202012Validator

    schema = json.loads((ROOT / "schemas" / "result.schema.json").read_text())
    sub = {"$defs": schema["$defs"], "$ref": "#/$defs/check"}
    return [e.message for e in Draft202012Validator(sub).iter_errors(record)]


def test_records_of_a_pass_and_of_a_refused_shortcut_fit_the_result_schema(tmp_path, monkeypatch):
    suite = edited_suite(
        tmp_path,
        "tolerance = { rtol = 1e-15, atol = 1e-15 }",
        "tolerance = { rtol = 1e-2, atol = 1e-2 }",
    )
    case = suite.case("axpy_f64")
    reference = load_reference(suite, case)
    refused = run_gate(case, reference, axpy_through("f16"), monkeypatch=monkeypatch)
    passed = run_gate(case, reference, fused_axpy, monkeypatch=monkeypatch)
    assert refused["rounding_shortcuts"] and passed["inputs_passed"] == ["declared", "edges"]
    assert check_record_errors(refused) == [] and check_record_errors(passed) == []


# ---- honest kernels in the GPU kernels' own orders (tree sums, in-order dot products, FMAs) -------


def tree_sum(m):
    x = m["x"].reshape(-1, 256).copy()
    while x.shape[1] > 1:
        half = x.shape[1] // 2
        x = x[:, :half] + x[:, half:]
    m["out"][:] = x[:, 0]


def in_order_fma_matmul(m):
    n = m.buffers.geometry.dims["n"]
    a, b = m["a"].reshape(n, n), m["b"].reshape(n, n)
    acc = np.zeros((n, n))
    for k in range(n):
        acc = (np.longdouble(1) * a[:, k : k + 1] * b[k : k + 1, :] + acc).astype(np.float64)
    m["c"][:] = acc.reshape(-1)


def fma_horner(m):
    from benchmarks.reference import HORNER_COEFFICIENTS

    x = m["x"]
    acc = np.full_like(x, HORNER_COEFFICIENTS[0])
    for c in HORNER_COEFFICIENTS[1:]:
        acc = (acc.astype(np.longdouble) * x + c).astype(np.float64)
    m["y"][:] = acc


def in_order_attention(m):
    seq, d = m.buffers.geometry.dims["seq"], m.buffers.geometry.dims["d"]
    q, k, v = (m[n].astype(np.float64).reshape(seq, d) for n in "qkv")
    scores = np.zeros((seq, seq))
    for j in range(d):
        scores = scores + q[:, j : j + 1] * k[:, j : j + 1].T
    scores = scores / np.sqrt(np.float64(d))
    scores[np.triu_indices(seq, 1)] = -1e30
    p = np.exp(scores - scores.max(axis=1, keepdims=True))
    total = np.zeros((seq, 1))
    for j in range(seq):
        total = total + p[:, j : j + 1]
    p = p / total
    o = np.zeros((seq, d))
    for j in range(seq):
        o = o + p[:, j : j + 1] * v[j : j + 1, :]
    m["o"][:] = o.reshape(-1).astype(np.float32)


@pytest.mark.parametrize(
    ("case_id", "kernel"),
    [
        ("reduce_sum_f64", tree_sum),
        ("matmul_f64_naive", in_order_fma_matmul),
        ("polynomial_f64", fma_horner),
        ("attention_f32_naive", in_order_attention),
    ],
)
def test_honest_kernels_in_other_orders_pass_both_sets_and_resemble_no_shortcut(
    case_id, kernel, monkeypatch
):
    # inputs next to +-1 round to +-1 in f32 and move polynomial_f64's result about as much as an
    # FMA does: only elements that a rounding of the lower precision moves may decide
    case = SUITE.case(case_id)
    record = run_gate(case, load_reference(SUITE, case), kernel, monkeypatch=monkeypatch)
    assert record["status"] == "passed", record["problems"]
    assert record["inputs_passed"] == ["declared", "edges"] and record["rounding_shortcuts"] == []
