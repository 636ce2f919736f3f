"""Run the GPU tests on a GPU box in priority order within one time budget, and write what was reached.

    python tools/gpu_session.py [--budget-s 540] [--out DIR] [--only GROUP ...] [--list]

A lent GPU machine can come late and a device call is capped at 10 minutes, so the groups run most
important first, each under the time left, and the report (DIR/gpu-session.txt, one line a group:
its pytest summary or why it did not run) is rewritten after every group: a call cut short still
says how far it got. Each group also leaves DIR/<group>.log (the pytest output) and the run's
documents where the tests keep them ($KERNELGAP_TEST_ARTIFACTS is set to DIR). Exit 0 when every
group that ran passed, 1 otherwise. Build the suite's bundle here first (`runner build
benchmarks/cases.toml --out .bundle`) and pass it as $KERNELGAP_BUNDLE where warpforthc is missing.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Most important first: the launch protocols and the suite run (every issue's end-to-end path), then
# the engine's measuring tests, the integrity sets, the generator and the rest.
GROUPS: dict[str, list[str]] = {
    "launch": [
        "tests/runner/launch/test_oneshot.py",
        "tests/runner/launch/test_serve_gpu.py",
        "tests/runner/launch/test_serve_faults_gpu.py",
        "tests/runner/launch/test_local_service_gpu.py",
        "tests/runner/launch/warpforth/test_switches_gpu.py",
    ],
    "suite": [
        "tests/runner/execution/test_suite_run_gpu.py",
        "tests/runner/execution/test_pairs_gpu.py",
        "tests/runner/execution/test_sweep_run_gpu.py",
    ],
    "cluster": ["tests/harness/cluster/test_cluster_gpu.py"],
    "measurement": [
        "tests/runner/measurement",
        "tests/runner/gpu",
        "tests/runner/definition/test_launch_limits_gpu.py",
        "tests/runner/test_faults_gpu.py",
    ],
    # the PTX sets (whole suites run hot and cold) and the callables' apart: the PTX group alone
    # fills most of one call (each group's time on each card: benchmarks/perf/RESULTS.md)
    "integrity": [
        "tests/integrity/test_cheats_gpu.py",
        "tests/integrity/test_cheats_gate_gpu.py",
        "tests/integrity/test_cheats_state_gpu.py",
        "tests/integrity/test_cheats_third_gpu.py",
        "tests/integrity/test_cheats_prefix_gpu.py",
        "tests/integrity/test_cheats_method_gpu.py",
        "tests/integrity/test_output_dependence_gpu.py",
    ],
    "integrity_callable": [
        "tests/integrity/test_cheats_bench_gpu.py",
        "tests/integrity/test_honest_third_gpu.py",
    ],
    "bench": ["tests/runner/bench"],
    "sanitize": ["tests/runner/execution/test_sanitize_gpu.py"],
    "warpforth": ["tests/suite/test_warpforth_gpu.py"],
    "profiling": ["tests/runner/explain/test_profiling_gpu.py"],
}


def summary_line(output: str) -> str:
    """pytest's closing line ('N passed, ... in Xs'), or the last line when there is none."""
    lines = [line.strip("= ") for line in output.strip().splitlines() if line.strip()]
    for line in reversed(lines):
        if " in " in line and any(w in line for w in ("passed", "failed", "error", "skipped")):
            return line
    return lines[-1] if lines else "(no output)"


def run_group(name: str, paths: list[str], left_s: float, out: Path) -> tuple[str, bool]:
    """Run one group's GPU tests under the time left; (its report line, whether it passed)."""
    present = [p for p in paths if (ROOT / p).exists()]
    if not present:
        return f"{name}: no such test files ({', '.join(paths)})", True
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-m",
        "gpu",
        "-v",  # a line a test: a group cut short still says which passed
        "--tb=short",
        "--durations=0",  # where a group's minutes go, for the next plan: every phase
        "--durations-min=1.0",  # of a second or more
        "-p",
        "no:cacheprovider",
        *present,
    ]
    started = time.monotonic()
    try:
        done = subprocess.run(
            command, cwd=ROOT, capture_output=True, text=True, timeout=left_s, check=False
        )
    except subprocess.TimeoutExpired as exc:
        text = (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        (out / f"{name}.log").write_text(text)
        reached = {w: text.count(f" {w}") for w in ("PASSED", "FAILED", "ERROR", "SKIPPED")}
        seen = ", ".join(f"{n} {w.lower()}" for w, n in reached.items() if n)
        return (
            f"{name}: cut at {left_s:.0f} s (the budget ran out; {seen or 'no test ended'})",
            False,
        )
    (out / f"{name}.log").write_text(done.stdout + done.stderr)
    took = time.monotonic() - started
    ok = done.returncode in (0, 5)  # 5: every test in the group deselected or skipped
    return f"{name}: {summary_line(done.stdout)} (rc {done.returncode}, {took:.0f} s)", ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget-s", type=float, default=540.0, help="seconds for all groups")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "gpu-session")))
    parser.add_argument("--only", nargs="+", choices=sorted(GROUPS), help="these groups, in order")
    parser.add_argument("--list", action="store_true", help="print the groups and their files")
    args = parser.parse_args()
    if args.list:
        for name, paths in GROUPS.items():
            print(f"{name}: {' '.join(paths)}")
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("KERNELGAP_TEST_ARTIFACTS", str(args.out.resolve()))
    deadline = time.monotonic() + args.budget_s
    report = args.out / "gpu-session.txt"
    lines: list[str] = []
    all_ok = True
    for name in args.only or list(GROUPS):
        left_s = deadline - time.monotonic()
        if left_s < 20:
            lines.append(f"{name}: not run ({left_s:.0f} s left)")
            all_ok = False
        else:
            line, ok = run_group(name, GROUPS[name], left_s, args.out)
            lines.append(line)
            all_ok &= ok
        print(lines[-1], file=sys.stderr, flush=True)
        report.write_text("\n".join(lines) + "\n")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
