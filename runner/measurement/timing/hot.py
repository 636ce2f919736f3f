"""hot: steady-state time per launch from CUDA-graph replays of a calibrated batch."""

from __future__ import annotations

import math
import time

from runner.measurement.timing.base import Backend, Strategy, TimingSettings, quantize_batch


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

    def sampler(self, backend: Backend, settings: TimingSettings, timings):
        def sample(n: str) -> float:
            backend.reset(n)
            return backend.timed_batch(n, timings[n].batch) / timings[n].batch

        return sample
