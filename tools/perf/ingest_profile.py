"""Benchmark (not a test): where a bulk `harness ingest --trusted` spends its time, with cProfile.

Writes --files result documents (dashboard_targets.py's: history_ingest.py's 30 cases x 3
implementations with static counters), then profiles
  main    the whole `harness ingest` call in this process (the writer; the worker processes
          plan the files and are not in this profile), with its wall and CPU seconds;
  worker  what one worker does for a file (read, validate, check, plan, run row), serially
          over --worker-files of them, in this process.
Prints the wall of each and the --top functions of each by own time, then, unprofiled, the CPU
a worker spends on each stage of a file (ms, the least of 3 passes over --worker-files files).
--no-static: documents without static counters (as the dashboard issue measured).

    python tools/perf/ingest_profile.py [--files 1000] [--worker-files 200] [--top 15]
        [--no-static]
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import io
import pickle
import pstats
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dashboard_targets import ingest_files

from harness.cli import main as harness_main
from harness.commands.ingest import _checked, _planned
from harness.history.store import plan, run_row
from harness.running import trust
from protocol.codec import decode
from protocol.points import as_rows
from protocol.validation import validate


def profiled(call, top: int) -> tuple[float, float, str]:
    """(wall s, CPU s of this process, the top of the profile by own time) of call()."""
    profile = cProfile.Profile()
    t0, c0 = time.perf_counter(), time.process_time()
    profile.runcall(call)
    wall_s, cpu_s = time.perf_counter() - t0, time.process_time() - c0
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(top)
    return wall_s, cpu_s, text.getvalue()


def main_process(manifest: Path, files: list[str], db: Path) -> None:
    args = ["ingest", "--trusted", "--cases", str(manifest), "--db", str(db), *files]
    harness_main.main(args, standalone_mode=False)


def worker(manifest: Path, files: list[str], db: Path) -> None:
    check = functools.partial(_checked, cases=manifest, gpu_pin=None, trusted=True)
    for path in files:
        _planned(Path(path), check=check, db=db, bundle=None)


STAGES = ("read", "parse", "validate", "trust", "plan", "run row", "report", "pickle")


def stage_ms(manifest: Path, files: list[str], db: Path) -> dict[str, float]:
    """CPU ms a file of each stage of a worker's file (harness.commands.ingest._planned taken
    apart), the least of 3 passes over `files`."""
    best = dict.fromkeys(STAGES, float("inf"))
    for _ in range(3):
        spent = dict.fromkeys(STAGES, 0.0)
        for path in files:
            marks = [time.process_time()]
            data = Path(path).read_bytes()
            marks.append(time.process_time())
            document = decode(data, path)
            marks.append(time.process_time())
            validate(document, "result", path)
            document = as_rows(document)
            marks.append(time.process_time())
            trust.check(document, trust.canon_for(document, manifest, None, True), path)
            marks.append(time.process_time())
            report = plan(document, path=db, trusted=True, what=path, bundle=None)
            marks.append(time.process_time())
            row = run_row(document, report)
            marks.append(time.process_time())
            report.prerender()
            marks.append(time.process_time())
            pickle.dumps((report, row))
            marks.append(time.process_time())
            for name, t0, t1 in zip(STAGES, marks[:-1], marks[1:], strict=True):
                spent[name] += t1 - t0
        best = {k: min(best[k], 1e3 * spent[k] / len(files)) for k in STAGES}
    return best


def main() -> int:
    folder = Path(tempfile.mkdtemp(prefix="kernelgap-ingest-profile-"))
    manifest, files = ingest_files(ARGS.files, folder, static=not ARGS.no_static)
    print(f"{ARGS.files} files written", file=sys.stderr)
    for name, call in (
        ("main", functools.partial(main_process, manifest, files, folder / "main.sqlite")),
        ("worker", functools.partial(worker, manifest, files[: ARGS.worker_files], folder / "w")),
    ):
        count = ARGS.files if name == "main" else ARGS.worker_files
        wall_s, cpu_s, top = profiled(call, ARGS.top)
        print(f"## {name}: {count} files, wall {wall_s:.2f} s, CPU {cpu_s:.2f} s in this process")
        print(f"({1e3 * cpu_s / count:.2f} ms CPU a file, profiled)\n{top}")
    stages = stage_ms(manifest, files[: ARGS.worker_files], folder / "w")
    print("## worker stages, unprofiled (CPU ms a file, least of 3)")
    print("| " + " | ".join(STAGES) + " | all |\n|" + "---:|" * (len(STAGES) + 1))
    print(
        "| " + " | ".join(f"{v:.2f}" for v in stages.values()) + f" | {sum(stages.values()):.2f} |"
    )
    for path in folder.iterdir():
        path.unlink()
    folder.rmdir()
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--worker-files", type=int, default=200)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--no-static", action="store_true", help="documents without counters")
    ARGS = parser.parse_args()
    raise SystemExit(main())
