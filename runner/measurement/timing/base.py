"""What every timing strategy shares: settings, the device interface it drives, its result.

A strategy (hot.py, cold.py) is one class with one entry point, `measure(backend, names)`,
and fixed phases: warm-up, calibration, paired rounds. The backend is the only thing that
touches the device, so a fake backend tests ordering and calibration on the CPU.
"""

from __future__ import annotations

import inspect
import math
import time
from dataclasses import dataclass, field
from typing import Protocol

from runner.measurement.timing.stopping import (
    SEQUENTIAL_TARGET,
    ControlTerm,
    precision_more,
    sequential_more,
)


@dataclass(frozen=True)
class TimingSettings:
    """Named, typed defaults of a measurement (docs/method.md, How it measures)."""

    mode: str = "hot"
    warmup: int = 10  # launches per implementation, never timed
    samples: int = 30  # paired rounds; each implementation gets one sample per round
    target_sample_s: float = 0.050  # hot: a sample (one batch) should last about this long
    graph_launches: int = 1000  # hot: launches captured in one graph; larger batches replay it
    max_batch: int = 100_000  # at most 100 graph replays are queued behind the blocking kernel
    calibration_steps: int = 5
    # "rounds": one sample per implementation per round, A B C or C B A (round_order).
    # "passes": two passes, A B C then C B A, each implementation taking its samples of a pass
    # back to back; `samples` is split between the passes (the Python API's default).
    schedule: str = "rounds"
    # "events": CUDA events around each sample; "cupti": kernel timestamps from CUPTI activity
    # records (runner.measurement.timing.cupti). The caller resolves "auto" before it gets here.
    timer: str = "events"
    # Precision stopping rule (None: exactly `samples`): after the first `samples`, keep
    # sampling until the 95% interval of every gap has a half-width of at most this fraction
    # of the gap, or `max_samples` or `precision_max_s` of wall time are spent.
    precision: float | None = None
    max_samples: int = 1000
    precision_max_s: float = 60.0
    # Sequential rule (None: off; runner bench's default; ignored with `precision`): the first
    # `first_samples` rounds, then stop as soon as every gap's interval (the A/A control's
    # included) has a half-width within `sequential_target`, else more rounds up to `samples`
    # (runner.measurement.timing.stopping).
    first_samples: int | None = None
    sequential_target: float = SEQUENTIAL_TARGET
    # cold: launches averaged into one sample (None: chosen from probe launches, cold.py)
    cold_launches: int | None = None

    def __post_init__(self):
        if self.mode not in ("hot", "cold"):
            raise ValueError(f"TimingSettings.mode must be 'hot' or 'cold' (got {self.mode!r})")
        if self.schedule not in SCHEDULES:
            raise ValueError(
                f"TimingSettings.schedule must be one of {', '.join(SCHEDULES)} (got {self.schedule!r})"
            )
        if self.schedule == "passes" and self.samples % 2:
            raise ValueError(
                f"TimingSettings.samples must be even with schedule 'passes' (got {self.samples})"
            )
        if self.samples < 1 or self.warmup < 0:
            raise ValueError(
                f"TimingSettings needs samples >= 1 and warmup >= 0 (got {self.samples}, {self.warmup})"
            )
        if self.timer not in TIMERS:
            raise ValueError(
                f"TimingSettings.timer must be one of {', '.join(TIMERS)} (got {self.timer!r})"
            )
        if self.precision is not None and not 0 < self.precision < 1:
            raise ValueError(
                f"TimingSettings.precision must be a fraction in (0, 1), e.g. 0.005 for 0.5% "
                f"(got {self.precision!r})"
            )
        if self.first_samples is not None and not (
            2 <= self.first_samples <= self.samples and self.schedule == "rounds"
        ):
            raise ValueError(
                f"TimingSettings.first_samples must be in 2..samples ({self.samples}) with "
                f"schedule 'rounds' (got {self.first_samples!r}, {self.schedule!r})"
            )
        if not 0 < self.sequential_target < 1:
            raise ValueError(
                "TimingSettings.sequential_target must be a fraction in (0, 1) "
                f"(got {self.sequential_target!r})"
            )
        if self.max_samples < self.samples:
            raise ValueError(
                f"TimingSettings.max_samples ({self.max_samples}) must be >= samples ({self.samples})"
            )
        if self.cold_launches is not None and not (
            isinstance(self.cold_launches, int) and 1 <= self.cold_launches <= 10_000
        ):
            raise ValueError(
                f"TimingSettings.cold_launches must be None or an integer in 1..10000 "
                f"(got {self.cold_launches!r})"
            )
        if not self.target_sample_s > 0:
            raise ValueError(
                f"TimingSettings.target_sample_s must be > 0 (got {self.target_sample_s})"
            )

    @property
    def sequential(self) -> bool:
        """Whether the sequential rule decides when sampling stops."""
        return self.precision is None and self.first_samples is not None


class Backend(Protocol):
    """The device side of a measurement; implementations are addressed by name."""

    def warmup(self, name: str, launches: int) -> None:
        """Run `launches` untimed launches and wait for them."""

    def reset(self, name: str) -> None:
        """Restore what the implementation overwrites (inputs it writes), outside any timing."""

    def timed_batch(self, name: str, batch: int) -> float:
        """Seconds between two events around `batch` back-to-back launches (graph replay)."""

    def flush_l2(self) -> None:
        """Leave the L2 holding clean lines of unrelated data."""

    def timed_cold(self, name: str) -> float:
        """Seconds between two events around one launch queued behind a blocking kernel."""


# The optional capabilities. A backend has one when it has its members (a fake by duck typing,
# a CUDA backend by its class); a strategy checks them once per measurement (Capabilities.of).


def declares(thing: object, capability: type) -> bool:
    """Whether `thing` has every member `capability` (a Protocol) declares, None counting as
    absent. Checked on the object each time, unlike isinstance on a runtime Protocol, whose
    answer is cached per class (a stand-in may drop a member for one test)."""
    members = [n for n in vars(capability) if not n.startswith("_")]
    members += list(getattr(capability, "__annotations__", {}))
    return all(inspect.getattr_static(thing, m, None) is not None for m in members)


class Pinned(Protocol):
    def pin_copy(self, name: str, sample: int) -> int | None:
        """Pin sample `sample` of `name` to one copy of it (the A/A control); the copy, or None."""


class HotAudited(Protocol):
    def audit_batch(self, name: str, batch: int, position: int) -> str | None:
        """An untimed replay of a hot batch with launch `position`'s outputs read back: None, or
        how they differ from the baseline's on the same input set."""

    def input_sets(self, name: str) -> int:
        """Input sets the hot launches of `name` rotate over."""


class ModuleStates(Protocol):
    def module_state(self, name: str) -> dict:
        """For the document: whether `name`'s module keeps `.global` state and what is done."""


class FreshInputs(Protocol):
    def reseed_inputs(self, seed: int) -> None:
        """Queue the inputs' generation from `seed` (cold audits: no cached answer)."""


class PoisonedOutputs(Protocol):
    def poison_outputs(self, byte: int) -> None:
        """Fill what the kernels only write with `byte`, outside any timing."""


class ReadBack(Protocol):
    def read_outputs(self, name: str) -> dict:
        """What the last launch of `name` left in the buffers it writes."""

    def outputs_differ(self, got: dict, expected: dict) -> str | None:
        """Where two read-backs differ, or None."""


class VerifiedOutputs(Protocol):
    def verify_outputs(self, name: str) -> str | None:
        """None, or what is wrong with the outputs the last launch of `name` left."""


class DeferredCold(Protocol):
    def cold_batch(self, name: str, batch: int, launches) -> list[float]:
        """Run `launches()` (a cold sample's launches) and return each one's seconds, read
        once afterwards (a timer that reads a launch only once the device reported it)."""


class GraphBatches(Protocol):
    graph_launches: int  # launches captured in one graph; larger batches replay it


class Disturbed(Protocol):
    def timed_disturbed(self, name: str, batch: int) -> float:
        """A poisoned replay's control: the same traffic aimed at scratch buffers."""


@dataclass(frozen=True)
class Capabilities:
    """Which optional capabilities a backend has (each field the backend, or None)."""

    pinned: Pinned | None = None
    hot_audited: HotAudited | None = None
    module_states: ModuleStates | None = None
    fresh_inputs: FreshInputs | None = None
    poisoned_outputs: PoisonedOutputs | None = None
    read_back: ReadBack | None = None
    verified_outputs: VerifiedOutputs | None = None
    deferred_cold: DeferredCold | None = None
    graph_batches: GraphBatches | None = None
    disturbed: Disturbed | None = None

    @classmethod
    def of(cls, backend: Backend) -> Capabilities:
        kinds = (
            Pinned,
            HotAudited,
            ModuleStates,
            FreshInputs,
            PoisonedOutputs,
            ReadBack,
            VerifiedOutputs,
            DeferredCold,
            GraphBatches,
            Disturbed,
        )
        return cls(*(backend if declares(backend, kind) else None for kind in kinds))


@dataclass
class ImplTiming:
    name: str
    samples_s: list[float] = field(default_factory=list)  # per-launch seconds, one per round
    batch: int = 1  # launches per sample
    calibration_s: float = 0.0
    method: str = ""
    timer: str = "events"
    # per sample: [SM MHz before, SM MHz after, clocks-event reason bits seen before or after]
    clocks: list[list[int]] | None = None
    problems: list[str] = field(default_factory=list)  # what the outputs showed after samples
    audit: dict | None = None  # which launches were read back and how they were chosen
    loads: list[int] | None = None  # per sample, the load it was pinned to (backend.pin_copy)


@dataclass
class Measurement:
    mode: str
    impls: dict[str, ImplTiming]
    orders: list[list[str]]  # the order implementations ran in, per round
    warmup: int
    wall_s: float = 0.0
    # the precision stopping rule's outcome (None when it was not asked for)
    precision: dict | None = None
    clocks_source: str | None = None  # where `clocks` came from, or why there are none
    # the sequential rule's outcome (None when it was off)
    sequential: dict | None = None


SCHEDULES = ("rounds", "passes")
TIMERS = ("events", "cupti")


def thue_morse(index: int) -> int:
    """Bit `index` of the Thue-Morse sequence 0 1 1 0 1 0 0 1 ...: the parity of its ones."""
    return index.bit_count() & 1


def round_order(names: list[str], round_index: int) -> list[str]:
    """The order of round r for any number of sides N: a cyclic Latin square with reversal.

    Rounds go in pairs (2j, 2j + 1): rotation j mod N of `names` (A B C, B C A, C A B, ...)
    forward, then the same rotation reversed, so every pair cancels linear drift and every two
    sides meet in both orders. N pairs (2N rounds, one cycle) put every side on every place of
    a round twice. Cycle c runs flipped (reversed, then forward) when bit c of the Thue-Morse
    sequence is 1: a cold launch's time depends on its place in the process's launch sequence
    (timing.cold), and over 16 cycles every side's samples then start on the places of any
    period of 2 to 16 launches as often as every other side's, whatever the batch, for 2 to 9
    sides (for N a multiple of 4, periods beyond 4N launches stay unbalanced;
    tests/runner/measurement/timing/test_cold.py). With 2 sides this is the Thue-Morse order itself (A B, B A,
    B A, A B, B A, A B, ...). Reversing alone, without rotation, left the middle side of 3 in
    the middle and 4 or 8 sides on their slot or the mirror one, on disjoint launch places."""
    count = len(names)
    if count < 2:
        return list(names)
    pair, second = divmod(round_index, 2)
    cycle, rotation = divmod(pair, count)
    rotated = [names[(i + rotation) % count] for i in range(count)]
    return rotated[::-1] if second ^ thue_morse(cycle) else rotated


def load_order(names: list[str], rounds: int) -> list[str]:
    """`rounds` rounds of every name, round i in round_order(names, i): the order cold mode
    makes its loads of each implementation's PTX in (runner.execution.case.COLD_LOADS), so no
    implementation's loads fall on other places of the sequence of loads than another's."""
    return [name for i in range(rounds) for name in round_order(names, i)]


def copy_turn(turn: int, copies: int) -> int:
    """Which of `copies` interchangeable copies (loads of a PTX, captures of a graph) the
    `turn`-th timed launch takes: in turn, one place later each cycle (0 1 2 3, 1 2 3 0,
    2 3 0 1, ...), so over `copies` cycles every copy falls on every place of a cold sample's
    batch and of the launch sequence; taken plainly in turn, a copy kept one place
    (docs/method/cold-launches.md)."""
    return (turn + turn // copies) % copies


class CopyTurns:
    """Per name, the copy its next timed launch takes: copy_turn over a count of its own."""

    def __init__(self):
        self._turns: dict[str, int] = {}

    def next(self, name: str, copies: int) -> int:
        turn = self._turns[name] = self._turns.get(name, -1) + 1
        return copy_turn(turn, copies)

    def peek(self, name: str, copies: int) -> int:
        """The copy the next call of next() will return, without taking it."""
        return copy_turn(self._turns.get(name, -1) + 1, copies)


def sample_plan(
    names: list[str], settings: TimingSettings, samples: int | None = None, first_round: int = 0
) -> list[list[tuple[str, int]]]:
    """The order samples are taken in: blocks of (implementation, consecutive samples).

    rounds: `samples` blocks, each one sample of every implementation in round_order.
    passes: two blocks, A B C then C B A, each implementation taking samples / 2 in a row, so
    the whole sequence is A B C C B A and a linear drift hits every implementation alike.
    `samples` and `first_round` give a continuation: more rounds, alternating on from there.
    """
    samples = settings.samples if samples is None else samples
    if settings.schedule == "passes":
        half = samples // 2
        return [[(n, half) for n in round_order(names, p)] for p in range(2)]
    return [[(n, 1) for n in round_order(names, first_round + r)] for r in range(samples)]


def quantize_batch(batch: int, quantum: int) -> int:
    """A batch above one graph's launches is a whole number of graph replays."""
    return batch if batch <= quantum else math.ceil(batch / quantum) * quantum


def warm_up(backend: Backend, names: list[str], settings: TimingSettings) -> None:
    """Untimed launches of every implementation, each from reset inputs."""
    for name in names:
        backend.reset(name)
        backend.warmup(name, settings.warmup)


class Monitor(Protocol):
    """Reads the device's clocks around each sample (runner.measurement.timing.clocks)."""

    source: str

    def read(self) -> tuple[int, int]:
        """(SM clock in MHz, clocks-event reason bits) now."""


def _sampled(sample, name: str, monitor: Monitor | None, timing: ImplTiming) -> None:
    if monitor is None:
        timing.samples_s.append(sample(name))
        return
    counters = getattr(monitor, "violation_ns", None)
    before_ns = counters() if counters else None
    before_mhz, before_bits = monitor.read()
    timing.samples_s.append(sample(name))
    after_mhz, after_bits = monitor.read()
    clock = [before_mhz, after_mhz, before_bits | after_bits]
    after_ns = counters() if before_ns is not None else None
    if after_ns is not None:
        clock.append(max(0, after_ns - before_ns))  # held down while the sample ran
    timing.clocks.append(clock)


def _run_plan(plan, backend_sample, monitor, timings, orders: list) -> None:
    for block in plan:
        orders.append([n for n, _ in block])
        for n, count in block:
            for _ in range(count):
                _sampled(backend_sample, n, monitor, timings[n])


def take_samples(
    backend_sample,
    names: list[str],
    settings: TimingSettings,
    timings: dict[str, ImplTiming],
    monitor: Monitor | None = None,
    baseline: str | None = None,
    control_term: ControlTerm | None = None,
) -> tuple[list[list[str]], dict | None, dict | None]:
    """Run the sample plan, calling `backend_sample(name)` -> seconds per launch, under the
    stopping rule settings ask for (runner.measurement.timing.stopping): with
    `settings.precision`, on until every gap is that precise; with `first_samples`, the
    sequential rule; else exactly `samples`. Intervals are widened by run_systematic
    (`control_term`: the A/A control's, where one is timed). Returns the orders the blocks ran
    in and the precision and sequential rules' outcomes (None where not asked for)."""
    t0 = time.perf_counter()
    if monitor is not None:
        for t in timings.values():
            t.clocks = []
    orders: list[list[str]] = []
    base = baseline or names[0]
    sequential = settings.sequential
    plan = sample_plan(names, settings, settings.first_samples if sequential else None)
    while True:
        _run_plan(plan, backend_sample, monitor, timings, orders)
        if sequential:
            more, outcome = sequential_more(timings, base, settings, control_term)
            if not more:
                return orders, None, outcome
        elif settings.precision is None:
            return orders, None, None
        else:
            spent = time.perf_counter() - t0
            more, outcome = precision_more(timings, base, settings, control_term, spent)
            if not more:
                return orders, outcome, None
        plan = sample_plan(names, settings, more, first_round=len(orders))


def pinned(sample, pin_copy, timings: dict[str, ImplTiming]):
    """`sample(name)` with `pin_copy(name, k)` before sample k: the backend then takes one load
    of `name` for the whole sample (the A/A control, runner.measurement.aa_control), or None
    for a name it does not pin; the load taken is kept in the timing's `loads`."""

    def sample_pinned(name: str) -> float:
        timing = timings[name]
        load = pin_copy(name, len(timing.samples_s))
        if load is not None:
            timing.loads = [*(timing.loads or []), load]
        return sample(name)

    return sample_pinned


class Strategy:
    """What hot and cold share: warm-up, their own preparation, then the paired samples (with
    the stopping rule and the clocks) into one Measurement. A strategy gives `name`, `method`,
    `prepare()` (hot: calibration) and `sampler()`: the function that takes one sample."""

    name = ""
    method = ""

    can = Capabilities()  # the backend's optional capabilities, set by measure()

    def prepare(self, backend: Backend, names: list[str], settings: TimingSettings, timings):
        """Untimed work after warm-up, before the samples."""

    def sampler(self, backend: Backend, settings: TimingSettings, timings):
        raise NotImplementedError

    def measure(
        self,
        backend: Backend,
        names: list[str],
        settings: TimingSettings,
        monitor: Monitor | None = None,
        baseline: str | None = None,
        control_term: ControlTerm | None = None,
    ) -> Measurement:
        t0 = time.perf_counter()
        timings = {n: ImplTiming(n, method=self.method, timer=settings.timer) for n in names}
        self.baseline = baseline or names[0]
        self.can = Capabilities.of(backend)
        warm_up(backend, names, settings)
        self.prepare(backend, names, settings, timings)
        sample = self.sampler(backend, settings, timings)
        if self.can.pinned is not None:
            sample = pinned(sample, self.can.pinned.pin_copy, timings)
        orders, precision, sequential = take_samples(
            sample, names, settings, timings, monitor, baseline, control_term
        )
        source = getattr(monitor, "source", None)
        wall_s = time.perf_counter() - t0
        return Measurement(
            self.name, timings, orders, settings.warmup, wall_s, precision, source, sequential
        )
