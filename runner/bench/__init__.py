"""kernelgap's Python API: compare an op (a Python callable that launches GPU work) with other
implementations of the same operation, case by case, on the runner's timing engine.

    import pytest
    from runner import bench

    @pytest.mark.parametrize("case", bench.cases(MyWorkload()), ids=lambda c: c.id)
    def test_my_op(case):
        bench.Runner(my_op, case).compare({"torch.matmul": torch.matmul})

See README.md ("Comparing Python callables") and examples/ops/bench_matmul.py, a file to copy.
"""

from runner.bench.comparison import Runner
from runner.bench.implementation import Implementation
from runner.bench.options import TimingOptions
from runner.bench.report import Comparison, ReportRow
from runner.bench.session import Session, current, reset
from runner.bench.verification import (
    DEFAULT_TOLERANCES,
    Control,
    Custom,
    Exact,
    Noncomparable,
    Partial,
    ReferenceInfeasible,
    Unestablished,
    Verification,
    check,
    zeroed_input,
)
from runner.bench.workload import Case, ReferenceUnavailable, Row, Workload, cases, params
from runner.errors import (
    CheckFailed,
    DeclarationError,
    InputsModified,
    IntegrityFailed,
    RecheckFailed,
    ResetRefused,
)

__all__ = [
    "DEFAULT_TOLERANCES",
    "Case",
    "CheckFailed",
    "Comparison",
    "Control",
    "Custom",
    "DeclarationError",
    "Exact",
    "Implementation",
    "InputsModified",
    "IntegrityFailed",
    "Noncomparable",
    "Partial",
    "RecheckFailed",
    "ReferenceInfeasible",
    "ReferenceUnavailable",
    "ReportRow",
    "ResetRefused",
    "Row",
    "Runner",
    "Session",
    "TimingOptions",
    "Unestablished",
    "Verification",
    "Workload",
    "cases",
    "check",
    "current",
    "params",
    "reset",
    "zeroed_input",
]
