"""Kernel busy time per timed sample from CUPTI activity records (needs cupti-python).

Events time everything between two points on the stream, gaps between kernels included. A
callable that launches several kernels with host work between them is charged for those gaps;
CUPTI's activity records give each kernel's own start and end, and the busy time of a sample is
the union of the intervals of the kernels it launched on the runner's stream (overlapping
kernels counted once; work other threads or streams run meanwhile is not, and is flagged by
runner.bench.watch). With the case's count_copies, memcpy and memset records join the union;
without it they stay out, which is the copy policy for this timer. The runner's own kernels
never count; they are known by the function launched, not by name
(runner.measurement.timing.own_launches). The records come from the comparison's one CUPTI recording
(runner.bench.watch.Watch), which places them in their sample's window.
"""

from __future__ import annotations

from runner.measurement.timing.cupti import is_copy, unavailable_reason, union_s

__all__ = ["KernelBusyTimer", "unavailable_reason", "union_s"]


class KernelBusyTimer:
    """`seconds(records)`: the busy time of one sample's records on the timing stream."""

    def __init__(self, include_copies: bool):
        self.include_copies = include_copies
        self.method = (
            "CUPTI kernel busy time (union of the kernel"
            + (", memcpy and memset" if include_copies else "")
            + " intervals a sample launched)"
        )

    def seconds(self, records) -> float:
        return union_s(
            (start, end)
            for start, end, name, _stream in records
            if self.include_copies or not is_copy(name)
        )
