"""cold: launches with a clean, unrelated L2 and no host latency inside the events; a sample is
the mean of `batch` of them.

Each launch is timed on its own: reset (inputs, and the module's `.global` state where the
backend keeps it), fresh inputs, a poison of its outputs, a read-only L2 flush, then the launch
(between events behind the blocking kernel, or by CUPTI's timestamps). The inputs' seed, the
poison byte and whether the outputs are read back afterwards are drawn per (sample, launch)
from a per-run secret (gate.launch_audit), the same for every implementation, so a kernel
cannot line its skipped launches up with the read-backs. A
sample is the mean of `batch` such launches, as a hot sample is the mean over its batch. One
cold launch of a small kernel is a coarse figure: on the H200 a 1.3 us launch spreads by about
+-10% from launch to launch, read in 32 ns ticks (CUPTI) or 0.5 us ones (events), so medians of
single launches sit on ticks and their ratio jumps by a whole tick (an A/A read x1.028 with 738
samples of torch.add at 2^10, an interval without 1.0). Launches are added to a sample until
their kernel time reaches COLD_SAMPLE_KERNEL_S, at most MAX_COLD_LAUNCHES.

A cold launch's time depends on where it falls in the process's sequence of cold launches, not
only on the kernel: on the H200, PTX axpy at 2^10 (1.36 us) by CUPTI read -4% to +4% by position
in windows of 16 launches, repeating every 4 launches (2^18: -2.7% to +1.9%), and by +-0.5% over
blocks of 16 repeating every 64; the phase carries from one sample to the next. Rounds in A B /
B A repeated started one side's samples on other places than the other's (the same loads on both
sides, 17 launches a sample: their turns read -1.0% / +0.9% on one side and the opposite on the
other), and fidelity.py's A/A read x0.9946 at 2^10 and x0.9977 at 2^18. The rounds' order
(base.round_order: a Latin square, its cycles flipped in Thue-Morse order) starts every side's
samples on every place of any period of 2 to 16 launches alike, whatever the batch, for 2 to 9
implementations;
and a batch of more than one launch is a multiple of COLD_PHASE (8), so each sample holds whole
periods of the short pattern and samples do not differ by where they started. From 20 us a
sample stays one launch: its place moves it by 80 ns at most, 0.4%, spread alike over both sides
by the rounds (benchmarks/perf/RESULTS.md, session 25).

A backend whose timer reads a launch's time only once the device has reported it (CUPTI: a
forced flush of its records costs about 0.7 ms on the H200, 500 times a 1.3 us kernel) may take
a sample's launches together: `backend.cold_batch(name, batch, launches)` runs `launches()` (each
launch as above, in order; what timed_cold returns inside it is not used) and returns each
launch's seconds, read from one flush afterwards.
"""

from __future__ import annotations

import math
import statistics
import time

from runner.measurement.gate.launch_audit import LaunchDraws, LaunchPlan, SideBySide
from runner.measurement.timing.base import Backend, Capabilities, Strategy, TimingSettings

COLD_SAMPLE_KERNEL_S = 20e-6  # the kernel time a cold sample gathers (see above)
MAX_COLD_LAUNCHES = 32
COLD_PHASE = 8  # a batch of more than one launch is a multiple of this (see above)
PROBES = 3  # untimed cold launches per implementation that choose the batch


def launches_for(seconds: float) -> int:
    """Cold launches per sample for a launch that takes `seconds` (see the module docstring)."""
    if not seconds > 0:
        return MAX_COLD_LAUNCHES
    wanted = math.ceil(COLD_SAMPLE_KERNEL_S / seconds - 1e-9)  # 20 us / 1 us is 20, not 21
    if wanted <= 1:  # 20 us or more: one launch (its place moves it by 0.4% at most)
        return 1
    whole = COLD_PHASE * math.ceil(wanted / COLD_PHASE)  # whole periods of the launch sequence
    return min(MAX_COLD_LAUNCHES, whole)


def cold_launch(
    backend: Backend, name: str, plan: LaunchPlan | None = None, can: Capabilities | None = None
) -> float:
    """One cold launch of `name`: reset (inputs, and the module's `.global` state where the
    backend keeps it), fresh inputs from the plan's seed and a poison of the outputs with its
    byte where the backend can (`can`: its capabilities; none without a plan), flush, then the
    timed launch; its seconds."""
    backend.reset(name)  # restores inputs first, so the flush evicts them too
    if plan is not None:
        can = can or Capabilities.of(backend)
        if can.fresh_inputs is not None:  # a content-keyed cache never has the answer
            can.fresh_inputs.reseed_inputs(plan.inputs_seed)
        if can.poisoned_outputs is not None:  # a launch that skips cannot leave the answer
            can.poisoned_outputs.poison_outputs(plan.poison)
    backend.flush_l2()
    return backend.timed_cold(name)


class ColdMode(Strategy):
    name = "cold"
    probed = -1  # probe launches so far (a strategy measures once)
    method = (
        "mean of `batch` launches, each behind a blocking kernel after reset, a fresh poison of "
        "its outputs and a read-only L2 flush; launches audited at random (timing.audit)"
    )

    def _probe(self) -> LaunchPlan:
        self.probed += 1
        return self.draws.plan(-1, self.probed)

    def _launch(self, backend: Backend, name: str, plan: LaunchPlan) -> float:
        return cold_launch(backend, name, plan, self.can)

    def prepare(self, backend: Backend, names: list[str], settings: TimingSettings, timings):
        """Every implementation gets the same batch: the one its fastest launch needs
        (settings.cold_launches when given, else from PROBES launches of each)."""
        self.draws = LaunchDraws()
        read = self.can.read_back
        self.sides = None if read is None else SideBySide(names, self.baseline, read.outputs_differ)
        c0 = time.perf_counter()
        launches = settings.cold_launches
        if launches is None:
            fastest = min(
                statistics.median(self._launch(backend, n, self._probe()) for _ in range(PROBES))
                for n in names
            )
            launches = launches_for(fastest)
        spent = time.perf_counter() - c0
        for n in names:
            timings[n].batch, timings[n].calibration_s = launches, spent / len(names)

    def _audited(self, backend: Backend, n: str, key: tuple[int, int], timings) -> None:
        """Read back what audited launch `key` of `n` left: compared with the baseline's
        launch at the same key (SideBySide) where the backend reads outputs, else by the
        backend's own verify_outputs."""
        if self.sides is not None:  # the problem names the launch, the sample and the baseline
            for name, problem in self.sides.add(key, n, self.can.read_back.read_outputs(n)):
                timings[name].problems.append(problem)
            return
        where = f"cold sample {key[0]} (launch {key[1]})"
        if self.can.verified_outputs is not None:
            self.verified.setdefault(n, []).append(list(key))
            if problem := self.can.verified_outputs.verify_outputs(n):
                timings[n].problems.append(f"{where}: {problem}")

    def sampler(self, backend: Backend, settings: TimingSettings, timings):
        deferred = self.can.deferred_cold
        self.verified: dict[str, list[list[int]]] = {}  # without read-backs: verify_outputs
        for n, t in timings.items():
            t.audit = self.audit_record(backend, n)

        def sample(n: str) -> float:
            k, batch = len(timings[n].samples_s), timings[n].batch

            def launches() -> list[float]:
                seconds = []
                for j in range(batch):
                    plan = self.draws.plan(k, j)
                    seconds.append(self._launch(backend, n, plan))
                    if plan.audited:
                        self._audited(backend, n, (k, j), timings)
                    timings[n].audit["launches"] += 1
                return seconds

            seconds = launches() if deferred is None else deferred.cold_batch(n, batch, launches)
            return sum(seconds) / batch

        return sample

    def audit_record(self, backend: Backend, name: str) -> dict:
        """What the document says about `name`'s cold launches: how they were drawn and which
        were read back (the list is shared with the sampler, filled as it goes)."""
        reads = self.sides is not None
        audited = (self.sides.audited if reads else self.verified).setdefault(name, [])
        record = {
            "seed": self.draws.secret.hex(),
            "fraction": self.draws.fraction,
            "chosen": "each launch (sample k, launch j) by a keyed hash of the seed and (k, j), "
            "the same choice for every implementation",
            "launches": 0,
            "audited": audited,
            "compared_with": f"baseline {self.baseline}, its launch at the same (k, j)"
            if reads
            else "the backend's check of the outputs"
            if self.can.verified_outputs is not None
            else "nothing: the backend reads no outputs back",
            "poison": "a byte drawn per (k, j) from the seed, 1..255",
            "inputs": "generated from a seed drawn per (k, j), the same for every implementation"
            if self.can.fresh_inputs is not None
            else "the same every launch",
        }
        if self.can.module_states is not None:
            record["module_state"] = self.can.module_states.module_state(name)
        return record
