"""On a GPU box: the headline suite through `harness run --cluster local:N` (a local Dask cluster of
one GPU worker) against a plain `runner bench` on the same card: both sets of gaps, whether
they agree within their intervals, and the engine's wall-time overhead.

    python tools/perf/cluster_overhead.py [--gpu 0] [--bundle .bundle] [--out DIR] [-- runner args]

The headline suite is every case at its headline point (`--case id[headline]` for a swept case).
The plain run goes first, then the cluster run, each timed from its command's start to its exit.
Needs the cluster extra (dask, distributed): offline, `pip install --no-index --find-links .whl
dask distributed`. Prints markdown on stdout; the runs' progress goes to stderr. Exit 0 when
every gap's intervals overlap, 1 otherwise, 2 when a run gives no document.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "benchmarks" / "cases.toml"


def headline_selectors() -> tuple[str, ...]:
    sys.path.insert(0, str(ROOT))
    from runner.definition import manifest

    return manifest.load(SUITE).headline_selectors()


def timed(command: list[str]) -> tuple[float, subprocess.CompletedProcess]:
    print(f"cluster_overhead: {' '.join(command)}", file=sys.stderr, flush=True)
    started = time.monotonic()
    done = subprocess.run(command, cwd=ROOT, stdout=subprocess.PIPE)
    return time.monotonic() - started, done


def gaps(document: dict) -> dict[tuple[str, str], dict]:
    return {
        (case["id"], name): impl["gap"]
        for case in document["cases"]
        for name, impl in case["implementations"].items()
        if impl.get("gap")
    }


def interval(gap: dict | None) -> str:
    if not gap:
        return "-"
    return f"x{gap['ratio_of_medians']:.4f} [{gap['ci_low']:.4f}, {gap['ci_high']:.4f}]"


def main() -> int:
    args, runner_args = sys.argv[1:], []
    if "--" in args:
        at = args.index("--")
        args, runner_args = args[:at], args[at + 1 :]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", default="0")
    parser.add_argument("--bundle", type=Path)
    parser.add_argument("--out", type=Path, default=ROOT / "cluster-overhead")
    options = parser.parse_args(args)
    options.out.mkdir(parents=True, exist_ok=True)
    chosen = [a for s in headline_selectors() for a in ("--case", s)]
    bundle = ["--bundle", str(options.bundle)] if options.bundle else []
    plain_path = options.out / "plain.json"
    python = sys.executable
    plain_s, plain = timed([python, "-m", "runner", "bench", str(SUITE), *chosen, *bundle,
                            "--device", options.gpu, "-o", str(plain_path), *runner_args])  # fmt: skip
    cluster_s, cluster = timed([python, "-m", "harness", "run", str(SUITE), "--cluster",
                                f"local:{options.gpu}", "--out", str(options.out / "cluster"),
                                *bundle, "--", *chosen, *runner_args])  # fmt: skip
    paths = cluster.stdout.decode().split()
    if plain.returncode not in (0, 1) or cluster.returncode not in (0, 1) or len(paths) != 1:
        print(f"error: plain exit {plain.returncode}, cluster exit {cluster.returncode} "
              f"({len(paths)} document(s))", file=sys.stderr)  # fmt: skip
        return 2
    a = gaps(orjson.loads(plain_path.read_bytes()))
    b = gaps(orjson.loads(Path(paths[0]).read_bytes()))
    print("| case | candidate | plain runner bench | harness run --cluster | agree |")
    print("|---|---|---|---|---|")
    disagree = 0
    for key in sorted(a.keys() | b.keys()):
        x, y = a.get(key), b.get(key)
        agree = bool(x and y and x["ci_low"] <= y["ci_high"] and y["ci_low"] <= x["ci_high"])
        disagree += not agree
        print(
            f"| {key[0]} | {key[1]} | {interval(x)} | {interval(y)} | {'yes' if agree else 'NO'} |"
        )
    print(f"\nWall time: plain {plain_s:.1f} s, cluster {cluster_s:.1f} s: overhead "
          f"{cluster_s - plain_s:+.1f} s ({cluster_s / plain_s - 1:+.1%}).")  # fmt: skip
    print(f"{len(a.keys() & b.keys())} gaps in both, {disagree} whose intervals do not overlap.")
    return 0 if disagree == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
