"""The null models, one set for both front ends: outputs that did not do the work must fail a
check, or the check cannot tell a kernel that skipped the work from one that did it.

The models, in order: all zeros, a constant, copies of the inputs, partial work (the reference
with each float input's every second element zeroed and the rest doubled), then for every precision
below an output's (runner.measurement.precision) the reference on inputs rounded to it and the
arithmetic rounded to it, a model that gives exactly the expected outputs left out. A suite case
gets them from runner.measurement.gate.correctness (`runner check`: named numpy buffers); a
Python case from `null_models()` here (tuples of numpy arrays or torch tensors), put through its
declaration's check (runner.bench.verification.reject_controls). What passes is an error in the
case. The gate also refuses an output that resembles a rounding model (resemblance()), whatever
the tolerance says.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import NamedTuple, TypeVar

import numpy as np

from runner.measurement import precision
from runner.measurement.gate import arrays

__all__ = [
    "AS_LARGE_FACTOR",
    "MIN_EVIDENCE",
    "PARTIAL",
    "ZEROS",
    "Model",
    "distinguishable",
    "lower_precisions",
    "models",
    "null_models",
    "partial_models",
    "passing",
    "resemblance",
]

Outputs = TypeVar("Outputs")

ZEROS = "all zeros"
# a subset of the inputs, scaled: what a reduction that reads half its inputs and doubles writes
PARTIAL = "partial work (the reference on every second element of {input}, doubled)"
PARTIAL_INPUTS = 4  # inputs given a partial-work model each (the first float ones)


def lower_precisions(below_each_output: Iterable[Iterable[str]]) -> list[str]:
    """Every precision below any output's, once, in the order the outputs first name them."""
    lower: list[str] = []
    for precisions in below_each_output:
        lower += [p for p in precisions if p not in lower]
    return lower


def distinguishable(
    models: dict[str, Outputs], same_as_expected: Callable[[Outputs], bool]
) -> dict[str, Outputs]:
    """The models minus those that give exactly the expected outputs: a shortcut that does
    cannot be told apart on these inputs, so it says nothing against the tolerance."""
    return {what: model for what, model in models.items() if not same_as_expected(model)}


def passing(models: dict[str, Outputs], passes: Callable[[Outputs], bool]) -> list[str]:
    """The descriptions of the models that the case's check accepts (empty is good)."""
    return [what for what, model in models.items() if passes(model)]


def partial_models(inputs, names, run_reference) -> dict:
    """{description: outputs} of the reference run with one input at a time replaced by its
    subset_scaled twin (up to PARTIAL_INPUTS inputs): a tolerance that accepts one lets a kernel
    skip half its work; `inputs` and `names` are parallel, `run_reference(changed inputs)`."""
    found = {}
    for i, x in enumerate(inputs):
        half = arrays.subset_scaled(x)
        if half is None:
            continue
        changed = list(inputs)
        changed[i] = half
        with np.errstate(all="ignore"):
            found[PARTIAL.format(input=names[i])] = run_reference(changed)
        if len(found) == PARTIAL_INPUTS:
            break
    return found


# -- rounding models (both front ends) ------------------------------------------------------------


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
    lower = lower_precisions(precision.lower_precisions(d) for d in dtypes.values())
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
    return distinguishable(
        found,
        lambda model: all(
            np.array_equal(model.outputs[n].view(np.uint8), expected[n].view(np.uint8))
            for n in expected
        ),
    )


def _relative(a: np.ndarray, b: np.ndarray, scale: np.ndarray) -> np.ndarray:
    return np.abs(a - b) / scale


def resemblance(
    out: np.ndarray, exact: np.ndarray, model: np.ndarray, to: str, atol: float = 0.0
) -> dict | None:
    """How `out` stands between the exact reference and a rounding model to precision `to`,
    where it resembles the model; None where it does not, or where there is too little evidence.

    Judged on the elements where the model moves the result by at least an eighth of a unit
    of `to` and by more than 16 units of out's own precision (an honest output is closer than
    that to the reference), and whose reference is above the case's `atol` in magnitude
    (below it the tolerance calls a value noise: a denormal flushed to zero is no evidence), by
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
        usable = np.isfinite(want) & np.isfinite(low) & (scale > atol)
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


# -- a Python case's catalogue (numpy arrays or torch tensors) ------------------------------


def null_models(inputs: tuple, expected: tuple, reference, call) -> dict[str, tuple]:
    """{description: outputs} of every null model that applies; `call(fn)` runs fn on the device."""
    models = {
        ZEROS: tuple(arrays.zeros_like(e) for e in expected),
        "a constant (the mean of each expected output)": tuple(
            arrays.constant_like(e) for e in expected
        ),
    }
    for i, x in enumerate(inputs):
        if arrays.is_array(x) and all(
            tuple(x.shape) == tuple(e.shape) and arrays.dtype_name(x) == arrays.dtype_name(e)
            for e in expected
        ):
            models[f"a copy of input {i}"] = tuple(x for _ in expected)
    partial = partial_models(
        list(inputs),
        [f"input {i}" for i in range(len(inputs))],
        lambda changed: tuple(
            arrays.cast_like(a, e)
            for a, e in zip(
                arrays.as_outputs(call(lambda: reference(*changed)), "the reference"),
                expected,
                strict=False,
            )
        ),
    )
    models.update(
        distinguishable(
            {w: o for w, o in partial.items() if len(o) == len(expected)},
            lambda outputs: all(
                arrays.same_bytes(o, e) for o, e in zip(outputs, expected, strict=True)
            ),
        )
    )
    for p in lower_precisions(arrays.lower_precisions(e) for e in expected):
        models.update(
            distinguishable(
                _rounding_models(inputs, expected, reference, call, p),
                lambda outputs: all(
                    arrays.same_bytes(o, e) for o, e in zip(outputs, expected, strict=True)
                ),
            )
        )
    return models


def _rounding_models(inputs: tuple, expected: tuple, reference, call, to: str) -> dict:
    """The reference on inputs rounded to `to`, and computed in `to` (or with its result
    rounded to `to` where the inputs cannot be converted or the reference refuses the dtype)."""
    models = {}
    rounded = [arrays.rounded(x, to) for x in inputs]
    if any(r is not None for r in rounded):
        changed = tuple(x if r is None else r for x, r in zip(inputs, rounded, strict=True))
        low = arrays.as_outputs(call(lambda: reference(*changed)), "the reference")
        if len(low) == len(expected):
            models[f"the reference on inputs rounded to {to}"] = tuple(
                arrays.cast_like(a, e) for a, e in zip(low, expected, strict=True)
            )
    converted = [arrays.lowered(x, to) for x in inputs]
    if all(c is not None or r is None for c, r in zip(converted, rounded, strict=True)):
        args = tuple(x if c is None else c for x, c in zip(inputs, converted, strict=True))
        try:
            low = arrays.as_outputs(call(lambda: reference(*args)), "the reference")
        except (TypeError, ValueError, RuntimeError, NotImplementedError):
            low = None  # the reference cannot run in `to`: round its result instead
        if low is not None and len(low) == len(expected):
            models[f"the reference computed in {to}"] = tuple(
                arrays.cast_like(a, e) for a, e in zip(low, expected, strict=True)
            )
            return models
    if f"the reference on inputs rounded to {to}" in models:
        rounded_in = models[f"the reference on inputs rounded to {to}"]
        models[f"the reference computed in {to} (inputs and result rounded to {to})"] = tuple(
            arrays.round_like(a, to, e) for a, e in zip(rounded_in, expected, strict=True)
        )
    return models
