"""A model of a cluster run (`harness run --cluster`): expected wall time as hosts are added, and
what limits it first.

    python tools/perf/scale_out_model.py RESULT.json [--suite benchmarks/cases.toml] [--swept-total-s 182]
        [--hosts 1,2,3,4] [--gpus-per-host 8] [--task-overhead-s 3]

Durations come from RESULT.json: each case's worker wall time (`worker_wall_s`). With --suite,
each case is swept over its points (runner.definition: the manifest's axes) and a point is
taken to cost its case's recorded time times one factor, chosen so the whole swept suite sums to
--swept-total-s (a measured one-GPU wall time of the swept suite). Tasks are dealt longest first
to the GPU that frees first (the longest-processing-time rule, which is what the scheduler does
with priorities), each paying --task-overhead-s (the runner's start and GPU probe in its worker,
shipping the tree: measured by tools/perf/cluster_overhead.py). Printed as markdown on stdout,
one table per dealing unit (a case, `harness run --cluster --deal case`; a point, `--deal point`)
and the first limit as hosts are added. Bad input exits 2 naming the file.
"""

from __future__ import annotations

import argparse
import heapq
import sys
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[2]


def durations(path: Path) -> dict[str, float]:
    """{case id: worker wall seconds} of a result document."""
    try:
        document = orjson.loads(path.read_bytes())
        found = {
            c["id"]: float(c["worker_wall_s"]) for c in document["cases"] if c.get("worker_wall_s")
        }
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError) as exc:
        raise SystemExit(
            f"error: {path}: not a result document with cases' worker_wall_s ({exc})"
        ) from None
    if not found:
        raise SystemExit(f"error: {path}: no case records worker_wall_s")
    return found


def swept(per_case: dict[str, float], suite: Path, total_s: float) -> dict[str, list[float]]:
    """{case id: each point's seconds}: the case's time per point, scaled so the suite sums to
    total_s."""
    sys.path.insert(0, str(ROOT))
    from runner.definition import manifest

    cases = {c.id: c for c in manifest.load(suite).cases}
    points = {
        cid: len(cases[cid].sweep.points) if cases[cid].sweep else 1
        for cid in per_case
        if cid in cases
    }
    raw = sum(per_case[c] * n for c, n in points.items())
    factor = total_s / raw
    return {c: [per_case[c] * factor] * n for c, n in points.items()}


def lpt(tasks: list[float], gpus: int, overhead_s: float) -> float:
    """Wall seconds of `tasks` over `gpus`, longest first to the GPU free first."""
    free = [0.0] * gpus
    for seconds in sorted(tasks, reverse=True):
        heapq.heapreplace(free, free[0] + seconds + overhead_s)
    return max(free)


def table(
    name: str, tasks: list[float], hosts: list[int], per_host: int, overhead_s: float
) -> list[str]:
    one = lpt(tasks, 1, overhead_s)
    lines = [
        f"#### One task per {name}: {len(tasks)} tasks, {sum(tasks):.0f} s of GPU work, the longest {max(tasks):.1f} s",
        "",
        "| hosts | GPUs | wall (s) | speed-up | GPUs busy | bound |",
        "|---:|---:|---:|---:|---:|---|",
    ]
    for count in hosts:
        gpus = count * per_host
        wall = lpt(tasks, gpus, overhead_s)
        busy = (sum(tasks) + len(tasks) * overhead_s) / (wall * gpus)
        longest = max(tasks) + overhead_s
        bound = "the longest task" if wall <= longest * 1.05 else "GPU work / GPUs"
        if len(tasks) < gpus:
            bound += f" ({gpus - len(tasks)} GPUs idle)"
        lines.append(
            f"| {count} | {gpus} | {wall:.1f} | {one / wall:.2f}x | {busy:.0%} | {bound} |"
        )
    return [*lines, ""]


def first_limit(tasks: list[float], name: str, per_host: int, overhead_s: float) -> str:
    """What stops the wall time falling as hosts are added."""
    longest = max(tasks) + overhead_s
    for count in range(1, 65):
        if lpt(tasks, count * per_host, overhead_s) <= longest * 1.05:
            return (
                f"- per {name}: from {count} host(s) ({count * per_host} GPUs) the wall is the "
                f"longest task ({longest:.1f} s with its overhead); more hosts change nothing"
            )
    return f"- per {name}: still GPU-bound at 64 hosts"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("result", type=Path)
    parser.add_argument("--suite", type=Path)
    parser.add_argument("--swept-total-s", type=float, default=182.0)
    parser.add_argument("--hosts", default="1,2,3,4")
    parser.add_argument("--gpus-per-host", type=int, default=8)
    parser.add_argument("--task-overhead-s", type=float, default=3.0)
    args = parser.parse_args(argv)
    hosts = [int(h) for h in args.hosts.split(",")]
    per_case = durations(args.result)
    points = (
        swept(per_case, args.suite, args.swept_total_s)
        if args.suite
        else {c: [s] for c, s in per_case.items()}
    )
    case_tasks = [sum(p) for p in points.values()]
    point_tasks = [s for p in points.values() for s in p]
    print(
        f"### {sum(case_tasks):.0f} s of GPU work: {len(case_tasks)} cases, {len(point_tasks)} points; "
        f"{args.task_overhead_s:g} s overhead per task\n"
    )
    print("\n".join(table("case", case_tasks, hosts, args.gpus_per_host, args.task_overhead_s)))
    if len(point_tasks) > len(case_tasks):
        print(
            "\n".join(table("point", point_tasks, hosts, args.gpus_per_host, args.task_overhead_s))
        )
    print("What limits it first as hosts are added:")
    print(first_limit(case_tasks, "case", args.gpus_per_host, args.task_overhead_s))
    if len(point_tasks) > len(case_tasks):
        print(first_limit(point_tasks, "point", args.gpus_per_host, args.task_overhead_s))
        share = (
            len(point_tasks)
            * args.task_overhead_s
            / (sum(point_tasks) + len(point_tasks) * args.task_overhead_s)
        )
        print(
            f"- per point, the per-task overhead is {share:.0%} of all GPU time ({len(point_tasks)} tasks)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
