"""Tolerances with teeth, for suite cases: outputs that did not do the work must fail a case's
comparison (the rules: runner.measurement.null_models).

`runner check` (no GPU) puts each case's reference output at its check size next to null
models of it: all zeros, a constant (the mean of the expected output), a copy of each input of
the output's data type (for an inout buffer, its untouched initial contents: a kernel that did
nothing), and, for every precision below each float output's, the reference on inputs rounded
to it and the arithmetic rounded to it (runner.measurement.rounding_models: f16 or bf16 passed
off as f32, f32, f16 or bf16 as f64). A null model that passes the case's tolerance for every
written buffer is an error in the case: its tolerance (or its data) cannot tell a kernel that
skipped the work from one that did it.

It also runs the reference on the gate's second input set, the edges of each input's valid
range: a reference that gives infinities or NaN there needs the inputs' `valid` ranges declared
(edges_problems).
"""

from __future__ import annotations

import numpy as np

from runner.definition import manifest, spec
from runner.definition.reference import load_reference
from runner.measurement import gate, rounding_models
from runner.measurement import null_models as rules


def _matching_input(array: np.ndarray, length: int, dtype: np.dtype) -> np.ndarray:
    return np.resize(array, length).astype(dtype)


def null_models(
    case: manifest.CaseSpec, geometry: spec.Geometry, reference, inputs: dict, expected: dict
) -> dict[str, dict[str, np.ndarray]]:
    """{description: {written buffer: array}} for every null model that applies to the case."""
    models: dict[str, dict[str, np.ndarray]] = {
        rules.ZEROS: {name: np.zeros_like(e) for name, e in expected.items()},
    }
    constant = {}
    for name, e in expected.items():
        finite = e[np.isfinite(e)] if e.dtype.kind == "f" else e
        value = finite.mean() if finite.size else 0
        constant[name] = np.full_like(e, value if e.dtype.kind == "f" else int(np.round(value)))
    models["a constant (the mean of the expected output)"] = constant
    for b in case.buffers:
        if b.name not in inputs:
            continue
        copy = {
            name: _matching_input(inputs[b.name], e.size, e.dtype)
            for name, e in expected.items()
            if inputs[b.name].dtype == e.dtype
        }
        if copy and len(copy) == len(expected):
            what = (
                f"{b.name} untouched (a kernel that did nothing)"
                if b.written
                else f"a copy of input {b.name}"
            )
            models[what] = copy
    for what, model in rounding_models.models(
        inputs,
        expected,
        lambda x: gate.expected_outputs(case, geometry, reference, x),
        gate.output_dtypes(case),
    ).items():
        models[what] = model.outputs
    return models


def passing_null_models(suite: manifest.Suite, case: manifest.CaseSpec) -> list[str]:
    """The null models that the case's tolerance accepts at its check size (empty is good)."""
    geometry = case.geometry(case.check_dims)
    reference = load_reference(suite, case)
    inputs = gate.host_inputs(case, geometry)
    expected = gate.expected_outputs(case, geometry, reference, inputs)
    tol = gate.Tolerance.of(case)
    return rules.passing(
        null_models(case, geometry, reference, inputs, expected),
        lambda outputs: all(
            gate.compare(outputs[n], expected[n], tol)["mismatches"] == 0 for n in expected
        ),
    )


def edges_problems(suite: manifest.Suite, case: manifest.CaseSpec) -> list[str]:
    """Where the reference, on the edges of the inputs' valid ranges at the check size, gives
    non-finite outputs: the case must declare the ranges its arithmetic holds for."""
    geometry = case.geometry(case.check_dims)
    reference = load_reference(suite, case)
    with np.errstate(all="ignore"):
        expected = gate.expected_outputs(
            case, geometry, reference, gate.host_inputs(case, geometry, "edges")
        )
    problems = []
    for name, e in expected.items():
        bad = np.flatnonzero(~np.isfinite(e)) if e.dtype.kind == "f" else np.array([], int)
        if bad.size:
            problems.append(
                f"{name}: the reference gives {bad.size} non-finite values of {e.size} on the "
                f"edges of the inputs' valid ranges (first at index {int(bad[0])}); declare "
                "each input's valid = { min = ..., max = ... } for the values the case's "
                "arithmetic and tolerance hold for"
            )
    return problems
