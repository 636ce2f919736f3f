"""Kernel start and end timestamps from CUPTI activity records (cupti-python), for both front ends.

CUDA events time everything between two points on a stream: the event's own overhead, the
latency from the start event to the first kernel, and a resolution of about half a microsecond.
CUPTI's activity records give each kernel's start and end on the device clock in nanoseconds.
This module owns the process's one CUPTI subscription (registration is process-wide) and a
window over it: `begin()` before the timed work, `end()` after the work has finished, and the
records of what ran on the window's stream in between. The runner's own kernels (the blocker,
the flush, the generator) never count: they are told apart by the function each launch ran
(`register`, `launching`, `is_own`), never by name, so a user's kernel named kg_* counts.

What a figure is, per timer and mode (docs/method.md, Timers):
- cold: the duration of one launch, end - start of its record (the union of the intervals
  when an implementation launches several kernels); a cold sample is the mean of its batch of
  such launches (runner.measurement.timing.cold).
- hot: (last end - first start) / launches over the batch's records. This keeps the spacing
  between back-to-back launches, which a stream of launches really pays and graph replay between
  events also includes, and leaves out the start event's latency to the first kernel and the
  end event after the last one. It does not read under the event figure, though: tracing puts
  a cost of its own on every launch, and short launches spread (docs/method/timers.md); hot
  mode's default is graph replay between events (`choose_timer`).

The runner's own launches (generator, L2 flush, blocking spin) are told apart from the measured
work by the function launched, never by a kernel's name: a user can name a kernel anything,
kg_* included, and a kernel left out of CUPTI's records by its name is work nobody times.

CUPTI's kernel records carry no function handle, but each carries the correlation id of the API
call that launched it. While an activity window is open, the runner subscribes to CUPTI's driver-API callbacks; around each of its own launches
(`launching()`) it turns on the callback for cuLaunchKernel, which notes the correlation id of a
launch whose CUfunction is one of the runner's own module (`register`). A record with such a
correlation id is the runner's; every other record counts, whatever its name. The callback is
on only during the runner's own launches, so measured launches pay nothing for it; a launch
another thread makes meanwhile is told apart by its function.

`choose_timer()`: which timer reads a mode's samples, and why, the same rule for both front ends.
Cold mode is timed by CUPTI's kernel timestamps: CUDA events add their own overhead to one
short launch, which compresses cold gaps toward 1, so "auto" never falls back to events in cold
mode: without a usable cupti-python the run is refused, naming the fix. Events in cold mode
are only ever the user's explicit choice (`--timer events`, `timer="events"`,
`--bench-timer events`), and that choice is warned about, recorded in every row
(`timing.timer_reason`) and is a series of its own (harness.series: `cold-mean`, never
`cold-mean/cupti`). Hot mode's "auto" is events (graph replay between events), since CUPTI's
tracing costs every launch something. The figures: docs/method/timers.md."""

from __future__ import annotations

import contextlib
import threading
from typing import ClassVar

from runner.errors import OwnLaunchError, TimerUnavailable

__all__ = [
    "SPAN",
    "ActivityWindow",
    "Record",
    "choose_timer",
    "cold_events_warning",
    "forget",
    "is_copy",
    "is_own",
    "launching",
    "now_ns",
    "register",
    "span_s",
    "subscribe",
    "unavailable_reason",
    "union_s",
    "unsubscribe",
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
    missing = missing_api(cupti)
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
            if is_own(getattr(a, "correlation_id", None)):
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
            subscribe()  # before any record: the runner's own launches are known
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
        the runner's own launches left out (by the function launched, see is_own)."""
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
            unsubscribe()
            self.subscribed = False


LAUNCH_APIS = ("cuLaunchKernel", "cuLaunchKernel_ptsz")


class _State:
    functions: ClassVar[set[int]] = (
        set()
    )  # CUfunction handles (as ints) of the runner's own kernels
    correlation_ids: ClassVar[set[int]] = (
        set()
    )  # of own launches whose records have not arrived yet
    noted = 0  # own launches the callback has seen, ever
    subscriber = None
    users = 0
    cupti = None
    cbids: tuple = ()
    errors: ClassVar[list[str]] = []
    lock = threading.Lock()


def register(functions) -> None:
    """The runner's own kernels (CUfunction handles, or anything int() turns into one)."""
    _State.functions.update(int(f) for f in functions)


def forget(functions) -> None:
    _State.functions.difference_update(int(f) for f in functions)


def is_own(correlation_id) -> bool:
    """Whether a record with this correlation id came from one of the runner's own launches
    (each id answers True once: a record is delivered once)."""
    if correlation_id is None:
        return False
    cid = int(correlation_id)
    with _State.lock:
        if cid in _State.correlation_ids:
            _State.correlation_ids.discard(cid)
            return True
    return False


def _callback(userdata, domain, cbid, data) -> None:
    cupti = _State.cupti
    try:
        if not hasattr(data, "function_params"):  # a raw pointer in some cupti-python releases
            data = cupti.CallbackData.from_ptr(int(data))
        if int(data.callback_site) != int(cupti.ApiCallbackSite.API_ENTER):
            return
        # cuLaunchKernel and its _ptsz twin share one parameter layout
        params = cupti.CuLaunchKernelParams.from_ptr(int(data.function_params), owner=data)
        if int(params.f) in _State.functions:
            with _State.lock:
                _State.correlation_ids.add(int(data.correlation_id))
                _State.noted += 1
    except BaseException as exc:  # never raise into the driver: report at the launch instead
        _State.errors.append(f"{type(exc).__name__}: {exc}")


def missing_api(cupti) -> list[str]:
    """What of the callback API used here this cupti-python lacks (empty when nothing)."""
    needed = ["subscribe", "unsubscribe", "enable_callback", "CallbackDomain", "ApiCallbackSite"]
    needed += ["DriverApiTraceCbid", "CuLaunchKernelParams"]
    missing = [name for name in needed if not hasattr(cupti, name)]
    cbids = getattr(cupti, "DriverApiTraceCbid", None)
    if cbids is not None:
        missing += [f"DriverApiTraceCbid.{api}" for api in LAUNCH_APIS if not hasattr(cbids, api)]
    return missing


def subscribe() -> None:
    """Subscribe to CUPTI's callbacks (once per process, counted: unsubscribe() as often)."""
    if _State.users == 0:
        from cupti import cupti

        _State.cupti = cupti
        _State.cbids = tuple(int(getattr(cupti.DriverApiTraceCbid, api)) for api in LAUNCH_APIS)
        _State.subscriber = cupti.subscribe(_callback, None)
    _State.users += 1


def unsubscribe() -> None:
    if _State.users == 0:
        return
    _State.users -= 1
    if _State.users == 0 and _State.subscriber is not None:
        _State.cupti.unsubscribe(_State.subscriber)
        _State.subscriber = None
        with _State.lock:
            _State.correlation_ids.clear()


def _enable(on: int) -> None:
    cupti = _State.cupti
    for cbid in _State.cbids:
        cupti.enable_callback(on, _State.subscriber, cupti.CallbackDomain.DRIVER_API, cbid)


@contextlib.contextmanager
def launching():
    """Around one of the runner's own launches: its correlation id is noted (no-op while no
    window is open). OwnLaunchError when CUPTI did not report it, so its record would count."""
    if _State.subscriber is None:
        yield
        return
    before = _State.noted
    _enable(1)
    try:
        yield
    finally:
        _enable(0)
    if _State.noted == before:
        said = f" (the callback said: {_State.errors[-1]})" if _State.errors else ""
        raise OwnLaunchError(
            "CUPTI's driver-API callback did not report the runner's own kernel launch, so its "
            "activity record cannot be told apart from the measured kernels'" + said + "; time "
            "with --timer events"
        )


# How each front end spells the explicit choice of events (for messages)
EVENTS_CHOICE = (
    '`--timer events` (runner bench), `TimingOptions(timer="events")` (runner.bench) or '
    "`--bench-timer events` (pytest)"
)
COLD_EVENTS_COST = (
    "CUDA events add their own overhead to one short cold launch (3 times CUPTI's figure for a "
    "1 us kernel: docs/method/timers.md), which compresses cold gaps toward 1"
)


def choose_timer(timer: str, mode: str, cupti_reason: str | None) -> tuple[str, str]:
    """(timer, why) for a `mode` measurement asked to use `timer` (auto, events or cupti) where
    CUPTI is usable when `cupti_reason` is None (else it says why not).

    Raises TimerUnavailable for cupti, or auto in cold mode, without CUPTI, naming the fix."""
    if cupti_reason is not None and (timer == "cupti" or (timer == "auto" and mode == "cold")):
        needs = "cold mode is" if timer == "auto" else "timer cupti was asked for:"
        raise TimerUnavailable(
            f"{needs} timed by CUPTI's kernel timestamps, and CUPTI cannot be used here "
            f"({cupti_reason}). Install cupti-python (`pip install cupti-python`, the `cupti` "
            "extra; `harness run --install` installs it on the GPU box), or choose CUDA events "
            f"explicitly with {EVENTS_CHOICE}; in cold mode {COLD_EVENTS_COST}, and such "
            "results are a series of their own"
        )
    if timer != "auto":
        if mode == "cold" and timer == "events":
            return timer, f"chosen: events in cold mode, asked for explicitly; {COLD_EVENTS_COST}"
        return timer, f"chosen: {timer}, asked for explicitly"
    if mode == "cold":
        return "cupti", "auto: CUPTI's kernel timestamps in cold mode"
    return "events", "auto: CUDA events (graph replay between events) in hot mode"


def cold_events_warning(what: str) -> str:
    """The stderr warning for an explicit choice of events in cold mode (`what` is timed)."""
    return (
        f"WARNING: {what} cold by CUDA events, as asked: {COLD_EVENTS_COST}; recorded in every "
        "row (timing.timer_reason) and a series apart from CUPTI's"
    )
