"""Work stays in the window: what ran on the device while a callable was timed, from CUPTI.

While a comparison is timed, CUPTI records every kernel, memcpy and memset of the context
(runner.measurement.timing.cupti). The runner brackets what it does itself on the host's CUPTI clock: each
timed window (from before the sample is queued until its end event has completed) and each
piece of untimed work (a reset, the warm-up, an L2 flush, a graph capture, a recheck). Every
record is then put in its place by its timestamps:

- inside a timed window, on the timing stream: the sample's own work. Together these must not
  span more than the events measured (a record that ends later ran after the end event), and a
  window with none of them did no device work at all (a result cached or made on the host);
- overlapping a timed window on any other stream: work on a side stream, which the events of
  the timing stream do not see;
- still running after a timed window ended (or flushed from CUPTI while still running, with no
  timestamps yet), or outside every bracket: work left to run after the window (another host
  thread, a deferred launch).

Each of those flags the implementation of the window (for work outside every bracket: of the
last timed window before it), with what was found. While CUPTI traces, a CUDA graph launch
waits for its stream, so watched samples are not queued behind the blocking kernel
(CallableBackend.time_unblocked); cold samples timed by events, which need it, are not watched
(runner.bench.integrity.watch_reason). The runner's own kernels never count (known by the
function each launch ran, never by name: runner.measurement.timing.cupti; a callable's
kernel named kg_* counts like any other), nor do device-to-host copies of at most 8 bytes (the blocking kernel's status, read after each
sample). Work another host thread launches while the runner's own untimed work runs (a reset)
is not told apart from it: CUPTI's records say which stream ran a kernel, not which thread
launched it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from runner.measurement.timing.cupti import SPAN, is_copy, span_s, unavailable_reason, union_s

__all__ = [
    "SPAN",
    "Bracket",
    "Classifier",
    "Finding",
    "KernelSpanTimer",
    "Watch",
    "runner_own",
    "span_s",
    "unavailable_reason",
]

SLACK_NS = 5_000  # host stamps and device records are both on CUPTI's clock, to about a microsecond
SPAN_SLACK_NS = 2_000  # the events' resolution and their own overhead (docs/method/timers.md)
SPAN_SLACK_FRACTION = 0.005  # clock-rate differences over a long sample
STATUS_READ_BYTES = 8
RECENT_BRACKETS = 160  # brackets a late record is looked up in (Watch.defer)
NAME_CHARS = 90

METHOD = (
    "CUPTI records of every kernel, memcpy and memset of the context, placed by timestamp against "
    "the timed windows and the runner's own untimed work"
)


@dataclass(frozen=True)
class Bracket:
    """What the runner did between two host stamps (CUPTI clock, ns): a timed window of
    implementation `name` (`elapsed_ns`: what its events measured) or untimed work."""

    kind: str  # "timed" or "untimed"
    name: str
    t0: int
    t1: int
    elapsed_ns: int = 0


@dataclass
class Finding:
    kind: str  # side, late, after, unfinished, outside, none
    record: str
    stream: int | None
    count: int = 1
    worst_ns: int = 0

    def text(self, timing_stream: int, windows: int) -> str:
        what = _what(self.record)
        times = f" ({self.count}x)" if self.count > 1 else ""
        us = self.worst_ns / 1e3
        if self.kind == "side":
            return (
                f"{what} ran on stream {self.stream}, not the timing stream {timing_stream}, "
                f"during a timed window{times}"
            )
        if self.kind == "late":
            return (
                f"{what} on the timing stream ended at least {us:.1f} us after the end event{times}"
            )
        if self.kind == "after":
            return f"{what} on stream {self.stream} was still running {us:.1f} us after a timed window ended{times}"
        if self.kind == "unfinished":
            return (
                f"{what} on stream {self.stream} was still running when a timed window ended "
                f"(CUPTI had no timestamps for it yet){times}"
            )
        if self.kind == "outside":
            return (
                f"{what} on stream {self.stream} ran outside every window, {us:.1f} us after a "
                f"timed window ended{times}"
            )
        return (
            f"no kernel or copy ran on the device during {self.count} of {windows} timed windows "
            "(a result cached, made on the host or by another thread)"
        )

    def as_dict(self) -> dict:
        return {
            "kind": self.kind,
            "record": self.record,
            "stream": self.stream,
            "count": self.count,
            "worst_us": self.worst_ns / 1e3,
        }


def _what(name: str) -> str:
    if not name:
        return "a record without a name"
    if name.startswith(("memcpy ", "memset ")):
        return f"a {name}"
    short = name if len(name) <= NAME_CHARS else name[: NAME_CHARS - 3] + "..."
    return f"kernel {short!r}"


def runner_own(record) -> bool:
    """A device-to-host copy of at most 8 bytes: the runner reading its blocking kernel's status."""
    name = record[2]
    if not name.startswith("memcpy DtoH "):
        return False
    try:
        return int(name.split()[2]) <= STATUS_READ_BYTES
    except (IndexError, ValueError):
        return False


class Classifier:
    """Puts records in their place against the brackets (see the module docstring). Pure: fed
    brackets and the records delivered after each, in order; testable without a GPU."""

    def __init__(self, timing_stream: int, exempt_no_work=()):
        """`exempt_no_work`: implementations whose timed calls may leave no record (every copy of
        a call disabled in its graph, so nothing of it runs)."""
        self.timing_stream = timing_stream
        self.exempt = set(exempt_no_work)
        self.recent: deque[Bracket] = deque(maxlen=RECENT_BRACKETS)
        self.found: dict[str, dict[tuple, Finding]] = {}
        self.windows: dict[str, int] = {}

    def _flag(self, name: str, kind: str, record, worst_ns: int = 0) -> None:
        key = (kind, record[2] if record else "", record[3] if record else None)
        found = self.found.setdefault(name, {})
        if key in found:
            found[key].count += 1
            found[key].worst_ns = max(found[key].worst_ns, worst_ns)
        else:
            found[key] = Finding(kind, key[1], key[2], 1, worst_ns)

    def add(self, bracket: Bracket | None, records) -> list:
        """Note `bracket` (just ended), then place `records`; returns the records of a timed
        `bracket` on the timing stream inside it (its samples' own work)."""
        if bracket is not None:
            self.recent.append(bracket)
        timed = [bracket] if bracket is not None and bracket.kind == "timed" else []
        insides = self.place(records, timed)
        return insides[0] if timed else []

    def place(self, records, timed: list[Bracket]) -> list[list]:
        """Place `records` among the recent brackets, then judge each of the `timed` brackets
        (noted already, in order, with no records placed since): each one's records inside it."""
        slot = {id(b): i for i, b in enumerate(timed)}
        inside: list[list] = [[] for _ in timed]
        touched = [False] * len(timed)
        for r in records:
            if r[0] <= 0 or r[1] < r[0]:  # flushed while still running: no timestamps
                last = timed[-1] if timed else None
                self._flag(self._last_timed(last, 1 << 62), "unfinished", r)
                if timed:
                    touched[-1] = True
                continue
            owner, clean = self._place(r)
            i = slot.get(id(owner))
            if i is not None:
                touched[i] = True
                if clean:
                    inside[i].append(r)
        for b, found, hit in zip(timed, inside, touched, strict=True):
            self.windows[b.name] = self.windows.get(b.name, 0) + 1
            self._judge_window(b, found, hit)
        return inside

    def _place(self, r) -> tuple[Bracket | None, bool]:
        """(the bracket `r` belongs to, whether it is clean there); (None, False) for work
        outside every bracket."""
        start, end, _name, stream = r
        for b in reversed(self.recent):
            if b.kind == "timed" and start < b.t1 - SLACK_NS and end > b.t0 + SLACK_NS:
                if stream != self.timing_stream:
                    self._flag(b.name, "side", r)
                    return b, False
                if end > b.t1 + SLACK_NS:
                    self._flag(b.name, "after", r, end - b.t1)
                    return b, False
                return b, True
            if b.kind == "untimed" and start >= b.t0 - SLACK_NS and end <= b.t1 + SLACK_NS:
                return b, True
        last = self._last_bracket(start)
        self._flag(last.name if last else "?", "outside", r, max(start - last.t1, 0) if last else 0)
        return None, False

    def _last_bracket(self, before_ns: int) -> Bracket | None:
        """The last timed bracket that ended by `before_ns` (else the last bracket of any kind
        that did, else the first one)."""
        before = [b for b in self.recent if b.t1 <= before_ns + SLACK_NS]
        timed = [b for b in before if b.kind == "timed"]
        if timed or before:
            return timed[-1] if timed else before[-1]
        return self.recent[0] if self.recent else None

    def _last_timed(self, bracket: Bracket | None, before_ns: int) -> str:
        if bracket is not None and bracket.kind == "timed":
            return bracket.name
        last = self._last_bracket(before_ns)
        return last.name if last else "?"

    def _judge_window(self, b: Bracket, inside: list, touched: bool) -> None:
        if not inside:
            if not touched and b.name not in self.exempt:  # nothing ran anywhere in it
                self._flag(b.name, "none", None)
            return
        first = min(r[0] for r in inside)
        last = max(inside, key=lambda r: r[1])
        allowed = b.elapsed_ns + SPAN_SLACK_NS + SPAN_SLACK_FRACTION * b.elapsed_ns
        if last[1] - first > allowed:
            self._flag(b.name, "late", last, last[1] - first - b.elapsed_ns)

    def flagged(self, name: str) -> bool:
        return bool(self.found.get(name))

    def summary(self, name: str) -> dict:
        """The document's `integrity.window` block of implementation `name`."""
        windows = self.windows.get(name, 0)
        findings = list(self.found.get(name, {}).values())
        block = {"checked": True, "method": METHOD, "windows": windows}
        block["timing_stream"] = self.timing_stream
        block["findings"] = [f.as_dict() for f in findings]
        if findings:
            texts = [f.text(self.timing_stream, windows) for f in findings]
            more = f"; and {len(texts) - 3} more" if len(texts) > 3 else ""
            block["message"] = "work outside the timed window: " + "; ".join(texts[:3]) + more
        return block


class Watch:
    """CUPTI recording for one comparison: brackets the runner's work and classifies records."""

    def __init__(self, context: int, stream: int, synchronize, exempt_no_work=()):
        """`context` and `stream` are driver handles as ints; `synchronize()` waits for the
        whole device (so untimed work has finished when its bracket closes)."""
        from runner.measurement.timing import cupti

        self.activity = cupti.ActivityWindow(context, stream, include_copies=True)
        self.now = cupti.now_ns  # looked up here, so a test can stand in for CUPTI
        self.synchronize = synchronize
        self.classifier = Classifier(self.activity.stream_id, exempt_no_work)
        self.depth = 0
        self.unflushed = 0  # untimed brackets since the last flush
        self.deferred: list[Bracket] | None = None  # timed brackets awaiting collect()
        self.activity.begin()

    @property
    def stream_id(self) -> int:
        return self.activity.stream_id

    def _take(self) -> list:
        self.unflushed = 0
        return [r for r in self.activity.end_records() if not runner_own(r)]

    def untimed(self, name: str, work):
        """Run the runner's own untimed `work()` (for implementation `name`) in a bracket."""
        if self.depth:  # nested (a capture's reset): the outer bracket covers it
            return work()
        self.depth += 1
        try:
            t0 = self.now()
            out = work()
            self.synchronize()
            # no flush (it costs a sample): its records arrive with the next window's and are placed
            # by their timestamps among the recent brackets, this one included; before this
            # bracket could leave those (warm-up of many implementations), a flush places them
            bracket = Bracket("untimed", name, t0, self.now())
            self.unflushed += 1
            records = []
            if self.unflushed >= RECENT_BRACKETS // 2 and self.deferred is None:
                records = self._take()
            self.classifier.add(bracket, records)
            return out
        finally:
            self.depth -= 1

    def timed(self, name: str, sample) -> tuple[float, list | None]:
        """`sample()` -> event seconds, run as a timed window: (seconds, its records); after
        defer(), (seconds, None), its records left to collect()."""
        t0 = self.now()
        seconds = sample()
        bracket = Bracket("timed", name, t0, self.now(), round(seconds * 1e9))
        if self.deferred is not None:
            self.classifier.recent.append(bracket)
            self.deferred.append(bracket)
            return seconds, None
        return seconds, self.classifier.add(bracket, self._take())

    def defer(self, brackets: int) -> bool:
        """From here, timed windows and untimed brackets leave their records in CUPTI until
        collect(): one forced flush (as costly as a cold sample) for many windows. Only for at
        most RECENT_BRACKETS `brackets` of any kind (so every one stays among the recent ones,
        where their records are looked up); False, nothing deferred, for more."""
        if brackets > RECENT_BRACKETS:
            return False
        if self.unflushed:  # the untimed brackets before: their records placed first
            self.classifier.add(None, self._take())
        self.deferred = []
        return True

    def collect(self) -> list[list]:
        """The records of each timed window since defer(), in order (each one's own, as
        timed() returns them); recording goes back to one flush per window."""
        timed, self.deferred = self.deferred or [], None
        return self.classifier.place(self._take(), timed)

    def finish(self) -> None:
        """Wait for the device and place what arrived after the last bracket."""
        self.synchronize()
        self.classifier.add(None, self._take())

    def summary(self, name: str) -> dict:
        return self.classifier.summary(name)

    def close(self) -> None:
        self.activity.close()


# The cupti timer: a sample's time is the span of its own records on the timing stream (first
# start to last end, cupti.SPAN, as the PTX runner's hot samples), memcpy and memset records
# included only with the case's count_copies; the records come from the comparison's one
# recording (Watch), which places them in their sample's window.


class KernelSpanTimer:
    """`seconds(records)`: the span of one sample's records on the timing stream."""

    def __init__(self, include_copies: bool):
        self.include_copies = include_copies
        self.method = (
            "CUPTI span (first start to last end of the kernel"
            + (", memcpy and memset" if include_copies else "")
            + " records a sample launched)"
        )

    def _timed(self, records) -> list[tuple[int, int]]:
        return [
            (start, end)
            for start, end, name, _stream in records
            if self.include_copies or not is_copy(name)
        ]

    def seconds(self, records) -> float:
        return span_s(self._timed(records))

    def shape(self, records) -> tuple[int, float]:
        """(records the span covers, seconds of the span no record covers): a cold sample's
        kernel count and summed inter-kernel gap, host dispatch between eager launches."""
        timed = self._timed(records)
        return len(timed), max(span_s(timed) - union_s(timed), 0.0)
