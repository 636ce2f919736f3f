"""What a comparison returns: one ReportRow per implementation, and the Comparison around them
(the report builds them, the runner returns them)."""

from __future__ import annotations

from dataclasses import dataclass, field

from runner.bench.workload import Case

__all__ = ["Comparison", "ReportRow"]


@dataclass
class ReportRow:
    """One implementation's line of the report."""

    name: str
    role: str  # "op" or "implementation"
    verification: str
    verified: bool
    check_status: str  # passed, failed, not_checked
    problems: list[str] = field(default_factory=list)
    median_s: float | None = None
    p10_s: float | None = None
    p90_s: float | None = None
    samples: int = 0
    method: str = ""
    tflops: float | None = None
    gbps: float | None = None
    ratio: float | None = None  # median time / the op's median time, verified rows only
    stable: bool | None = None  # noise of this row (and, for a ratio, of the op's) within limits
    flags: list[str] = field(default_factory=list)  # integrity findings: no ratio (integrity.py)


@dataclass
class Comparison:
    op: str
    case: Case
    rows: dict[str, ReportRow]
    document_case: dict
    timed: bool

    def __getitem__(self, name: str) -> ReportRow:
        return self.rows[name]
