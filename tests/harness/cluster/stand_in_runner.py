"""The one fake of the cluster tests: a stand-in for `python -m runner` on CPU-only workers.

A CPU cannot time a kernel, so the tests ship this file as `runner/__main__.py` of a tree of
their own (tests/harness/cluster/conftest.py). `info` prints an environment block for the GPU
the worker's environment names (STAND_IN_GPU, CUDA_VISIBLE_DEVICES); `bench SUITE --case ID`
prints a recorded H200 result document (tests/fixtures) as a run of that one case of SUITE; a
case with `points` is swept (point ids `n=256`), `--case 'ID[n=256]'` runs that point alone and
the sweep is assembled as the runner does it (protocol.points). With a budget under a millisecond
every selected case is recorded as not run (what the harness asks for the cases' skeletons).
A JSON file named by STAND_IN_CONTROL can make a case sleep, or kill its worker (the
grandparent: worker -> shipped-tree unpacker -> this) the first time or every time it runs.
The standard library and protocol only (the leaf the runner shares): it runs in the shipped
tree, with whatever the worker has.
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

from protocol.points import sweep_block

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


def not_run(table: dict, dims: dict | None = None, phase: str = "timeout",
            message: str = "not run: budget spent") -> dict:  # fmt: skip
    """A case (at `dims`) past the budget before it started (or a headline not selected, at
    setup), as the runner records one."""
    dims = dims or table["dims"]
    return {
        "id": table["id"],
        "version": table["version"],
        "description": table["description"],
        "status": "skipped",
        "error": {"phase": phase, "message": f"case {table['id']}: {message}"},
        "baseline": "cuda",
        "dims": dims,
        "check_dims": dims,
        "launch": {"grid": [4, 1, 1], "block": [256, 1, 1], "shared_bytes": 0},
        "implementations": {
            i["name"]: {k: i[k] for k in ("role", "toolchain", "source", "entry")}
            for i in table["impl"]
        },
    }


def points(table: dict) -> list[tuple[str, dict]]:
    """A swept case's (point id, dims) in declared order."""
    return [
        (",".join(f"{k}={v}" for k, v in point.items()), {**table["dims"], **point})
        for point in table.get("points", [])
    ]


def measured(table: dict, dims: dict, index: int) -> dict:
    """The fixture's case as `table` at `dims`; its candidates' gaps grow with `index` (a curve)."""
    document = json.loads(FIXTURE.read_text())
    case = next((c for c in document["cases"] if c["id"] == table["id"]), document["cases"][0])
    case.update(id=table["id"], dims=dims)
    for impl in case["implementations"].values():
        if impl.get("gap"):
            impl["gap"]["ratio_of_medians"] *= 1.0 + 0.25 * index
    return case


def swept(table: dict, selected: set[str] | None, past_budget: bool) -> dict:
    """A swept case at its `selected` points (None: all), assembled as runner bench does."""
    listed = points(table)
    headline = next(pid for pid, dims in listed if dims == table["dims"])
    docs = {}
    for index, (pid, dims) in enumerate(listed):
        if selected is not None and pid not in selected:
            continue
        docs[pid] = not_run(table, dims) if past_budget else measured(table, dims, index)
    if headline not in docs:
        why = f"not run: the headline point {headline} was not selected"
        docs[headline] = not_run(table, table["dims"], "setup", why)
    return sweep_block(
        headline,
        docs[headline],
        list(table["points"][0]),
        [(pid, dims, docs[pid]) for pid, dims in listed if pid in docs],
    )


def selection(argv: list[str], tables: list[dict]) -> dict[str, set[str] | None]:
    """{case id: its selected points, None for all} from `--case ID` and `--case 'ID[point]'`."""
    chosen: dict[str, set[str] | None] = {}
    for index, arg in enumerate(argv[:-1]):
        if arg == "--case":
            case_id, _, point = argv[index + 1].partition("[")
            if point:
                chosen.setdefault(case_id, set()).add(point.removesuffix("]"))
            else:
                chosen[case_id] = None
    return chosen if chosen else {t["id"]: None for t in tables}


def bench(argv: list[str]) -> int:
    suite_path = Path(argv[0])
    raw = suite_path.read_bytes()
    manifest = tomllib.loads(raw.decode())
    suite = manifest["suite"]
    budget_s = float(argv[argv.index("--budget-s") + 1]) if "--budget-s" in argv else None
    chosen = selection(argv, manifest["case"])
    tables = [t for t in manifest["case"] if t["id"] in chosen]
    if budget_s is not None and budget_s < 0.001:  # the harness asks for the cases' skeletons
        document = json.loads(FIXTURE.read_text())
        document["schema_version"] = "1.10.0"
        document["cases"] = [
            swept(t, chosen[t["id"]], True) if "points" in t else not_run(t) for t in tables
        ]
        sys.stdout.write(json.dumps(document))
        return 1
    (table,) = tables
    case_id = table["id"]
    control = _control()
    _kill_worker(argv[argv.index("--case") + 1], control)  # by its selector: 'ID', 'ID[point]'
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
    if "points" in table:
        case = swept(table, chosen[case_id], False)
    else:
        case = measured(table, table["dims"], 0)
    case["notes"] = [f"stand-in argv: {' '.join(argv)}"]  # what the harness asked of it
    case["device"] = {"index": 0, "uuid": document["environment"]["device"]["uuid"], "name": None}
    selector = argv[argv.index("--case") + 1]
    sleep_s = control.get("sleep_s", {}).get(selector, control.get("sleep_s", {}).get(case_id, 0.0))
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
        "skipped": int(case["status"] == "skipped"),
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
