"""The one fake of the cluster tests: a stand-in for `python -m runner` on CPU-only workers.

A CPU cannot time a kernel, so the tests ship this file as `runner/__main__.py` of a tree of
their own (tests/harness/cluster/conftest.py). `info` prints an environment block for the GPU
the worker's environment names (STAND_IN_GPU, CUDA_VISIBLE_DEVICES); `bench SUITE --case ID`
prints a recorded H200 result document (tests/fixtures) as a run of that one case of SUITE.
A JSON file named by STAND_IN_CONTROL can make a case sleep, or kill its worker (the
grandparent: worker -> shipped-tree unpacker -> this) the first time or every time it runs.
Standard library only: it runs in the shipped tree, with whatever the worker has.
"""

import hashlib
import json
import os
import signal
import socket
import sys
import time
import tomllib
from pathlib import Path

FIXTURE = Path(__file__).with_name("fixture.json")


def environment() -> dict:
    document = json.loads(FIXTURE.read_text())
    env = document["environment"]
    ordinal = os.environ.get("CUDA_VISIBLE_DEVICES", "0")
    env["device"]["name"] = os.environ.get("STAND_IN_GPU", "NVIDIA H100 80GB HBM3")
    env["device"]["uuid"] = f"GPU-stand-in-{socket.gethostname()}-{ordinal}"
    env["software"]["hostname"] = socket.gethostname()
    return env


def _control() -> dict:
    path = os.environ.get("STAND_IN_CONTROL")
    return json.loads(Path(path).read_text()) if path and Path(path).exists() else {}


def _kill_worker(case: str, control: dict) -> None:
    """SIGKILL the worker process running this case, as a lost host would end it."""
    marks = Path(control["marks"])
    mark = marks / f"killed-{case}"
    if case in control.get("kill_first", []) and mark.exists():
        return
    if case not in control.get("kill_first", []) + control.get("kill_always", []):
        return
    mark.write_text(os.environ.get("CUDA_VISIBLE_DEVICES", ""))
    status = Path(f"/proc/{os.getppid()}/status").read_text()
    worker = int(next(line.split()[1] for line in status.splitlines() if line.startswith("PPid:")))
    os.kill(worker, signal.SIGKILL)
    time.sleep(30)
    sys.exit(3)


def not_run(table: dict) -> dict:
    """A case past the budget before it started, as the runner records one."""
    return {
        "id": table["id"],
        "version": table["version"],
        "description": table["description"],
        "status": "skipped",
        "error": {"phase": "setup", "message": f"case {table['id']}: not run: budget spent"},
        "baseline": "cuda",
        "dims": table["dims"],
        "check_dims": table["dims"],
        "launch": {"grid": [4, 1, 1], "block": [256, 1, 1], "shared_bytes": 0},
        "implementations": {
            i["name"]: {k: i[k] for k in ("role", "toolchain", "source", "entry")}
            for i in table["impl"]
        },
    }


def bench(argv: list[str]) -> int:
    suite_path = Path(argv[0])
    raw = suite_path.read_bytes()
    manifest = tomllib.loads(raw.decode())
    suite = manifest["suite"]
    if "--case" not in argv:  # the harness asks for every case's record, not run
        document = json.loads(FIXTURE.read_text())
        document["schema_version"] = "1.10.0"
        document["cases"] = [not_run(table) for table in manifest["case"]]
        sys.stdout.write(json.dumps(document))
        return 1
    case_id = argv[argv.index("--case") + 1].split("[", 1)[0]
    budget_s = float(argv[argv.index("--budget-s") + 1]) if "--budget-s" in argv else None
    control = _control()
    _kill_worker(case_id, control)
    document = json.loads(FIXTURE.read_text())
    document["schema_version"] = "1.10.0"
    document["environment"] = environment()
    document["suite"].update(
        name=suite["name"],
        version=suite["version"],
        path=str(suite_path),
        sha256=hashlib.sha256(raw).hexdigest(),
        gpu=suite.get("gpu"),
    )
    case = next((c for c in document["cases"] if c["id"] == case_id), document["cases"][0])
    case["id"] = case_id
    case["notes"] = [f"stand-in argv: {' '.join(argv)}"]  # what the harness asked of it
    case["device"] = {"index": 0, "uuid": document["environment"]["device"]["uuid"], "name": None}
    sleep_s = control.get("sleep_s", {}).get(case_id, 0.0)
    time.sleep(min(sleep_s, budget_s) if budget_s is not None else sleep_s)
    status = 0
    if budget_s is not None and sleep_s > budget_s:
        case["status"] = "failed"
        case["error"] = {"phase": "timeout", "message": f"case {case_id}: stopped by --budget-s"}
        status = 1
    document["cases"] = [case]
    document["summary"] = {
        "cases": 1,
        "ok": int(case["status"] == "ok"),
        "failed": int(case["status"] == "failed"),
        "skipped": 0,
        "unstable": 0,
        "geomean_gap": {},
    }
    sys.stdout.write(json.dumps(document))
    return status


def main() -> int:
    command, argv = sys.argv[1], sys.argv[2:]
    if command == "info":
        sys.stdout.write(json.dumps(environment()))
        return 0
    if command == "bench":
        return bench(argv)
    print(f"error: the stand-in runner has no command {command!r}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
