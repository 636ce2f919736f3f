"""cold: one launch per sample with a clean, unrelated L2 and no host latency inside the events."""

from __future__ import annotations

import time

from runner.timing.base import (
    Backend,
    ImplTiming,
    Measurement,
    Monitor,
    TimingSettings,
    take_samples,
    warm_up,
)

POISON_CYCLE = (0xFF, 0x7F, 0xA5, 0x5A)  # a fresh pattern for every sample, in turn
VERIFY_EVERY = 10  # the outputs of samples 0, 10, 20, ... are read back and compared


class ColdMode:
    name = "cold"
    method = (
        "one launch behind a blocking kernel after reset, a fresh poison of its outputs and a "
        "read-only L2 flush"
    )

    def measure(
        self,
        backend: Backend,
        names: list[str],
        settings: TimingSettings,
        monitor: Monitor | None = None,
        baseline: str | None = None,
    ) -> Measurement:
        t0 = time.perf_counter()
        timings = {n: ImplTiming(n, method=self.method, timer=settings.timer) for n in names}
        warm_up(backend, names, settings)

        poison = getattr(backend, "poison_outputs", None)
        verify = getattr(backend, "verify_outputs", None)

        def sample(n: str) -> float:
            k = len(timings[n].samples_s)
            backend.reset(n)  # restores inputs first, so the flush evicts them too
            if poison is not None:  # so a launch that skips its work cannot leave the answer
                poison(POISON_CYCLE[k % len(POISON_CYCLE)])
            backend.flush_l2()
            seconds = backend.timed_cold(n)
            if verify is not None and k % VERIFY_EVERY == 0:
                problem = verify(n)
                if problem:
                    timings[n].problems.append(f"cold sample {k}: {problem}")
            return seconds

        orders, precision = take_samples(sample, names, settings, timings, monitor, baseline)
        return Measurement(
            "cold",
            timings,
            orders,
            settings.warmup,
            time.perf_counter() - t0,
            precision,
            getattr(monitor, "source", None),
        )
