"""Where a suite run's wall time goes: per case and phase, from its result documents.

    python tools/perf/suite_phases.py run --bundle .bundle [--rev REV] [--modes hot,cold]
                                               [--out DIR] [-- extra runner bench options]
    python tools/perf/suite_phases.py table BEFORE.json [AFTER.json ...]
    (either with --before session30: the session 30 hot table of RESULTS.md as the first column)

run: `python -m runner bench benchmarks/cases.toml --bundle B --mode M -o DIR/LABEL-M.json` for
each mode (hot, then cold), in this checkout or, with --rev, in a detached `git worktree` of that
revision (the "before" of a change), timing each run end to end; then the table of each.
table: the tables of documents written before (any schema version: a phase an older runner did
not record shows as "-", and its time lands in "other"), and with two or more, their totals side
by side. The phases are the cases' `phases_s` (result schema 1.9.0 names them) and the sum of
their implementations' `timing.calibration_s`; "other" is the case's worker time not in a phase.
Progress goes to stderr, the tables to stdout.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# (column, phases_s key or a computed name): in the worker's order, then the host's
WORKER_PHASES = [
    ("start", "worker_start_s"),
    ("setup", "setup_s"),
    ("load", "load_s"),
    ("check", "check_s"),
    ("inputs", "inputs_s"),
    ("xcheck", "check_timed_size_s"),
    ("refsample", "reference_sample_s"),
    ("auditsets", "audit_sets_s"),
    ("calib", "calibration"),
    ("timing", "timing_s"),
    ("integrity", "integrity_s"),
    ("teardown", "teardown_s"),
    ("exit", "worker_exit_s"),
]
HOST_PHASES = [("build", "build_s"), ("static", "static_s")]

# The 8-case hot suite on the H200 in session 30 (benchmarks/perf/RESULTS.md, "Session 30"):
# the "before" of issue 37's 60 s target, 108 s of run wall. Per case: setup, load, check,
# xcheck, refsample, calib, timing, integrity and the case's total, in seconds.
SESSION_30_RUN_S = 108.0
SESSION_30_COLUMNS = ("setup", "load", "check", "xcheck", "refsample", "calib", "timing")
SESSION_30 = {
    "scale_i64": (0.16, 0.06, 0.03, 0.01, 0.01, 0.31, 8.49, 1.77, 11.11),
    "axpy_f64": (0.15, 0.05, 0.48, 0.01, 0.01, 0.42, 8.65, 3.63, 13.64),
    "reduce_sum_f64": (0.16, 0.05, 0.17, 0.00, 0.01, 0.30, 8.36, 0.91, 10.24),
    "matmul_f64_naive": (0.16, 0.05, 0.09, 0.00, 0.00, 0.35, 9.11, 0.84, 10.90),
    "matmul_f64_tiled": (0.17, 0.06, 0.10, 0.01, 0.00, 0.33, 8.91, 0.96, 10.82),
    "attention_f32_naive": (0.17, 0.21, 0.12, 0.00, 0.01, 0.31, 8.38, 0.92, 10.48),
    "polynomial_f64": (0.16, 0.01, 0.63, 0.01, 0.05, 0.16, 4.76, 0.58, 6.64),
    "transpose_f32": (0.17, 0.08, 0.09, 0.00, 0.00, 0.31, 8.40, 1.59, 10.95),
}


def session_30_document() -> dict:
    """The session 30 table as a document suite_phases can tabulate: its recorded phases, the
    rest of each case (start, inputs, audit sets, teardown, exit) in "other"."""
    keys = dict(WORKER_PHASES)
    cases = []
    for case_id, row in SESSION_30.items():
        *phases, integrity, total = row
        named = {keys[c]: v for c, v in zip(SESSION_30_COLUMNS, phases, strict=True)}
        named.pop("calibration")
        named["timing_s"] += row[5]  # timing_s holds calibration (case_phases takes it out)
        named["integrity_s"] = integrity
        cases.append(
            {
                "id": case_id,
                "phases_s": named,
                "worker_wall_s": total,
                "implementations": {"all": {"timing": {"calibration_s": row[5]}}},
            }
        )
    return {
        "options": {"mode": "hot"},
        "schema_version": "1.9.0 (session 30, RESULTS.md)",
        "cases": cases,
        "run_wall_s": SESSION_30_RUN_S,
    }


def case_phases(case: dict) -> dict[str, float | None]:
    """{column: seconds or None (not recorded)} of one case document, with "other" and "case"
    (worker wall plus the host's build and static work). Timing excludes calibration."""
    phases = case.get("phases_s", {})
    calibration = sum(
        (impl.get("timing") or {}).get("calibration_s", 0.0)
        for impl in case.get("implementations", {}).values()
    )
    row: dict[str, float | None] = {}
    for column, key in WORKER_PHASES + HOST_PHASES:
        row[column] = calibration if key == "calibration" else phases.get(key)
    if row["timing"] is None and "timing_wall_s" in case:  # before 1.9.0: the strategy's wall
        row["timing"] = case["timing_wall_s"]
    if row["timing"] is not None:
        row["timing"] = max(row["timing"] - calibration, 0.0)
    worker_s = case.get("worker_wall_s") or 0.0
    inside = sum(row[c] or 0.0 for c, _ in WORKER_PHASES)
    row["other"] = max(worker_s - inside, 0.0)
    row["case"] = worker_s + sum(row[c] or 0.0 for c, _ in HOST_PHASES)
    return row


def run_wall_s(doc: dict) -> float | None:
    """finished_utc - started_utc of a complete document (a table's own: run_wall_s)."""
    if "run_wall_s" in doc:
        return doc["run_wall_s"]
    try:
        start = datetime.fromisoformat(doc["started_utc"].replace("Z", "+00:00"))
        end = datetime.fromisoformat(doc["finished_utc"].replace("Z", "+00:00"))
    except (KeyError, TypeError, AttributeError, ValueError):
        return None
    return (end - start).total_seconds()


COLUMNS = [c for c, _ in WORKER_PHASES] + ["other"] + [c for c, _ in HOST_PHASES] + ["case"]


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def table(doc: dict, label: str) -> tuple[str, dict[str, float]]:
    """A markdown table of seconds per case and phase, with its totals row; and the totals."""
    lines = [
        f"{label}: {doc.get('options', {}).get('mode')} mode, schema {doc.get('schema_version')}, "
        f"run wall {_cell(run_wall_s(doc))} s",
        "",
        "| case | " + " | ".join(COLUMNS) + " |",
        "|---|" + "---:|" * len(COLUMNS),
    ]
    totals = dict.fromkeys(COLUMNS, 0.0)
    for case in doc.get("cases", []):
        row = case_phases(case)
        for c in COLUMNS:
            totals[c] += row[c] or 0.0
        lines.append(f"| {case['id']} | " + " | ".join(_cell(row[c]) for c in COLUMNS) + " |")
    lines.append("| **total** | " + " | ".join(_cell(totals[c]) for c in COLUMNS) + " |")
    totals["run"] = run_wall_s(doc) or 0.0
    return "\n".join(lines), totals


def side_by_side(labelled: list[tuple[str, dict[str, float]]]) -> str:
    """Totals per phase of several documents, one column each."""
    lines = ["| phase | " + " | ".join(label for label, _ in labelled) + " |"]
    lines.append("|---|" + "---:|" * len(labelled))
    for c in [*COLUMNS, "run"]:
        lines.append(f"| {c} | " + " | ".join(f"{t[c]:.2f}" for _, t in labelled) + " |")
    return "\n".join(lines)


def print_tables(paths: list[Path], before: str | None = None) -> None:
    labelled = []
    documents = [(path.stem, json.loads(path.read_text())) for path in paths]
    if before == "session30":
        documents.insert(0, ("session30", session_30_document()))
    for label, doc in documents:
        text, totals = table(doc, label)
        print(text + "\n")
        labelled.append((label, totals))
    if len(labelled) > 1:
        print(side_by_side(labelled))


def checkout_of(rev: str | None, scratch: Path) -> Path:
    """This checkout, or a detached worktree of `rev` under `scratch`."""
    if rev is None:
        return ROOT
    tree = scratch / "rev"
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), rev],
        check=True,
        stdout=sys.stderr,
    )
    return tree


def bench(tree: Path, bundle: Path, mode: str, out: Path, extra: list[str]) -> float:
    """One `runner bench` of the suite in `tree`; its wall seconds (the document goes to `out`)."""
    command = [sys.executable, "-m", "runner", "bench", "benchmarks/cases.toml"]
    command += ["--bundle", str(bundle.resolve()), "--mode", mode, "-o", str(out), *extra]
    print(f"suite_phases: {' '.join(command)} (in {tree})", file=sys.stderr, flush=True)
    t0 = time.monotonic()
    done = subprocess.run(command, cwd=tree, stdout=subprocess.DEVNULL, env=_env(tree))
    wall_s = time.monotonic() - t0
    if done.returncode not in (0, 1):  # 1: a case failed, its time still counts
        raise SystemExit(f"suite_phases: runner bench exited {done.returncode}")
    return wall_s


def _env(tree: Path) -> dict:
    """The tree first, then what this interpreter was given (a GPU box's wheels: orjson, ...):
    the tree alone left `runner bench` without orjson on the box, which then wrote nothing."""
    import os

    paths = [str(tree), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}


def run(args: argparse.Namespace) -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    label = args.label or (f"rev-{args.rev}" if args.rev else "worktree")
    written = []
    with tempfile.TemporaryDirectory() as scratch:
        tree = checkout_of(args.rev, Path(scratch))
        try:
            for mode in args.modes.split(","):
                out = (args.out / f"{label}-{mode}.json").resolve()
                wall_s = bench(tree, args.bundle, mode, out, args.extra)
                print(f"suite_phases: {mode}: {wall_s:.1f} s end to end", file=sys.stderr)
                written.append(out)
        finally:
            if args.rev is not None:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)])
    print_tables(written, args.before)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run the suite (hot, then cold) and tabulate its phases")
    r.add_argument("--bundle", type=Path, required=True, help="PTX bundle (runner build)")
    r.add_argument("--rev", help="a git revision to run instead of this checkout (the before)")
    r.add_argument("--modes", default="hot,cold", help="comma-separated (default hot,cold)")
    r.add_argument("--out", type=Path, default=Path("results/phases"), help="where documents go")
    r.add_argument("--label", help="file name prefix (default: worktree or rev-REV)")
    r.add_argument("extra", nargs="*", help="after --: more runner bench options")
    t = sub.add_parser("table", help="tabulate documents written before")
    t.add_argument("documents", type=Path, nargs="*")
    for p in (r, t):
        p.add_argument(
            "--before",
            choices=("session30",),
            help="put the session 30 hot table (RESULTS.md, issue 37's before) first",
        )
    args = parser.parse_args(argv)
    if args.command == "run":
        run(args)
    else:
        print_tables(args.documents, args.before)


if __name__ == "__main__":
    main()
