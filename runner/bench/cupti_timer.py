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

from typing import ClassVar

__all__ = ["KernelBusyTimer", "unavailable_reason", "union_s"]

BUFFER_BYTES = 8 << 20


def union_s(intervals_ns) -> float:
    """Seconds covered by the union of [start, end) nanosecond intervals."""
    total, cursor = 0, None
    for start, end in sorted(intervals_ns):
        if end <= start:
            continue
        if cursor is None or start >= cursor:
            total += end - start
            cursor = end
        elif end > cursor:
            total += end - cursor
            cursor = end
    return total * 1e-9


def unavailable_reason() -> str | None:
    """None when CUPTI activity tracing can be used from Python here, else why not."""
    try:
        from cupti import cupti  # noqa: F401
    except Exception as exc:  # not installed, or its libcupti could not be loaded
        return f"cupti-python is not usable: {type(exc).__name__}: {exc}"
    return None


class _Collector:
    """The process's one pair of CUPTI buffer callbacks (registration is process-wide)."""

    registered = False
    records: ClassVar[list[tuple[int, int, str, int | None]]] = []  # start, end, name, stream

    @classmethod
    def register(cls, cupti) -> None:
        if not cls.registered:
            cupti.activity_register_callbacks(cls._requested, cls._completed)
            cls.registered = True

    @staticmethod
    def _requested():
        return BUFFER_BYTES, 0

    @classmethod
    def _completed(cls, activities) -> None:
        for a in activities:
            name = getattr(a, "name", "") or ""
            stream = getattr(a, "stream_id", None)
            cls.records.append((int(a.start), int(a.end), str(name), stream))


class KernelBusyTimer:
    """begin() before the timed work, end() after it has finished -> busy seconds."""

    def __init__(self, include_copies: bool, context: int, stream: int):
        """`context` and `stream` (driver handles as ints): only work on that stream counts."""
        from cupti import cupti

        self.cupti = cupti
        self.stream_id = int(cupti.get_stream_id_ex(context, stream, 0))
        kinds = [cupti.ActivityKind.CONCURRENT_KERNEL]
        if include_copies:
            kinds += [cupti.ActivityKind.MEMCPY, cupti.ActivityKind.MEMSET]
        self.kinds = []
        _Collector.register(cupti)
        try:
            for kind in kinds:
                cupti.activity_enable(kind)
                self.kinds.append(kind)
        except Exception:
            self.close()  # disable what was enabled
            raise
        self.method = (
            "CUPTI kernel busy time (union of the kernel"
            + (", memcpy and memset" if include_copies else "")
            + " intervals a sample launched)"
        )

    def begin(self) -> None:
        self.cupti.activity_flush_all(1)
        _Collector.records.clear()

    def end(self) -> float:
        self.cupti.activity_flush_all(1)
        intervals = [
            (s, e)
            for s, e, name, stream in _Collector.records
            if not name.startswith("kg_")
            and stream == self.stream_id  # fail closed: no id, no count
        ]
        _Collector.records.clear()
        return union_s(intervals)

    def close(self) -> None:
        self.cupti.activity_flush_all(1)
        for kind in self.kinds:
            self.cupti.activity_disable(kind)
        _Collector.records.clear()
