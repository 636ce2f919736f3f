"""A timed sample's time from CUPTI activity records (needs cupti-python).

Events time everything between two points on the stream. CUPTI's activity records give each
kernel's own start and end on the device clock, and a sample's time is their span: from the
first start to the last end of the records it launched on the runner's stream, in both modes
(cupti.SPAN, named in every timing block as `cupti_span`), as the PTX runner's hot samples are
timed. The gaps between a call's kernels are in it, as a stream of launches pays them: an
unfused composite is charged for them, not flattered by a union of busy intervals. With the
case's count_copies, memcpy and memset records are among the records; without it they stay
out, which is the copy policy for this timer. The runner's own kernels never count; they are
known by the function launched, not by name (runner.measurement.timing.own_launches). The
records come from the comparison's one CUPTI recording (runner.bench.watch.Watch), which places
them in their sample's window; work on other streams is flagged there, never timed here.
"""

from __future__ import annotations

from runner.measurement.timing.cupti import SPAN, is_copy, span_s, unavailable_reason

__all__ = ["SPAN", "KernelSpanTimer", "span_s", "unavailable_reason"]


class KernelSpanTimer:
    """`seconds(records)`: the span of one sample's records on the timing stream."""

    def __init__(self, include_copies: bool):
        self.include_copies = include_copies
        self.method = (
            "CUPTI span (first start to last end of the kernel"
            + (", memcpy and memset" if include_copies else "")
            + " records a sample launched)"
        )

    def seconds(self, records) -> float:
        return span_s(
            (start, end)
            for start, end, name, _stream in records
            if self.include_copies or not is_copy(name)
        )
