"""Where a process-per-launch `runner launch --no-service` spends its time, phase by phase.

    python tools/perf/launch_startup.py [--repeats 9] [--cpp /tmp/warpforth-runner]

Every figure comes from fresh interpreters. Without a GPU only the import phases, the overlap
marks and the wall time of a launch that ends at the environment error are measured; with one,
the driver phases (cuInit, the primary context, loading the PTX, one launch and its read-back,
the release), what ending the process costs with the context released first or still held, and
the wall time of whole launches: `--no-service` with the early driver start
(runner.gpu.driver_start) and without it (KERNELGAP_EARLY_DRIVER=0, the before), through the
launch service (after a first call started it), and the C++ runner given with --cpp (WarpForth's
warpforth-runner, same arguments). The overlap marks: when, after the process was spawned, the
early start began and the main thread reached the driver (its imports, cuda.bindings included,
arguments, PTX and checks done), all of which the driver's start now hides.
Targets (issue 32): imports <= 60 ms, a `--no-service` launch no slower than the C++ runner.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
IMPORT_TARGET_S = 0.060
PTX = """.version 7.0
.target sm_70
.address_size 64
.visible .entry add1(.param .u64 p, .param .s64 n)
{
\t.reg .b64 %rd<4>;
\t.reg .b32 %r<2>;
\tld.param.u64 %rd1, [p];
\tmov.u32 %r1, %tid.x;
\tmul.wide.u32 %rd2, %r1, 8;
\tadd.s64 %rd3, %rd1, %rd2;
\tst.global.u64 [%rd3], %rd2;
\tret;
}
"""
ARGS = ["--kernel", "add1", "--param", "i64[]:0,0,0,0", "--param", "i64:4",
        "--grid", "1,1,1", "--block", "4,1,1", "--output-param", "0", "--output-count", "4"]  # fmt: skip
LAUNCH_MODULES = (
    "runner.launch.launch_command, runner.launch.launch_plan, "
    "runner.launch.fresh_context, runner.gpu.driver, runner.gpu.ptx"
)
IMPORTS = {  # a tuple: the interpreter's arguments, timed whole; a string: timed inside
    "interpreter only (`-c pass`, wall)": ("-c", "pass"),
    "interpreter without site-packages' start-up (`-S -c pass`, wall)": ("-S", "-c", "pass"),
    "launch path's own modules": f"import {LAUNCH_MODULES}",
    "cuda.bindings.driver": "from cuda.bindings import driver",
    "before: runner.launch.oneshot (numpy, jsonschema)": "import runner.launch.oneshot",
}
_TIMED = "import time; t = time.perf_counter()\n{body}\nprint(time.perf_counter() - t)"
PHASES = """import time
marks = [("start", time.perf_counter())]
def mark(name): marks.append((name, time.perf_counter()))
from runner.gpu import driver, ptx
from runner.launch import launch_plan as host_arrays
mark("import runner + cuda.bindings")
d = driver.cu(); driver.check(d.cuInit(0), "cuInit"); mark("cuInit")
ctx = driver.Context(0); mark("primary context")
module = driver.Module(open({ptx!r}).read()); kernel = module.kernel("add1", (1, 1, 1), (4, 1, 1))
mark("module load (PTX JIT)")
buf = driver.Buffer(32); buf.upload(host_arrays.pack("i64", [0] * 4))
args = driver.KernelArgs([("ptr", buf.ptr), ("u64", 4)]); stream = driver.Stream()
kernel.launch(stream, args); stream.synchronize(); out = host_arrays.values("i64", buf.download_bytes())
mark("upload, launch, read back")
buf.free(); stream.destroy(); module.unload(); ctx.close(); mark("release")
print(";".join(f"{{n}}={{t - marks[i][1]}}" for i, (n, t) in enumerate(marks[1:])))
"""
# `python -m runner launch ...` with two marks (seconds since the epoch) written to KG_MARKS:
# when the early driver start begins and when the main thread reaches the driver (waits for it)
MARKED = """import os, runpy, sys, time
from runner.gpu import driver_start
def _marked(name, call, only_if_started=False):
    def marked(*args, **kwargs):
        stamp = time.time()
        result = call(*args, **kwargs)
        if result is not None or not only_if_started:
            with open(os.environ["KG_MARKS"], "a") as marks:
                marks.write(f"{name}={stamp}\\n")
        return result
    return marked
driver_start.start = _marked("early driver start begun", driver_start.start, True)
driver_start.wait = _marked("main thread at the driver", driver_start.wait)
sys.argv = ["runner", *sys.argv[1:]]
runpy.run_module("runner", run_name="__main__", alter_sys=True)
"""
# what ending the process costs after a launch: the context released first (to zero, as the C++
# runner's cuCtxDestroy) or still held (the driver frees it with the process)
EXIT = """import os, sys, time
from runner.gpu import driver
context = driver.Context(0)
context.synchronize()
sys.stdout.write(repr(time.time())); sys.stdout.flush()
if {release}:
    context.close()
os._exit(0)
"""
SWITCH_OFF = {"KERNELGAP_EARLY_DRIVER": "0"}  # runner.gpu.driver_start.SWITCH


def _python(code: str, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                          env=env, check=False)  # fmt: skip


def _env(runtime: str) -> dict:
    paths = [str(ROOT), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, paths)),
            "XDG_RUNTIME_DIR": runtime}  # fmt: skip


def _wall(argv: list[str], env: dict) -> tuple[float, subprocess.CompletedProcess]:
    t = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env=env, check=False)
    return time.perf_counter() - t, done


def _row(name: str, seconds: list[float], note: str = "") -> None:
    print(
        f"| {name} | {statistics.median(seconds) * 1e3:.1f} | {max(seconds) * 1e3:.1f} | {note} |"
    )


def measure_imports(repeats: int, env: dict) -> float:
    """Print the import rows; return the launch path's imports (its modules + cuda.bindings)."""
    medians = {}
    for name, body in IMPORTS.items():
        if isinstance(body, tuple):
            runs = [_wall([sys.executable, *body], env)[0] for _ in range(repeats)]
        else:
            runs = []
            for _ in range(repeats):
                done = _python(_TIMED.format(body=body), env)
                if done.returncode != 0:
                    print(f"| {name} | - | - | failed: {done.stderr.strip()[-120:]} |")
                    break
                runs.append(float(done.stdout.split()[-1]))
        if runs:
            medians[name] = statistics.median(runs)
            _row(name, runs)
    return medians.get("launch path's own modules", 0) + medians.get("cuda.bindings.driver", 0)


def measure_phases(repeats: int, env: dict, ptx: Path) -> None:
    runs: dict[str, list[float]] = {}
    for _ in range(repeats):
        done = _python(PHASES.format(ptx=str(ptx)), env)
        if done.returncode != 0:
            print(f"| driver phases | - | - | failed: {done.stderr.strip()[-160:]} |")
            return
        for item in done.stdout.strip().splitlines()[-1].split(";"):
            name, value = item.split("=")
            runs.setdefault(name, []).append(float(value))
    for name, values in runs.items():
        _row(f"phase: {name}", values)


def measure_overlap(repeats: int, env: dict, ptx: Path) -> None:
    """The marks of a `--no-service` launch, as seconds after its spawn, and its wall time."""
    runs: dict[str, list[float]] = {}
    argv = [sys.executable, "-c", MARKED, "launch", str(ptx), *ARGS, "--no-service"]
    for _ in range(repeats):
        marks = Path(env["XDG_RUNTIME_DIR"]).parent / "marks.txt"
        marks.unlink(missing_ok=True)
        spawned = time.time()
        seconds, _ = _wall(argv, {**env, "KG_MARKS": str(marks)})
        for line in marks.read_text().splitlines() if marks.exists() else []:
            name, stamp = line.split("=")
            runs.setdefault(f"spawn to {name}", []).append(float(stamp) - spawned)
        runs.setdefault("spawn to exit (wall, marked)", []).append(seconds)
    for name, values in runs.items():
        _row(name, values)


def measure_exit(repeats: int, env: dict) -> None:
    """From a launch's end to the process's: release the context first, or exit holding it."""
    for release, name in ((True, "release the context, then exit"), (False, "exit holding it")):
        runs = []
        for _ in range(repeats):
            done = _python(EXIT.format(release=release), env)
            ended = time.time()
            if done.returncode != 0:
                print(f"| {name} | - | - | failed: {done.stderr.strip()[-120:]} |")
                return
            runs.append(ended - float(done.stdout))
        _row(f"end: {name}", runs, "to the parent's wait returning")


def measure_launches(repeats: int, env: dict, ptx: Path, cpp: str | None) -> None:
    base = [sys.executable, "-m", "runner", "launch", str(ptx), *ARGS]
    commands = {
        "`runner launch --no-service` (wall)": ([*base, "--no-service"], env),
        "`--no-service`, no early driver start (wall; the before)": (
            [*base, "--no-service"], {**env, **SWITCH_OFF}
        ),
        "`runner launch` via the service (wall, warm)": (base, env),
    }  # fmt: skip
    if cpp:
        commands["C++ runner (wall)"] = ([cpp, str(ptx), *ARGS], env)
    _wall(base, env)  # starts the service (ignored when there is no GPU)
    for name, (argv, argv_env) in commands.items():
        runs, last = [], None
        for _ in range(repeats):
            seconds, last = _wall(argv, argv_env)
            runs.append(seconds)
        outcome = last.stdout.strip() or last.stderr.strip().splitlines()[0][:60]
        _row(name, runs, f"rc {last.returncode}: {outcome}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--cpp", help="the C++ runner to time beside runner launch")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        runtime = Path(folder) / "run"
        runtime.mkdir(mode=0o700)
        env = _env(str(runtime))
        ptx = Path(folder) / "add1.ptx"
        ptx.write_text(PTX)
        print("| step (fresh process) | median (ms) | max (ms) | note |")
        print("| --- | ---: | ---: | --- |")
        imports_s = measure_imports(args.repeats, env)
        gpu = _python("from runner.gpu import driver; driver.init()", env).returncode == 0
        if gpu:
            measure_phases(args.repeats, env, ptx)
            measure_exit(args.repeats, env)
        measure_overlap(args.repeats, env, ptx)
        measure_launches(args.repeats, env, ptx, args.cpp)
        verdict = "met" if imports_s <= IMPORT_TARGET_S else "MISSED"
        print(f"\nlaunch path's imports (its modules + cuda.bindings): {imports_s * 1e3:.0f} ms "
              f"(target <= {IMPORT_TARGET_S * 1e3:.0f} ms: {verdict})"
              + ("" if gpu else "; no GPU here: driver phases not measured"))  # fmt: skip
        stop_services(runtime)


def stop_services(runtime: Path) -> None:
    """End the launch service this script's runtime folder started (it would idle out anyway)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"--socket" in argv and any(str(runtime).encode() in a for a in argv):
            os.kill(int(entry.name), 15)


if __name__ == "__main__":
    main()
