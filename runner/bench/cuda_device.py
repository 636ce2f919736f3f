"""The GPU side of the Python API: torch callables on the runner's stream, timed by its engine.

Every call runs with torch's current stream set to the runner's own non-blocking stream, in the
device's primary context (the one torch uses), so CUDA events, the blocking kernel and the L2
flush of runner.measurement.timing apply to callables exactly as to PTX kernels: CallableBackend
is timing.cuda.CudaBase's callable adapter, saying only how a call is launched and captured.

Per implementation, once before timing:
- capture: one call is captured into a CUDA graph (torch.cuda.CUDAGraph). Every graph of a
  comparison shares one private memory pool, and a captured call's outputs are freed as the
  capture ends, so identical implementations write the same addresses. Its memcpy nodes are the
  call's copies. A callable that cannot be captured is recorded with the reason and timed
  without a graph.
- blocking probe (uncaptured callables only): one call queued behind a blocking kernel with a
  short timeout; a call that waits for the stream (synchronizes) cannot be timed behind the
  blocking kernel, so its events include host latency, and the row says so.
cold: reset, flush, then one launch of the captured 1-call graph (device-paced: no host dispatch
between its kernels; its memcpy nodes disabled where the case leaves copies out), or the call
itself where it cannot be captured, between events behind the blocking kernel; an uncapturable
callable in a case that leaves copies out is timed with them, and its row gets no ratio
(report.py). With the cupti timer each row records its cold samples' kernel count and summed
inter-kernel gap (integrity.cold_sample).
hot: a graph of up to `graph_calls` calls replayed between events, or a Python loop of calls
where the callable cannot be captured (host launch overhead included, recorded). Each instance
of a graph runs at an offset of its own, so a full hot graph (and a cold call's graph) is
captured INSTANCES times and the samples take the instances in turn. Every instance is uploaded
as it is made and, for hot batches, replayed once untimed (torch's instantiate does not upload).
The figures behind the pool and the instances: docs/method/callables.md.
The 1-call graph's nodes are judged (runner.bench.graph_capture) and it is replayed once onto
poisoned outputs (replayed_outputs). Around every timed window the legacy default stream is
synchronized before and queried after: work a call left running there is outside the timing
stream (findings). Each row's method_class says what its time stands for. The engine drives it
through runner.bench.integrity.WatchedBackend (CUPTI, the cupti timer, recheck).
"""

from __future__ import annotations

import contextlib
import functools

from runner.bench.graph_capture import CapturedGraph, Kept, graph_problems
from runner.bench.reset_probe import poison
from runner.gpu import driver
from runner.measurement import aa_control, environment
from runner.measurement.timing.cuda import CudaBase, InternalKernels

__all__ = ["CallableBackend", "CudaDevice"]

PROBE_TIMEOUT_NS = 200_000_000  # a call still waiting this long behind the blocker synchronizes
# While CUPTI traces, a CUDA graph launch waits for its stream, so it cannot be queued behind
# the blocking kernel (the host would wait for a stream the blocker holds until it is released)
UNBLOCKED = "not behind a blocking kernel (CUPTI records the window)"
INSTANCES = 16  # captures of a full hot graph and of the cold 1-call graph (see above)


class CudaDevice:
    """One CUDA device for callables: the primary context, one stream, the runner's kernels."""

    def __init__(self, ordinal: int = 0):
        import torch

        self.torch = torch
        self.ctx = driver.Context(ordinal)
        torch.cuda.set_device(ordinal)
        torch.cuda.init()
        self.stream = _runner_stream(ordinal)
        self.torch_stream = torch.cuda.ExternalStream(int(self.stream.handle), device=ordinal)
        self.internal = InternalKernels(self.ctx)
        self._env: dict | None = None

    @property
    def output_rule(self) -> tuple:
        """Outputs are exactly torch.Tensor, on the GPU (runner.bench.integrity)."""
        return self.torch.Tensor, "cuda"

    def call(self, fn):
        """fn() with the runner's stream current; returns after its work has finished.

        The runner's stream does not wait for torch's default stream, where inputs, snapshots
        and the reference were made: the device is synchronized first.
        """
        self.torch.cuda.synchronize()
        with self.torch.cuda.stream(self.torch_stream):
            out = fn()
        self.stream.synchronize()
        return out

    def _captured(self) -> dict:
        """The environment block, measured once per device (bandwidth and peaks included)."""
        if self._env is None:
            env = environment.capture(self.ctx)
            env["sensors_start"] = env.pop("sensors", None)
            env["toolchains"] = {"python": {"version": env["software"]["python"]}}
            for package in ("torch", "triton", "cupti-python"):
                version = environment.package_version(package)
                if version:
                    env["toolchains"][package] = {"version": version}
                    env["software"][package.replace("-", "_")] = version
            self._env = env
        return self._env

    def environment(self) -> dict:
        """The environment block with the sensors read now as `sensors_end`."""
        env = self._captured()
        env["sensors_end"] = environment.nvml_sensors(uuid=env["device"].get("uuid"))
        return env

    def peaks(self) -> dict:
        return self._captured()["peaks"]

    def cupti_handles(self) -> tuple[int, int]:
        """The context and the timing stream, as CUPTI takes them (runner.bench.watch)."""
        return int(self.ctx.handle), int(self.stream.handle)

    def synchronize_device(self) -> None:
        self.torch.cuda.synchronize()

    def persisting_l2_bytes(self) -> int:
        """The context's persisting-L2 limit now (0 since InternalKernels set it; a device
        without a persisting L2 is not asked)."""
        if self.internal.persisting_l2["max_bytes"] == 0:
            return 0
        return driver.persisting_l2_bytes()

    @property
    def l2_bytes(self) -> int:
        """The L2's size: a working set that fits is not judged against DRAM bandwidth."""
        return self.internal.l2_bytes

    def backend(self, impls: dict, case, options) -> CallableBackend:
        return CallableBackend(self, impls, case, options)

    def close(self) -> None:
        self.stream.synchronize()  # the stream itself stays: see _runner_stream
        self.internal.close()
        self.ctx.close()


_STREAMS: dict[int, driver.Stream] = {}


def _legacy_stream():
    """The legacy default stream (CU_STREAM_LEGACY), where torch's default stream runs."""
    d = driver.cu()
    return d.CUstream(getattr(d, "CU_STREAM_LEGACY", 1))


def _busy(stream) -> bool:
    """Whether `stream` still has work queued or running (cuStreamQuery: CUDA_ERROR_NOT_READY)."""
    d = driver.cu()
    result = d.cuStreamQuery(stream)
    err = result[0] if isinstance(result, tuple) else result
    if err == d.CUresult.CUDA_ERROR_NOT_READY:
        return True
    driver.check(result, "cuStreamQuery")
    return False


def _node_counts(node_types: list[str]) -> dict[str, int]:
    """How many nodes of each type a call's 1-call graph holds (the row's graph_nodes)."""
    counts: dict[str, int] = {}
    for t in node_types:
        counts[t.lower()] = counts.get(t.lower(), 0) + 1
    return counts


def _runner_stream(ordinal: int) -> driver.Stream:
    """The runner's one stream on device `ordinal`, for the life of the process. torch's caching
    allocator remembers the stream of every block it handed out there and records events on it
    when such a block is reused or freed; a stream destroyed while torch still holds blocks of
    it makes the next comparison's first kernel fail (invalid resource handle)."""
    if ordinal not in _STREAMS:
        _STREAMS[ordinal] = driver.Stream()
    return _STREAMS[ordinal]


class CallableBackend(CudaBase):
    """The callable adapter of timing.cuda.CudaBase: how a torch callable is launched (a call,
    or a replay of its captured graph) and captured; `info[name]` says how each one was timed."""

    graph_calls = 100  # calls captured in one graph for hot mode; larger batches replay it
    # Graph instances are uploaded as they are made and replayed once untimed before any sample
    # (tools/perf/graph_upload.py turns it off to show what a first launch costs a sample)
    upload_graphs = True

    def __init__(self, device: CudaDevice, impls: dict, case, options):
        super().__init__(device.stream, device.internal)
        self.device, self.impls, self.case, self.options = device, impls, case, options
        self.inputs = case.inputs
        self.count_copies = case.count_copies
        self._copies: dict[str, int] = {}  # memcpy nodes per captured call
        self._pool = None  # one memory pool for every graph of the comparison (see above)
        self._calls: dict[str, functools.partial] = {}
        self._capture_error: dict[str, str] = {}
        self._synchronizes: dict[str, bool] = {}
        self._timed_graph: dict[str, CapturedGraph | None] = {}  # what the last sample ran
        self.refused: dict[str, list[str]] = {}  # per implementation: why its row is refused
        self._legacy_busy: dict[str, int] = {}  # windows after which the legacy stream was busy
        try:
            device.torch.cuda.synchronize()  # inputs made on other streams are complete
            self.info: dict[str, dict] = {name: self._prepare(name) for name in impls}
        except BaseException:
            with contextlib.suppress(Exception):  # the original failure is the one to report
                self.close()  # graphs captured so far, events
            raise

    def _run(self, name: str):
        """One call of `name` on the case's inputs, made once per implementation."""
        if name not in self._calls:
            impl = self.impls[name]
            call = functools.partial(impl.run, *impl.call_args(self.inputs))
            self._calls[name] = Kept(call)  # its outputs: where the graph writes them (recheck)
        return self._calls[name]

    def _graph(self, name: str, calls: int, instance: int = 0) -> CapturedGraph:
        key = (name, calls, instance)
        if key not in self._graphs:
            self.reset(name)
            self.stream.synchronize()
            if self._pool is None:
                self._pool = self.device.torch.cuda.graph_pool_handle()
            try:
                self._graphs[key] = CapturedGraph(
                    self.device,
                    self._run(name),
                    calls,
                    not self.count_copies,
                    self._pool,
                    upload=self.upload_graphs,
                )
            except BaseException:
                # torch leaves a pool whose capture failed (a call that synchronizes) recording;
                # capturing into it again fails (already recording to mempool_id). Graphs made
                # before keep the old pool (README: list a synchronizing callable last).
                self._pool = None
                raise
        return self._graphs[key]

    def _cold_graph(self, name: str) -> bool:
        """Whether cold launches of `name` replay its 1-call graph: whenever it was captured, so
        a cold sample is device-paced (an eager multi-kernel call's span held the host's
        dispatch between its kernels: issue 50 item 9), and its copies can be left out."""
        return name in self._copies and name not in self._capture_error

    def _prepare(self, name: str) -> dict:
        try:
            graph = self._graph(name, 1)
            self._copies[name] = graph.copies
            problems = graph_problems(
                graph.node_types,
                graph.copy_targets,
                graph.outputs.ranges(),
                self.count_copies,
                self.options.recheck is not False,
            )
            if problems:
                self.refused[name] = problems
            if self.options.mode == "cold" and self._cold_graph(name):
                for instance in range(1, INSTANCES):
                    self._graph(name, 1, instance)
            copies = {
                "known": True,
                "counted": self.count_copies,
                "per_call": graph.copies,
                "bytes_per_call": graph.copy_bytes,
            }
        except Exception as exc:  # not capturable: why goes into the row
            self._copies.pop(name, None)  # an instance that failed: no graph for cold either
            self.device.torch.cuda.synchronize()
            first = (str(exc).splitlines() or [""])[0][:160]
            self._capture_error[name] = f"not capturable: {type(exc).__name__}: {first}"
            copies = {"known": False, "counted": self.count_copies}
            self._synchronizes[name] = self._probe_synchronizes(name)
        entry = {
            "method": self._method(name),
            "method_class": self._method_class(name),
            "fallback": self._fallback(name),
            "copies": copies,
        }
        if name not in self._capture_error:
            entry["graph_nodes"] = _node_counts(graph.node_types)
        return entry

    def _probe_synchronizes(self, name: str) -> bool:
        self.reset(name)
        self.internal.block(self.stream, PROBE_TIMEOUT_NS)
        try:
            with self.device.torch.cuda.stream(self.device.torch_stream):
                self._run(name)()
        finally:
            self.internal.release()
        self.stream.synchronize()
        return self.internal.blocker_timed_out()

    def _method(self, name: str) -> str:
        captured = name not in self._capture_error
        where = UNBLOCKED if self.unblocked else "behind a blocking kernel"
        if self.options.mode == "hot":
            if captured:
                text = "hot: CUDA graph of back-to-back calls replayed between events; time / batch"
                if self.unblocked:
                    text += f"; {UNBLOCKED}, the first launch's latency included"
                return text
            return "hot: Python loop of calls between events; time / batch (host launch overhead included)"
        if self._cold_graph(name):
            disabled = ", copies disabled" if not self.count_copies and self._copies[name] else ""
            return f"cold: one launch of the call's CUDA graph (device-paced){disabled}, {where}"
        if self._synchronizes.get(name):
            return "cold: one call between events, host latency included (the call synchronizes)"
        return f"cold: one call {where}"

    def _method_class(self, name: str) -> str:
        """What a row's time stands for, as far as a ratio goes (report.py refuses a ratio
        between rows of different classes): hot, graph replay or a host loop (host launch
        overhead included); cold, the call's device time behind the blocking kernel (or under
        CUPTI's recording), or a call that synchronizes, timed with the host's latency."""
        if self.options.mode == "hot":
            return "graph-replay" if name not in self._capture_error else "host-loop"
        return "host-latency" if self._synchronizes.get(name) else "device"

    def time_unblocked(self) -> None:
        """Time every sample between events without the blocking kernel (CUPTI is recording:
        see UNBLOCKED); the rows' methods say so."""
        super().time_unblocked()
        for name, entry in self.info.items():
            entry["method"] = self._method(name)

    def _fallback(self, name: str) -> str | None:
        why = self._capture_error.get(name)
        if why is None:
            return None
        parts = [why]
        if self.options.mode == "hot":
            parts.append("timed as a Python loop")
        elif self._synchronizes.get(name):
            parts.append(
                "the call waits for its stream, so it is not queued behind the blocking kernel"
            )
        if not self.count_copies and self.options.timer == "events":
            parts.append("copies inside the call could not be left out, so the row gets no ratio")
        return "; ".join(parts)

    # -- runner.measurement.timing.base.Backend ------------------------------------------------------------

    def warmup(self, name: str, launches: int) -> None:
        run, impl = self._run(name), self.impls[name]
        with self.device.torch.cuda.stream(self.device.torch_stream):
            for _ in range(launches):
                impl.do_reset()
                run()
        self.stream.synchronize()

    def reset(self, name: str) -> None:
        with self.device.torch.cuda.stream(self.device.torch_stream):
            self.impls[name].do_reset()

    def launching(self):
        return self.device.torch.cuda.stream(self.device.torch_stream)

    def _watched(self, name: str, window) -> float:
        """`window()` -> seconds, with the legacy default stream idle before it and queried
        after it: work the call left running there outlived the window the events measured."""
        legacy = _legacy_stream()
        driver.check(driver.cu().cuStreamSynchronize(legacy), "cuStreamSynchronize")
        seconds = window()
        if _busy(legacy):
            self._legacy_busy[name] = self._legacy_busy.get(name, 0) + 1
        return seconds

    def replayed_outputs(self, name: str):
        """The outputs of one replay of `name`'s 1-call graph, from its reset, with every output
        that is not an input or a private argument poisoned first; None when it has no graph.
        (runner.bench.integrity compares them with the reference: a call that does less while
        a CUDA graph is captured leaves poison.)"""
        if name in self._capture_error or name in self.refused:
            return None  # no graph, or one refused already (its outputs may not be its own)
        graph = self._graph(name, 1)
        impl = self.impls[name]
        keep = [*self.inputs, *(x for x in (impl.args or ()) if hasattr(x, "data_ptr"))]
        self.reset(name)
        outputs = graph.outputs.tensors()
        with self.device.torch.cuda.stream(self.device.torch_stream):
            poison(outputs, keep)
            graph.replay()
        self.stream.synchronize()
        return outputs

    def findings(self, name: str) -> list[str]:
        """Why `name`'s row is refused (its graph's content, work left on the legacy stream)."""
        found = list(self.refused.get(name, []))
        busy = self._legacy_busy.get(name, 0)
        if busy:
            found.append(
                f"work on the legacy default stream was still running after {busy} of its timed "
                "windows: it ran outside the timing stream, which the events do not see"
            )
        return found

    def timed_cold(self, name: str) -> float:
        self._timed_graph[name] = None
        self.info[name]["graph_instances"] = 1
        if self._cold_graph(name):
            instance = self._instance(name, INSTANCES)
            graph = self._timed_graph[name] = self._graph(name, 1, instance)
            return self._watched(name, lambda: self._timed(graph.replay))
        if self._synchronizes.get(name):
            return self._watched(name, lambda: self._between_events(self._run(name)))
        return self._watched(name, lambda: self._timed(self._run(name)))

    def pin_copies(self, name: str) -> int:
        """The A/A control (runner.measurement.aa_control) is pinned to one of INSTANCES graph
        instances a sample, its label in the document; where its samples take no instances
        (info's `graph_instances` 1) the label is only a place in the run."""
        return INSTANCES if name.endswith(aa_control.CONTROL_SUFFIX) else 0

    def _instance(self, name: str, instances: int) -> int:
        """The instance a timed sample of `name` takes (pinned, or the next in turn), and
        how many its samples take, kept in info (report.py's A/A control reads it)."""
        self.info[name]["graph_instances"] = instances
        if name in self._pin:
            return self._pin[name] % instances
        return self.turns.next(name, instances)

    def prepare_batch(self, name: str, batch: int) -> None:
        """Capture the graphs of a batch before, outside any window, and replay each new one
        once (then reset): no instance's first launch falls in a timed sample."""
        if name in self._capture_error:
            return
        calls = min(batch, self.graph_calls)
        made = [
            self._graph(name, calls, instance)
            for instance in range(self._instances(batch))
            if (name, calls, instance) not in self._graphs
        ]
        if made and self.upload_graphs:
            with self.device.torch.cuda.stream(self.device.torch_stream):
                for graph in made:
                    graph.replay()  # on the runner's stream, as a timed replay
            self.reset(name)
            self.stream.synchronize()

    def _instances(self, batch: int) -> int:
        """Instances of the batch's graph: INSTANCES for a full graph, else one (a batch under
        graph_calls calls is one of a kernel so slow that the offsets do not show)."""
        return INSTANCES if batch >= self.graph_calls else 1

    def timed_batch(self, name: str, batch: int) -> float:
        self.prepare_batch(name, batch)
        run = self._run(name)
        self._timed_graph[name] = None
        self.info[name]["graph_instances"] = 1
        if name in self._capture_error:

            def loop():
                for _ in range(batch):
                    run()

            return self._watched(name, lambda: self._between_events(loop))
        per_graph = min(batch, self.graph_calls)
        if batch % per_graph:
            raise ValueError(f"batch {batch} is not a whole number of {per_graph}-call graphs")
        instance = self._instance(name, self._instances(batch))
        graph = self._timed_graph[name] = self._graph(name, per_graph, instance)

        def replays():
            for _ in range(batch // per_graph):
                graph.replay()

        return self._watched(name, lambda: self._timed(replays))

    # -- for runner.bench.integrity.WatchedBackend ------------------------------------------

    def synchronize(self) -> None:
        self.stream.synchronize()

    def last_outputs(self, name: str):
        """The outputs of the last call of the last timed sample (recheck mode only)."""
        graph = self._timed_graph.get(name)
        return graph.outputs.tensors() if graph is not None else self._run(name).last

    def close(self) -> None:
        """Release everything, each step even if an earlier one failed."""
        steps = [self.stream.synchronize, *self._close_base(CapturedGraph.close)]
        failure = None
        for step in steps:
            try:
                step()
            except Exception as exc:  # the first failure is raised after all steps ran
                failure = failure or exc
        if failure is not None:
            raise failure
