"""Tolerances with teeth: outputs that did not do the work must fail a case's comparison.

`runner check` (no GPU) puts each case's reference output at its check size next to null
models of it: all zeros, a constant (the mean of the expected output), a copy of each input of
the output's data type (for an inout buffer, its untouched initial contents: a kernel that did
nothing), and, where the case computes in f64, the reference computed from inputs rounded to
f32 (an f32 computation passed off as f64). A null model that passes the case's tolerance for
every written buffer is an error in the case: its tolerance (or its data) cannot tell a kernel
that skipped the work from one that did it.
"""

from __future__ import annotations

import numpy as np

from runner import gate, manifest, spec
from runner.reference import load_reference


def _matching_input(array: np.ndarray, length: int, dtype: np.dtype) -> np.ndarray:
    return np.resize(array, length).astype(dtype)


def null_models(
    case: manifest.CaseSpec, geometry: spec.Geometry, reference, inputs: dict, expected: dict
) -> dict[str, dict[str, np.ndarray]]:
    """{description: {written buffer: array}} for every null model that applies to the case."""
    models: dict[str, dict[str, np.ndarray]] = {
        "all zeros": {name: np.zeros_like(e) for name, e in expected.items()},
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
    if any(inputs[b.name].dtype == np.float64 for b in case.buffers if b.name in inputs):
        rounded = {
            k: (v.astype(np.float32).astype(np.float64) if v.dtype == np.float64 else v)
            for k, v in inputs.items()
        }
        low = gate.expected_outputs(case, geometry, reference, rounded)
        models["the reference computed from inputs rounded to f32"] = {
            name: low[name].astype(expected[name].dtype) for name in expected
        }
    return models


def passing_null_models(suite: manifest.Suite, case: manifest.CaseSpec) -> list[str]:
    """The null models that the case's tolerance accepts at its check size (empty is good)."""
    geometry = case.geometry(case.check_dims)
    reference = load_reference(suite, case)
    inputs = gate.host_inputs(case, geometry)
    expected = gate.expected_outputs(case, geometry, reference, inputs)
    tol = gate.Tolerance.of(case)
    passing = []
    for what, outputs in null_models(case, geometry, reference, inputs, expected).items():
        if all(gate.compare(outputs[n], expected[n], tol)["mismatches"] == 0 for n in expected):
            passing.append(what)
    return passing
