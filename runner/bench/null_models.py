"""A declaration's check must be able to fail: negative controls, or else null models.

A workload can declare negative controls (bench.Control: inputs changed so that the check must
reject the reference's result on them). One that declares none gets null models instead, as
`runner check` gives every suite case (runner.execution.null_models): outputs that did not do the work,
put through the case's own check against the reference's outputs. They are all zeros; a
constant (the mean of each expected output); a copy of an input of the outputs' shape and
dtype; and, where the case has float64 (or float32) inputs, the reference computed from inputs
rounded to float32 (float16). Any of them passing the check is an error in the declaration: it
cannot tell an implementation that skipped the work from one that did it.
"""

from __future__ import annotations

from runner.bench import arrays
from runner.bench.verification import DeclarationError, Verification

__all__ = ["null_models", "reject_controls"]


def null_models(inputs: tuple, expected: tuple, reference, call) -> dict[str, tuple]:
    """{description: outputs} of every null model that applies; `call(fn)` runs fn on the device."""
    models = {
        "all zeros": tuple(arrays.zeros_like(e) for e in expected),
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
    rounded = [arrays.rounded(x) for x in inputs]
    if any(r is not None for r in rounded):
        lower = sorted(
            {
                arrays.LOWER_PRECISION[arrays.dtype_name(x)]
                for x, r in zip(inputs, rounded, strict=True)
                if r is not None
            }
        )
        changed = tuple(x if r is None else r for x, r in zip(inputs, rounded, strict=True))
        low = arrays.as_outputs(call(lambda: reference(*changed)), "the reference")
        if len(low) == len(expected):
            models[f"the reference computed from inputs rounded to {', '.join(lower)}"] = tuple(
                arrays.cast_like(a, e) for a, e in zip(low, expected, strict=True)
            )
    return models


def reject_controls(case, verification: Verification, expected: tuple, call, named) -> None:
    """Raise DeclarationError when a declared control, or (with none declared) a null model,
    passes the check of `case` against the reference's `expected` outputs. `named(what)` is a
    context that names `what` in the failure of user code (runner.bench.runner._named)."""
    described = verification.describe(arrays.dtype_names(expected))
    for control in verification.controls:
        with named(f"negative control {control.name!r} of case {case.id}"):
            changed = control.transform(case.inputs)
            out = arrays.as_outputs(
                call(lambda changed=changed: case.reference(*changed)),
                f"the reference under control {control.name!r}",
            )
        if verification.check(out, expected).passed:
            raise DeclarationError(
                f"case {case.id}: negative control {control.name!r} passed the check "
                f"({described}): the declaration cannot tell a wrong result from a right one; "
                "tighten the tolerances or choose another control"
            )
    if verification.controls:
        return
    with named(f"the null models of case {case.id}"):
        models = null_models(case.inputs, expected, case.reference, call)
    passing = [
        what for what, outputs in models.items() if verification.check(outputs, expected).passed
    ]
    if passing:
        raise DeclarationError(
            f"case {case.id}: null model(s) {', '.join(repr(p) for p in passing)} pass the check "
            f"({described}): outputs that did not do the work would be verified; tighten the "
            "tolerances, make the data less degenerate, or declare negative controls "
            "(bench.Control) that the check must reject"
        )
