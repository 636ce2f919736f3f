"""cold: one launch per sample with a clean, unrelated L2 and no host latency inside the events."""

from __future__ import annotations

from runner.measurement.timing.base import Backend, Strategy, TimingSettings

POISON_CYCLE = (0xFF, 0x7F, 0xA5, 0x5A)  # a fresh pattern for every sample, in turn
VERIFY_EVERY = 10  # the outputs of samples 0, 10, 20, ... are read back and compared


class ColdMode(Strategy):
    name = "cold"
    method = (
        "one launch behind a blocking kernel after reset, a fresh poison of its outputs and a "
        "read-only L2 flush"
    )

    def sampler(self, backend: Backend, settings: TimingSettings, timings):
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

        return sample
