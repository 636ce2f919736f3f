"""hot: steady-state time per launch from CUDA-graph replays of a calibrated batch.

Audits (where the backend is HotAudited): before HOT_AUDITS samples of each implementation,
chosen at random from a per-run seed (os.urandom), the same batch is replayed untimed with the
outputs of one launch, also chosen at random, copied out right after it and compared with the
baseline's outputs on that launch's input set. The backend rotates the launches over several
input sets, so a launch that skips its work leaves another set's answer; a kernel that works
only on some launches (every k-th, lined up with the replays) is caught with high probability.
"""

from __future__ import annotations

import math
import os
import random
import time

from runner.measurement.timing.base import Backend, Strategy, TimingSettings, quantize_batch

HOT_AUDITS = 8  # audited replays per implementation (each an untimed batch)


def calibrate(time_batch, settings: TimingSettings) -> int:
    """Batch size whose sample lasts about `target_sample_s`.

    Starts from one launch and rescales from the measured per-launch time; the first
    estimate includes the replay overhead, so a few steps converge from above.
    """
    batch = 1
    for _ in range(settings.calibration_steps):
        elapsed = time_batch(batch)
        if 0.5 * settings.target_sample_s <= elapsed <= 1.5 * settings.target_sample_s:
            break
        per_launch = max(elapsed / batch, 1e-9)
        wanted = min(max(1, math.ceil(settings.target_sample_s / per_launch)), settings.max_batch)
        wanted = quantize_batch(wanted, settings.graph_launches)
        if wanted > settings.max_batch:  # rounding up to whole graphs must not pass the cap
            wanted = max(
                settings.graph_launches,
                settings.max_batch // settings.graph_launches * settings.graph_launches,
            )
        if wanted == batch:
            break
        batch = wanted
    return batch


def _reset_then_time(backend: Backend, name: str, batch: int) -> float:
    backend.reset(name)  # every batch, calibration included, starts from the same inputs
    return backend.timed_batch(name, batch)


class HotMode(Strategy):
    name = "hot"
    method = "CUDA graph of back-to-back launches, replayed between two events; time / batch"

    def prepare(self, backend: Backend, names: list[str], settings: TimingSettings, timings):
        for n in names:
            c0 = time.perf_counter()
            timings[n].batch = calibrate(lambda b, n=n: _reset_then_time(backend, n, b), settings)
            _reset_then_time(backend, n, timings[n].batch)  # untimed: warms the final graph
            timings[n].calibration_s = time.perf_counter() - c0
        self.audits = self.choose_audits(backend, names, settings, timings)

    def choose_audits(self, backend: Backend, names: list[str], settings, timings) -> dict:
        """{name: {sample: launch}}: before which samples an audit replay runs and which launch
        of its batch it reads back; records how in each implementation's `audit`."""
        audited, states = self.can.hot_audited, self.can.module_states
        if audited is None:
            return {}
        secret = os.urandom(16)
        rng = random.Random(secret)
        audits = {}
        for n in names:
            batch = timings[n].batch
            chosen = sorted(rng.sample(range(settings.samples), min(HOT_AUDITS, settings.samples)))
            audits[n] = {k: rng.randrange(batch) for k in chosen}
            timings[n].audit = {
                "seed": secret.hex(),
                "chosen": f"{len(chosen)} samples and one launch of each one's batch, drawn by "
                "random.Random(seed); before each, an untimed replay of the same launches "
                "copies that launch's outputs out",
                "launches": 0,
                "audited": [],
                "compared_with": f"baseline {self.baseline}'s outputs on the same input set",
                "input_sets": audited.input_sets(n),
            }
            if states is not None:
                timings[n].audit["module_state"] = states.module_state(n)
        return audits

    def sampler(self, backend: Backend, settings: TimingSettings, timings):
        def sample(n: str) -> float:
            k, batch = len(timings[n].samples_s), timings[n].batch
            position = self.audits.get(n, {}).get(k)
            if position is not None:  # untimed, before the sample: the samples stay as they were
                backend.reset(n)
                timings[n].audit["audited"].append([k, position])
                if problem := self.can.hot_audited.audit_batch(n, batch, position):
                    timings[n].problems.append(
                        f"implementation {n}, hot launch {position} of the batch replayed before "
                        f"sample {k} (audited at random): {problem}, against baseline "
                        f"{self.baseline}'s outputs on the same inputs: the launch did not do "
                        "the work"
                    )
            backend.reset(n)
            if n in self.audits:
                timings[n].audit["launches"] += batch
            return backend.timed_batch(n, batch) / batch

        return sample


# Hot mode for the Python API (SharedBatchHot): rows of about the same speed share one batch.
# Each row's batch is calibrated on its own from noisy first batches, so two identical
# callables can end with batches of 200 and 300 calls, which an A/A must not; after
# calibration, rows whose batches are within a factor of SHARE of the largest of a group take
# the group's smallest, and its graphs are warmed untimed.


SHARE = 2.0


def shared_batches(batches: dict[str, int]) -> dict[str, int]:
    """Each row's batch after sharing: groups in descending order of batch, a group holding
    every row whose batch is at least its largest / SHARE, each row taking its group's
    smallest (already a whole number of graphs, as every calibrated batch is)."""
    out: dict[str, int] = {}
    ordered = sorted(batches, key=lambda n: -batches[n])
    while ordered:
        top = batches[ordered[0]]
        group = [n for n in ordered if batches[n] * SHARE >= top]
        smallest = min(batches[n] for n in group)
        out.update(dict.fromkeys(group, smallest))
        ordered = [n for n in ordered if n not in group]
    return out


class SharedBatchHot(HotMode):
    """HotMode whose calibrated batches are shared (see the module docstring)."""

    def prepare(self, backend, names, settings, timings):
        super().prepare(backend, names, settings, timings)
        shared = shared_batches({n: timings[n].batch for n in names})
        for n in names:
            if shared[n] == timings[n].batch:
                continue
            c0 = time.perf_counter()
            timings[n].batch = shared[n]
            backend.reset(n)
            backend.timed_batch(n, shared[n])  # untimed: warms the shared batch's graphs
            timings[n].calibration_s += time.perf_counter() - c0
