"""Benchmark (not a test): what sets a cold A/A's offset: where the loads land, or what the
process ran before?

The runner's cold CUPTI A/A (the same PTX loaded for two sides, COLD_LOADS loads a side) read A'
faster than A at 2^14 in four fidelity.py runs in a row (x0.9951, 0.9962, 0.9974, 0.9975), and
fidelity.py's PTX engine in fresh processes read the same again (x0.9977, 0.9976, 0.9964,
0.9974): the offset repeats for a process that does the same things. This script runs the
engine's cold CUPTI A/A (fidelity.py's PTX axpy, loads split in load_order, launches by
copy_turn) in fresh processes, each variant one process, a variant being parts joined by "/":

  plain        the loads as the runner makes them
  decoys:S     before each load, 0 to 3 extra loads of the same PTX (seeded by S), unloaded once
               every real load is made: the real loads land elsewhere for each seed
  after:R+R    first the engine's other A/A runs on the same loads, as fidelity.py makes them
               before its cold CUPTI run (R: hot-events, hot-cupti, cold-events)

and prints the A/A of each (ratio of medians, ratio of means, bootstrap interval).

    python tools/perf/cold_placement.py [--sizes 10,14] [--samples 2000]
        [--variants plain,plain,decoys:1,decoys:2,after:hot-events+hot-cupti+cold-events,...]

On the H200 (benchmarks/perf/RESULTS.md, sessions 27 and 28) six processes of plain and
decoys:1-4 at 2^10 and 2^14 took 123 s: the loads' places did not move the A/A. Five of plain and
after:R+R at 2^14, 4000 samples, took 110 s: an earlier cold run on the same loads (cold-events)
did, to x0.9987, and all three earlier runs to x0.9975 (plain x1.0012); the hot runs alone not.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(Path(__file__).resolve().parent)]

from fidelity import child, say  # noqa: E402
from fidelity_ptx import (  # noqa: E402
    ENGINE_RUNS,
    ENTRY,
    TARGET_SAMPLE_MS,
    Axpy,
    aa_fields,
    device_ptx,
    engine_aa,
    engine_samples,
    side_loads,
)


def parse_variant(variant: str) -> tuple[int | None, list[tuple[str, str]]]:
    """(the decoys' seed or None, the (mode, timer) runs made before) of a variant."""
    seed, before = None, []
    runs = {f"{mode}-{timer}": (mode, timer) for mode, timer in ENGINE_RUNS}
    for part in variant.split("/"):
        kind, _, value = part.partition(":")
        if kind == "decoys" and value.isdigit():
            seed = int(value)
        elif kind == "after" and set(value.split("+")) <= set(runs):
            before = [runs[r] for r in value.split("+")]
        elif kind != "plain":
            raise SystemExit(
                f"cold_placement.py: variant {variant!r}: {part!r} is not plain, decoys:SEED or "
                f"after:R+R with R one of {', '.join(runs)}"
            )
    return seed, before


def one_variant(ptx: str, sizes: list[int], samples: int, variant: str) -> list[dict]:
    from runner.execution.case import COLD_LOADS

    seed, before = parse_variant(variant)
    rows = []
    for log2n in sizes:
        axpy = Axpy(ptx, 1 << log2n, modules=2 * COLD_LOADS, decoy_seed=seed)
        loads = side_loads(axpy.items)
        for mode, timer in before:
            samples_before = engine_samples(mode, timer, log2n)
            engine_aa(axpy, loads, mode, timer, samples_before, TARGET_SAMPLE_MS)
        m = engine_aa(axpy, loads, "cold", "cupti", samples, TARGET_SAMPLE_MS)
        axpy.close()
        fields = aa_fields(m, "cold", "cupti")
        a, b = fields["cold_cupti_samples"]
        row = {
            "variant": variant,
            "log2n": log2n,
            "us": fields["cold_cupti_us"],
            "median_ratio": fields["cold_cupti_aa"][0],
            "mean_ratio": statistics.fmean(b) / statistics.fmean(a),
            "ci": fields["cold_cupti_aa_bootstrap"],
        }
        say(f"{variant} 2^{log2n}: {row}")
        rows.append(row)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", nargs="?", default="all")
    parser.add_argument("--sizes", default="10,14")
    parser.add_argument("--samples", type=int, default=2000)
    parser.add_argument("--variants", default="plain,plain,decoys:1,decoys:2,decoys:3,decoys:4")
    parser.add_argument("--ptx", type=Path)
    parser.add_argument("--variant")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.part == "variant":
        rows = one_variant(args.ptx.read_text(), sizes, args.samples, args.variant)
        sys.stdout.buffer.write(orjson.dumps(rows))
        return 0
    variants = args.variants.split(",")
    for variant in variants:  # every variant checked before any GPU work
        parse_variant(variant)
    ptx_path = Path(os.environ.get("TMPDIR", "/tmp")) / "cold-placement-axpy.ptx"
    ptx_path.write_text(device_ptx())
    rows = []
    for variant in variants:
        part = ["variant", "--ptx", str(ptx_path), "--variant", variant, "--sizes", args.sizes]
        rows += child([*part, "--samples", str(args.samples)], script=__file__)
    print(
        f"cold CUPTI A/A of {ENTRY}, {args.samples} samples a side, each variant a fresh process\n"
    )
    print("| variant | n | us | A'/A medians | A'/A means | bootstrap 95% |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in sorted(rows, key=lambda r: r["log2n"]):
        print(
            f"| {r['variant']} | 2^{r['log2n']} | {r['us']:.3f} | {r['median_ratio']:.4f} | "
            f"{r['mean_ratio']:.4f} | [{r['ci'][0]:.4f}, {r['ci'][1]:.4f}] |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
