"""A fake timing backend with programmable kernel times, so the timing loop is tested on the CPU.

It implements runner.measurement.timing.base.Backend and records every call, in order, in `calls`.
"""

from __future__ import annotations

import numpy as np

TIMED = ("timed_batch", "timed_cold")


def timed_names(calls: list[tuple]) -> list[str]:
    """The implementation of every timed call in `calls`, in order."""
    return [c[1] for c in calls if c[0] in TIMED]


class FakeBackend:
    """Kernel `name` takes `per_launch_s[name]` seconds per launch.

    timed_batch(name, B) = overhead_s + B * per_launch * (1 + noise * N(0, 1)) * (1 + drift)
    timed_cold(name)     = per_launch * cold_factor * (1 + noise * N(0, 1)) * (1 + drift)
    where drift = drift_per_call * (number of timed calls before this one), a linear clock
    or temperature drift that hits whichever implementation runs at that moment.
    """

    def __init__(
        self,
        per_launch_s: dict[str, float],
        overhead_s: float = 5e-6,
        noise: float = 0.0,
        seed: int = 0,
        drift_per_call: float = 0.0,
        cold_factor: float = 1.5,
        graph_launches: int = 1000,
    ):
        self.per_launch_s = dict(per_launch_s)
        self.overhead_s, self.noise, self.drift_per_call = overhead_s, noise, drift_per_call
        self.cold_factor, self.graph_launches = cold_factor, graph_launches
        self.rng = np.random.default_rng(seed)
        self.calls: list[tuple] = []
        self.timed_calls = 0

    def _factor(self) -> float:
        """Noise and drift of the next timed call; advances the drift clock."""
        drift = self.drift_per_call * self.timed_calls
        self.timed_calls += 1
        return (1 + self.noise * float(self.rng.standard_normal())) * (1 + drift)

    def warmup(self, name: str, launches: int) -> None:
        self.calls.append(("warmup", name, launches))

    def reset(self, name: str) -> None:
        self.calls.append(("reset", name))

    def timed_batch(self, name: str, batch: int) -> float:
        # Same rule as CudaBackend: a batch is a whole number of replays of one graph.
        if batch < 1 or batch % min(batch, self.graph_launches):
            raise ValueError(f"batch {batch} is not a whole number of graphs")
        self.calls.append(("timed_batch", name, batch))
        return self.overhead_s + batch * self.per_launch_s[name] * self._factor()

    def flush_l2(self) -> None:
        self.calls.append(("flush",))

    def timed_cold(self, name: str) -> float:
        self.calls.append(("timed_cold", name))
        return self.per_launch_s[name] * self.cold_factor * self._factor()
