"""What every timing strategy shares: settings, the device interface it drives, its result.

A strategy (hot.py, cold.py) is one class with one entry point, `measure(backend, names)`,
and fixed phases: warm-up, calibration, paired rounds. The backend is the only thing that
touches the device, so a fake backend tests ordering and calibration on the CPU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True)
class TimingSettings:
    """Named, typed defaults of a measurement (see DESIGN.md, Timing method)."""

    mode: str = "hot"
    warmup: int = 10  # launches per implementation, never timed
    samples: int = 30  # paired rounds; each implementation gets one sample per round
    target_sample_s: float = 0.050  # hot: a sample (one batch) should last about this long
    graph_launches: int = 1000  # hot: launches captured in one graph; larger batches replay it
    max_batch: int = 100_000  # at most 100 graph replays are queued behind the blocking kernel
    calibration_steps: int = 5
    # "rounds": one sample per implementation per round, rounds alternate A B C / C B A.
    # "passes": two passes, A B C then C B A, each implementation taking its samples of a pass
    # back to back; `samples` is split between the passes (the Python API's default).
    schedule: str = "rounds"

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
        if not self.target_sample_s > 0:
            raise ValueError(
                f"TimingSettings.target_sample_s must be > 0 (got {self.target_sample_s})"
            )


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


@dataclass
class ImplTiming:
    name: str
    samples_s: list[float] = field(default_factory=list)  # per-launch seconds, one per round
    batch: int = 1  # launches per sample
    calibration_s: float = 0.0
    method: str = ""


@dataclass
class Measurement:
    mode: str
    impls: dict[str, ImplTiming]
    orders: list[list[str]]  # the order implementations ran in, per round
    warmup: int
    wall_s: float = 0.0


SCHEDULES = ("rounds", "passes")


def round_order(names: list[str], round_index: int) -> list[str]:
    """Round r runs A B C when r is even and C B A when odd, so drift hits every side alike."""
    return list(names) if round_index % 2 == 0 else list(reversed(names))


def sample_plan(names: list[str], settings: TimingSettings) -> list[list[tuple[str, int]]]:
    """The order samples are taken in: blocks of (implementation, consecutive samples).

    rounds: `samples` blocks, each one sample of every implementation in round_order.
    passes: two blocks, A B C then C B A, each implementation taking samples / 2 in a row, so
    the whole sequence is A B C C B A and a linear drift hits every implementation alike.
    """
    if settings.schedule == "passes":
        half = settings.samples // 2
        return [[(n, half) for n in round_order(names, p)] for p in range(2)]
    return [[(n, 1) for n in round_order(names, r)] for r in range(settings.samples)]


def quantize_batch(batch: int, quantum: int) -> int:
    """A batch above one graph's launches is a whole number of graph replays."""
    return batch if batch <= quantum else math.ceil(batch / quantum) * quantum


def warm_up(backend: Backend, names: list[str], settings: TimingSettings) -> None:
    """Untimed launches of every implementation, each from reset inputs."""
    for name in names:
        backend.reset(name)
        backend.warmup(name, settings.warmup)
