"""`harness run --cluster`: whole cases (or a sweep's points) dealt to a Dask cluster's GPUs.

The harness connects to a scheduler (`tcp://host:8786`) or starts a local cluster of one worker
per GPU of this host (`local`, `local:0,1`). A worker owns one GPU: it declares the worker
resource `GPU=1` and sees that one card (CUDA_VISIBLE_DEVICES). Before anything runs, every
worker's kernelgap version is checked (an older or newer one is refused, both named) and its GPU
is probed with the shipped runner (`runner info`); the scheduler, the workers, their GPUs and
models are listed. Then one task per case: the task unpacks the shipped tree on its worker
(harness.running.shipping, the containment rules of an SSH target) and runs `runner bench` for
that case alone, so a case's implementations (and a base and a head) always share one GPU. With
`--deal point` (or `auto`, the default, when a selected case is swept and the cases are fewer
than the GPU workers, so that whole cases would leave GPUs idle) a swept case is one task per
point instead (`--case 'case[point]'`), its points read from the runner's skeleton of the suite;
a point's implementations still share one GPU. A worker lost mid-case gets its case (or point)
run once more on another worker of the same model, else it is recorded as failed with the
reason. `--budget-s` is a deadline the tasks themselves read: a case starting after it is
skipped, one started before it gets what is left. The case documents go to
harness.running.model_documents as they arrive.

dask and distributed are the `cluster` extra: imported only here, only when --cluster is given.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import CancelledError
from dataclasses import dataclass, field
from pathlib import Path

import click

from harness.errors import ClusterError, SuiteTomlError
from harness.history.series import gpu_model
from harness.running import manifest_check, model_documents, result_files, shipping
from protocol.codec import encode
from protocol.points import as_rows, point_case_id, split_id

__all__ = [
    "GPU_RESOURCE",
    "GpuWorker",
    "Plan",
    "connect",
    "deal",
    "gpu_workers",
    "plan_cases",
    "plan_points",
    "run",
]

GPU_RESOURCE = "GPU"  # the worker resource that says a worker owns one GPU
TOPIC = "kernelgap"  # the event topic on which tasks say where each case started
PROBE_TIMEOUT_S = 300.0
CONNECT_TIMEOUT_S = 30.0
PIECE_BYTES = 16 * 2**20  # the shipped tree goes to the workers in pieces of this size
POLL_S = 0.2  # how often the dealing looks for finished tasks
MAX_RESENT = 3  # a task cancelled for want of the shipped tree is submitted again this often
STRANDED_S = 120.0  # with no GPU worker left this long, the cases still waiting are failed
# runner options the harness owns with --cluster (it deals the cases and keeps the documents)
HARNESS_OWNED = ("--gpus", "--device", "--output", "-o", "--emit-partial")
DEALS = ("auto", "case", "point")  # --deal: the unit of a task (auto: docs/scale-out.md)
SWEEP_TABLE_KEYS = ("axes", "points", "options")  # a manifest case table with these is swept


@dataclass(frozen=True)
class GpuWorker:
    """A worker that owns one GPU, as probed: its address and name, host, the GPU's ordinal on
    that host (CUDA_VISIBLE_DEVICES), the runner's device block and the worker's versions."""

    address: str
    name: str
    host: str
    ordinal: str
    environment: dict  # the runner's `info` on that worker: device, software, peaks, sensors
    kernelgap: str
    python: str

    @property
    def device(self) -> dict:
        return self.environment["device"]

    @property
    def model(self) -> str:
        return gpu_model(self.device.get("name") or "unknown")

    def describe(self) -> str:
        driver = self.device.get("driver_version_string") or self.device.get("driver_version")
        return (
            f"{self.name} ({self.address}) on {self.host}, GPU {self.ordinal}: "
            f"{self.device.get('name')} {self.device.get('uuid')}, driver {driver}"
        )

    def record(self) -> dict:
        """The worker as the document's environment records it."""
        return {
            "name": self.name,
            "address": self.address,
            "host": self.host,
            "ordinal": self.ordinal,
            "gpu": self.device.get("name"),
            "uuid": self.device.get("uuid"),
            "driver_version": self.device.get("driver_version"),
            "kernelgap": self.kernelgap,
            "python": self.python,
        }


@dataclass
class Plan:
    """What to deal: case ids (or `case[point]` ids, plan_points) in the order to submit
    (longest expected first), the runner's `--case` selectors per task, its other arguments,
    and the run's budget."""

    cases: list[str]
    selectors: dict[str, list[str]]
    runner_args: list[str]
    budget_s: float | None
    expected_s: dict[str, float] = field(default_factory=dict)


def _option_values(args: list[str], name: str) -> tuple[list[str], list[str]]:
    """(values of `name` in args, args without it), for `--name V` and `--name=V`."""
    values, rest, skip = [], [], False
    for index, arg in enumerate(args):
        if skip:
            skip = False
        elif arg == name:
            if index + 1 >= len(args):
                raise ClusterError(f"runner option {name} needs a value")
            values.append(args[index + 1])
            skip = True
        elif arg.startswith(name + "="):
            values.append(arg.split("=", 1)[1])
        else:
            rest.append(arg)
    return values, rest


def plan_cases(case_ids: list[str], runner_args: list[str]) -> Plan:
    """The tasks of a run: every case of the suite (`case_ids`, in suite order), or those the
    runner's `--case` selectors name (an id, 'id[point]' or a glob); `--budget-s` becomes the
    harness's; `--previous RESULT.json` (an earlier run) orders the cases longest first."""
    for name in HARNESS_OWNED:
        if any(a == name or a.startswith(name + "=") for a in runner_args):
            raise ClusterError(
                f"runner option {name}: with --cluster the harness deals the cases over the "
                "workers' GPUs and keeps the documents; drop it"
            )
    selectors, rest = _option_values(runner_args, "--case")
    budgets, rest = _option_values(rest, "--budget-s")
    previous_paths, rest = _option_values(rest, "--previous")
    previous = _previous(previous_paths[-1]) if previous_paths else None
    try:
        budget_s = float(budgets[-1]) if budgets else None
    except ValueError:
        raise ClusterError(f"--budget-s {budgets[-1]!r}: expected seconds") from None
    chosen: dict[str, list[str]] = {}
    for selector in selectors:
        pattern = selector.split("[", 1)[0] if "[" in selector else selector
        matched = [c for c in case_ids if fnmatch.fnmatchcase(c, pattern)]
        if not matched:
            raise ClusterError(
                f"--case {selector!r}: no case of the suite matches (its cases: "
                f"{', '.join(case_ids)})"
            )
        for case in matched:
            chosen.setdefault(case, []).append(selector)
    cases = [c for c in case_ids if c in chosen] if selectors else list(case_ids)
    expected_s = {
        c["id"]: float(c["worker_wall_s"])
        for c in _rows(previous)
        if isinstance(c, dict) and isinstance(c.get("worker_wall_s"), int | float)
    }
    selectors = {c: chosen.get(c, [c]) for c in cases}
    return Plan(_longest_first(cases, expected_s), selectors, rest, budget_s, expected_s)


def _longest_first(units: list[str], expected_s: dict[str, float]) -> list[str]:
    """Those with an earlier time longest first, then the others in the order given."""
    known = sorted((u for u in units if u in expected_s), key=lambda u: -expected_s[u])
    return known + [u for u in units if u not in expected_s]


def _rows(previous: dict | None) -> list:
    """An earlier run's cases, each point of a sweep a row `case[point]` of its own."""
    try:
        return as_rows(previous)["cases"] if previous else []
    except (KeyError, TypeError, AttributeError):  # not as a runner writes one: its cases alone
        return previous.get("cases", []) if isinstance(previous.get("cases"), list) else []


def swept_tables(toml: dict) -> set[str]:
    """The ids of the manifest's swept cases (a case table with axes, points or options)."""
    return {
        c["id"]
        for c in toml.get("case", [])
        if isinstance(c, dict) and any(key in c for key in SWEEP_TABLE_KEYS)
    }


def deals_points(deal: str, plan: Plan, swept: set[str], workers: int) -> bool:
    """Whether swept cases go one task per point: asked for, or (auto) a selected case is swept
    and the cases are fewer than the GPU workers (whole cases would leave some idle)."""
    if deal not in DEALS:
        raise ClusterError(f"--deal {deal!r}: expected one of {', '.join(DEALS)}")
    if deal != "auto":
        return deal == "point"
    return any(c in swept for c in plan.cases) and len(plan.cases) < workers


def _dealt_points(skeleton: dict) -> list[str]:
    """The points of a swept case's skeleton that the run selected, in declared order: every
    point it lists but a headline the runner records as not selected (skipped at setup; one
    selected is skipped by the skeleton's spent budget)."""
    headline_selected = (skeleton.get("error") or {}).get("phase") != "setup"
    return [
        p["point"]
        for p in skeleton.get("points") or ()
        if not p.get("headline") or headline_selected
    ]


def plan_points(plan: Plan, skeletons: dict[str, dict]) -> Plan:
    """`plan` with each swept case (one whose skeleton lists points) as one task per selected
    point, `case[point]`, run with `--case 'case[point]'`; plain cases stay whole. An earlier
    run's times (its point rows; the case's for the headline) order them longest first."""
    units, selectors, expected_s = [], {}, dict(plan.expected_s)
    for case in plan.cases:
        points = _dealt_points(skeletons[case]) if case in skeletons else []
        if not points:
            units.append(case)
            selectors[case] = plan.selectors[case]
            continue
        for point in points:
            unit = point_case_id(case, point)
            units.append(unit)
            selectors[unit] = [unit]
            if point == skeletons[case].get("point") and case in plan.expected_s:
                expected_s[unit] = plan.expected_s[case]
    return Plan(
        _longest_first(units, expected_s), selectors, plan.runner_args, plan.budget_s, expected_s
    )


def _previous(path: str) -> dict:
    from protocol.codec import decode

    try:
        return decode(open(path, "rb").read(), path)
    except (OSError, ValueError) as exc:
        raise ClusterError(
            f"--previous {path}: not a result document to deal cases by ({exc})"
        ) from None


# ---------------------------------------------------------------- the cluster and its workers


def visible_gpus() -> list[str]:
    """This host's GPU ordinals, from nvidia-smi (the harness never touches CUDA)."""
    try:
        done = subprocess.run(
            ["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise ClusterError(
            f"--cluster local: cannot count this host's GPUs with nvidia-smi ({exc}); name "
            "them: --cluster local:0,1"
        ) from None
    gpus = [line.strip() for line in done.stdout.splitlines() if line.strip().isdigit()]
    if done.returncode != 0 or not gpus:
        raise ClusterError(
            f"--cluster local: nvidia-smi found no GPU (exit {done.returncode}: "
            f"{done.stderr.strip()[-300:]}); name them: --cluster local:0,1"
        )
    return gpus


def local_gpus(text: str) -> list[str]:
    """The ordinals of `local` (all of nvidia-smi's) or `local:0,1`."""
    if text == "local":
        return visible_gpus()
    gpus = [g.strip() for g in text.removeprefix("local:").split(",") if g.strip()]
    if not gpus or not all(g.isdigit() for g in gpus) or len(set(gpus)) != len(gpus):
        raise ClusterError(
            f"--cluster {text!r}: expected local, local:0,1 (distinct GPU ordinals) or a "
            "scheduler's address, tcp://host:8786"
        )
    return gpus


def _local_cluster(gpus: list[str]):
    """A scheduler on 127.0.0.1 and one worker process per GPU, each seeing only its card;
    a worker lost mid-case is never re-run by the scheduler (allowed-failures 0): the harness
    re-runs it once, on a worker of the same model."""
    import dask
    from distributed import Nanny, Scheduler, SpecCluster

    workers = {
        f"gpu{g}": {
            "cls": Nanny,
            "options": {
                "nthreads": 1,
                "resources": {GPU_RESOURCE: 1},
                "env": {"CUDA_VISIBLE_DEVICES": g},
                "silence_logs": 40,  # logging.ERROR: INFO lines would drown the run's progress
                "host": "127.0.0.1",
            },
        }
        for g in gpus
    }
    scheduler = {"cls": Scheduler, "options": {"host": "127.0.0.1", "dashboard_address": ":0"}}
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        return SpecCluster(workers=workers, scheduler=scheduler, silence_logs=40)


@contextlib.contextmanager
def connect(address: str, say, timeout_s: float = CONNECT_TIMEOUT_S):
    """A client of the scheduler at `address` (given `timeout_s` to answer), or of a local
    cluster it starts (`local`, `local:0,1`); both closed on leaving."""
    try:
        from distributed import Client
    except ImportError:
        raise ClusterError(
            "--cluster needs dask and distributed: pip install 'kernelgap[cluster]'"
        ) from None
    with contextlib.ExitStack() as stack:
        if address == "local" or address.startswith("local:"):
            gpus = local_gpus(address)
            say(f"harness: starting a local cluster, one worker per GPU: {', '.join(gpus)}")
            cluster = stack.enter_context(_local_cluster(gpus))
            target = cluster
        else:
            target = address
        try:
            client = stack.enter_context(Client(target, timeout=timeout_s))
        except OSError as exc:
            raise ClusterError(f"--cluster {address}: cannot reach the scheduler: {exc}") from None
        yield client


def _worker_facts() -> dict:
    """Runs on each worker: its kernelgap, Python, host and GPU ordinal."""
    from protocol.version import package_version

    return {
        "kernelgap": package_version(),
        "python": sys.executable,
        "host": socket.gethostname(),
        "ordinal": os.environ.get("CUDA_VISIBLE_DEVICES", ""),
    }


def _refusal(client, address: str, fact, ours: str) -> str | None:
    """Why the worker at `address` is refused (None: it runs this harness's kernelgap). A
    worker whose kernelgap cannot run _worker_facts is asked with the standard library alone."""
    from importlib import metadata

    from protocol.version import version_tuple

    if isinstance(fact, dict):
        theirs = fact["kernelgap"]
        if theirs == ours:
            return None
    else:  # unpickling failed there: no harness.running.cluster, or no kernelgap at all
        got = client.run(metadata.version, "kernelgap", workers=[address], on_error="return")
        theirs = got.get(address) if isinstance(got.get(address), str) else "none"
        if theirs == ours:
            return f"{address} has kernelgap {ours} but cannot run its worker side ({fact!r})"
    try:
        older = version_tuple(theirs) < version_tuple(ours)
    except ValueError:
        older = True
    return f"{address} runs kernelgap {theirs}, {'older' if older else 'newer'} than this harness's {ours}"


def _refuse_versions(client, facts: dict, ours: str) -> None:
    """ClusterError naming every worker whose kernelgap is not this harness's."""
    wrong = [w for a, fact in facts.items() if (w := _refusal(client, a, fact, ours))]
    if wrong:
        raise ClusterError(
            "workers refused: "
            + "; ".join(wrong)
            + f"; install kernelgap {ours} there (pip install 'kernelgap[cluster]=={ours}') "
            "and restart them"
        )


def _scatter_tree(client, shipment: shipping.Shipment) -> list:
    """The shipped tree's tar stream (shipping.Shipment.chunks) scattered to every worker in
    pieces of at most PIECE_BYTES, one piece at a time, so this process never holds the tree
    whole. The futures of the pieces, in order: what _probe_task and _case_task take as
    `tree`."""
    futures, piece, size = [], [], 0

    def send() -> None:
        futures.append(client.scatter(b"".join(piece), broadcast=True, hash=False))
        piece.clear()

    for chunk in shipment.chunks():
        piece.append(chunk)
        size += len(chunk)
        if size >= PIECE_BYTES:
            send()
            size = 0
    if piece:
        send()
    return futures


def _tree_lost(tree: list) -> bool:
    """Whether a worker lost since took a piece of the scattered tree with it (the scheduler
    keeps one copy of a piece only)."""
    return any(piece.status != "finished" for piece in tree)


def _scatter_again(client, shipment: shipping.Shipment, say) -> list:
    say("harness: the shipped tree was lost with its worker; sending it again")
    return _scatter_tree(client, shipment)


@contextlib.contextmanager
def _spooled(tree: list[bytes]):
    """On a worker: the tree's pieces in one temporary file, at its start, for a command's
    stdin (the pieces stay where Dask keeps them; no second copy in memory)."""
    import tempfile

    with tempfile.TemporaryFile(prefix="kernelgap-tree-") as spool:
        for piece in tree:
            spool.write(piece)
        spool.seek(0)
        yield spool


def _probe_task(tree: list[bytes], timeout_s: float) -> dict:
    """Runs on a GPU worker: the shipped runner's `info` for the worker's one GPU."""
    with _spooled(tree) as stdin:
        done = subprocess.run(
            shipping.in_shipped_tree(
                sys.executable, [sys.executable, "-m", "runner", "info", "--no-bandwidth"]
            ),
            stdin=stdin,
            capture_output=True,
            timeout=timeout_s,
        )
    return {
        "returncode": done.returncode,
        "stdout": done.stdout,
        "stderr": done.stderr.decode(errors="replace")[-2000:],
    }


def _probe_result(address: str, future) -> dict:
    try:
        return future.result()
    except Exception as exc:  # the worker died, or the task could not run there
        raise ClusterError(
            f"worker {address}: its GPU probe failed: {type(exc).__name__}: {exc}"
        ) from None


def _probed(address: str, info: dict, fact: dict, outcome: dict) -> GpuWorker:
    """The worker from its `runner info`, or ClusterError with the runner's own refusal."""
    from protocol.codec import decode

    name = str(info.get("name") or address)
    if outcome["returncode"] != 0:
        lines = [line for line in outcome["stderr"].splitlines() if line.strip()]
        why = lines[-1].removeprefix("error: ") if lines else f"exit {outcome['returncode']}"
        raise ClusterError(
            f"worker {name} ({address}) on {fact['host']}, GPU {fact['ordinal'] or '?'}: the "
            f"runner cannot use its GPU: {why}"
        )
    env = decode(outcome["stdout"], f"runner info on worker {name}")
    return GpuWorker(
        address,
        name,
        fact["host"],
        fact["ordinal"],
        env,
        fact["kernelgap"],
        fact["python"],
    )


def _workers_info(client) -> dict:
    """{address: the scheduler's record} of every worker (distributed 2025.4 to 2026.6 list five
    unless asked for all; older ones have no n_workers and list all)."""
    try:
        return client.scheduler_info(n_workers=-1)["workers"]
    except TypeError:
        return client.scheduler_info()["workers"]


def gpu_workers(client, shipment: shipping.Shipment, ours: str, say) -> tuple[list[GpuWorker], list]:  # fmt: skip
    """Every worker with a GPU resource, version-checked and probed; listed on stderr before
    anything runs; and the shipped tree, scattered (_scatter_tree). ClusterError when there is
    none, a worker is refused, or two share a GPU."""
    from distributed import wait

    info = _workers_info(client)
    gpu = {a: w for a, w in info.items() if (w.get("resources") or {}).get(GPU_RESOURCE, 0) >= 1}
    say(
        f"harness: scheduler {client.scheduler.address}: {len(info)} worker(s), {len(gpu)} with a GPU"
    )
    if not gpu:
        raise ClusterError(
            f"the scheduler at {client.scheduler.address} has no worker with the resource "
            f"{GPU_RESOURCE}=1; start one per GPU: CUDA_VISIBLE_DEVICES=N dask worker "
            f"{client.scheduler.address} --nthreads 1 --resources {GPU_RESOURCE}=1"
        )
    facts = client.run(_worker_facts, workers=list(gpu), on_error="return")
    _refuse_versions(client, facts, ours)
    tree = _scatter_tree(client, shipment)
    futures = {
        a: client.submit(
            _probe_task,
            tree,
            PROBE_TIMEOUT_S,
            workers=[a],
            allow_other_workers=False,
            resources={GPU_RESOURCE: 1},
            pure=False,
            key=f"kernelgap-probe-{a}",
        )
        for a in gpu
    }
    try:
        wait(list(futures.values()), timeout=PROBE_TIMEOUT_S + 60)
    except TimeoutError:
        late = ", ".join(a for a, f in futures.items() if not f.done())
        raise ClusterError(
            f"workers {late} did not run the GPU probe in {PROBE_TIMEOUT_S + 60:.0f} s (busy "
            "with another client's tasks?)"
        ) from None
    workers = [_probed(a, gpu[a], facts[a], _probe_result(a, futures[a])) for a in sorted(gpu)]
    by_uuid: dict[str, GpuWorker] = {}
    for worker in workers:
        say(f"harness:   {worker.describe()}")
        other = by_uuid.setdefault(str(worker.device.get("uuid")), worker)
        if other is not worker:
            raise ClusterError(
                f"workers {other.name} and {worker.name} share the GPU {worker.device.get('uuid')}; "
                "pin each worker to its own card with CUDA_VISIBLE_DEVICES"
            )
    models = sorted({w.model for w in workers})
    say(f"harness: GPU models: {', '.join(models)} (one document per model)")
    return workers, tree


# ------------------------------------------------------------------------------ the dealing


def _case_task(tree: list[bytes], case_id: str, argv: list[str], deadline: float | None, timeout_s):
    """Runs on a GPU worker: `runner bench` for one case in a fresh copy of the shipped tree.
    Skipped when the run's deadline (wall clock) has passed; else given what is left of it."""
    from distributed import get_worker

    worker = get_worker()
    host = socket.gethostname()
    worker.log_event(TOPIC, {"case": case_id, "worker": worker.address, "name": worker.name})
    base = {"worker": worker.address, "name": str(worker.name), "host": host}
    if deadline is not None and time.time() >= deadline:
        return {**base, "skipped": True}
    left = [] if deadline is None else ["--budget-s", f"{max(deadline - time.time(), 0.001):.3f}"]
    python = sys.executable  # the worker's: kernelgap's runner dependencies are installed there
    command = [python, "-m", "runner", "bench", *argv, "--device", "0", *left]
    started = time.monotonic()
    try:
        with _spooled(tree) as stdin:
            done = subprocess.run(
                shipping.in_shipped_tree(python, command),
                stdin=stdin,
                capture_output=True,
                timeout=timeout_s,
            )
    except subprocess.TimeoutExpired as exc:
        tail = (exc.stderr or b"").decode(errors="replace")[-4000:]
        return {**base, "returncode": None, "stdout": b"", "stderr": tail, "timed_out": True}
    return {
        **base,
        "returncode": done.returncode,
        "stdout": done.stdout,
        "stderr": done.stderr.decode(errors="replace")[-4000:],
        "wall_s": time.monotonic() - started,
    }


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


class Progress:
    """Cases done, running and queued, and the time left (the time so far over the cases done,
    times the cases to go), on stderr as each case starts or ends."""

    def __init__(self, total: int, say):
        self.total, self.say = total, say
        self.done = 0
        self.running: dict[str, str] = {}  # case id -> worker name
        self.t0 = time.monotonic()
        self.lock = threading.Lock()

    def line(self, what: str) -> None:
        with self.lock:
            queued = self.total - self.done - len(self.running)
            elapsed = time.monotonic() - self.t0
            left = ""
            if self.done:  # the rate so far, over every worker, for the cases to go
                left = f", about {_duration(elapsed / self.done * (self.total - self.done))} left"
            self.say(
                f"harness: [{self.done}/{self.total} done, {len(self.running)} running, "
                f"{max(queued, 0)} queued, {_duration(elapsed)}{left}] {what}"
            )

    def started(self, event) -> None:
        _, message = event
        with self.lock:
            self.running[message["case"]] = message["name"]
        self.line(f"{message['case']} started on {message['name']}")

    def ended(self, case: str, what: str) -> None:
        with self.lock:
            self.running.pop(case, None)
            self.done += 1
        self.line(f"{case} {what}")


@dataclass
class _Attempt:
    case: str
    number: int
    lost_on: list[str] = field(default_factory=list)  # names of the workers it was lost on
    only: list[str] | None = None  # the addresses it may run on (a re-run: its model's others)
    resent: int = 0  # times submitted again because the shipped tree was lost with a worker
    tree: int = 0  # the generation of the shipped tree its task took (_Dealing.generation)


def _lost_where(exc, workers: dict[str, GpuWorker], progress: Progress, case: str) -> GpuWorker:
    """The worker a KilledWorker names (its last worker), else the one the case started on."""
    last = getattr(exc, "last_worker", None)
    address = getattr(last, "address", None)
    if address in workers:
        return workers[address]
    name = progress.running.get(case)
    return next((w for w in workers.values() if w.name == name), None)


def deal(client, workers: list[GpuWorker], shipment: shipping.Shipment, tree: list, plan: Plan, settings: dict, sink, say) -> list:  # fmt: skip
    """One task per case over the GPU workers; each outcome to `sink.arrived(case, outcome,
    worker, lost_on)`, a case that could not be run to `sink.failed(case, why, worker)`.
    `tree`: the shipment's pieces as scattered (_scatter_tree); returns them as they are at the
    end (scattered again where they were lost), for what runs after."""
    from distributed import as_completed

    dealing = _Dealing(client, workers, plan, settings, sink, say)
    client.subscribe_topic(TOPIC, dealing.progress.started)
    try:
        dealing.share(shipment, tree)
        pending = as_completed([dealing.submit(case, _Attempt(case, 1)) for case in plan.cases])
        stranded_since = None
        while not pending.is_empty():
            batch = pending.next_batch(block=False)
            for future in batch:
                retry = dealing.finished(future)
                if retry is not None:
                    pending.add(retry)
            if batch:
                stranded_since = None
                continue
            stranded_since = dealing.stranded(stranded_since)
            time.sleep(POLL_S)
    finally:
        client.unsubscribe_topic(TOPIC)
    return dealing.shared


class _Dealing:
    """The tasks of one run: submitting a case, and what to do with a task that ended."""

    def __init__(self, client, workers, plan: Plan, settings: dict, sink, say):
        self.client, self.workers, self.plan = client, workers, plan
        self.settings, self.sink, self.say = settings, sink, say
        self.by_address = {w.address: w for w in workers}
        self.deadline = time.time() + plan.budget_s if plan.budget_s else None
        self.progress = Progress(len(plan.cases), say)
        self.attempts: dict[str, tuple[_Attempt, object]] = {}  # key: (attempt, future)
        self.token = f"{os.getpid()}-{time.monotonic_ns()}"
        self.shared = None
        self.generation = 0  # how often the shipped tree was scattered again

    def share(self, shipment: shipping.Shipment, tree: list | None = None) -> None:
        """The shipped tree on every worker (its pieces, `tree` where already scattered), for
        the tasks to take. The scheduler keeps one copy of a piece only (its memory manager
        drops the others), so a worker lost with it takes it: submit sends the tree again."""
        self.shipment = shipment
        self.shared = tree if tree is not None else _scatter_tree(self.client, shipment)

    def resend(self, attempt: _Attempt):
        """`attempt`'s task again after it lost its input (the shipped tree went with a worker):
        the tree scattered again once per loss (the first of the tasks it took to report it;
        the others take the new one), under a key of its own (a cancelled key submitted again
        can come back cancelled)."""
        attempt.resent += 1
        if attempt.tree == self.generation:
            self._scatter_again()
        return self.submit(attempt.case, attempt, attempt.only)

    def _scatter_again(self) -> None:
        self.shared = _scatter_again(self.client, self.shipment, self.say)
        self.generation += 1

    def submit(self, case: str, attempt: _Attempt, only: list[str] | None = None):
        attempt.only = only
        if _tree_lost(self.shared):
            self._scatter_again()
        attempt.tree = self.generation
        argv = [
            self.settings["cases"],
            *[a for s in self.plan.selectors[case] for a in ("--case", s)],
        ]
        where = {"workers": only, "allow_other_workers": False} if only else {}
        future = self.client.submit(
            _case_task,
            self.shared,
            case,
            [*argv, *self.settings["bench_args"], *self.plan.runner_args],
            self.deadline,
            self.settings["job_timeout_s"],
            key=f"kernelgap-{case}-{attempt.number}-{attempt.resent}-{self.token}",
            resources={GPU_RESOURCE: 1},
            pure=False,
            priority=int(self.plan.expected_s.get(case, 0)),
            **where,
        )
        self.attempts[future.key] = (attempt, future)
        return future

    def finished(self, future):
        """Keep what a task gave; a future for the case's re-run after a lost worker, else None."""
        from distributed.scheduler import KilledWorker

        if future.key not in self.attempts:  # cancelled by the dealing itself (stranded)
            return None
        attempt, _ = self.attempts.pop(future.key)
        case = attempt.case
        try:
            outcome = future.result()
        except CancelledError:  # the shipped tree was lost before the task started: again
            if attempt.resent < MAX_RESENT:
                return self.resend(attempt)
            why = (
                f"its task was cancelled {MAX_RESENT + 1} times (the shipped tree kept being lost)"
            )
            self.sink.failed(case, why, None)
            self.progress.ended(case, f"failed: {why}")
            return None
        except KilledWorker as exc:
            others = _after_loss(
                self.client, exc, attempt, self.by_address, self.progress, self.sink, self.say
            )
            if others is None:
                return None
            again = _Attempt(case, attempt.number + 1, attempt.lost_on, resent=attempt.resent)
            return self.submit(case, again, others)
        except Exception as exc:  # the task itself failed: the case, not the run
            # its input, the shipped tree, went with a lost worker: not the case's failure
            if _tree_lost(self.shared) and attempt.resent < MAX_RESENT:
                return self.resend(attempt)
            worker = next(
                (w for w in self.workers if w.name == self.progress.running.get(case)), None
            )
            self.sink.failed(
                case, f"its task failed on the cluster: {type(exc).__name__}: {exc}", worker
            )
            self.progress.ended(case, "failed (task error)")
            return None
        worker = self.by_address.get(outcome["worker"]) or next(
            (w for w in self.workers if w.name == outcome["name"]), None
        )
        self.progress.ended(case, self.sink.arrived(case, outcome, worker, attempt.lost_on))
        return None

    def stranded(self, since: float | None) -> float | None:
        """While no GPU worker is left, the time that began; past STRANDED_S every case still
        waiting is recorded as failed and its task cancelled (nothing would ever run it)."""
        now = time.monotonic()
        if since is not None and now - since < STRANDED_S:
            return since
        alive = {
            a
            for a, w in _workers_info(self.client).items()
            if (w.get("resources") or {}).get(GPU_RESOURCE)
        }
        if alive:
            return None
        if since is None:
            return now
        for attempt, future in list(self.attempts.values()):
            future.cancel()
            why = f"no GPU worker was left in the cluster for {STRANDED_S:.0f} s to run it"
            self.sink.failed(attempt.case, why, None)
            self.progress.ended(attempt.case, f"failed: {why}")
        self.attempts.clear()
        return None


def _after_loss(client, exc, attempt: _Attempt, by_address, progress, sink, say):
    """After a worker died mid-case: the addresses of the other live workers of its model for
    the one re-run, or None once the case is recorded as failed."""
    case = attempt.case
    lost = _lost_where(exc, by_address, progress, case)
    lost_name = lost.name if lost else "an unknown worker"
    attempt.lost_on.append(lost_name)
    alive = set(_workers_info(client))
    others = [
        w.address
        for w in by_address.values()
        if lost is not None
        and w.model == lost.model
        and w.name not in attempt.lost_on
        and w.address in alive
    ]
    if attempt.number == 1 and others:
        say(
            f"harness: worker {lost_name} was lost during {case}; running it again on another {lost.model}"
        )
        with progress.lock:
            progress.running.pop(case, None)
        return others
    if attempt.number > 1:
        why = f"its workers were lost mid-case twice ({', '.join(attempt.lost_on)})"
    elif lost is None:
        why = "its worker was lost mid-case and the cluster did not say which"
    else:
        why = f"its worker {lost_name} was lost mid-case and no other {lost.model} worker is left to run it again"
    sink.failed(case, why, lost)
    progress.ended(case, f"failed: {why}")
    return None


# ---------------------------------------------------------------------------------- the run


def bench_args(plan: shipping.Shipment, commit: str | None) -> list[str]:
    """The runner's arguments that come from the harness: the commit and the shipped bundles."""
    args = ["--commit", commit] if commit else []
    if plan.bundle:
        args += ["--bundle", plan.bundle]
    for label, folder in plan.revisions:  # X@base and X@head in one case, on one GPU
        args += ["--bundle", f"{label}={folder}"]
    return args


def skeletons(client, shipment: shipping.Shipment, tree: list, plan: Plan, settings: dict, say) -> dict[str, dict]:  # fmt: skip
    """Every selected case as the runner records one that did not run (ids, sources, launch
    geometry; a swept case's selected points), from one `runner bench --budget-s` with the
    run's arguments that starts past its budget on a GPU worker: what a case lost with its
    workers, or skipped, is recorded as, and the points a sweep is dealt as. Tried twice, the
    tree sent again where a lost worker took a piece of it (after the dealing's last loss, or
    during the first try); {} when neither gives a document."""
    from protocol.codec import decode

    selected = [a for c in plan.cases for s in plan.selectors[c] for a in ("--case", s)]
    argv = [settings["cases"], *selected, *settings["bench_args"], *plan.runner_args,
            "--budget-s", "0.000001"]  # fmt: skip
    why = None
    for _ in range(2):
        tree = _scatter_again(client, shipment, say) if _tree_lost(tree) else tree
        future = client.submit(
            _case_task, tree, "", argv, None, PROBE_TIMEOUT_S,
            resources={GPU_RESOURCE: 1}, pure=False, key=f"kernelgap-skeletons-{time.monotonic_ns()}",
        )  # fmt: skip
        try:
            outcome = future.result(timeout=PROBE_TIMEOUT_S + 60)
            return {
                c["id"]: c for c in decode(outcome["stdout"], "the runner's skeletons")["cases"]
            }
        except Exception as exc:  # the cases then fall back to what the manifest says
            why = exc
    say(f"harness: the runner's case skeletons could not be read ({why})")
    return {}


def run(address: str, cases: Path, shipment: shipping.Shipment, runner_args: list[str], settings: dict, say) -> int:  # fmt: skip
    """The whole run on the cluster: connect, check and list the workers, deal the cases, keep
    each case's document as it arrives and one merged document per model under settings["out"]
    (their paths on stdout). Returns 0 (every case ok) or 1; ClusterError for exit 2."""
    from protocol.version import package_version

    try:
        raw, toml = manifest_check.read(cases)
    except SuiteTomlError as exc:
        raise ClusterError(str(exc)) from None
    case_ids = [
        c["id"]
        for c in toml.get("case", [])
        if isinstance(c, dict) and isinstance(c.get("id"), str)
    ]
    plan = plan_cases(case_ids, runner_args)
    deal_by = settings.get("deal") or "auto"
    deals_points(deal_by, plan, set(), 0)  # a bad --deal is refused before anything starts
    options = {
        "cases": [s for c in plan.cases for s in plan.selectors[c]],
        "budget_s": plan.budget_s,
    }
    sink = model_documents.CaseDocuments(
        settings["out"],
        toml,
        model_documents.suite_block(raw, toml, shipment.cases, settings.get("commit")),
        {**options, "cluster": address},
        say,
    )
    with connect(address, say, settings.get("connect_timeout_s", CONNECT_TIMEOUT_S)) as client:
        workers, tree = gpu_workers(client, shipment, package_version(), say)
        deal_settings = {
            "cases": shipment.cases,
            "bench_args": bench_args(shipment, settings.get("commit")),
            "job_timeout_s": settings["job_timeout_s"],
        }
        skeleton_cases = None  # one runner start on a worker, a few seconds: only when needed
        if deals_points(deal_by, plan, swept_tables(toml), len(workers)):
            skeleton_cases = skeletons(client, shipment, tree, plan, deal_settings, say)
            plan = _per_point(plan, skeleton_cases, deal_by, len(workers), say)
            sink.skeletons = skeleton_cases
        else:
            say(f"harness: {len(plan.cases)} case(s) over {len(workers)} GPU worker(s)")
        sink.options["deal"] = "point" if any(split_id(u)[1] for u in plan.cases) else "case"
        tree = deal(client, workers, shipment, tree, plan, deal_settings, sink, say)
        if sink.unrun:
            if skeleton_cases is None:
                skeleton_cases = skeletons(client, shipment, tree, plan, deal_settings, say)
            sink.use_skeletons(skeleton_cases)
    say(f"harness: each case's document is kept in {sink.folder}")
    return _write(sink, workers)


def _per_point(plan: Plan, skeleton_cases: dict, deal_by: str, workers: int, say) -> Plan:
    """The plan dealt per point, said on stderr; ClusterError where --deal point cannot be."""
    if not skeleton_cases:
        if deal_by == "point":
            raise ClusterError(
                "--deal point: the runner's skeleton of the suite could not be read, so its "
                "points are unknown; run with --deal case"
            )
        say("harness: dealing whole cases instead (the points are unknown)")
        return plan
    split = plan_points(plan, skeleton_cases)
    swept = len({split_id(u)[0] for u in split.cases if split_id(u)[1] is not None})
    say(
        f"harness: dealing per point ({deal_by}): {len(split.cases)} task(s) from "
        f"{len(plan.cases)} case(s), {swept} swept, over {workers} GPU worker(s)"
    )
    return split


def _write(sink: model_documents.CaseDocuments, workers: list[GpuWorker]) -> int:
    from protocol.errors import DocumentError

    try:
        written = sink.write(workers)
    except DocumentError as exc:  # kept anyway: nothing measured is lost
        kept = result_files.keep(sink.out, "merged.invalid.json", encode(exc.document, pretty=True))
        raise ClusterError(f"{exc}; the merged document is kept in {kept.path}") from None
    problems = [problem for _, problem in written if problem] + sink.problems
    for path, _ in written:
        if path is not None:
            click.echo(str(path))
    if problems:
        raise ClusterError("; ".join(problems))
    ok = sink.ok()
    if not ok:
        sink.say("harness: some case failed or was skipped; the documents record which and why")
    return 0 if ok else 1
