"""fidelity.py's PTX side: the suite's axpy_f64 at n in one context, its loads split between
the two sides of an A/A as the runner's cold mode splits them, and one A/A through the runner's
engine (fidelity.py, cold_placement.py, cold_aa.py and cold_phase.py take them from here)."""

from __future__ import annotations

from pathlib import Path

from fidelity_torch import SMALL_LOG2N

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "benchmarks" / "kernels" / "axpy_f64.cu"
ENTRY = "axpy_f64"
# cold samples for the CUPTI A/A (each the mean of up to 32 launches): a cold launch of a small
# kernel spreads by +-10%, so a 0.1% standard error of the gap takes about 10,000 launches a side;
# at 2^18 and under (batches of 8 to 32), 2000 samples left a standard error of about 0.1%, and
# |gap - 1| <= 0.2% then misses by chance alone in one size of twenty: 4000 halve that
COLD_SAMPLES = {"small": 4000, "large": 2000}
TARGET_SAMPLE_MS = 20.0  # the engine's sample length here (--target-sample-ms)


def cold_samples(log2n: int) -> int:
    return COLD_SAMPLES["small" if log2n <= SMALL_LOG2N else "large"]


class Axpy:
    """Inputs for axpy at n in one context, and a launchable per loaded module."""

    def __init__(self, ptx: str, n: int, modules: int = 1, decoy_seed: int | None = None):
        import numpy as np

        from runner.gpu import driver, generator
        from runner.gpu.generator import Distribution
        from runner.measurement.timing.cuda import InternalKernels, Launchable

        self.ctx = driver.Context(0)
        self.stream = driver.Stream()
        self.internal = InternalKernels(self.ctx)
        # with `decoy_seed`, 0 to 3 decoy loads before each, unloaded once all are made, so the
        # loads land elsewhere for each seed (cold_placement.py)
        rng = np.random.default_rng(decoy_seed) if decoy_seed is not None else None
        self.modules, decoys = [], []
        for i in range(modules):
            if rng is not None:
                decoys += [driver.Module(ptx, "decoy") for _ in range(int(rng.integers(0, 4)))]
            self.modules.append(driver.Module(ptx, f"axpy {i}"))
        for m in decoys:
            m.unload()
        self.buffers = x, y, y0 = [driver.Buffer(8 * n) for _ in range(3)]
        dist = Distribution("uniform", -1.0, 1.0)
        for buf, name in ((x, "x"), (y, "y")):
            args = generator.launch_args("f64", dist, 1, generator.stream_id(name), n)
            self.internal.fill_random(self.stream, buf, n, args)
        y0.copy_from(y, self.stream)
        self.stream.synchronize()
        grid = min((n + 255) // 256, 4224)
        args = driver.KernelArgs([("ptr", x.ptr), ("ptr", y.ptr), ("f64", 2.5), ("i64", n)])
        self.items = [
            Launchable(m.kernel(ENTRY, (grid, 1, 1), (256, 1, 1)), args) for m in self.modules
        ]
        self.resets = [(y, y0)]

    def close(self) -> None:
        for b in self.buffers:
            b.free()
        for m in self.modules:
            m.unload()
        self.internal.close()
        self.stream.destroy()
        self.ctx.close()


def side_loads(items: list) -> dict[str, list]:
    """The loads, made in turn, split between A and A' as the runner's cold mode splits its
    (runner.execution.case.COLD_LOADS, in load_order)."""
    from runner.measurement.timing import load_order

    sides: dict[str, list] = {"A": [], "A'": []}
    for item, name in zip(items, load_order(["A", "A'"], len(items) // 2), strict=False):
        sides[name].append(item)
    return sides


def engine_aa(axpy: Axpy, loads: dict, mode: str, timer: str, samples: int, target_ms: float):
    """One A/A through the runner's engine on `axpy`'s loads (split by side_loads): hot takes
    each side's first load, cold all of them in turn (as the runner's cold mode does, see
    runner.execution.case.COLD_LOADS); the Measurement."""
    from runner.measurement.timing import TimingSettings, cupti, measure
    from runner.measurement.timing.cuda import CudaBackend

    window = None
    if timer == "cupti":
        window = cupti.ActivityWindow(int(axpy.ctx.handle), int(axpy.stream.handle))
    items = {n: loads[n][0] for n in loads}  # hot: each side's first load
    backend = CudaBackend(
        axpy.stream,
        axpy.internal,
        items,
        axpy.resets,
        1000,
        window=window,
        cold_items=loads if mode == "cold" else None,
    )
    settings = TimingSettings(
        mode=mode,
        samples=samples,
        max_samples=max(samples, 1000),
        target_sample_s=target_ms / 1e3,
        timer=timer,
    )
    try:
        return measure(backend, ["A", "A'"], settings)
    finally:
        backend.close()
        if window is not None:
            window.close()


# what fidelity.py measures at each size, in this order, each run in a fresh process as a case's
# worker makes it (cold_placement.py replays parts of it in one process)
ENGINE_RUNS = (("hot", "events"), ("hot", "cupti"), ("cold", "events"), ("cold", "cupti"))


def engine_samples(mode: str, timer: str, log2n: int) -> int:
    return 30 if mode == "hot" else 200 if timer == "events" else cold_samples(log2n)


def engine_run(ptx: str, log2n: int, mode: str, timer: str, target_ms: float, split=None) -> dict:
    """One of ENGINE_RUNS at 2^log2n in this process, as the runner's worker makes a case's
    measurement (a context of its own, the loads in load_order, then the A/A; no other run
    before it): the row's fields for it. `split(items)` splits the loads between the sides in
    place of side_loads (cold_phase.py)."""
    from runner.execution.case import COLD_LOADS

    axpy = Axpy(ptx, 1 << log2n, modules=2 * COLD_LOADS if mode == "cold" else 2)
    try:
        loads = (split or side_loads)(axpy.items)
        samples = engine_samples(mode, timer, log2n)
        m = engine_aa(axpy, loads, mode, timer, samples, target_ms)
    finally:
        axpy.close()
    return aa_fields(m, mode, timer)


def aa_fields(m, mode: str, timer: str) -> dict:
    """A row's fields for an A/A Measurement `m` of `mode` by `timer`: A's median (us), the
    gap with its interval as the result gives it, the bootstrap's interval alone (the evidence
    for the systematic term), and both sides' samples."""
    import statistics

    from protocol import statistics as pstats
    from runner.measurement import stats

    a, b = m.impls["A"].samples_s, m.impls["A'"].samples_s
    systematic = stats.systematic(mode, statistics.median(a))  # as in the result
    g = pstats.gap(a, b, systematic=systematic)
    raw = pstats.gap(a, b)
    key = f"{mode}_{timer}"
    return {
        f"{key}_aa_bootstrap": [raw["ci_low"], raw["ci_high"]],
        f"{key}_us": statistics.median(a) * 1e6,
        f"{key}_aa": [g["ratio_of_medians"], g["ci_low"], g["ci_high"]],
        f"{key}_samples": [a, b],
    }


def device_ptx() -> str:
    """The axpy PTX that nvcc builds for GPU 0's architecture."""
    from runner.definition import toolchains
    from runner.gpu import driver

    ctx = driver.Context(0)
    major, minor = (ctx.attribute(f"COMPUTE_CAPABILITY_{p}") for p in ("MAJOR", "MINOR"))
    ctx.close()
    return toolchains.build("nvcc", SOURCE, f"sm_{major}{minor}").ptx
