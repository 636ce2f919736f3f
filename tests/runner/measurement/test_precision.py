"""runner.measurement.precision (rounding to lower precisions) and rounding_models (what a
rounding shortcut outputs, and when an output resembles one)."""

from __future__ import annotations

import numpy as np
import pytest

from runner.measurement import precision
from runner.measurement.gate import null_models as rounding_models
from runner.measurement.precision import round_to


def wide_values(n: int = 50000) -> np.ndarray:
    rng = np.random.default_rng(7)
    x = rng.standard_normal(n) * 10.0 ** rng.integers(-50, 50, n)
    edges = [65504.0, 65519.99, 65520.0, 6e-8, 2.98e-8, 3e-8, -0.0, 0.0, np.inf, -np.inf, np.nan]
    return np.concatenate([x, edges, [3.4028235677973366e38, 3.4028236e38, 1e-45, 7e-46]])


@pytest.mark.parametrize(("name", "numpy_type"), [("f16", np.float16), ("f32", np.float32)])
def test_rounding_agrees_with_numpy_casts_bit_for_bit(name, numpy_type):
    x = wide_values()
    with np.errstate(over="ignore"):
        want = x.astype(numpy_type).astype(np.float64)
    got = round_to(x, name)
    assert got.dtype == np.float64
    same = (got.view(np.uint64) == want.view(np.uint64)) | (np.isnan(got) & np.isnan(want))
    assert same.all(), x[~same][:5]


def bf16_by_bits(x32: np.ndarray) -> np.ndarray:
    """bfloat16 rounding written out on the f32 bit pattern (round to nearest even)."""
    bits = x32.view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16
    return rounded.astype(np.uint32).view(np.float32)


def test_bf16_rounding_agrees_with_the_bit_pattern_rule():
    with np.errstate(over="ignore"):
        x32 = wide_values().astype(np.float32)
    x32 = x32[np.isfinite(x32)]
    got = round_to(x32, "bf16")
    assert got.dtype == np.float32
    want = bf16_by_bits(x32)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def test_rounding_keeps_nan_infinities_and_the_sign_of_zero():
    x = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1e10])
    got = round_to(x, "f16")
    assert np.isnan(got[0]) and got[1] == np.inf and got[2] == -np.inf
    assert np.signbit(got[3]) and not np.signbit(got[4]) and got[5] == np.inf


def test_the_ladder_names_every_lower_precision():
    assert precision.lower_precisions("float64") == ("f32", "f16", "bf16")
    assert precision.lower_precisions("f32") == ("f16", "bf16")
    assert precision.lower_precisions("float16") == ("bf16",)
    assert precision.lower_precisions("bfloat16") == ()  # f16 is not less precise than bf16
    assert precision.lower_precisions("int64") == ()


def times_two(inputs):
    return {"out": inputs["x"].astype(np.float64) * 2.0}


def test_models_cover_inputs_rounded_and_arithmetic_rounded_for_each_lower_precision():
    x = np.linspace(-3.0, 3.0, 101, dtype=np.float32) + np.float32(1e-3)
    expected = times_two({"x": x})
    models = rounding_models.models({"x": x}, expected, times_two, {"out": "float32"})
    assert set(models) == {
        name
        for p in ("f16", "bf16")
        for name in (
            f"the reference on inputs rounded to {p}",
            f"the reference computed in {p} (inputs and result rounded to {p})",
        )
    }
    assert {m.precision for m in models.values()} == {"f16", "bf16"}
    f16 = models["the reference computed in f16 (inputs and result rounded to f16)"]
    assert np.array_equal(f16.outputs["out"], round_to(x.astype(np.float64) * 2.0, "f16"))
    assert models["the reference on inputs rounded to bf16"].outputs["out"].dtype == np.float64


def test_an_output_computed_in_the_lower_precision_resembles_its_model():
    rng = np.random.default_rng(3)
    exact = rng.uniform(-1, 1, 4096)
    model = round_to(exact, "f16")
    honest = exact.astype(np.float32)
    assert rounding_models.resemblance(honest, exact, model.astype(np.float64), "f16") is None
    cheat = model.astype(np.float32)
    found = rounding_models.resemblance(cheat, exact, model, "f16")
    assert found is not None and found["why"] == "no farther from the model than from the reference"
    assert found["median_rel_to_model"] == 0.0 and found["elements"] > 3000


def test_an_output_as_wrong_as_the_shortcut_resembles_it_even_off_the_model():
    rng = np.random.default_rng(4)
    exact = rng.uniform(0.5, 1.0, 4096)
    model = round_to(exact, "f16")
    noisy = (exact * (1 + rng.choice([-1, 1], 4096) * 2.0**-12)).astype(np.float32)
    found = rounding_models.resemblance(noisy, exact, model, "f16")
    assert found is not None


def test_too_little_evidence_or_an_integer_output_decides_nothing():
    exact = np.array([1.0, 2.0, 3.0 + 2**-20])
    model = round_to(exact, "f16")
    assert rounding_models.resemblance(model.astype(np.float32), exact, model, "f16") is None
    ints = np.arange(100, dtype=np.int64)
    assert rounding_models.resemblance(ints, ints, ints, "f16") is None


def test_an_honest_f16_output_does_not_resemble_the_bf16_model():
    rng = np.random.default_rng(5)
    exact = rng.uniform(-1, 1, 4096)
    honest = exact.astype(np.float16)
    assert rounding_models.resemblance(honest, exact, round_to(exact, "bf16"), "bf16") is None


def test_an_honest_long_f32_sum_resembles_no_lower_precision():
    rng = np.random.default_rng(6)
    terms = rng.uniform(-1, 1, (512, 4096)).astype(np.float32)
    exact = terms.astype(np.float64).sum(axis=1)
    honest = np.cumsum(terms, axis=1, dtype=np.float32)[:, -1]  # one f32 rounding per term
    assert np.median(np.abs(honest - exact) / np.abs(exact)) > 2.0**-22  # really lossy
    for p in ("f16", "bf16"):
        assert rounding_models.resemblance(honest, exact, round_to(exact, p), p) is None


def test_values_under_the_atol_are_no_evidence_of_a_lower_precision():
    """Issue 50's honest fast-math control: on the edge inputs, results of 1e-37 come out 0 (its
    denormals flushed), as the f16 model's do (underflow) and 100% from the reference (bf16's
    0.4%): relative distances there say nothing the tolerance (atol 1e-4) does not call noise.
    The same output through f16 where the values are above the atol is still caught."""
    rng = np.random.default_rng(7)
    tiny = rng.uniform(1e-37, 1e-36, 4096)
    flushed = np.zeros(4096, dtype=np.float32)
    for p in ("f16", "bf16"):
        model = round_to(tiny, p)
        assert rounding_models.resemblance(flushed, tiny, model, p) is not None  # without atol
        assert rounding_models.resemblance(flushed, tiny, model, p, atol=1e-4) is None
    exact = rng.uniform(-4, 4, 4096)
    model = round_to(exact, "f16")
    found = rounding_models.resemblance(model.astype(np.float32), exact, model, "f16", atol=1e-2)
    assert found is not None and found["elements"] > 3000
