"""cold: one launch per sample with a clean, unrelated L2 and no host latency inside the events."""

from __future__ import annotations

import time

from runner.timing.base import (
    Backend,
    ImplTiming,
    Measurement,
    TimingSettings,
    sample_plan,
    warm_up,
)


class ColdMode:
    name = "cold"
    method = "one launch behind a blocking kernel after reset and a read-only L2 flush"

    def measure(self, backend: Backend, names: list[str], settings: TimingSettings) -> Measurement:
        t0 = time.perf_counter()
        timings = {n: ImplTiming(n, method=self.method) for n in names}
        warm_up(backend, names, settings)
        orders = []
        for block in sample_plan(names, settings):
            orders.append([n for n, _ in block])
            for n, count in block:
                for _ in range(count):
                    backend.reset(n)  # restores inputs first, so the flush evicts them too
                    backend.flush_l2()
                    timings[n].samples_s.append(backend.timed_cold(n))
        return Measurement("cold", timings, orders, settings.warmup, time.perf_counter() - t0)
