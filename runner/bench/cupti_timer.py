"""Kernel busy time per timed sample from CUPTI activity records (needs cupti-python).

Events time everything between two points on the stream, gaps between kernels included. A
callable that launches several kernels with host work between them is charged for those gaps;
CUPTI's activity records give each kernel's own start and end, and the busy time of a sample is
the union of the intervals of the kernels it launched on the runner's stream (overlapping
kernels counted once; work other threads or streams run meanwhile is not). With
the case's count_copies, memcpy and memset records join the union; without it they stay out,
which is the copy policy for this timer. The runner's own kernels (kg_*) never count.
"""

from __future__ import annotations

from runner.timing.cupti import ActivityWindow, unavailable_reason, union_s

__all__ = ["KernelBusyTimer", "unavailable_reason", "union_s"]


class KernelBusyTimer:
    """begin() before the timed work, end() after it has finished -> busy seconds."""

    def __init__(self, include_copies: bool, context: int, stream: int):
        """`context` and `stream` (driver handles as ints): only work on that stream counts."""
        self.window = ActivityWindow(context, stream, include_copies)
        self.method = (
            "CUPTI kernel busy time (union of the kernel"
            + (", memcpy and memset" if include_copies else "")
            + " intervals a sample launched)"
        )

    def begin(self) -> None:
        self.window.begin()

    def end(self) -> float:
        return union_s(self.window.end())

    def close(self) -> None:
        self.window.close()
