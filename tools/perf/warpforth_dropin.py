"""WarpForth's own 37 GPU tests through its C++ `warpforth-runner` and kernelgap's three runner
switches: `python -m runner launch` (its command line), `python -m runner run` (a JSON request
on stdin) and `python -m runner run PTX REQUEST RESULT` (the request-file runner), each through
the launch service or `--no-service`.

    # here, where warpforthc is: WarpForth's test tree and the PTX of each of its test kernels
    python tools/perf/warpforth_dropin.py prepare --tarball warpforth-SHA.tar.gz --out .dev/warpforth
    # on the GPU box (nvcc there builds the C++ runner); --ssh: each launch over one reused SSH
    # connection to a private sshd there (tools/perf/launch_over_ssh.py)
    python3 tools/perf/warpforth_dropin.py measure --tree .dev/warpforth --out dropin.json [--ssh]

`requests` records the same tests as run requests with what each expects (no GPU; the file
tests/runner/launch/warpforth/ replays through each runner switch):

    python tools/perf/warpforth_dropin.py requests --tree .dev/warpforth \
        --out tests/fixtures/warpforth-83c30d0-requests.json

`--modes` picks runners (default cpp,service,no-service,run,files; also run-no-service,
files-no-service; `no-service-late` is `--no-service`
without the early driver start, the driver coming up when first used: a before/after on one box).
`prepare` unpacks gpu_test/ and the C++ runner's source from WarpForth's source tarball, puts a
stand-in `build/bin/warpforthc` in the tree that replays the PTX the real compiler made here
(the GPU box has no MLIR), and fills that cache by running the tests once in `record` mode.
`measure` runs the tests, unchanged, once per runner (tools/perf/warpforth_local_session.py
swaps WarpForth's Vast.ai session for this machine) and prints a table: per launch median and
p95, the first launch, the 37 tests' wall time and how many passed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
SHIM = '''#!/usr/bin/env python3
"""warpforthc stand-in: the PTX the real compiler made for this source (KG_DROPIN_PTX), or,
with KG_DROPIN_RECORD set, run the real compiler and keep its PTX there."""
import hashlib, os, subprocess, sys
from pathlib import Path
source = Path(sys.argv[1]).read_bytes()
cache = Path(os.environ["KG_DROPIN_PTX"]) / (hashlib.sha256(source).hexdigest() + ".ptx")
if os.environ.get("KG_DROPIN_RECORD"):
    done = subprocess.run([os.environ["KG_DROPIN_RECORD"], sys.argv[1]], capture_output=True, text=True)
    if done.returncode == 0:
        cache.write_text(done.stdout)
    sys.stdout.write(done.stdout); sys.stderr.write(done.stderr); sys.exit(done.returncode)
if not cache.exists():
    sys.exit(f"no recorded PTX for this source ({cache.name}): run warpforth_dropin.py prepare")
sys.stdout.write(cache.read_text())
'''
VASTAI_STUB = '''"""Stand-in for the vastai package WarpForth's conftest imports; never called here."""
class VastAI:
    def __init__(self, *args, **kwargs):
        raise RuntimeError("the local session replaces Vast.ai in this measurement")
'''


def _env(tree: Path, mode: str, log: Path) -> dict:
    paths = [str(HERE), str(tree / "stub"), str(ROOT), os.environ.get("PYTHONPATH", "")]
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in paths if p),
        "VASTAI_API_KEY": "local",
        "KG_DROPIN_MODE": mode,
        "KG_DROPIN_LOG": str(log),
        "KG_DROPIN_PTX": str(tree / "ptx"),
        "KG_DROPIN_RUNNER_SRC": str(tree / "tools" / "warpforth-runner" / "warpforth-runner.cpp"),
        "KG_DROPIN_RUNTIME": str(tree / "run"),  # the launch service's folder (stopped after)
    }


def _pytest(tree: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "warpforth_local_session", "-p", "no:cacheprovider",
         "-q", "gpu_test/test_kernels.py"],
        cwd=tree, env=env, capture_output=True, text=True, timeout=1800,
    )  # fmt: skip


def prepare(tarball: Path, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with tarfile.open(tarball) as archive:
        for member in archive.getmembers():
            parts = Path(member.name).parts[1:]
            if parts and parts[0] in ("gpu_test", "tools", "pyproject.toml") and member.isfile():
                target = out.joinpath(*parts)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(archive.extractfile(member).read())
    (out / "ptx").mkdir(exist_ok=True)
    (out / "stub" / "vastai").mkdir(parents=True, exist_ok=True)
    (out / "stub" / "vastai" / "__init__.py").write_text(VASTAI_STUB)
    shim = out / "build" / "bin" / "warpforthc"
    shim.parent.mkdir(parents=True, exist_ok=True)
    shim.write_text(SHIM)
    shim.chmod(0o755)
    real = shutil.which("warpforthc")
    if real is None:
        sys.exit("warpforthc is not on PATH: prepare needs the real compiler")
    env = {**_env(out, "record", out / "record.jsonl"), "KG_DROPIN_RECORD": real}
    _pytest(out, env)  # every test compiles its kernel, then fails on the "0" answer
    kept = len(list((out / "ptx").glob("*.ptx")))
    print(f"{out}: {kept} kernels' PTX recorded from {real}", file=sys.stderr)


def requests(tree: Path, out: Path) -> None:
    """WarpForth's tests recorded as run requests with their expectations (no GPU needed)."""
    real = shutil.which("warpforthc")
    if real is None:
        sys.exit("warpforthc is not on PATH: recording the requests needs the real compiler")
    env = {**_env(tree, "record", tree / "requests.jsonl"), "KG_DROPIN_RECORD": real,
           "KG_REQUESTS_OUT": str(out.resolve()), "KG_REQUESTS_FROM": tree.name}  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "warpforth_requests", "-p", "no:cacheprovider",
         "-q", "gpu_test/test_kernels.py"],
        cwd=tree, env=env, capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    recorded = json.loads(out.read_text())["requests"] if out.exists() else []
    print(f"{out}: {len(recorded)} requests recorded ({done.stdout.strip().splitlines()[-1:]})",
          file=sys.stderr)  # fmt: skip


def measure(tree: Path, modes: list[str], out: Path | None, ssh: list[str] | None = None) -> None:
    from launch_startup import stop_services

    rows = []
    (tree / "run").mkdir(mode=0o700, exist_ok=True)
    for mode in modes:
        log = tree / f"{mode}.jsonl"
        log.unlink(missing_ok=True)
        env = _env(tree, mode, log)
        if ssh:
            env["KG_DROPIN_SSH"] = json.dumps(ssh)
        started = time.perf_counter()
        done = _pytest(tree, env)
        wall_s = time.perf_counter() - started
        stop_services(tree / "run")
        calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
        times = [c["s"] for c in calls]
        summary = (done.stdout.strip().splitlines() or ["(no output)"])[-1]
        if done.returncode != 0:
            print(done.stdout[-3000:], done.stderr[-2000:], file=sys.stderr)
        rows.append({
            "mode": mode, "launches": len(times), "wall_s": wall_s, "pytest": summary,
            "median_ms": 1e3 * statistics.median(times) if times else None,
            "p95_ms": 1e3 * sorted(times)[max(0, int(0.95 * len(times)) - 1)] if times else None,
            "first_ms": 1e3 * times[0] if times else None, "times_s": times,
        })  # fmt: skip
    if out:
        out.write_text(json.dumps(rows, indent=1))
    print("| runner | per launch (median) | p95 | first launch | 37 tests (wall) | pytest |")
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    names = {"cpp": "C++ warpforth-runner", "service": "`runner launch` (service)",
             "no-service": "`runner launch --no-service`",
             "no-service-late": "`--no-service`, no early driver start",
             "run": "`runner run` (stdin JSON, service)",
             "run-no-service": "`runner run --no-service` (stdin JSON)",
             "files": "`runner run PTX REQUEST RESULT` (service)",
             "files-no-service": "`runner run --no-service PTX REQUEST RESULT`"}  # fmt: skip
    for r in rows:
        if r["median_ms"] is None:
            print(f"| {names[r['mode']]} | - | - | - | {r['wall_s']:.1f} s | {r['pytest']} |")
            continue
        print(
            f"| {names[r['mode']]} | {r['median_ms']:.1f} ms | {r['p95_ms']:.1f} ms | "
            f"{r['first_ms']:.1f} ms | {r['wall_s']:.1f} s | {r['pytest']} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--tarball", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    r = sub.add_parser("requests")
    r.add_argument("--tree", type=Path, required=True)
    r.add_argument("--out", type=Path, required=True)
    m = sub.add_parser("measure")
    m.add_argument("--tree", type=Path, required=True)
    m.add_argument("--modes", default="cpp,service,no-service,run,files")
    m.add_argument("--out", type=Path)
    m.add_argument("--ssh", action="store_true",
                   help="each launch over one reused SSH connection to a private sshd here")  # fmt: skip
    args = parser.parse_args()
    if args.command == "prepare":
        prepare(args.tarball.resolve(), args.out.resolve())
    elif args.command == "requests":
        requests(args.tree.resolve(), args.out)
    elif args.ssh:
        import tempfile

        from launch_over_ssh import reused_connection

        with tempfile.TemporaryDirectory() as folder, reused_connection(Path(folder)) as ssh:
            measure(args.tree.resolve(), args.modes.split(","), args.out, ssh)
    else:
        measure(args.tree.resolve(), args.modes.split(","), args.out)


if __name__ == "__main__":
    main()
