"""Benchmark (not a test): the runner's timings against independent readings of the same kernels.

On the GPU box, for n = 2^10 .. 2^27 it measures
  PTX      the suite's axpy_f64 (nvcc PTX, grid min(n/256, 4224)) with the runner's engine, hot
           and cold, timed by CUDA events and by CUPTI, and an A/A gap (the same PTX loaded twice);
           Nsight Compute's gpu__time_duration of the same launch (--cache-control all for cold,
           none for hot; --clock-control none: the card's clocks are left alone); and
           torch.profiler's CUPTI kernel durations of the same PTX launched after the same
           read-only L2 flush, and of launches run back to back (independent CUPTI readings,
           cold and hot);
  torch    torch.add on float32 through runner.bench (cold by CUPTI, cold by events, hot) with an
           A/A gap, triton's do_bench and do_bench_cudagraph, torch.profiler and ncu;
then prints one markdown table per front end and the targets met or missed.

    python tools/perf/fidelity.py [--sizes 10,14,18,20,22,24,27] [--skip-ncu]
        [--ncu-cache ncu.json] [--raw raw.json] [--only ptx|torch]
    python tools/perf/fidelity.py report --from raw_ptx.json raw_torch_a.json ...
        [--ncu-cache ncu.json]     (the table of runs made in parts, each saved with --raw)

On the H200 `--only ptx` took 187 s with ncu and 162 s with ncu's figures cached (session 28);
`--only torch` for all seven sizes took more than 380 s (session 26), so under the device's 600 s
a call it runs in two parts (`--sizes 10,14,18`, 187 s, then `--sizes 20,22,24,27`, 291 s), and
`report` merges them.

Each part runs in its own process: CUPTI has one subscriber per process, and the runner's CUPTI
timer, torch.profiler and ncu must not see each other. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(Path(__file__).resolve().parent)]

from fidelity_ncu import ncu_us  # noqa: E402
from fidelity_ptx import (  # noqa: E402
    ENGINE_RUNS,
    ENTRY,
    TARGET_SAMPLE_MS,
    Axpy,
    device_ptx,
    engine_run,
)
from fidelity_report import report  # noqa: E402
from fidelity_torch import (  # noqa: E402
    NCU_LAUNCHES,
    PROFILED_LAUNCHES,
    TORCH_KERNEL,
    l2_flush_tensor,
    profiled_mean,
    profiler_durations,
    torch_profiler,
    torch_side,
    torch_target,
)


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


# -- the PTX side --------------------------------------------------------------------------


def ptx_engine(ptx_path: Path, sizes: list[int], target_ms: float) -> list[dict]:
    """The runner's figures: hot and cold, events and CUPTI, each with an A/A gap; each run
    (fidelity_ptx.ENGINE_RUNS) in a process of its own, as the runner gives each case's
    measurement a fresh worker with one mode and one timer. (Made one after the other in one
    process, the earlier runs on the same loads moved the cold CUPTI A/A at 2^14 to x0.997:
    benchmarks/perf/RESULTS.md, session 27.)"""
    rows = []
    for log2n in sizes:
        row = {"log2n": log2n}
        for mode, timer in ENGINE_RUNS:
            part = ["ptx-run", "--ptx", str(ptx_path), "--n", str(log2n), "--mode", mode]
            row.update(child([*part, "--timer", timer, "--target-sample-ms", str(target_ms)]))
            r, lo, hi = row[f"{mode}_{timer}_aa"]
            say(
                f"ptx 2^{log2n} {mode} {timer}: {row[f'{mode}_{timer}_us']:.3f} us, A/A "
                f"{r:.5f} [{lo:.5f}, {hi:.5f}]"
            )
        rows.append(row)
    return rows


def ptx_target(ptx: str, log2n: int, reset: bool) -> None:
    """What ncu profiles: NCU_LAUNCHES launches of axpy at n; with `reset` each after a restore
    of y (cold: ncu flushes the caches anyway), else back to back on the same y, as the hot
    graph replays them (a restore between them would leave y in the L2)."""
    axpy = Axpy(ptx, 1 << log2n)
    for _ in range(NCU_LAUNCHES):
        if reset:
            for dst, src in axpy.resets:
                dst.copy_from(src, axpy.stream)
        axpy.items[0].enqueue(axpy.stream)
    axpy.stream.synchronize()
    axpy.close()


def ptx_profiler(ptx: str, sizes: list[int]) -> dict:
    """torch.profiler's CUPTI kernel durations of the PTX per size (us): cold, each launch
    behind a read-only flush; hot, PROFILED_LAUNCHES launches queued behind the blocking
    kernel, so they run back to back on data the launch before left in the L2 (each kernel's
    own start to end: the gaps between them are not in it)."""
    import torch

    torch.cuda.init()
    flush = l2_flush_tensor(torch)
    out = {}
    for log2n in sizes:
        axpy = Axpy(ptx, 1 << log2n)

        def launch(axpy=axpy):
            axpy.items[0].enqueue(axpy.stream)

        def back_to_back(axpy=axpy):
            axpy.internal.block(axpy.stream, timeout_ns=2_000_000_000)
            try:
                for _ in range(PROFILED_LAUNCHES):
                    launch()
            finally:
                axpy.internal.release()

        cold = profiler_durations(torch, launch, flush, ENTRY, int(axpy.stream.handle))
        hot = profiled_mean(torch, back_to_back, ENTRY, PROFILED_LAUNCHES)
        out[log2n] = {"cold": cold, "hot": hot}
        axpy.close()
    return out


# -- ncu and the orchestration ---------------------------------------------------------------


def read_cache(cache: Path | None) -> dict:
    """ncu's figures kept by --ncu-cache: {str(log2n): {"ptx": [cold, hot], "torch": cold}}."""
    return orjson.loads(cache.read_bytes()) if cache and cache.exists() else {}


def ncu_figures(sizes: list[int], ptx_path: Path, parts: tuple[str, ...], cache: Path | None):
    """ncu's (cold, hot) of the PTX and cold of torch.add per size, for `parts` ("ptx",
    "torch"). With `cache`, figures found there are not profiled again and each one profiled
    is written there at once, so a run cut short keeps what it measured (ncu is the slowest
    part)."""
    known = read_cache(cache)
    for k in sizes:
        entry = known.setdefault(str(k), {})
        missing = [p for p in parts if p not in entry]
        if "ptx" in missing:
            say(f"fidelity: ncu at 2^{k}, the PTX")
            target = [sys.executable, __file__, "ptx-target", "--ptx", str(ptx_path), "--n", str(k)]
            entry["ptx"] = (
                ncu_us([*target, "--reset"], f"^{ENTRY}$", "all"),
                ncu_us(target, f"^{ENTRY}$", "none"),
            )
        if "torch" in missing:
            say(f"fidelity: ncu at 2^{k}, torch.add")
            target = [sys.executable, __file__, "torch-target", "--n", str(k)]
            entry["torch"] = ncu_us(target, TORCH_KERNEL, "all")
        if cache and missing:  # each size's new figures kept at once
            cache.write_bytes(orjson.dumps(known))
    return cached_ncu(known, sizes)


def cached_ncu(known: dict, sizes: list[int]) -> tuple[dict, dict]:
    """({log2n: (cold, hot)} of the PTX, {log2n: cold} of torch.add) of an ncu cache."""
    ptx_ncu, torch_ncu = {}, {}
    for k in sizes:
        entry = known.get(str(k), {})
        if "ptx" in entry:
            ptx_ncu[k] = tuple(entry["ptx"])
        torch_ncu[k] = entry.get("torch")
    return ptx_ncu, torch_ncu


def merged_report(sources: list[Path], cache: Path | None) -> list[str]:
    """The report of runs saved with --raw (parts and sizes run in separate calls, each under
    the device's time limit), with ncu's figures from `cache`; a size in two files: the last."""
    parts: dict[str, dict] = {"ptx": {}, "torch": {}, "ptx_profiler": {}}
    for source in sources:
        saved = orjson.loads(source.read_bytes())
        for side in ("ptx", "torch"):
            parts[side].update({row["log2n"]: row for row in saved.get(side, [])})
        parts["ptx_profiler"].update(saved.get("ptx_profiler", {}))
    known = read_cache(cache)
    ptx_ncu, torch_ncu = cached_ncu(known, sorted({*parts["ptx"], *parts["torch"]}))
    ptx_rows = [parts["ptx"][k] for k in sorted(parts["ptx"])]
    torch_rows = [parts["torch"][k] for k in sorted(parts["torch"])]
    return report(ptx_rows, ptx_ncu, parts["ptx_profiler"], torch_rows, torch_ncu)


def child(args: list[str], script: str = __file__) -> object:
    """The JSON a part run in its own process (`script` with `args`) prints; its progress goes
    on to stderr as made."""
    done = subprocess.run([sys.executable, script, *args], stdout=subprocess.PIPE, check=False)
    if done.returncode:
        raise RuntimeError(f"{' '.join(args)} exited {done.returncode}")
    return orjson.loads(done.stdout)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", nargs="?", default="all")
    parser.add_argument("--sizes", default="10,14,18,20,22,24,27")
    parser.add_argument("--n", type=int, help="log2 n (the ncu targets)")
    parser.add_argument("--ptx", type=Path, help="the PTX (the children)")
    parser.add_argument("--target-sample-ms", type=float, default=TARGET_SAMPLE_MS)
    parser.add_argument("--skip-ncu", action="store_true")
    parser.add_argument("--reset", action="store_true", help="ptx-target: restore y each time")
    parser.add_argument("--mode", choices=("hot", "cold"), help="ptx-run: the timing mode")
    parser.add_argument("--timer", choices=("events", "cupti"), help="ptx-run: the timer")
    parser.add_argument(
        "--skip-torch", action="store_true", help="no torch: the PTX engine and ncu"
    )
    parser.add_argument(
        "--only",
        choices=("ptx", "torch"),
        help="one front end (with its references): a run in two parts, under a time limit each",
    )
    parser.add_argument("--raw", type=Path, help="write every row with its raw samples here")
    parser.add_argument(
        "--from",
        dest="sources",
        type=Path,
        nargs="+",
        help="report: the --raw files of earlier runs, merged (with --ncu-cache)",
    )
    parser.add_argument(
        "--ncu-cache",
        type=Path,
        help="ncu's figures per size: read from here where present, each new one written here",
    )
    return parser


def _one_part(args, sizes: list[int]) -> bool:
    """Run the part `args.part` names (the report of earlier runs, or a child's part: its rows
    on stdout); False for "all", the whole run."""
    if args.part == "report":
        print("\n".join(merged_report(args.sources or [], args.ncu_cache)))
        return True
    if args.part == "ptx-target":
        ptx_target(args.ptx.read_text(), args.n, args.reset)
        return True
    if args.part == "torch-target":
        torch_target(args.n)
        return True
    if args.part == "ptx-run":
        ptx = args.ptx.read_text()
        row = engine_run(ptx, args.n, args.mode, args.timer, args.target_sample_ms)
        sys.stdout.buffer.write(orjson.dumps(row))
        return True
    if args.part == "ptx-profiler":
        sys.stdout.buffer.write(
            orjson.dumps(ptx_profiler(args.ptx.read_text(), sizes), option=orjson.OPT_NON_STR_KEYS)
        )
        return True
    if args.part == "torch-profiler":
        sys.stdout.buffer.write(orjson.dumps(torch_profiler(sizes), option=orjson.OPT_NON_STR_KEYS))
        return True
    if args.part == "torch":
        sys.stdout.buffer.write(orjson.dumps(torch_side(sizes)))
        return True
    return False


def _whole_run(args, sizes: list[int]) -> None:
    """Each front end's part in a child process of its own, ncu, then the tables."""
    ptx_path = Path(os.environ.get("TMPDIR", "/tmp")) / "fidelity-axpy.ptx"
    ptx_path.write_text(device_ptx())
    common = ["--sizes", args.sizes, "--ptx", str(ptx_path)]
    ptx_ncu, torch_ncu, ptx_prof, ptx_rows, torch_rows = {}, {}, {}, [], []
    parts = tuple(p for p in ("ptx", "torch") if args.only in (None, p))
    if args.skip_torch:
        parts = tuple(p for p in parts if p != "torch")
    if "ptx" in parts:
        say("fidelity: the runner's engine on the PTX")
        ptx_rows = ptx_engine(ptx_path, sizes, args.target_sample_ms)
        if not args.skip_torch:
            say("fidelity: torch.profiler on the PTX")
            ptx_prof = child(["ptx-profiler", *common])
    if "torch" in parts:
        say("fidelity: the torch side")
        torch_rows = child(["torch", "--sizes", args.sizes])
        profiled = child(["torch-profiler", "--sizes", args.sizes])
        for row in torch_rows:
            row["profiler_us"] = profiled[str(row["log2n"])]
    if not args.skip_ncu:
        ptx_ncu, torch_ncu = ncu_figures(sizes, ptx_path, parts, args.ncu_cache)
    if args.raw:
        raw = {"ptx": ptx_rows, "torch": torch_rows, "ptx_profiler": ptx_prof}
        args.raw.write_bytes(orjson.dumps(raw, option=orjson.OPT_NON_STR_KEYS))
    print("\n".join(report(ptx_rows, ptx_ncu, ptx_prof, torch_rows, torch_ncu)))


def main() -> int:
    args = _parser().parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if not _one_part(args, sizes):
        _whole_run(args, sizes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
