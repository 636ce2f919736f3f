"""A declaration's check must be able to fail: negative controls, or else null models (the
rules: runner.measurement.null_models).

A workload can declare negative controls (bench.Control: inputs changed so that the check must
reject the reference's result on them). One that declares none gets null models instead, as
`runner check` gives every suite case (runner.execution.null_models): outputs that did not do the work,
put through the case's own check against the reference's outputs. They are all zeros; a
constant (the mean of each expected output); a copy of an input of the outputs' shape and
dtype; and, for every precision below each float output's (runner.measurement.precision: f32,
f16 and bf16 below f64; f16 and bf16 below f32; ...), the reference on inputs rounded to it and
the reference computed in it (its inputs converted, so a torch reference runs in f16 or bf16;
where the framework cannot, numpy's bfloat16, the result is rounded instead). Any of them
passing the check is an error in the declaration: it cannot tell an implementation that
skipped the work from one that did it.
"""

from __future__ import annotations

from runner.bench import arrays
from runner.bench.verification import DeclarationError, Verification
from runner.measurement import null_models as rules

__all__ = ["null_models", "reject_controls"]


def null_models(inputs: tuple, expected: tuple, reference, call) -> dict[str, tuple]:
    """{description: outputs} of every null model that applies; `call(fn)` runs fn on the device."""
    models = {
        rules.ZEROS: tuple(arrays.zeros_like(e) for e in expected),
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
    for p in rules.lower_precisions(arrays.lower_precisions(e) for e in expected):
        models.update(
            rules.distinguishable(
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


def reject_controls(case, verification: Verification, expected: tuple, call, named) -> None:
    """Raise DeclarationError when a declared control, or (with none declared) a null model,
    passes the check of `case` against the reference's `expected` outputs. `named(what)` is a
    context that names `what` in the failure of user code (runner.bench.comparison._named)."""
    described = verification.describe(arrays.dtype_names(expected))
    for control in verification.controls:
        with named(f"negative control {control.name!r} of case {case.id}"):
            changed = control.transform(case.inputs)
            out = arrays.as_outputs(
                call(lambda changed=changed: case.reference(*changed)),
                f"the reference under control {control.name!r}",
            )
        if verification.passes(out, expected):
            raise DeclarationError(
                f"case {case.id}: negative control {control.name!r} passed the check "
                f"({described}): the declaration cannot tell a wrong result from a right one; "
                "tighten the tolerances or choose another control"
            )
    if verification.controls:
        return
    with named(f"the null models of case {case.id}"):
        models = null_models(case.inputs, expected, case.reference, call)
    passing = [what for what, outputs in models.items() if verification.passes(outputs, expected)]
    if passing:
        raise DeclarationError(
            f"case {case.id}: null model(s) {', '.join(repr(p) for p in passing)} pass the check "
            f"({described}): outputs that did not do the work would be verified; tighten the "
            "tolerances, make the data less degenerate, or declare negative controls "
            "(bench.Control) that the check must reject"
        )
