"""cold: launches with a clean, unrelated L2 and no host latency inside the events; a sample is
the mean of `batch` of them.

Each launch is timed on its own: reset (inputs, and the module's `.global` state where the
backend keeps it), fresh inputs, a poison of its outputs, a read-only L2 flush, then the launch
(between events behind the blocking kernel, or by CUPTI's timestamps). The inputs' seed, the
poison byte and whether the outputs are read back are drawn per (sample, launch) from a per-run
secret (gate.launch_audit), the same for every implementation, so a kernel cannot line its
skipped launches up with the read-backs.

One cold launch is a coarse figure, and its time depends on its place in the process's sequence
of cold launches: so a sample is the mean of launches adding up to COLD_SAMPLE_KERNEL_S of kernel
time (at most MAX_COLD_LAUNCHES), a batch of more than one is a multiple of COLD_PHASE, and the
rounds' order (base.round_order) starts every side's samples on every place alike. A backend
whose timer reads a launch only once the device reported it (CUPTI, whose forced flush costs as
much as a sample) may take a sample's launches together: `cold_batch(name, batch, launches)`
runs `launches()` and returns each launch's seconds, read from one flush afterwards.
The evidence: docs/method/cold-launches.md.
"""

from __future__ import annotations

import math
import statistics
import time

from runner.measurement.gate.launch_audit import LaunchDraws, LaunchPlan, SideBySide
from runner.measurement.timing.base import Backend, Capabilities, Strategy, TimingSettings

COLD_SAMPLE_KERNEL_S = 20e-6  # the kernel time a cold sample gathers (module docstring)
MAX_COLD_LAUNCHES = 32
COLD_PHASE = 8  # a batch of more than one launch is a multiple of this (see above)
PROBES = 3  # untimed cold launches per implementation that choose the batch


def launches_for(seconds: float) -> int:
    """Cold launches per sample for a launch that takes `seconds` (see the module docstring)."""
    if not seconds > 0:
        return MAX_COLD_LAUNCHES
    wanted = math.ceil(COLD_SAMPLE_KERNEL_S / seconds - 1e-9)  # 20 us / 1 us is 20, not 21
    if wanted <= 1:  # COLD_SAMPLE_KERNEL_S or more: one launch (its place matters little)
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
            "poison": "a byte drawn per (k, j) from the seed, never zero, NaN or an infinity "
            "(gate.launch_audit.POISON_CHOICES)",
            "inputs": "generated from a seed drawn per (k, j), the same for every implementation"
            if self.can.fresh_inputs is not None
            else "the same every launch",
        }
        if self.can.module_states is not None:
            record["module_state"] = self.can.module_states.module_state(name)
        return record
