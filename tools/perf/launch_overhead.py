"""Benchmark (not a test): the runner's hot mode against a plain Python launch loop, and cold mode.

For a grid-stride f64 axpy at n = 2^10 .. 2^27 it prints the per-launch time of
  hot   the runner's engine: graph replay of a calibrated batch behind a blocking kernel,
  loop  B launches from a Python loop between two events (what a naive harness measures),
  cold  the runner's cold mode (L2 flushed before every launch, a sample the mean of B launches),
each the median of --samples samples. Target: hot never above loop, and within 5% of it at 2^27.

    python tools/perf/launch_overhead.py [--samples 30] [--sizes 10,16,20,24,27]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from runner.definition import toolchains  # noqa: E402
from runner.gpu import driver, generator  # noqa: E402
from runner.gpu.generator import Distribution  # noqa: E402
from runner.measurement.timing import TimingSettings, measure  # noqa: E402
from runner.measurement.timing.cuda import CudaBackend, InternalKernels, Launchable  # noqa: E402

SOURCE = ROOT / "benchmarks" / "kernels" / "axpy_f64.cu"


def loop_per_launch_s(stream, start, end, item: Launchable, batch: int) -> float:
    """B launches straight from Python between two events: host launch cost is inside."""
    start.record(stream)
    for _ in range(batch):
        item.enqueue(stream)
    end.record(stream)
    end.synchronize()
    return end.elapsed_s(start) / batch


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--sizes", default="10,16,20,24,27", help="log2 of n, comma separated")
    parser.add_argument("--target-sample-ms", type=float, default=50.0)
    args = parser.parse_args()

    ctx = driver.Context(0)
    arch = (
        f"sm_{ctx.attribute('COMPUTE_CAPABILITY_MAJOR')}{ctx.attribute('COMPUTE_CAPABILITY_MINOR')}"
    )
    build = toolchains.build("nvcc", SOURCE, arch)
    module = driver.Module(build.ptx, "axpy_f64")
    internal = InternalKernels(ctx)
    stream = driver.Stream()
    start, end = driver.Event(), driver.Event()
    dist = Distribution("uniform", -1.0, 1.0)
    rows = []
    for log2n in [int(s) for s in args.sizes.split(",")]:
        n = 1 << log2n
        x, y, y0 = (driver.Buffer(8 * n) for _ in range(3))
        for buf, name in ((x, "x"), (y, "y")):
            internal.fill_random(
                stream, buf, n, generator.launch_args("f64", dist, 1, generator.stream_id(name), n)
            )
        y0.copy_from(y, stream)
        grid = min((n + 255) // 256, 4224)
        item = Launchable(
            module.kernel("axpy_f64", (grid, 1, 1), (256, 1, 1)),
            driver.KernelArgs([("ptr", x.ptr), ("ptr", y.ptr), ("f64", 2.5), ("i64", n)]),
        )
        backend = CudaBackend(stream, internal, {"axpy": item}, [(y, y0)], graph_launches=1000)
        hot_settings = TimingSettings(
            mode="hot", samples=args.samples, target_sample_s=args.target_sample_ms / 1e3
        )
        hot = measure(backend, ["axpy"], hot_settings).impls["axpy"]
        loop = []
        for _ in range(args.samples):
            backend.reset("axpy")
            loop.append(loop_per_launch_s(stream, start, end, item, hot.batch))
        cold = measure(backend, ["axpy"], TimingSettings(mode="cold", samples=args.samples)).impls[
            "axpy"
        ]
        backend.close()
        for buf in (x, y, y0):
            buf.free()
        row = (
            log2n,
            hot.batch,
            statistics.median(hot.samples_s),
            statistics.median(loop),
            statistics.median(cold.samples_s),
        )
        rows.append(row)
        print(
            f"n=2^{log2n}: hot {row[2] * 1e6:.3f} us, loop {row[3] * 1e6:.3f} us, cold {row[4] * 1e6:.3f} us",
            file=sys.stderr,
        )
    gpu = driver.cu().cuDeviceGetName(64, ctx.device)[1].split(b"\0")[0].decode()
    print(
        f"# {gpu}, axpy_f64 grid-stride (block 256, grid min(n/256, 4224)), median of {args.samples} samples, per launch"
    )
    print("| n | batch B | hot (us) | Python loop (us) | cold (us) | hot / loop |")
    print("| --- | --- | --- | --- | --- | --- |")
    ok = True
    for log2n, batch, hot_s, loop_s, cold_s in rows:
        print(
            f"| 2^{log2n} | {batch} | {hot_s * 1e6:.3f} | {loop_s * 1e6:.3f} | {cold_s * 1e6:.3f} | {hot_s / loop_s:.3f} |"
        )
        ok &= hot_s <= loop_s
    big = [r for r in rows if r[0] == 27]
    if big:
        within = abs(big[0][2] / big[0][3] - 1) <= 0.05
        print(
            f"target: hot never above loop: {'met' if ok else 'MISSED'}; within 5% of loop at 2^27: {'met' if within else 'MISSED'}"
        )
    internal.close()
    module.unload()
    ctx.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
