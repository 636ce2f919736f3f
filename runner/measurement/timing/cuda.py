"""The CUDA backends of the timing strategies: one base (CudaBase) with the machinery, and the
PTX kernel adapter (CudaBackend); the Python API's callable adapter is runner.bench.cuda_device.

Host latency is kept outside every timed region: each sample is queued behind a
blocking kernel that spins on a mapped host flag, and the flag is released only after
the start event, the work and the end event have all been queued.
"""

from __future__ import annotations

import contextlib
import math
import os
from dataclasses import dataclass, field

from runner.errors import TimingError
from runner.gpu import driver
from runner.gpu.driver import Graph
from runner.measurement.gate.launch_audit import poison_of
from runner.measurement.timing import cupti
from runner.measurement.timing.base import CopyTurns, copy_turn
from runner.measurement.timing.cupti import span_s, union_s


@dataclass
class Launchable:
    """One implementation: a resolved kernel and its packed arguments."""

    kernel: driver.Kernel
    args: driver.KernelArgs

    def enqueue(self, stream: driver.Stream) -> None:
        self.kernel.launch(stream, self.args)


@dataclass
class LaunchAuditHooks:
    """What the CUDA backend needs for cold mode's audits (runner.measurement.gate.launch_audit):
    `reseed(seed)` queues the inputs' generation from `seed`; `read()` returns the written
    buffers as arrays; `differ(got, expected)` says where two read-backs differ, or None;
    `states[name]`: per load of `name` (the order of cold_items), its ModuleState or None."""

    reseed: object
    read: object
    differ: object
    states: dict[str, list] = field(default_factory=dict)
    # hot: per implementation, one launchable per input set, which its timed launches rotate
    # over (launch i takes set i % len); what the baseline left on each set (one launch from
    # reset) is `expected[set]`; `written` are the buffers an audit copies out, `as_array(name,
    # buffer)` reads a copy back as that buffer's array. Empty `expected`: no hot audit.
    sets: dict[str, list] = field(default_factory=dict)
    expected: list[dict] = field(default_factory=list)
    written: dict = field(default_factory=dict)
    as_array: object = None


class InternalKernels:
    """The runner's own kernels (runner/gpu/device/kernels.cu): generator, L2 flush, blocking spin.

    Their functions are registered with cupti.register and each launch is made inside
    cupti.launching(), so CUPTI windows leave their records out by the function launched.
    Made once per timing context, they set its persisting-L2 limit to 0 first (`persisting_l2`,
    runner.gpu.driver.set_no_persisting_l2), so no line outlives a cold launch's flush."""

    SPIN_TIMEOUT_NS = 10_000_000_000  # a blocker never outlives a dead host by more than this
    ENTRIES = (
        "kg_fill_random",
        "kg_flush_l2",
        "kg_spin",
        "kg_poison_shared",
        "kg_poison_heap",
        "kg_free_heap",
    )
    SHARED_POISON_BYTES = 48 << 10  # a block's dynamic shared memory without an opt-in
    HEAP_POISON_THREADS = 256  # a block of kg_poison_heap, one block an SM

    def __init__(self, ctx: driver.Context):
        from runner.gpu.device import load_ptx

        self.persisting_l2 = driver.set_no_persisting_l2(ctx)
        if self.persisting_l2["limit_bytes"] != 0:
            raise TimingError(
                f"the persisting-L2 limit reads {self.persisting_l2['limit_bytes']} bytes after "
                f"setting it to 0 ({self.persisting_l2.get('error', 'no error')}): lines a kernel "
                "marks persisting would outlive the L2 flush of cold samples"
            )
        self.module = driver.Module(load_ptx(), "kernelgap internal kernels")
        self._functions = [
            self.module.kernel(e, (1, 1, 1), (1, 1, 1)).function for e in self.ENTRIES
        ]
        cupti.register(self._functions)
        self.sm_count = ctx.attribute("MULTIPROCESSOR_COUNT")
        self.l2_bytes = ctx.attribute("L2_CACHE_SIZE")
        self._flush_buffer: driver.Buffer | None = None
        self._flush_sink: driver.Buffer | None = None
        self._flag: driver.HostFlag | None = None
        self._status: driver.Buffer | None = None
        self._heap: tuple | None = None  # (heads, poison kernel, free kernel, their args)

    def fill_random(
        self, stream: driver.Stream, buffer: driver.Buffer, n: int, tail_args: list
    ) -> None:
        """Queue the device generator over `n` elements (`tail_args` from generator.launch_args)."""
        if n == 0:
            return
        grid = min(math.ceil(n / 256), self.sm_count * 16)
        kernel = self.module.kernel("kg_fill_random", (grid, 1, 1), (256, 1, 1))
        args = driver.KernelArgs([("ptr", buffer.ptr), *tail_args])
        with cupti.launching():
            kernel.launch(stream, args)

    def flush_l2(self, stream: driver.Stream) -> None:
        """Queue a read of a buffer of at least twice the L2 (3x, and 64 MiB at least), in
        stream order and nothing else: no line persists through it, since the context's
        persisting-L2 limit is 0 (set once in __init__, not reset per launch from the host)."""
        if self._flush_buffer is None:
            self._flush_buffer = driver.Buffer(max(3 * self.l2_bytes, 64 << 20))
            self._flush_buffer.fill_bytes(0x3C, stream)
            stream.synchronize()  # the fill must not overlap a measurement
            self._flush_sink = driver.Buffer(8)
            self._flush_kernel = self.module.kernel(
                "kg_flush_l2", (self.sm_count * 4, 1, 1), (256, 1, 1)
            )
            self._flush_args = driver.KernelArgs(
                [
                    ("ptr", self._flush_buffer.ptr),
                    ("u64", self._flush_buffer.nbytes // 8),
                    ("ptr", self._flush_sink.ptr),
                ]
            )
        with cupti.launching():
            self._flush_kernel.launch(stream, self._flush_args)

    def poison_shared(self, stream: driver.Stream) -> None:
        """Queue all ones into the shared memory of every SM (8 blocks of 48 KiB an SM, in
        waves), so a kernel that reads shared memory before writing it is wrong in the gate
        rather than right by the zeros it happens to find (issue 50 class 7)."""
        words = self.SHARED_POISON_BYTES // 4
        kernel = self.module.kernel(
            "kg_poison_shared", (self.sm_count * 8, 1, 1), (256, 1, 1), self.SHARED_POISON_BYTES
        )
        with cupti.launching():
            kernel.launch(stream, driver.KernelArgs([("u32", words)]))

    def poison_heap(self, stream: driver.Stream) -> None:
        """Queue all ones into the device heap (`malloc` in a kernel): kg_poison_heap allocates
        it to the last 16-byte fragment (one block an SM, each starting with chunks of its share
        of the heap) and fills it, kg_free_heap frees it all again, so a kernel that reads heap
        memory before writing it is wrong in the gate rather than right by the zeros a fresh
        heap holds (issue 50 class 7)."""
        if self._heap is None:
            d = driver.cu()
            limit = "CU_LIMIT_MALLOC_HEAP_SIZE"
            heap_bytes = int(
                driver.check(d.cuCtxGetLimit(getattr(d.CUlimit, limit)), f"cuCtxGetLimit({limit})")
            )
            heads = driver.Buffer(8 * self.sm_count)  # a list of chunks per block
            heads.fill_bytes(0, stream)
            share = max(heap_bytes // self.sm_count, 16)
            chunk = 1 << (share.bit_length() - 1)  # a power of two: halving keeps it whole
            grid = (self.sm_count, 1, 1)
            self._heap = (
                heads,
                self.module.kernel("kg_poison_heap", grid, (self.HEAP_POISON_THREADS, 1, 1)),
                driver.KernelArgs([("u64", chunk), ("ptr", heads.ptr)]),
                self.module.kernel("kg_free_heap", grid, (1, 1, 1)),
                driver.KernelArgs([("ptr", heads.ptr)]),
            )
        _heads, poison, poison_args, free, free_args = self._heap
        with cupti.launching():
            poison.launch(stream, poison_args)
            free.launch(stream, free_args)

    def block(self, stream: driver.Stream, timeout_ns: int | None = None) -> None:
        """Queue the blocking kernel; nothing behind it on `stream` runs until `release()`.

        It gives up after `timeout_ns` (SPIN_TIMEOUT_NS by default) and then records that it
        timed out (see `blocker_timed_out()`).
        """
        timeout_ns = self.SPIN_TIMEOUT_NS if timeout_ns is None else int(timeout_ns)
        if self._flag is None:
            self._flag = driver.HostFlag()
            self._status = driver.Buffer(4)
            self._spin = self.module.kernel("kg_spin", (1, 1, 1), (1, 1, 1))
            self._spin_args: dict[int, driver.KernelArgs] = {}
        if timeout_ns not in self._spin_args:
            self._spin_args[timeout_ns] = driver.KernelArgs(
                [("ptr", self._flag.device_ptr), ("u64", timeout_ns), ("ptr", self._status.ptr)]
            )
        self._flag.set(0)
        with cupti.launching():
            self._spin.launch(stream, self._spin_args[timeout_ns])

    def blocker_timed_out(self) -> bool:
        """Whether the last blocking kernel gave up before release() (read after it finished)."""
        return self._status is not None and int(self._status.download("u4", 1)[0]) != 0

    def release(self) -> None:
        self._flag.set(1)

    def check_blocker(self) -> None:
        if self.blocker_timed_out():
            raise TimingError(
                "the blocking kernel timed out before the host released it: the sample included host "
                "latency; the host was stalled for over 10 s"
            )

    def close(self) -> None:
        for thing in (
            self._flush_buffer,
            self._flush_sink,
            self._status,
            self._flag,
            self._heap[0] if self._heap else None,
        ):
            if thing is not None:
                thing.free()
        cupti.forget(self._functions)
        self.module.unload()


def timed_behind_blocker(
    internal: InternalKernels,
    stream: driver.Stream,
    start: driver.Event,
    end: driver.Event,
    enqueue_work,
) -> float:
    """Seconds between two events around `enqueue_work()`, all queued behind the blocking
    kernel, so the host's time to queue the work stays outside the events."""
    internal.block(stream)
    try:
        start.record(stream)
        enqueue_work()
        end.record(stream)
    finally:
        internal.release()  # never leave the stream held by the spin kernel
    end.synchronize()
    internal.check_blocker()
    return end.elapsed_s(start)


class CudaBase:
    """What both CUDA adapters share: one stream, two events, the runner's kernels, the blocker
    around every timed window (or plain events once CUPTI records: time_unblocked), CUPTI window
    matching, pinned copies and copy turns, and the graphs made once per key. An adapter says
    how a side is launched and captured; `launching()` is the context its work is queued in."""

    def __init__(self, stream: driver.Stream, internal: InternalKernels, window=None):
        self.stream, self.internal, self.window = stream, internal, window
        self.start, self.end = driver.Event(), driver.Event()
        self._graphs: dict[tuple, object] = {}
        self.turns = CopyTurns()  # which copy (load, graph instance) a timed launch takes
        self._pin: dict[str, int] = {}  # the copy a pinned name's samples take now
        self.unblocked = False  # time_unblocked()

    def launching(self):
        """The context the adapter's work is queued in (the callable adapter: torch's stream)."""
        return contextlib.nullcontext()

    def pin_copies(self, name: str) -> int:
        """How many copies a pinned `name`'s samples choose from; 0: `name` is not pinned."""
        return 0

    def pin_copy(self, name: str, sample: int) -> int | None:
        """Sample `sample` of a pinned `name` takes copy copy_turn(sample) of it; None if unpinned."""
        copies = self.pin_copies(name)
        if not copies:
            return None
        self._pin[name] = copy_turn(sample, copies)
        return self._pin[name]

    def time_unblocked(self) -> None:
        """From now on, time every window between events without the blocking kernel: while
        CUPTI traces, a graph launch waits for its stream, which the blocker holds."""
        self.unblocked = True

    def _between_events(self, work) -> float:
        self.start.record(self.stream)
        with self.launching():
            work()
        self.end.record(self.stream)
        self.end.synchronize()
        return self.end.elapsed_s(self.start)

    def _timed(self, work) -> float:
        """Seconds of `work()` between the events, queued behind the blocker unless unblocked."""
        if self.unblocked:
            return self._between_events(work)

        def queued():
            with self.launching():
                work()

        return timed_behind_blocker(self.internal, self.stream, self.start, self.end, queued)

    def _recorded(self, name: str, work, launches: int) -> list[tuple[int, int]]:
        """The CUPTI intervals of `launches` launches of `name` that `work` queues.

        Not queued behind the blocking kernel: the timestamps are the kernels' own, so host
        latency before the first launch cannot enter them, and in hot mode a graph keeps the GPU
        fed while the host queues the next one. (Held behind the blocker, a graph launch under
        CUPTI tracing can wait for the stream: a deadlock the blocker only breaks at its
        timeout.)"""
        self.stream.synchronize()  # reset and flush finish outside the window
        self.window.begin()
        work()
        self.stream.synchronize()
        intervals = self.window.end()
        if len(intervals) != launches:
            raise TimingError(
                f"implementation {name!r}: CUPTI recorded {len(intervals)} kernel(s) on the timing "
                f"stream for {launches} launch(es); the timestamps cannot be matched to the launches"
            )
        return intervals

    def flush_l2(self) -> None:
        self.internal.flush_l2(self.stream)

    def _close_base(self, release_graph) -> list:
        """The steps that release the graphs (each by `release_graph`) and the events."""
        steps = [lambda g=g: release_graph(g) for g in self._graphs.values()]
        steps += [self.start.destroy, self.end.destroy]
        self._graphs = {}
        return steps


class CudaBackend(CudaBase):
    """timing.base.Backend for PTX kernels on one stream of one context: how they launch."""

    def __init__(
        self,
        stream: driver.Stream,
        internal: InternalKernels,
        launchables: dict[str, Launchable],
        resets: list[tuple[driver.Buffer, driver.Buffer]],
        graph_launches: int,
        outputs: list[driver.Buffer] | None = None,
        window=None,
        verify=None,
        cold_items: dict[str, list[Launchable]] | None = None,
        audit: LaunchAuditHooks | None = None,
        pinned: dict[str, list[list[Launchable]]] | None = None,
    ):
        """With `window` (a runner.measurement.timing.cupti.ActivityWindow on `stream`), samples are read
        from CUPTI's kernel timestamps instead of the events (runner.measurement.timing.cupti says how).
        `verify(name)` -> None or what is wrong with the outputs the last launch left.
        `cold_items[name]`: launchables of several loads of `name`'s module, which its cold
        launches take in turn (runner.execution.case.COLD_LOADS); by default its one.
        `audit`: what cold mode's random audits need (fresh inputs, read-backs, module state).
        `pinned[name]`: groups of launchables of loads of `name` (the A/A control), of which
        each sample takes one group whole (pin_copy), its launches taking the group's loads
        in turn (hot: groups of one); by default none is."""
        super().__init__(stream, internal, window)
        self.launchables = launchables
        self.resets = resets  # (destination, pristine copy) of every buffer the kernels overwrite
        self.graph_launches = graph_launches
        self.outputs = outputs or []  # buffers the kernels only write (poisoned, never restored)
        self.verify = verify
        self.cold_items = cold_items or {}
        self.audit = audit
        if audit is not None:  # the optional capabilities cold mode checks for (base.ReadBack)
            self.reseed_inputs, self.outputs_differ = audit.reseed, audit.differ
        if audit is not None and audit.expected:  # base.HotAudited
            self.audit_batch = self._audit_batch
        self._deferred = False  # inside cold_batch: launches queue into its one window
        self.pinned = pinned or {}
        self._scratch: dict[str, driver.Buffer] | None = None  # hot audits' copies out
        self._disturb: tuple[list, list] | None = None  # timed_disturbed's scratch buffers

    def pin_copies(self, name: str) -> int:
        """A pinned name's samples take one group of its loads each."""
        return len(self.pinned.get(name) or [])

    def _loads(self, name: str) -> tuple[list[Launchable], int]:
        """The loads `name`'s launches take in turn now (the pinned group, or cold_items, or
        its one) and the index of the first of them among all its loads (its states')."""
        groups = self.pinned.get(name)
        if groups:
            group = self._pin.get(name, 0)
            return groups[group], sum(len(g) for g in groups[:group])
        return self.cold_items.get(name) or [self.launchables[name]], 0

    def _all_loads(self, name: str) -> list[Launchable]:
        groups = self.pinned.get(name)
        if groups:
            return [item for group in groups for item in group]
        return self.cold_items.get(name) or [self.launchables[name]]

    def warmup(self, name: str, launches: int) -> None:
        for _ in range(launches):
            self.launchables[name].enqueue(self.stream)
        for item in self._all_loads(name)[1:]:  # every other load launched once too
            item.enqueue(self.stream)
        self.stream.synchronize()

    def reset(self, name: str) -> None:
        """Restore the inout buffers and the `.global` variables of the load of `name` that
        its next launch takes (as loaded: runner.gpu.driver.ModuleState)."""
        for destination, pristine in self.resets:
            destination.copy_from(pristine, self.stream)
        states = self.audit.states.get(name) if self.audit is not None else None
        if states:
            items, first = self._loads(name)
            state = states[first + self.turns.peek(name, len(items))]
            if state is not None:
                state.restore(self.stream)

    def read_outputs(self, name: str) -> dict:
        """What the last launch of `name` left in the buffers the kernels write (waits for it)."""
        self.stream.synchronize()
        return self.audit.read()

    def module_state(self, name: str) -> dict:
        """For the document: whether `name`'s module keeps `.global` state and what is done."""
        states = self.audit.states.get(name) if self.audit is not None else None
        kept = [s for s in states or [] if s is not None]
        if not kept:
            return {"globals": {}, "restored": False}
        how = (
            "every .global variable copied back to its bytes as loaded before each reset, "
            "outside the timing (cold: before every launch; hot: before every sample)"
        )
        if kept[0].missing:
            how += f"; not found by the driver, so not restored: {', '.join(kept[0].missing)}"
        return {
            "globals": {n: v.nbytes for n, v in kept[0].variables.items()},
            "restored": bool(kept[0].variables),
            "how": how,
        }

    def _graph(self, key: tuple, enqueue) -> Graph:
        """The graph captured from `enqueue(stream)`, made once per `key`."""
        if key not in self._graphs:
            self._graphs[key] = Graph(self.stream, enqueue)
        return self._graphs[key]

    def _hot_items(self, name: str) -> list[Launchable]:
        """What hot launch i of `name` takes, in turn: one launchable per input set."""
        sets = self.audit.sets.get(name) if self.audit is not None else None
        if name in self.pinned:  # the pinned group's first load, on each input set's arguments
            load = self._loads(name)[0][0]
            return [Launchable(load.kernel, s.args) for s in sets or [load]]
        return sets or [self.launchables[name]]

    def _enqueue_launches(self, name: str, launches: int, copy_after: int | None = None):
        """enqueue(stream) of `launches` launches of `name` rotating over its input sets; with
        `copy_after`, the written buffers are copied out right after that launch."""
        items = self._hot_items(name)

        def enqueue(stream):
            for i in range(launches):
                items[i % len(items)].enqueue(stream)
                if i == copy_after:
                    for buffer_name, buffer in self.audit.written.items():
                        self._scratch[buffer_name].copy_from(buffer, stream)

        return enqueue

    def _launches(self, name: str, launches: int) -> Graph:
        key = (name, launches, self._pin.get(name))  # a graph of each pinned load its own
        return self._graph(key, self._enqueue_launches(name, launches))

    def input_sets(self, name: str) -> int:
        return len(self._hot_items(name))

    def _audit_batch(self, name: str, batch: int, position: int) -> str | None:
        """An untimed replay of the same `batch` launches as a hot sample (the same graphs,
        the same input sets, launch for launch) with the written buffers copied out right after
        launch `position`; None, or how that launch's outputs differ from the baseline's on
        the same input set. The kernel cannot tell this replay from a timed one."""
        per_graph = min(batch, self.graph_launches)
        replay, at = divmod(position, per_graph)
        if self._scratch is None:
            self._scratch = {n: driver.Buffer(b.nbytes) for n, b in self.audit.written.items()}
        timed = self._launches(name, per_graph)
        audited = Graph(self.stream, self._enqueue_launches(name, per_graph, copy_after=at))
        try:
            for r in range(batch // per_graph):
                (audited if r == replay else timed).launch(self.stream)
            self.stream.synchronize()
        finally:
            audited.destroy()
        got = {n: self.audit.as_array(n, b) for n, b in self._scratch.items()}
        input_set = at % self.input_sets(name)
        found = self.audit.differ(got, self.audit.expected[input_set])
        from runner.measurement.gate.output_dependence import POISON_BYTE

        for copy in self._scratch.values():  # an answer no later timed launch may read
            copy.fill_bytes(POISON_BYTE, self.stream)  # (issue 50 class 1)
        return None if found is None else f"{found} (input set {input_set})"

    def timed_batch(self, name: str, batch: int) -> float:
        per_graph = min(batch, self.graph_launches)
        if batch % per_graph:
            raise ValueError(f"batch {batch} is not a whole number of {per_graph}-launch graphs")
        graph = self._launches(name, per_graph)

        def work():
            for _ in range(batch // per_graph):
                graph.launch(self.stream)

        if self.window is None:
            return self._timed(work)
        intervals = self._recorded(name, work, batch)
        return span_s(intervals) * batch / len(intervals)  # timed_batch's seconds for `batch`

    def poison_outputs(self, byte: int, stream: driver.Stream | None = None) -> None:
        """Fill what the kernels only write with `byte` (cold samples: outside the events)."""
        for buffer in self.outputs:
            buffer.fill_bytes(byte, stream or self.stream)

    def verify_outputs(self, name: str) -> str | None:
        return None if self.verify is None else self.verify(name)

    def timed_poisoned(self, name: str, batch: int, with_kernel: bool) -> float:
        """Like timed_batch, with every launch preceded by a poison of what the kernels write
        (runner.measurement.gate.output_dependence); without the kernel, the poison alone."""
        item = self.launchables[name] if with_kernel else None
        key = ("poisoned", name, with_kernel)
        return self._timed_traffic(key, self.outputs, self.resets, item, batch)

    def timed_disturbed(self, name: str, batch: int) -> float:
        """Like timed_poisoned with the kernel, the memsets and copies aimed at scratch buffers
        of the same sizes: the same bytes through the memory system before every launch, the
        outputs left holding the answer (output_dependence.check's control for a kernel whose
        working set the poison pushes out of the L2)."""
        if self._disturb is None:
            self._disturb = (
                [driver.Buffer(b.nbytes) for b in self.outputs],
                [(driver.Buffer(d.nbytes), pristine) for d, pristine in self.resets],
            )
        fills, copies = self._disturb
        key = ("disturbed", name)
        return self._timed_traffic(key, fills, copies, self.launchables[name], batch)

    def _timed_traffic(self, key: tuple, fills, copies, item, batch: int) -> float:
        """Seconds of `batch` launches, each a fill of `fills` with a poison byte of its own
        (drawn at random, never NaN: gate.launch_audit.poison_of), the copies (destination,
        source) and `item` (None: the traffic alone), replayed from one graph behind the
        blocker. The graph is warmed untimed once, when made (it is uploaded then too): the
        check's repeats alternate between graphs that are all warm by then."""
        per_graph = min(batch, self.graph_launches)

        def enqueue(stream):
            for _ in range(per_graph):
                poison = poison_of(int.from_bytes(os.urandom(8), "little"))
                for buffer in fills:
                    buffer.fill_bytes(poison, stream)
                for destination, source in copies:
                    destination.copy_from(source, stream)
                if item is not None:
                    item.enqueue(stream)

        key = (*key, per_graph)
        made = key not in self._graphs
        graph = self._graph(key, enqueue)
        if made:
            graph.launch(self.stream)
            self.stream.synchronize()

        def work():
            for _ in range(batch // per_graph):
                graph.launch(self.stream)

        return self._timed(work)

    def timed_cold(self, name: str) -> float:
        items, _ = self._loads(name)
        item = items[self.turns.next(name, len(items))]

        def work():
            item.enqueue(self.stream)

        if self.window is None:
            return self._timed(work)
        if self._deferred:  # read from the window when cold_batch closes it
            work()
            return 0.0
        return union_s(self._recorded(name, work, 1))

    def cold_batch(self, name: str, batch: int, launches) -> list[float]:
        """A cold sample's launches (runner.measurement.timing.cold) in one CUPTI window: each
        launch's reset, poison and flush are queued on the stream before it, as when each has
        a window of its own, and the window is read once at the end (one flush of CUPTI's
        records instead of one per launch). By events, each launch is timed as it runs."""
        if self.window is None:
            return launches()
        self._deferred = True
        try:  # one kernel per launch (a PTX implementation's entry), checked as any window
            intervals = self._recorded(name, launches, batch)
        finally:
            self._deferred = False
        return [union_s([interval]) for interval in sorted(intervals)]

    def close(self) -> None:
        fills, copies = self._disturb or ([], [])
        for scratch in [*(self._scratch or {}).values(), *fills, *(c for c, _ in copies)]:
            scratch.free()
        for step in self._close_base(Graph.destroy):
            step()
