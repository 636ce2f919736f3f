"""Integrity of the Python front end's timings: what a row's time is allowed to stand for.

- Outputs are plain arrays of the device's kind (`output_problems`): on the CUDA device exactly
  `torch.Tensor` on the GPU; a subclass, a lazy, fake or meta value can defer or fake the work.
- `WatchedBackend` wraps the device's backend for the timing engine: with CUPTI, every timed
  window and every piece of the runner's untimed work is bracketed (runner.bench.watch); with
  the `cupti` timer, a sample's time is the span of its own records (cupti_timer); with `recheck`, every
  sample gets fresh inputs and its outputs are verified (runner.bench.recheck).
- `judge()` marks the document: a row whose work left the window is flagged and gets no gap,
  and the case fails with what was found; Runner.compare then raises IntegrityFailed. A row
  whose rate is physically impossible on this device (above the ceiling of
  runner.measurement.environment.judge_rate, or above the nominal FLOP/s; not judged for a
  noncomparable row, which computes something else than the case declares) is flagged, with both figures in
  `throughput.bound`, and gets no gap, but the comparison's other rows stand.
"""

from __future__ import annotations

import statistics
import time
from typing import Protocol

from runner.bench import watch
from runner.bench.recheck import Recheck
from runner.bench.verification import COMPARISON_GUARD, comparison_changed
from runner.bench.workload import ReferenceUnavailable
from runner.document import impossible, rate_bound
from runner.errors import DeclarationError, NoKernelTimed
from runner.measurement import aa_control
from runner.measurement.gate import arrays
from runner.measurement.timing import cold
from runner.measurement.timing.base import Backend, Pinned, copy_turn, declares


class CallableSides(Backend, Protocol):
    """What the wrapper asks of a device's backend for callables (bench.cuda_device's
    CallableBackend, or a stand-in): the timing Backend, each row's info, its implementations,
    why a row is refused, a replay's outputs and the last sample's."""

    info: dict[str, dict]
    graph_calls: int
    impls: dict

    def findings(self, name: str) -> list[str]: ...

    def replayed_outputs(self, name: str): ...

    def last_outputs(self, name: str): ...

    def close(self) -> None: ...


# What a device's backend for callables may add, checked once when the wrapper is made.


class Unblockable(Protocol):
    def time_unblocked(self) -> None:
        """Time every sample without the blocking kernel from now on (CUPTI records)."""


class StreamSynchronized(Protocol):
    def synchronize(self) -> None:
        """Wait for the timing stream (reset and flush finish outside the window)."""


class BatchPrepared(Protocol):
    def prepare_batch(self, name: str, batch: int) -> None:
        """Make what a batch replays before, outside any window."""


class StatedWall(Protocol):
    def sample_wall_s(self, name: str) -> float:
        """The host wall time of a sample of `name`, as a stand-in states it."""


# What a device may offer the wrapper: its rule for outputs, CUPTI's handles, the L2 limit.


class OutputRule(Protocol):
    output_rule: tuple  # (the tensor type outputs must be exactly, the device type or None)


class Watchable(Protocol):
    def cupti_handles(self) -> tuple[int, int]: ...

    def synchronize_device(self) -> None: ...


class PersistingL2(Protocol):
    def persisting_l2_bytes(self) -> int: ...


class L2Sized(Protocol):
    l2_bytes: int  # a working set that fits is not judged against DRAM bandwidth


__all__ = [
    "CallableSides",
    "WatchedBackend",
    "check_outputs",
    "copies_disabled",
    "judge",
    "output_problems",
]

COLD_PROBES = 2  # cold launches of each implementation before the samples (cold_probe)
BATCH_PROBE = 4  # and, with the cupti timer, a batch of this many (WatchedBackend._batched_wall)


def _type_name(t: type) -> str:
    module = getattr(t, "__module__", "") or ""
    return f"{module}.{t.__qualname__}" if module and module != "builtins" else t.__qualname__


def output_problems(outputs, tensor_type: type, device_type: str | None) -> list[str]:
    """What is wrong with each output that is not a plain `tensor_type` on `device_type`."""
    if outputs is None:
        return []
    items = outputs if isinstance(outputs, tuple | list) else (outputs,)
    wanted = _type_name(tensor_type)
    problems = []
    for i, x in enumerate(items):
        kind = type(x)
        if x is None:  # nothing returned in that place (an unchecked declaration allows it)
            continue
        if kind is not tensor_type:
            relation = (
                f"a subclass of {wanted}" if isinstance(x, tensor_type) else f"not a {wanted}"
            )
            problems.append(f"output {i} is a {_type_name(kind)}, {relation}")
        elif getattr(x, "is_meta", False):
            problems.append(f"output {i} is a meta {wanted} (it has no data)")
        elif device_type is not None and getattr(getattr(x, "device", None), "type", None) not in (
            None,
            device_type,
        ):
            problems.append(f"output {i} is on device {x.device}, not on {device_type}")
    return problems


def check_outputs(device, case_id: str, name: str, outputs) -> None:
    """Raise DeclarationError when the device has an output rule and `outputs` break it."""
    if not declares(device, OutputRule):
        return
    tensor_type, device_type = device.output_rule
    problems = output_problems(outputs, tensor_type, device_type)
    if problems:
        where = f" {device_type}" if device_type else ""
        raise DeclarationError(
            f"case {case_id}: implementation {name!r} returned {'; '.join(problems)}. Outputs "
            f"must be plain {_type_name(tensor_type)} values on the{where} device: a subclass, "
            "a lazy, fake or meta value can defer or fake the work the timing is meant to see"
        )


def copies_disabled(info: dict) -> bool:
    """Whether a row's copies are left out by disabling them in its graph (its info)."""
    copies = info.get("copies", {})
    return bool(copies.get("known") and copies.get("per_call") and not copies.get("counted"))


# recheck=False is said in every row, never silent: its outputs were checked once, on the case's
# inputs, so a result cached by those inputs' addresses is not ruled out (issue 50 class 8b)
RECHECK_OFF = {
    "fresh_inputs": 0,
    "verified_samples": 0,
    "verified": False,
    "mode": "off",
    "schedule": "off",
    "reason": "recheck=False: the timed samples ran on the checked inputs only; a result kept "
    "from the checked call (a cache keyed by the inputs' addresses) is not ruled out",
}


def cold_sample(shapes: list[tuple[int, float]]) -> dict:
    """What a row's cold samples held, by the cupti timer's records: the median kernel count and
    the median summed gap between them (issue 50 item 9: a span that includes host dispatch)."""
    return {
        "kernels": int(statistics.median(k for k, _ in shapes)),
        "gap_s": float(statistics.median(g for _, g in shapes)),
        "samples": len(shapes),
    }


HOT_EVENTS = (
    "not made for hot samples timed by events: they wait behind the blocking kernel, which a CUDA "
    "graph launch cannot do while CUPTI traces, and taken without it the host's latency enters "
    "the replays (docs/method/callables.md); --bench-timer cupti checks the window"
)
COLD_EVENTS = (
    "not made for cold samples timed by events: they wait behind the blocking kernel, which a "
    "CUDA graph launch cannot do while CUPTI traces; the cupti timer (auto's choice in cold "
    "mode) checks the window"
)


def watch_reason(device, options) -> str | None:
    """None when the comparison's windows can be recorded by CUPTI, else why not."""
    if not declares(device, Watchable):
        return "the device is a stand-in without CUDA"
    why = watch.unavailable_reason()
    if why is None and options.timer == "events":
        return COLD_EVENTS if options.mode == "cold" else HOT_EVENTS
    return why


class WatchedBackend:
    """runner.measurement.timing.base.Backend around the device's backend (see the module docstring).

    With CUPTI, the recording starts before the device's backend is made (so the graphs are
    captured while it traces), and that preparation is untimed work in its own bracket."""

    def __init__(self, device, impls: dict, case, options, verify: list[str]):
        self.watch = self.busy = self.recheck = None
        self._recheck_off = options.recheck is False
        self._shapes: dict[str, list[tuple[int, float]]] = {}  # cold: (kernels, gap_s) a sample
        self._resetting = "(L2 flush)"
        self.device, self.cold = device, options.mode == "cold"
        why = watch_reason(device, options)
        if options.timer == "cupti" and why:
            raise DeclarationError(f"timer 'cupti' cannot be used: {why}")
        if why is None:
            from runner.bench.watch import Watch

            # only the cupti timer is watched (events need the blocker): its failure is the
            # comparison's (another CUPTI subscriber, say), raised as it is
            self.watch = Watch(*device.cupti_handles(), device.synchronize_device)
        self.not_watched = why
        try:
            make = lambda: device.backend(impls, case, options)  # noqa: E731
            self.inner: CallableSides = (
                make() if self.watch is None else self.watch.untimed("(prepare)", make)
            )
        except BaseException:
            if self.watch is not None:
                self.watch.close()
            raise
        self.info, self.graph_calls = self.inner.info, self.inner.graph_calls
        self.synchronizes = declares(self.inner, StreamSynchronized)
        self.prepares = declares(self.inner, BatchPrepared)
        if self.watch is not None:
            self.watch.classifier.exempt = {
                n for n, i in self.info.items() if copies_disabled(i) and not i["fallback"]
            }
            if declares(self.inner, Unblockable):
                self.inner.time_unblocked()
        try:
            self.replay_problems = self._check_replays(case, verify)
        except BaseException:
            self.close()  # the device's backend and CUPTI: nothing is timed
            raise
        if options.timer == "cupti":
            self.busy = watch.KernelSpanTimer(case.count_copies)
            for entry in self.info.values():  # one method for every sample of every row
                entry["method"] = f"{self.busy.method}; launched as {entry['method']}"
        if options.recheck:
            hints = {n: self._recheck_hint(n, i) for n, i in self.info.items()}
            # auto: a sample's share of the budget at the fewest samples (runner.bench.recheck)
            budget = (
                options.budget_s / (options.min_samples * len(impls))
                if options.recheck == "auto"
                else None
            )
            # a row refused already (its graph, its replay) is not rechecked: its refusal says more
            checked = [
                n for n in verify if not self.inner.findings(n) and n not in self.replay_problems
            ]
            self.recheck = Recheck(
                case, checked, device.call, {n: h for n, h in hints.items() if h}, budget
            )

    def _check_replays(self, case, verify: list[str]) -> dict[str, str]:
        """Each verified row's graph replayed once (outputs poisoned first) and compared with the
        reference on the case's own inputs: what hot samples replay must make the outputs.
        Rows whose copies are disabled in the graph are left out (their outputs may depend on
        a copy that does not run)."""
        replay = self.inner.replayed_outputs
        if not case.verification.checks:
            return {}
        expected = case.expected
        if isinstance(expected, ReferenceUnavailable):
            return {}
        expected = arrays.as_outputs(expected, f"the reference of case {case.id}")
        problems = {}

        def replayed(name: str):
            outputs = replay(name)
            if outputs is None:
                return None
            got = arrays.as_outputs(outputs, f"implementation {name!r}")
            return case.verification.check(got, expected)  # its reads stay in the bracket

        for name in verify:
            if copies_disabled(self.info[name]):
                continue
            outcome = self._untimed(name, lambda name=name: replayed(name))
            if outcome is None:
                continue
            if not outcome.passed:
                problems[name] = (
                    "a replay of its captured CUDA graph does not make its outputs (they were "
                    "poisoned before it): " + "; ".join(outcome.problems) + ". The call does "
                    "less while a CUDA graph is captured than when it is called"
                )
        return problems

    def _recheck_hint(self, name: str, info: dict) -> str | None:
        parts = []
        impl = self.inner.impls.get(name)
        if impl is not None and impl.args is not None:
            parts.append(
                "it takes private arguments (Implementation(args=...)): its reset must refill "
                "them from case.inputs, which recheck regenerates in place"
            )
        if copies_disabled(info):
            parts.append(
                f"its {info['copies']['per_call']} copies per call are disabled in the timed "
                "graph (the case leaves copies out), so what reads their destinations sees stale "
                "data: use count_copies=True with recheck"
            )
        return "; ".join(parts) or None

    def _untimed(self, name: str, work):
        return work() if self.watch is None else self.watch.untimed(name, work)

    def _timed(self, name: str, sample) -> float:
        if self.synchronizes:
            self.inner.synchronize()  # reset and flush finish outside the window
        if self.watch is None:
            seconds = sample()
        else:
            seconds, inside = self.watch.timed(name, sample)
            if self.busy is not None and inside is not None:  # None: deferred (cold_batch)
                seconds = self._busy(name, inside)
        if self.recheck is not None:
            if changed := comparison_changed():  # a timed call patched what judges it
                raise DeclarationError(
                    f"implementation {name!r} changed the comparison that rechecks it: "
                    f"{', '.join(changed)} are not the functions runner.bench imported"
                )
            self._untimed(name, lambda: self.recheck.verify(name, self.inner.last_outputs(name)))
        return seconds

    def _busy(self, name: str, inside: list) -> float:
        """The cupti timer's seconds of a window's records (their span)."""
        seconds = self.busy.seconds(inside)
        if self.cold:
            self._shapes.setdefault(name, []).append(self.busy.shape(inside))
        # nothing of the sample ran on the timing stream: flagged (the row gets no ratio and the
        # case fails), else a row the timer cannot time
        if seconds <= 0 and not self.watch.classifier.flagged(name):
            raise NoKernelTimed(
                name,
                f"implementation {name!r}: CUPTI recorded no kernel for a timed sample; it "
                "launches no kernel the timer counts (copies are left out in this case), so time "
                "it with events",
            )
        return seconds

    def cold_batch(self, name: str, batch: int, launches) -> list[float]:
        """With the cupti timer, a cold sample's launches leave their records in CUPTI until the
        last one (runner.measurement.timing.cold): one forced flush for the sample, not one per
        launch; each launch's window and untimed work stay bracketed and judged as before."""
        # per launch: its reset, its flush, its window and a recheck's verification
        if self.busy is None or not self.watch.defer(4 * batch):
            return launches()
        try:
            launches()
        finally:
            insides = self.watch.collect()
        return [self._busy(name, inside) for inside in insides]

    # -- runner.measurement.timing.base.Backend ------------------------------------------------------------

    def warmup(self, name: str, launches: int) -> None:
        self._untimed(name, lambda: self.inner.warmup(name, launches))

    def reset(self, name: str) -> None:
        self._resetting = name  # the flush that follows is this implementation's

        def work():
            if self.recheck is not None:
                self.recheck.fresh()
            self.inner.reset(name)

        self._untimed(name, work)

    def flush_l2(self) -> None:
        self._untimed(self._resetting, self.inner.flush_l2)

    def timed_cold(self, name: str) -> float:
        return self._timed(name, lambda: self.inner.timed_cold(name))

    def timed_batch(self, name: str, batch: int) -> float:
        if self.prepares:  # a graph captured here, outside every window
            self._untimed(name, lambda: self.inner.prepare_batch(name, batch))
        return self._timed(name, lambda: self.inner.timed_batch(name, batch))

    def cold_probe(self, name: str) -> tuple[float, float]:
        """Two cold launches (reset, flush, timed call): the shorter host wall time, for the
        sample budget (the first launch of a process pays one-time costs: docs/method/
        cold-launches.md; a CPU stand-in states its own), and the shorter
        seconds timed, for the launches per sample (runner.measurement.timing.cold)."""
        walls, seconds = [], []
        for _ in range(COLD_PROBES):
            t0 = time.perf_counter()
            seconds.append(cold.cold_launch(self, name))  # no poison here
            walls.append(time.perf_counter() - t0)
        if declares(self.inner, StatedWall):
            return self.inner.sample_wall_s(name), min(seconds)
        if self.busy is not None:  # its samples are read a sample at a time (cold_batch)
            return self._batched_wall(name, min(seconds)), min(seconds)
        return min(walls), min(seconds)

    def _batched_wall(self, name: str, launch_s: float) -> float:
        """The host wall time a launch takes in a cold sample read at its end (cold_batch): the
        walls of a batch of 1 and of BATCH_PROBE launches give the cost of a launch and the one
        flush a sample pays, spread over this launch's batch (an upper bound: a sample takes the
        batch of the fastest implementation, at least this one's)."""

        def wall(launches: int) -> float:
            t0 = time.perf_counter()
            run = lambda: [  # noqa: E731
                cold.cold_launch(self, name) for _ in range(launches)
            ]
            self.cold_batch(name, launches, run)
            return time.perf_counter() - t0

        one, many = wall(1), wall(BATCH_PROBE)
        per_launch = max((many - one) / (BATCH_PROBE - 1), 0.0)
        return per_launch + max(one - per_launch, 0.0) / cold.launches_for(launch_s)

    def pin_copy(self, name: str, sample: int) -> int | None:
        """The device backend's pin of the A/A control's samples (CallableBackend.pin_copy), or
        the place label copy_turn(sample, CONTROL_LOADS) where it pins none."""
        if declares(self.inner, Pinned):
            return self.inner.pin_copy(name, sample)
        if name.endswith(aa_control.CONTROL_SUFFIX):
            return copy_turn(sample, aa_control.CONTROL_LOADS)
        return None

    def finish(self) -> None:
        """After the last sample: the last records placed, every row's findings in `info`."""
        if self.watch is not None:
            self.watch.finish()
        for name, entry in self.info.items():
            if self.watch is not None:
                entry["window"] = self.watch.summary(name)
            else:
                entry["window"] = {"checked": False, "reason": self.not_watched}
            if self.recheck is not None:
                entry["recheck"] = self.recheck.summary(name)
            elif self._recheck_off:
                entry["recheck"] = RECHECK_OFF
            if self._shapes.get(name):
                entry["cold_sample"] = cold_sample(self._shapes[name])
            entry["refused"] = self.inner.findings(name)
            if name in self.replay_problems:
                entry["refused"].append(self.replay_problems[name])
        if raised := self._persisting_l2_raised():
            for entry in self.info.values():  # which call raised it cannot be told
                entry["refused"].append(raised)

    def _persisting_l2_raised(self) -> str | None:
        """Cold: why the samples are void when the persisting-L2 limit, 0 since the device's
        setup (runner.gpu.driver.set_no_persisting_l2), is not 0 after them: a call raised it, so
        its lines could persist through the flush. None otherwise, and for a device that cannot say."""
        watched = self.cold and declares(self.device, PersistingL2)
        kept = self.device.persisting_l2_bytes() if watched else 0
        if not kept:
            return None
        return (
            f"the persisting-L2 limit read {kept} bytes after the cold samples (0 since setup): "
            "a call raised it, so L2 lines could persist through the flush"
        )

    def close(self) -> None:
        """The case's own inputs back (recheck), then the device's backend, then CUPTI: each
        step even if an earlier one failed (CUPTI left enabled slows the whole process)."""
        try:
            if self.recheck is not None:
                self.recheck.restore()
        finally:
            try:
                self.inner.close()
            finally:
                watch, self.watch = self.watch, None
                if watch is not None:
                    watch.close()


def judge(doc: dict, info: dict, peaks: dict, case) -> list[str]:
    """Flag the document's timed rows (see the module docstring); returns the "name: why" lines
    that fail the case (work outside the window, a refused graph; a rate above the device's
    ceiling only flags its row). `peaks` are the device's, with its
    `l2_bytes`; the case's bytes a call are its declared traffic, not its distinct footprint
    (an in-place op counts its buffer twice), so the L2 may serve twice its size."""
    failing, flagged = [], []
    for name, entry in doc["implementations"].items():
        if "timing" not in entry:
            continue
        window = info.get(name, {}).get("window")
        refused = list(info.get(name, {}).get("refused") or [])
        flags = list(refused)
        failing += [f"{name}: {why}" for why in refused]  # graphs that hide the work: a cheat
        if window and window.get("message"):
            flags.append(window["message"])
            failing.append(f"{name}: {window['message']}")
        # a noncomparable row computes something else: the case's bytes and FLOPs are not its own
        comparable = entry["verification"]["kind"] != "noncomparable"
        rates = entry.get("throughput", {})
        bound = comparable and rate_bound(rates, peaks, case.bytes, footprint_known=False)
        if bound:
            rates["bound"] = bound
        why = comparable and impossible(rates, peaks, case.bytes, footprint_known=False)
        if why:
            flags.append(
                "physically impossible timing (the work was not all done, or not all timed): " + why
            )
        block = {"flags": flags, "comparison": COMPARISON_GUARD}
        if window:
            block["window"] = window
        if info.get(name, {}).get("cold_sample"):
            block["cold_sample"] = info[name]["cold_sample"]
        if info.get(name, {}).get("recheck"):
            block["recheck"] = info[name]["recheck"]
            if block["recheck"]["mode"] == "off" and entry["verification"]["verified"]:
                entry["verification"]["text"] += "; recheck off: checked once, on these inputs"
        entry["integrity"] = block
        if flags:
            flagged.append(name)
    if not flagged:
        return []
    op_flagged = bool(doc["implementations"][doc["baseline"]]["integrity"]["flags"])
    for name, entry in doc["implementations"].items():
        if name == doc["baseline"] or "timing" not in entry:
            continue
        if entry["integrity"]["flags"] or op_flagged:
            entry["gap"] = None
            whose = "its" if entry["integrity"]["flags"] else "the op's"
            entry["gap_note"] = f"no ratio: {whose} timing is flagged (integrity.flags)"
    if failing:
        doc["status"] = "failed"
        doc["error"] = {"phase": "timing", "message": "; ".join(failing)[:2000]}
    return failing
