"""How the Python API times a comparison (bench.TimingOptions): the options every other module of
runner.bench reads, so it depends on nothing of theirs."""

from __future__ import annotations

from dataclasses import dataclass

from runner.errors import DeclarationError

__all__ = ["SCHEDULE", "TimingOptions"]

# One sample of every implementation per round, the rounds in the PTX engine's balanced order
# (timing.round_order): statistics.gap pairs sample r of each side as one round, which only a
# schedule of rounds makes true (two passes A..A B..B | B..B A..A broke the pairing: simulated
# A/A coverage of the 95% interval fell to 0.84 under drift; tests/coverage/test_bench_schedule.py).
SCHEDULE = "rounds"


@dataclass(frozen=True)
class TimingOptions:
    """How the Python API times: cold by default, paired rounds within the budget."""

    mode: str = "cold"
    budget_s: float = 1.0  # wall time for all timed samples of one comparison
    min_samples: int = 30  # per implementation (one per round; even, as rounds pair up)
    max_samples: int = 1000
    warmup: int = 10
    target_sample_s: float = 0.010  # hot: one sample (a replayed batch) lasts about this long
    verify_only: bool = False
    # "events": CUDA events around each sample; "cupti": the span (first start to last end) of
    # the kernel records the sample launched (cupti-python), for every implementation alike;
    # "auto": cupti in cold mode where cupti-python works, else events (timing.cupti)
    timer: str = "auto"
    # timed samples on fresh inputs from a new seed, their outputs verified (outside timing):
    # True every sample; "auto" every sample where that is cheap, else spot samples
    # (runner.bench.recheck); False never
    recheck: bool | str = "auto"

    def __post_init__(self):
        if self.mode not in ("hot", "cold"):
            raise DeclarationError(f"timing mode must be 'hot' or 'cold' (got {self.mode!r})")
        if self.timer not in ("auto", "events", "cupti"):
            raise DeclarationError(
                f"timer must be 'auto', 'events' or 'cupti' (got {self.timer!r})"
            )
        if not (isinstance(self.recheck, bool) or self.recheck == "auto"):
            raise DeclarationError(f"recheck must be True, False or 'auto' (got {self.recheck!r})")
        if not (isinstance(self.budget_s, int | float) and self.budget_s > 0):
            raise DeclarationError(
                f"budget_s must be a number of seconds > 0 (got {self.budget_s!r})"
            )
        if self.min_samples < 2 or self.min_samples % 2 or self.max_samples < self.min_samples:
            raise DeclarationError(
                "min_samples must be even and >= 2, max_samples >= min_samples "
                f"(got {self.min_samples}, {self.max_samples})"
            )

    def samples_for(self, sample_wall_s: float) -> int:
        """Samples per implementation so all of them fit the budget: even, within the limits."""
        if sample_wall_s <= 0:
            return self.max_samples
        n = int(self.budget_s / sample_wall_s)
        n = max(self.min_samples, min(self.max_samples, n))
        return n - n % 2
