"""Timed outputs are real: hot mode must not reward a kernel for finding its answer already there.

Hot mode replays B launches on the same buffers, so a kernel that skips its work when its output
already holds the answer (by design, or a compiler's accident) would look fast. After the hot
samples, each implementation is replayed again with every launch preceded by a poison of what
it writes (a memset of its output buffers, a restore of its inout buffers: graph nodes, so still
no host in the loop), and that poison is replayed alone; their difference per launch is the
kernel's time on outputs it must compute. When it is well above the plain hot figure, the
implementation is flagged output-dependent and the case gets no gap. With `verify`, the outputs
are also read back after a poisoned replay and compared with the baseline's at the timed size:
a kernel that skips the work on a later launch (a result cached by pointer) leaves poison there.
A poisoned launch that is slow gets a control before it is flagged: the same memsets and copies
aimed at scratch buffers (`disturbed`), since a working set that fits in the L2 is pushed out by
any such traffic, whoever's kernel it is. That excuse holds only as far as the baseline, doing
the same work on the same sizes, is as fast under the same traffic: the disturbed times are
compared directly (a candidate slower disturbed than the baseline, beyond its plain gap, is
flagged). Comparing slowdowns instead (disturbed / plain against the baseline's) reduced to
1 / gap where both turn DRAM-bound, so it flagged every honest candidate more than 10% faster
at an L2-resident size (issue 50 item 10). The limit is the samples' own: their median's 95%
interval and the spread of the check's replays, never below MIN_TOLERANCE, applied to a row's
ratio over the smallest ratio among the case's other rows: what the poison costs every row of a
small case alike is the method's, not the kernel's (_verdicts).
"""

from __future__ import annotations

import math
import statistics

from protocol import statistics as pstats
from runner.measurement.timing.base import Capabilities

REPEATS = 3  # samples of each replay: a check, not a measurement
CHECK_SHARE = 0.2  # a replay's launches: about a fifth of a sample's (10 ms of a 50 ms sample)
CHECK_MIN_LAUNCHES = 64  # and never fewer (or the sample's own, if fewer): a pattern repeats
# and never more: every poisoned launch queues its memset and copy nodes behind the blocking
# kernel, and too many stalled the host past its guard (docs/method/output-dependence.md)
CHECK_MAX_LAUNCHES = 256
MIN_TOLERANCE = 0.05  # poisoned / plain may exceed 1 by this much at least (a check's bias)
POISON_BYTE = 0xFF  # all-ones: NaN for floats, -1 for integers


def check_batch(batch: int, graph_launches: int | None) -> int:
    """Launches of one poisoned replay: CHECK_SHARE of a sample's `batch`, at least
    CHECK_MIN_LAUNCHES and at most CHECK_MAX_LAUNCHES (and `batch`), and above one graph's
    `graph_launches` a whole number of graphs, as timed_poisoned replays them. The replays are
    a check with a 10% tolerance, not a measurement: a fifth of a sample keeps the events'
    latency far below it at a fraction of a full replay's cost
    (docs/method/output-dependence.md)."""
    want = min(batch, CHECK_MAX_LAUNCHES, max(round(batch * CHECK_SHARE), CHECK_MIN_LAUNCHES))
    if graph_launches and want > graph_launches:
        want -= want % graph_launches
    return max(want, 1)


def check(
    backend, names: list[str], measurement, verify=None, baseline: str | None = None
) -> dict[str, dict]:
    """Per implementation: plain and poisoned per-launch seconds, their ratio and the verdict;
    `verify(name)` -> None or what is wrong with the outputs the last launch left. `baseline`
    (default names[0]) is the reference for the disturbed control's excuse (module doc)."""
    found, alone_of, batch_of, wrong = {}, {}, {}, set()
    can = Capabilities.of(backend)
    graphs = can.graph_batches.graph_launches if can.graph_batches is not None else None
    for name in names:
        timing = measurement.impls[name]
        batch = check_batch(timing.batch, graphs)
        plain_s = statistics.median(timing.samples_s)
        both, poison, problem = [], [], None
        for repeat in range(REPEATS):
            backend.reset(name)
            both.append(backend.timed_poisoned(name, batch, with_kernel=True))
            if verify is not None and repeat == 0:
                problem = verify(name)
            poison.append(backend.timed_poisoned(name, batch, with_kernel=False))
        alone = statistics.median(poison)
        alone_of[name], batch_of[name] = alone, batch
        poisoned_s = max(statistics.median(both) - alone, 0.0) / batch
        limit = limit_for(timing.samples_s, both)
        ratio = poisoned_s / plain_s if plain_s > 0 else float("inf")
        found[name] = {
            "plain_s": plain_s,
            "poisoned_s": poisoned_s,
            "ratio": ratio,
            "limit": limit,
            "method": "hot replay with a poison of the outputs before every launch, minus the "
            f"poison replayed alone; time / {batch} launches (output_dependence.check_batch)",
        }
        if ratio > limit and can.disturbed is not None:
            found[name].update(disturbed(backend, name, batch, alone, found[name]))
        if verify is not None:
            found[name]["outputs_after_replay"] = problem or "match the baseline's"
        if problem is not None:
            wrong.add(name)
    _verdicts(found, wrong)
    _against_baseline(backend, found, baseline or names[0], alone_of, batch_of)
    backend.reset(names[0])
    return found


def judged(found: dict) -> float:
    """The ratio a row is judged by: poisoned over its disturbed control where one ran, else
    poisoned over plain."""
    return found.get("ratio_disturbed", found["ratio"])


def _verdicts(found: dict, wrong: set[str]) -> None:
    """Flag each row whose judged ratio, over the method's own bias at this case and size,
    exceeds its limit (or whose outputs after a poisoned replay are wrong). The bias is the
    smallest judged ratio among the case's other rows (floored at 1): a poison before every
    launch costs a small kernel its graph's overlap whoever wrote it (docs/method/
    output-dependence.md has the figures), while a row that skips work cannot slow the others.
    A row alone has no excuse; two rows skipping alike would excuse each other only where they
    agree, and a case's baseline is the suite's hand-written kernel."""
    ratios = {name: judged(row) for name, row in found.items()}
    for name, row in found.items():
        others = [r for n, r in ratios.items() if n != name]
        bias = max(min(others), 1.0) if others else 1.0
        row["output_dependent"] = ratios[name] / bias > row["limit"] or name in wrong
        if bias > 1.0:
            row["method_bias"] = bias


def limit_for(samples_s: list[float], replays_s: list[float]) -> float:
    """1 + the larger of MIN_TOLERANCE and the ratio's own uncertainty: the relative half-width
    of the plain samples' median (95%, sigma from the MAD, the median's variance factor) twice,
    plus the relative range of the check's replays."""
    if statistics.median(samples_s) <= 0:
        return 1.0 + MIN_TOLERANCE
    n = len(samples_s)  # sigma_mad is relative: the half-width comes out relative too
    half = pstats.z_of(0.95) * pstats.sigma_mad(samples_s) * math.sqrt(pstats.median_variance(n))
    middle = statistics.median(replays_s) if replays_s else 0.0
    spread = (max(replays_s) - min(replays_s)) / middle if middle > 0 else 0.0
    return 1.0 + max(MIN_TOLERANCE, 2 * half + spread)


def _against_baseline(backend, found: dict, base: str, alone_of: dict, batch_of: dict) -> None:
    """Hold every implementation the disturbed control excused to the baseline under the same
    traffic (measured here if the baseline's poisoned launch was not slow): `flag`ged when its
    disturbed time exceeds the baseline's by more than its limit beyond its plain gap (a
    candidate slower than the baseline everywhere keeps that gap). A flag keeps the row's gap
    and says it beside it: its own control excused it, so the evidence is relative."""
    excused = [
        n
        for n, f in found.items()
        if n != base and "disturbed_s" in f and not f["output_dependent"]
    ]
    if not excused or base not in found:
        return
    ref = found[base]
    if "disturbed_s" not in ref:
        ref.update(disturbed(backend, base, batch_of[base], alone_of[base], ref))
    for name in excused:
        relative = disturbed_vs_baseline(found[name], ref)
        found[name]["disturbed_vs_baseline"] = relative
        if relative > found[name]["limit"]:
            found[name]["flag"] = (
                f"fast only in plain hot replay: under the same traffic x{relative:.2f} the "
                "baseline's time beyond the plain gap; the cold gap (--mode cold) times it "
                "without the L2's help"
            )


def disturbed_vs_baseline(candidate: dict, baseline: dict) -> float:
    """Disturbed time over the baseline's, over the plain gap where the candidate is slower
    (each disturbed time floored at its plain time: a control faster than plain is noise)."""
    c = max(candidate["disturbed_s"], candidate["plain_s"])
    b = max(baseline["disturbed_s"], baseline["plain_s"])
    return (c / b) / max(candidate["plain_s"] / baseline["plain_s"], 1.0)


def disturbed(backend, name: str, batch: int, alone_s: float, found: dict) -> dict:
    """The control of a poisoned launch that was slow: the same memsets and copies before every
    launch, aimed at scratch buffers, so the outputs still hold the answer. A kernel whose working
    set fits in the L2 is slower after any such traffic (it reads from DRAM again), the baseline
    as much as a candidate (docs/method/output-dependence.md); only a kernel that is faster
    when its answer is there is slower poisoned than disturbed."""
    runs = [backend.timed_disturbed(name, batch) for _ in range(REPEATS)]
    disturbed_s = max(statistics.median(runs) - alone_s, 0.0) / batch
    return {
        "disturbed_s": disturbed_s,
        # floored at plain: a control read faster than plain replay is noise, not a licence
        "ratio_disturbed": found["poisoned_s"] / max(disturbed_s, found["plain_s"]),
        "method_disturbed": "the same hot replay with the poison's memsets and copies aimed at "
        "scratch buffers of the same sizes (the outputs keep the answer), minus the poison "
        f"replayed alone; flagged when poisoned / disturbed exceeds x{found['limit']:.2f}, or the "
        "disturbed time exceeds the baseline's by as much beyond the plain gap",
    }
