"""Timed outputs are real: hot mode must not reward a kernel for finding its answer already there.

Hot mode replays B launches on the same buffers, so a kernel that skips its work when its output
already holds the answer (by design, or a compiler's accident) would look fast. After the hot
samples, each implementation is replayed again with every launch preceded by a poison of what
it writes (a memset of its output buffers, a restore of its inout buffers: graph nodes, so still
no host in the loop), and that poison is replayed alone; their difference per launch is the
kernel's time on outputs it must compute. When it is well above the plain hot figure, the
implementation is flagged output-dependent and the case gets no gap.
"""

from __future__ import annotations

import statistics

from runner import stats

REPEATS = 3  # samples of each replay: a check, not a measurement
TOLERANCE = 0.10  # poisoned / plain may exceed 1 by this much, or 5 x the sample noise if larger
POISON_BYTE = 0xFF  # all-ones: NaN for floats, -1 for integers


def check(backend, names: list[str], measurement) -> dict[str, dict]:
    """Per implementation: plain and poisoned per-launch seconds, their ratio and the verdict."""
    found = {}
    for name in names:
        timing = measurement.impls[name]
        batch = timing.batch
        plain_s = statistics.median(timing.samples_s)
        both, poison = [], []
        for _ in range(REPEATS):
            backend.reset(name)
            both.append(backend.timed_poisoned(name, batch, with_kernel=True))
            poison.append(backend.timed_poisoned(name, batch, with_kernel=False))
        poisoned_s = max(statistics.median(both) - statistics.median(poison), 0.0) / batch
        noise = stats.summarize(timing.samples_s)["noise"]
        limit = 1.0 + max(TOLERANCE, 5 * noise)
        ratio = poisoned_s / plain_s if plain_s > 0 else float("inf")
        found[name] = {
            "plain_s": plain_s,
            "poisoned_s": poisoned_s,
            "ratio": ratio,
            "limit": limit,
            "output_dependent": ratio > limit,
            "method": "hot replay with a poison of the outputs before every launch, minus the "
            "poison replayed alone; time / batch",
        }
    backend.reset(names[0])
    return found
