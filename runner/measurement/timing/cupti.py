"""Kernel start and end timestamps from CUPTI activity records (cupti-python), for both front ends.

CUDA events time everything between two points on a stream: the event's own overhead, the
latency from the start event to the first kernel, and a resolution of about half a microsecond.
CUPTI's activity records give each kernel's start and end on the device clock in nanoseconds.
This module owns the process's one CUPTI subscription (registration is process-wide) and a
window over it: `begin()` before the timed work, `end()` after the work has finished, and the
records of what ran on the window's stream in between. The runner's own kernels (the blocker,
the flush, the generator) never count: they are told apart by the function each launch ran
(runner.measurement.timing.own_launches), never by name, so a user's kernel named kg_* counts.

What a figure is, per timer and mode (docs/method.md, Timers):
- cold: the duration of one launch, end - start of its record (the union of the intervals
  when an implementation launches several kernels); a cold sample is the mean of its batch of
  such launches (runner.measurement.timing.cold).
- hot: (last end - first start) / launches over the batch's records. This keeps the spacing
  between back-to-back launches, which a stream of launches really pays and graph replay between
  events also includes, and leaves out the start event's latency to the first kernel and the
  end event after the last one. It does not read under the event figure, though: tracing puts
  a cost of its own on every launch, and short launches spread (docs/method/timers.md); hot
  mode's default is graph replay between events (timer_choice).
"""

from __future__ import annotations

from typing import ClassVar

from runner.measurement.timing import own_launches

__all__ = [
    "SPAN",
    "ActivityWindow",
    "Record",
    "is_copy",
    "now_ns",
    "span_s",
    "unavailable_reason",
    "union_s",
]

# What a CUPTI figure is, in both modes and both front ends (a timing block's `cupti_span`):
# from the first record's start to the last record's end of what the sample launched; hot
# divides it by the launches. A cold PTX launch is one kernel, whose span is its duration.
SPAN = "first-start-to-last-end"

BUFFER_BYTES = 8 << 20

# start ns, end ns, name, CUPTI stream id; a copy's name says what it is: "memcpy DtoD 4096 B",
# "memset 64 B" (kernels carry their own names)
Record = tuple[int, int, str, "int | None"]
COPY_PREFIXES = ("memcpy ", "memset ")
# CUpti_ActivityMemcpyKind, in order from 1
COPY_KINDS = dict(
    enumerate(("HtoD", "DtoH", "HtoA", "AtoH", "AtoA", "AtoD", "DtoA", "DtoD", "HtoH", "PtoP"), 1)
)


def is_copy(name: str) -> bool:
    """Whether a record's name is that of a memcpy or memset record (see Record)."""
    return name.startswith(COPY_PREFIXES)


def now_ns() -> int:
    """CUPTI's timestamp now: the clock of its activity records, read on the host."""
    from cupti import cupti

    return int(cupti.get_timestamp())


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


def span_s(intervals_ns) -> float:
    """Seconds from the first start to the last end (0 for no intervals)."""
    intervals = list(intervals_ns)
    if not intervals:
        return 0.0
    return (max(e for _, e in intervals) - min(s for s, _ in intervals)) * 1e-9


def unavailable_reason() -> str | None:
    """None when CUPTI activity tracing can be used from Python here, else why not."""
    try:
        from cupti import cupti
    except Exception as exc:  # not installed, or its libcupti could not be loaded
        return f"cupti-python is not usable: {type(exc).__name__}: {exc}"
    missing = own_launches.missing_api(cupti)
    if missing:  # the runner's own launches could not be told apart from the measured ones
        return f"cupti-python lacks the callback API the runner needs ({', '.join(missing)})"
    return None


class _Collector:
    """The process's one pair of CUPTI buffer callbacks."""

    registered = False
    records: ClassVar[list[Record]] = []

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
            if own_launches.is_own(getattr(a, "correlation_id", None)):
                continue  # the runner's own kernel, known by the function it launched
            stream = getattr(a, "stream_id", None)
            cls.records.append((int(a.start), int(a.end), _name(a), stream))


def _name(activity) -> str:
    """A kernel's name, or what a copy is (its kind and size), for Record."""
    name = getattr(activity, "name", "") or ""
    if name:
        return str(name)
    nbytes = getattr(activity, "bytes", None)
    if nbytes is None:
        return ""
    kind = getattr(activity, "copy_kind", None)
    if kind is not None:
        return f"memcpy {COPY_KINDS.get(int(kind), f'kind {int(kind)}')} {int(nbytes)} B"
    return f"memset {int(nbytes)} B"


class ActivityWindow:
    """Kernel (and optionally memcpy/memset) records of one stream between begin() and end()."""

    def __init__(self, context: int, stream: int, include_copies: bool = False):
        """`context` and `stream` are driver handles as ints: only work on that stream counts."""
        from cupti import cupti

        self.cupti = cupti
        self.stream_id = int(cupti.get_stream_id_ex(context, stream, 0))
        kinds = [cupti.ActivityKind.CONCURRENT_KERNEL]
        if include_copies:
            kinds += [cupti.ActivityKind.MEMCPY, cupti.ActivityKind.MEMSET]
        self.kinds = []
        self.begun_ns = 0
        self.subscribed = False
        _Collector.register(cupti)
        try:
            own_launches.subscribe()  # before any record: the runner's own launches are known
            self.subscribed = True
            for kind in kinds:
                cupti.activity_enable(kind)
                self.kinds.append(kind)
        except Exception:
            self.close()  # disable what was enabled
            raise

    def begin(self) -> None:
        """Open the window, after the caller has waited for the work before it (both front ends
        synchronize first). No flush here: a forced flush costs as much as the rest of a cold
        sample (docs/method/cold-launches.md). What ran before has started (and ended) before
        this host stamp on CUPTI's clock, so end_records() tells it apart by its start."""
        _Collector.records.clear()
        self.begun_ns = now_ns()

    def end_records(self) -> list[Record]:
        """Every record that started since begin() (or has no timestamps yet: still running),
        the runner's own launches left out (by the function launched, see own_launches)."""
        self.cupti.activity_flush_all(1)
        records = [r for r in _Collector.records if r[0] <= 0 or r[0] >= self.begun_ns]
        _Collector.records.clear()
        return records

    def end(self) -> list[tuple[int, int]]:
        """The (start, end) intervals on this window's stream since begin()."""
        return [
            (s, e)
            for s, e, _name, stream in self.end_records()
            if stream == self.stream_id  # fail closed: no id, no count
        ]

    def close(self) -> None:
        self.cupti.activity_flush_all(1)
        for kind in self.kinds:
            self.cupti.activity_disable(kind)
        self.kinds = []
        _Collector.records.clear()
        if self.subscribed:
            own_launches.unsubscribe()
            self.subscribed = False
