"""`check(op, *inputs, reference=...)`: the correctness test a benchmark's workload also serves.

The same workload feeds correctness tests and benchmarks: a test calls
`bench.check(my_op, *workload.gen_inputs(params, dtype, seed), reference=workload.reference)`
(or `workload.check(my_op, *inputs)`) and fails with the case's mismatch, at the per-dtype
tolerances unless told otherwise.
"""

from __future__ import annotations

from runner.bench import arrays
from runner.bench.verification import Exact, Verification

__all__ = ["check"]


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
