"""Null models of rounding: what a lower-precision shortcut would output, and whether an
implementation's output looks like one.

For every precision below an output's (runner.measurement.precision), two models: the
reference on inputs rounded to that precision ("inputs rounded"), and the same with its result
rounded too ("arithmetic rounded": the reference cannot run in f16 or bf16 itself, so the
arithmetic's last rounding stands in for all of it). `runner check` refuses a tolerance that
admits one; the gate refuses an output that resembles one (resemblance()), whatever the
tolerance says.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from runner.measurement import null_models, precision

__all__ = ["AS_LARGE_FACTOR", "MIN_EVIDENCE", "Model", "models", "resemblance"]


class Model(NamedTuple):
    precision: str  # what the shortcut rounds to
    outputs: dict[str, np.ndarray]  # {written buffer: what it would output}


# Fewer elements where a model moves the result than this decide nothing.
MIN_EVIDENCE = 16
# An output whose median error is at least the model's divided by this is as wrong as it.
AS_LARGE_FACTOR = 4.0


def _inputs_rounded(inputs: dict[str, np.ndarray], to: str) -> dict[str, np.ndarray]:
    rank = precision.PRECISIONS[to].significand_bits
    rounded = {}
    for name, x in inputs.items():
        own = precision.short_name(x.dtype.name)
        above = own is not None and precision.PRECISIONS[own].significand_bits > rank
        rounded[name] = precision.round_to(x, to) if above else x
    return rounded


def models(
    inputs: dict[str, np.ndarray],
    expected: dict[str, np.ndarray],
    run_reference,
    output_dtypes: dict[str, str] | None = None,
) -> dict[str, Model]:
    """{description: Model} for each precision below the outputs' float dtypes
    (`output_dtypes`, {buffer: dtype name}; by default the expected arrays', which a float64
    reference may have widened); `run_reference(inputs) -> {buffer: array}` runs the case's
    reference on copies."""
    dtypes = output_dtypes or {name: e.dtype.name for name, e in expected.items()}
    lower = null_models.lower_precisions(precision.lower_precisions(d) for d in dtypes.values())
    found: dict[str, Model] = {}
    for p in lower:
        with np.errstate(all="ignore"):  # rounding to f16 overflows wide values on purpose
            low = run_reference(_inputs_rounded(inputs, p))
        found[f"the reference on inputs rounded to {p}"] = Model(
            p, {name: np.asarray(low[name]).astype(e.dtype) for name, e in expected.items()}
        )
        found[f"the reference computed in {p} (inputs and result rounded to {p})"] = Model(
            p,
            {
                name: (
                    precision.round_to(np.asarray(low[name]).astype(e.dtype), p)
                    if precision.short_name(e.dtype.name)
                    else np.asarray(low[name]).astype(e.dtype)
                )
                for name, e in expected.items()
            },
        )
    return null_models.distinguishable(
        found,
        lambda model: all(
            np.array_equal(model.outputs[n].view(np.uint8), expected[n].view(np.uint8))
            for n in expected
        ),
    )


def _relative(a: np.ndarray, b: np.ndarray, scale: np.ndarray) -> np.ndarray:
    return np.abs(a - b) / scale


def resemblance(out: np.ndarray, exact: np.ndarray, model: np.ndarray, to: str) -> dict | None:
    """How `out` stands between the exact reference and a rounding model to precision `to`,
    where it resembles the model; None where it does not, or where there is too little evidence.

    Judged on the elements where the model moves the result by at least an eighth of a unit
    of `to` and by more than 16 units of out's own precision (an honest output is closer than
    that to the reference), by
    median relative distances: out resembles the model when it is no farther from the model
    than from the reference, or when its error is at least a quarter of the model's (only where
    `to` has 8 or more fewer significand bits than out's precision).
    """
    own = precision.short_name(out.dtype.name)
    if own is None:
        return None
    own_bits = precision.PRECISIONS[own].significand_bits
    to_bits = precision.PRECISIONS[to].significand_bits
    gap_bits = own_bits - to_bits
    # an element counts where the model moves the result by a rounding of `to` (not merely by
    # a few of out's own units, as inputs already almost representable in `to` do)
    threshold = max(2.0 ** (5 - own_bits), 2.0 ** (-to_bits - 3))
    with np.errstate(all="ignore"):
        got, want, low = (a.astype(np.float64) for a in (out, exact, model))
        scale = np.abs(want)
        usable = np.isfinite(want) & np.isfinite(low) & (scale > 0)
        moved = np.zeros(out.shape, dtype=bool)
        moved[usable] = _relative(low[usable], want[usable], scale[usable]) > threshold
        if np.count_nonzero(moved) < MIN_EVIDENCE:
            return None
        got_m, want_m, low_m, scale_m = got[moved], want[moved], low[moved], scale[moved]
        finite = np.isfinite(got_m)
        if not finite.any():
            return None
        to_reference = float(np.median(_relative(got_m[finite], want_m[finite], scale_m[finite])))
        to_model = float(np.median(_relative(got_m[finite], low_m[finite], scale_m[finite])))
        shortcut = float(np.median(_relative(low_m, want_m, scale_m)))
    closer = to_model <= to_reference
    # within a factor 4 of the shortcut's error: far above what a long f32 sum loses honestly
    as_large = gap_bits >= 8 and to_reference >= shortcut / AS_LARGE_FACTOR
    if not (closer or as_large):
        return None
    return {
        "elements": int(np.count_nonzero(moved)),
        "median_rel_to_model": to_model,
        "median_rel_to_reference": to_reference,
        "median_rel_model_to_reference": shortcut,
        "why": "no farther from the model than from the reference"
        if closer
        else "an error of the order of the model's",
    }
