"""How a case's outputs are verified against its reference, declared once per workload.

Checked kinds (Exact, Partial, Custom) compare outputs and give a ratio against the op; the
unchecked kinds (Unestablished, ReferenceInfeasible, Noncomparable) time without a check and
give no ratio. Each kind says in `describe()` what the report prints, and `verified` says
whether a passing row earns a ratio. A declaration's check must be able to fail: its negative
controls, or else the null models (runner.measurement.gate.null_models), must not pass it
(reject_controls). `check()` is the correctness test a benchmark's workload also serves:
`bench.check(my_op, *workload.gen_inputs(params, dtype, seed), reference=workload.reference)`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from runner.definition.spec import DEFAULT_TOLERANCES, default_tolerance
from runner.errors import DeclarationError
from runner.measurement.gate import arrays, null_models

__all__ = [
    "DEFAULT_TOLERANCES",
    "Control",
    "Custom",
    "Exact",
    "Noncomparable",
    "Partial",
    "ReferenceInfeasible",
    "Unestablished",
    "Verification",
    "check",
    "comparison_changed",
    "reject_controls",
    "tolerance_for",
    "zeroed_input",
]


def tolerance_for(dtype: str) -> tuple[float, float]:
    """(rtol, atol) an output of `dtype` (a numpy or torch name) is checked with when a
    declaration gives none: runner.definition.spec.DEFAULT_TOLERANCES, the suite's defaults
    too; a complex dtype's parts take their float's; integers and bools are exact."""
    return default_tolerance(dtype)


def _reason(owner: str, reason) -> str:
    if not isinstance(reason, str) or not reason.strip():
        raise DeclarationError(f"{owner} needs a reason: a non-empty string saying why")
    return reason.strip()


def _tolerance(owner: str, name: str, value) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise DeclarationError(f"{owner}.{name} must be a number >= 0 (got {value!r})")
    return float(value)


def _controls(declaration, owner: str) -> None:
    """Store `controls` as a tuple of Control values, or raise naming the bad one."""
    object.__setattr__(declaration, "controls", tuple(declaration.controls))
    for c in declaration.controls:
        if not isinstance(c, Control):
            raise DeclarationError(
                f"{owner}.controls takes bench.Control values such as bench.zeroed_input(0) "
                f"(got {type(c).__name__}: {c!r})"
            )


@dataclass(frozen=True)
class Control:
    """A negative control: inputs changed so that a correct check must reject the result.

    `transform(inputs) -> inputs` returns new inputs (never writing the ones it is given); the
    reference is run on them and the case's check must fail against the true expected outputs.
    """

    name: str
    transform: Callable[[tuple], tuple]


def zeroed_input(index: int) -> Control:
    """The control 'input `index` zeroed'."""

    def transform(inputs: tuple) -> tuple:
        if not 0 <= index < len(inputs):
            raise DeclarationError(
                f"control 'input {index} zeroed': the case has {len(inputs)} inputs"
            )
        return tuple(arrays.zeros_like(x) if i == index else x for i, x in enumerate(inputs))

    return Control(f"input {index} zeroed", transform)


@dataclass(frozen=True)
class CheckOutcome:
    passed: bool
    comparisons: list[dict] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


class Verification:
    kind = ""
    verified = False  # a passing row earns a ratio against the op
    checks = False  # outputs are compared at all
    controls: tuple = ()

    def describe(self, dtypes: tuple[str, ...] = ()) -> str:
        """The report's text; `dtypes` (of the expected outputs) make default tolerances concrete."""
        raise NotImplementedError

    def check(self, outputs: tuple, expected: tuple) -> CheckOutcome:
        raise NotImplementedError(f"{type(self).__name__} does not check outputs")

    def passes(self, outputs: tuple, expected: tuple) -> bool:
        """check()'s verdict alone (the null models and negative controls want no more); the
        tolerance checks stop at the first failing chunk (arrays.agrees)."""
        return self.check(outputs, expected).passed

    def fit(self, expected_outputs: int) -> None:
        """Raise DeclarationError if the declaration cannot apply to this many outputs."""


def _compare_outputs(
    outputs: tuple,
    expected: tuple,
    count: int,
    rtol: float | None,
    atol: float | None,
    all_outputs: bool = False,
) -> CheckOutcome:
    problems, comparisons = [], []
    if all_outputs and len(outputs) != len(expected):
        problems.append(
            f"{len(outputs)} outputs returned where the reference returns {len(expected)}"
        )
        return CheckOutcome(False, comparisons, problems)
    if len(outputs) < count or len(expected) < count:
        problems.append(
            f"{len(outputs)} outputs returned, {len(expected)} expected; {count} are checked"
        )
        return CheckOutcome(False, comparisons, problems)
    for i in range(count):
        dtype, r, a = _output_tolerance(expected[i], rtol, atol)
        result = arrays.compare(outputs[i], expected[i], r, a)
        result["output"] = i
        result["tolerance"] = f"rtol={r:g}, atol={a:g} ({dtype})"
        comparisons.append(result)
        if result["mismatches"]:
            problems.append(f"output {i}: {result['problem']}")
    return CheckOutcome(not problems, comparisons, problems)


def _outputs_agree(outputs, expected, count, rtol, atol, all_outputs: bool = False) -> bool:
    """_compare_outputs(...).passed, stopping at the first chunk that disagrees."""
    if (all_outputs and len(outputs) != len(expected)) or min(len(outputs), len(expected)) < count:
        return False
    return all(
        arrays.agrees(outputs[i], expected[i], *_output_tolerance(expected[i], rtol, atol)[1:])
        for i in range(count)
    )


def _output_tolerance(expected, rtol, atol) -> tuple[str, float, float]:
    """An expected output's dtype name and the (rtol, atol) it is checked with: the declared
    ones, else its dtype's defaults."""
    dtype = arrays.dtype_name(expected)
    default_r, default_a = tolerance_for(dtype)
    return dtype, default_r if rtol is None else rtol, default_a if atol is None else atol


def _tolerance_text(rtol, atol, dtypes: tuple[str, ...] = ()) -> str:
    parts = []
    for dtype in dict.fromkeys(dtypes) or [None]:
        default_r, default_a = tolerance_for(dtype) if dtype else (None, None)
        r = rtol if rtol is not None else default_r
        a = atol if atol is not None else default_a
        if r is None or a is None:
            text = f"rtol={'per dtype' if r is None else f'{r:g}'}, atol={'per dtype' if a is None else f'{a:g}'}"
        elif r == 0 and a == 0:
            text = "bit-exact"
        else:
            text = f"rtol={r:g}, atol={a:g}"
        parts.append(f"{text} ({dtype})" if dtype and len(dict.fromkeys(dtypes)) > 1 else text)
    return "; ".join(parts)


@dataclass(frozen=True)
class Exact(Verification):
    """Every output within tolerance of the reference's."""

    rtol: float | None = None
    atol: float | None = None
    controls: tuple[Control, ...] = ()
    kind = "exact"
    verified = True
    checks = True

    def __post_init__(self):
        _tolerance("Exact", "rtol", self.rtol)
        _tolerance("Exact", "atol", self.atol)
        _controls(self, "Exact")

    def describe(self, dtypes: tuple[str, ...] = ()) -> str:
        return f"exact: every output, {_tolerance_text(self.rtol, self.atol, dtypes)}"

    def check(self, outputs, expected):
        return _compare_outputs(outputs, expected, len(expected), self.rtol, self.atol, True)

    def passes(self, outputs, expected):
        return _outputs_agree(outputs, expected, len(expected), self.rtol, self.atol, True)


@dataclass(frozen=True)
class Partial(Verification):
    """Only the first `outputs` outputs are checked; the others are named in the report."""

    outputs: int
    reason: str
    rtol: float | None = None
    atol: float | None = None
    controls: tuple[Control, ...] = ()
    kind = "partial"
    verified = True
    checks = True

    def __post_init__(self):
        if isinstance(self.outputs, bool) or not isinstance(self.outputs, int) or self.outputs < 1:
            raise DeclarationError(
                f"Partial.outputs must be an int >= 1, the number of leading outputs checked (got {self.outputs!r})"
            )
        object.__setattr__(self, "reason", _reason("Partial", self.reason))
        _tolerance("Partial", "rtol", self.rtol)
        _tolerance("Partial", "atol", self.atol)
        _controls(self, "Partial")

    def describe(self, dtypes: tuple[str, ...] = ()) -> str:
        checked = "output 0" if self.outputs == 1 else f"outputs 0-{self.outputs - 1}"
        total = len(dtypes)
        if total and total <= self.outputs:
            unchecked = "none left unchecked"
        elif total:
            last = total - 1
            unchecked = (
                f"output {last}" if last == self.outputs else f"outputs {self.outputs}-{last}"
            )
            unchecked += " not checked"
        else:
            unchecked = f"outputs from {self.outputs} on not checked"
        tol = _tolerance_text(self.rtol, self.atol, tuple(dtypes[: self.outputs]))
        return f"partial: {checked} checked ({tol}); {unchecked}: {self.reason}"

    def fit(self, expected_outputs: int) -> None:
        if self.outputs > expected_outputs:
            raise DeclarationError(
                f"Partial(outputs={self.outputs}) checks more outputs than the reference returns "
                f"({expected_outputs})"
            )

    def check(self, outputs, expected):
        return _compare_outputs(outputs, expected, self.outputs, self.rtol, self.atol)

    def passes(self, outputs, expected):
        return _outputs_agree(outputs, expected, self.outputs, self.rtol, self.atol)


@dataclass(frozen=True)
class Custom(Verification):
    """`validator(outputs, expected)` decides: None or True passes; False, a string or an
    exception fails (the string or the exception's text is the reason)."""

    validator: Callable
    reason: str
    controls: tuple[Control, ...] = ()
    kind = "custom"
    verified = True
    checks = True

    def __post_init__(self):
        if not callable(self.validator):
            raise DeclarationError(
                f"Custom.validator must be callable (got {type(self.validator).__name__})"
            )
        object.__setattr__(self, "reason", _reason("Custom", self.reason))
        _controls(self, "Custom")

    def describe(self, dtypes: tuple[str, ...] = ()) -> str:
        name = getattr(self.validator, "__qualname__", type(self.validator).__name__)
        return f"custom: {name}: {self.reason}"

    def check(self, outputs, expected):
        try:
            verdict = self.validator(outputs, expected)
        except Exception as exc:  # the validator's own failure is a failed check, with its text
            return CheckOutcome(False, [], [f"{type(exc).__name__}: {exc}"])
        if verdict is None or verdict is True:
            return CheckOutcome(True)
        text = verdict if isinstance(verdict, str) else "the validator returned False"
        return CheckOutcome(False, [], [text])


@dataclass(frozen=True)
class Unestablished(Verification):
    """No reference result is established yet: rows are timed, unverified, without a ratio."""

    reason: str
    kind = "unestablished"

    def __post_init__(self):
        object.__setattr__(self, "reason", _reason("Unestablished", self.reason))

    def describe(self, dtypes: tuple[str, ...] = ()) -> str:
        return f"unverified: no reference established: {self.reason}"


@dataclass(frozen=True)
class ReferenceInfeasible(Verification):
    """A reference cannot be computed (`missing` names what is lacking)."""

    missing: str
    reason: str
    kind = "reference_infeasible"

    def __post_init__(self):
        object.__setattr__(self, "missing", _reason("ReferenceInfeasible.missing", self.missing))
        object.__setattr__(self, "reason", _reason("ReferenceInfeasible", self.reason))

    def describe(self, dtypes: tuple[str, ...] = ()) -> str:
        return f"unverified: reference infeasible, missing {self.missing}: {self.reason}"


@dataclass(frozen=True)
class Noncomparable(Verification):
    """The implementations do not compute the same thing: timed side by side, never compared."""

    reason: str
    kind = "noncomparable"

    def __post_init__(self):
        object.__setattr__(self, "reason", _reason("Noncomparable", self.reason))

    def describe(self, dtypes: tuple[str, ...] = ()) -> str:
        return f"unverified: noncomparable: {self.reason}"


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
        models = null_models.null_models(case.inputs, expected, case.reference, call)
    passing = [what for what, outputs in models.items() if verification.passes(outputs, expected)]
    if passing:
        raise DeclarationError(
            f"case {case.id}: null model(s) {', '.join(repr(p) for p in passing)} pass the check "
            f"({described}): outputs that did not do the work would be verified; tighten the "
            "tolerances, make the data less degenerate, or declare negative controls "
            "(bench.Control) that the check must reject"
        )


def check(op, *inputs, reference, verification: Verification | None = None):
    """Run `op(*inputs)` and `reference(*inputs)`; raise AssertionError naming every mismatch.

    Returns the op's outputs. `verification` defaults to Exact() (per-dtype tolerances); an
    unchecked declaration (Unestablished, ...) cannot be used here and raises ValueError.
    """
    verification = verification or Exact()
    if not verification.checks:
        raise ValueError(f"check() needs a checked declaration; {verification.describe()}")
    outputs = op(*inputs)
    got = arrays.as_outputs(outputs, f"{getattr(op, '__name__', 'the op')}")
    expected = arrays.as_outputs(reference(*inputs), "the reference")
    outcome = verification.check(got, expected)
    if not outcome.passed:
        described = verification.describe(arrays.dtype_names(expected))
        raise AssertionError(
            f"{getattr(op, '__name__', 'the op')} does not match the reference "
            f"({described}):\n  " + "\n  ".join(outcome.problems)
        )
    return outputs


# -- the comparison, guarded ----------------------------------------------------------------------
# The comparison runs in the callables' process, so a callable could patch it (issue 50 class 8c).
# What it runs is recorded once, when this module is imported, and checked before every
# comparison: the same function objects with the same code, numpy's functions the same objects.


def _guarded() -> dict[str, tuple[object, str, object, object]]:
    """{label: (owner, attribute, the object there now, its code object or None)}."""
    import numpy as np

    from runner.measurement.gate import elements

    owners = {
        "runner.bench.verification": (
            globals(),
            ("_compare_outputs", "_outputs_agree", "_output_tolerance"),
        ),
        "runner.measurement.gate.arrays": (
            arrays,
            ("compare", "agrees", "to_numpy", "as_outputs", "same_bytes"),
        ),
        "runner.measurement.gate.elements": (
            elements,
            ("compare", "comparison", "_abs_diff", "_class_differs"),
        ),
        "numpy": (
            np,
            ("abs", "isnan", "isfinite", "array_equal", "count_nonzero", "where", "maximum"),
        ),
    }
    for cls in (Verification, Exact, Partial):
        owners[f"runner.bench.verification.{cls.__name__}"] = (cls, ("check", "passes"))
    found = {}
    for where, (owner, names) in owners.items():
        for name in names:
            obj = owner[name] if isinstance(owner, dict) else getattr(owner, name)
            found[f"{where}.{name}"] = (owner, name, obj, getattr(obj, "__code__", None))
    return found


_GUARDED = _guarded()
COMPARISON_GUARD = (
    f"in process; its code ({len(_GUARDED)} functions of runner.bench.verification, "
    "runner.measurement.gate.arrays and .elements, and the numpy functions they call) "
    "checked unchanged before every comparison"
)


def comparison_changed() -> list[str]:
    """The guarded functions that are no longer what was imported (replaced, or their code)."""
    changed = []
    for label, (owner, name, obj, code) in _GUARDED.items():
        now = owner.get(name) if isinstance(owner, dict) else getattr(owner, name, None)
        if now is not obj or (code is not None and getattr(now, "__code__", None) is not code):
            changed.append(label)
    return changed
