"""`runner bench`: build, gate and time every case of a suite, one worker process per case.

This process never creates a CUDA context: the environment probe and each case run in
worker processes (runner.execution.isolation), so a case that faults or hangs is killed and
recorded as a structured error while the remaining cases still run. One case from the host's
side (run_one): its timing settings, its build (or its PTX from a bundle), its job for a worker,
and what comes back folded into its document (runner.execution.result).

By section: `--case` and `--point` (`select`), which cases and points run: `--case` takes a case id, a point id (`axpy_f64[n=2^20]`: that case at that point) or a glob
over either (`axpy*`, `*[n=2^20]`); `--point` takes a point id, a bare one (`n=2^20`, at every
case that has it) or a glob. Globs know `*` and `?`; a `[` is a point id's bracket, never a
character class. A pattern that selects nothing is bad input naming the pattern.

`--gpus all|0,1,...` (the GPUs of one host): one thread per GPU deals itself the next case when its GPU is free; each case still runs in its
own worker process, pinned to that GPU with its own context (runner.execution.isolation). The
unit dealt is a whole case, so the implementations of a case (a baseline and its candidates, a
base and a head) always share one device and one context. Cases go longest expected first
(`--previous RESULT.json`: the worker wall time each case took in an earlier run of the suite),
which is the longest-processing-time rule for N identical machines; cases without a previous
time follow in suite order. A GPU whose case fails in a way that says the device itself failed
(its context could not be made, or its worker died without a result) takes no more cases: it
loses only that in-flight case, and the others go on with the rest.

A second measurement of a case whose first one could not be used, after a cool-down, with
shorter samples: a gap whose samples are noisier than statistics.UNSTABLE_NOISE is usually the GPU, not the kernel: a
long hot sample at the power cap throttles in every sample (benchmarks/perf/RESULTS.md). The
headline keeps such a case in its fixed set either way (protocol.headline); measuring it again
first gives it a chance to be shown stable. The second measurement replaces
the first when it completed (ok), whatever its gap reads, so the choice never depends on the
gap's value; the case records that it was re-measured, why, and the first one's noise."""

from __future__ import annotations

import copy
import dataclasses
import re
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from protocol import statistics
from protocol.codec import encode
from protocol.errors import DocumentError
from protocol.input_files import checkout_commit
from protocol.progress import PARTIAL_DOCUMENT_PREFIX, visible
from protocol.validation import validate
from runner import document
from runner.definition import manifest, sweep, toolchains
from runner.definition.bundle import Bundle, utc_now, variants
from runner.definition.spec import CaseSpec, Suite
from runner.document import write_atomic
from runner.errors import (
    BuildError,
    BundleError,
    ManifestError,
    NoGpuError,
    PtxError,
    SignatureError,
    ToolchainMissing,
)
from runner.execution import sweep_run
from runner.execution.isolation import keep_ahead, run_worker, stop_ahead
from runner.execution.result import (
    case_skeleton,
    finish_from_worker,
    outcome_line,
    over_budget,
    record_failure,
    record_worker_failure,
)
from runner.execution.sweep_run import Built, settings_for_point
from runner.explain import profiling
from runner.explain.static import record_static
from runner.gpu import generator, ptx
from runner.measurement import aa_control, environment
from runner.measurement.timing import clocks, cupti

__all__ = [
    "COOLDOWN_S",
    "DEVICE_LOST_PHASES",
    "SHORTER",
    "cool_down",
    "deal_order",
    "device_lost",
    "first_noise",
    "needs_remeasure",
    "parse_gpus",
    "previous_durations",
    "remeasure_options",
    "run_sharded",
    "select",
    "settle",
]


def _matches(pattern: str, name: str) -> bool:
    """`name` is `pattern` or matches it as a glob of * and ? only."""
    if pattern == name:
        return True
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, name) is not None


def _hits(pattern: str, case: CaseSpec) -> bool:
    """Whether `pattern` selects the case or one of its points."""
    return _matches(pattern, case.id) or any(
        _matches(pattern, f"{case.id}[{p}]") for p in _point_ids(case)
    )


def _point_ids(case: CaseSpec) -> list[str]:
    return [p.id for p in case.sweep.points] if case.sweep else []


def _by_case_pattern(suite: Suite, patterns: tuple[str, ...]) -> dict[str, set[str] | None]:
    """{case id: its selected point ids, None for all} from --case patterns."""
    chosen: dict[str, set[str] | None] = {}
    for pattern in patterns:
        hit = False
        for case in suite.cases:
            if _matches(pattern, case.id):
                chosen[case.id], hit = None, True
                continue
            points = {p for p in _point_ids(case) if _matches(pattern, f"{case.id}[{p}]")}
            if points:
                hit = True
                if chosen.get(case.id, set()) is not None:
                    chosen[case.id] = chosen.get(case.id, set()) | points
        if not hit:
            raise ManifestError(
                f"{suite.path}: --case: no case with id {pattern!r}, and no point or glob matches it "
                f"(cases: {', '.join(c.id for c in suite.cases)})"
            )
    return chosen


def _by_point_pattern(suite: Suite, patterns: tuple[str, ...]) -> dict[str, set[str]]:
    """{case id: its point ids that --point patterns select} (swept cases only)."""
    chosen: dict[str, set[str]] = {}
    for pattern in patterns:
        hit = False
        for case in suite.cases:
            for p in _point_ids(case):
                name = f"{case.id}[{p}]" if "[" in pattern else p
                if _matches(pattern, name):
                    chosen.setdefault(case.id, set()).add(p)
                    hit = True
        if not hit:
            swept = [f"{c.id}[{p}]" for c in suite.cases for p in _point_ids(c)][:8]
            raise ManifestError(
                f"{suite.path}: --point {pattern}: no point matches "
                f"(points look like {', '.join(swept) or 'nothing: no case has axes'})"
            )
    return chosen


def select(
    suite: Suite, case_patterns: tuple[str, ...], point_patterns: tuple[str, ...] = ()
) -> tuple[list[CaseSpec], dict[str, tuple[str, ...]]]:
    """(the cases to run, in the order of the --case patterns that name them, else the suite's;
    {case id: the points to run, in declared order}
    for each swept case run at fewer than all its points)."""
    by_case = _by_case_pattern(suite, case_patterns) if case_patterns else None
    by_point = _by_point_pattern(suite, point_patterns) if point_patterns else None
    cases, points = [], {}
    for case in suite.cases:
        if by_case is not None and case.id not in by_case:
            continue
        if by_point is not None and case.id not in by_point:
            continue
        wanted = None if by_case is None else by_case[case.id]
        if by_point is not None:
            wanted = by_point[case.id] if wanted is None else wanted & by_point[case.id]
            if not wanted:
                continue
        cases.append(case)
        if wanted is not None:
            points[case.id] = tuple(p for p in _point_ids(case) if p in wanted)
    if by_case is not None:  # in the order asked for, as the ids were run before patterns
        cases.sort(key=lambda c: next(i for i, p in enumerate(case_patterns) if _hits(p, c)))
    if not cases:
        raise ManifestError(
            f"{suite.path}: --case {' '.join(case_patterns)} with --point "
            f"{' '.join(point_patterns)}: no point is selected by both"
        )
    return cases, points


# the phases of a case error that mean the GPU, not the case, failed
DEVICE_LOST_PHASES = ("setup", "crash")


def parse_gpus(text: str, count: int | None = None) -> list[int]:
    """ "all" (needs `count`) or "0,1,3" as CUDA ordinals; ValueError saying what was expected."""
    text = text.strip()
    if text == "all":
        if not count:
            raise ValueError("--gpus all: no CUDA device was found")
        return list(range(count))
    try:
        gpus = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ValueError(
            f"--gpus {text!r}: expected 'all' or CUDA ordinals separated by commas, e.g. 0,1"
        ) from None
    if not gpus or any(g < 0 for g in gpus) or len(set(gpus)) != len(gpus):
        raise ValueError(f"--gpus {text!r}: expected distinct ordinals >= 0, e.g. 0,1")
    if count is not None and max(gpus) >= count:
        raise ValueError(f"--gpus {text!r}: this host has {count} CUDA device(s), 0 to {count - 1}")
    return gpus


def previous_durations(document: dict | None) -> dict[str, float]:
    """Case id -> the worker wall time of that case in an earlier result document."""
    if not document:
        return {}
    return {
        c["id"]: float(c["worker_wall_s"])
        for c in document.get("cases", [])
        if isinstance(c.get("worker_wall_s"), int | float)
    }


def load_previous(path: Path | None) -> dict[str, float]:
    if path is None:
        return {}
    from protocol.codec import decode

    return previous_durations(decode(Path(path).read_bytes(), str(path)))


def deal_order(cases: list, expected_s: dict[str, float]) -> list:
    """Longest expected first; cases without an expected time after them, in suite order."""
    known = sorted((c for c in cases if c.id in expected_s), key=lambda c: -expected_s[c.id])
    return known + [c for c in cases if c.id not in expected_s]


def device_lost(case_doc: dict) -> bool:
    return (
        case_doc.get("status") == "failed"
        and (case_doc.get("error") or {}).get("phase") in DEVICE_LOST_PHASES
    )


def run_sharded(cases: list, devices: list[int], run, on_done, not_run, say) -> None:
    """run(case, device) -> case_doc on every case, one thread per device taking the next case
    (in the order given) when free; on_done(case_doc) is called under one lock as each finishes.
    A device whose case failed in a DEVICE_LOST_PHASES phase stops; cases no device is left to
    run get not_run(case, why) -> case_doc."""
    pending = deque(cases)
    lock = threading.Lock()
    lost: list[int] = []

    def serve(device: int) -> None:
        while True:
            with lock:
                if not pending:
                    return
                case = pending.popleft()
            doc = run(case, device)
            with lock:
                on_done(doc)
                if device_lost(doc):
                    lost.append(device)
                    say(
                        f"kernelgap: GPU {device} failed during {case.id} "
                        f"({doc['error']['phase']}); it takes no more cases"
                    )
                    return

    threads = [threading.Thread(target=serve, args=(d,), name=f"gpu{d}") for d in devices]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for case in pending:  # every device failed before these started
        on_done(not_run(case, f"not run: every GPU of the run failed (GPUs {lost})"))


COOLDOWN_S = 10.0


"""The longest idle pause before the second measurement (and the pause where NVML cannot say
when the board has settled)."""


MIN_COOLDOWN_S = 2.0


"""The shortest pause: a power limit is enforced over a moving average of the draw, which an
idle board clears within this."""


SETTLED_POWER = 0.3


"""The board has settled when it draws less than this fraction of its enforced power limit and
no power or thermal slowdown reason is set (an idle board draws well under it)."""


POLL_S = 0.25


SHORTER = 0.5


"""The second measurement's hot sample target, as a fraction of the first's (a shorter sample
spends less time at the cap; cold samples are single launches and keep their batch)."""


def needs_remeasure(case_doc: dict) -> str | None:
    """Why this case should be measured again, or None: it completed but a gap is unstable."""
    if case_doc.get("status") != "ok" or case_doc.get("remeasured"):
        return None
    noisy = [
        name
        for name, impl in case_doc.get("implementations", {}).items()
        if impl.get("gap") and not impl["gap"]["stable"]
    ]
    if not noisy:
        return None
    if case_doc.get("clocks", {}).get("unstable"):
        why = "clocks held down in most samples"
    else:
        why = f"noise above {statistics.UNSTABLE_NOISE:.0%}"
    return f"unstable gap of {', '.join(noisy)} ({why})"


def remeasure_options(options, case_target_sample_ms: float):
    """`options` for the second measurement: the case's hot sample target times SHORTER."""
    target = options.target_sample_ms or case_target_sample_ms
    return dataclasses.replace(options, target_sample_ms=target * SHORTER)


def first_noise(case_doc: dict) -> dict[str, float]:
    """Per implementation with a timing, its noise (MAD / median) in this measurement."""
    return {
        name: impl["timing"]["stats"]["noise"]
        for name, impl in case_doc.get("implementations", {}).items()
        if "timing" in impl and impl["timing"]["stats"].get("noise") is not None
    }


def settle(first: dict, second: dict, reason: str, cooldown_s: float, target_ms: float) -> dict:
    """The case document to keep: the second when it completed (ok), else the first; either
    way with `remeasured` saying what happened."""
    record = {
        "reason": reason,
        "cooldown_s": cooldown_s,
        "target_sample_s": target_ms / 1000.0,
        "first_noise": first_noise(first),
        "improved": second.get("status") == "ok" and needs_remeasure(second) is None,
    }
    kept = second if second.get("status") == "ok" else first
    kept["remeasured"] = record
    return kept


def cool_down(index: int = 0, uuid: str | None = None, longest_s: float = COOLDOWN_S) -> float:
    """Leave the GPU idle (nothing of this process runs on it between cases) until NVML says it
    has settled (`settled`), at least MIN_COOLDOWN_S and at most `longest_s`; `longest_s` where
    NVML cannot be read. Returns the seconds waited."""
    monitor, _ = clocks.open_monitor(index, uuid)
    start = time.monotonic()
    if monitor is None:
        time.sleep(longest_s)
        return longest_s
    time.sleep(MIN_COOLDOWN_S)
    while (waited := time.monotonic() - start) < longest_s:
        if settled(monitor):
            return round(waited, 3)
        time.sleep(POLL_S)
    return round(time.monotonic() - start, 3)


def settled(monitor) -> bool:
    """Whether the board draws under SETTLED_POWER of its limit with no slowdown reason set;
    False where the power cannot be read."""
    try:
        drawn, limit = monitor.power_mw()
        _, reasons = monitor.read()
    except Exception:  # a board or driver without the power queries: wait the longest pause
        return False
    slowed = any(reasons & bit for bit in clocks.SLOWDOWN_BITS)
    return limit > 0 and drawn < SETTLED_POWER * limit and not slowed


@dataclass(frozen=True)
class BenchOptions:
    case_ids: tuple[str, ...] = ()  # case ids, point ids or globs (select)
    point_ids: tuple[str, ...] = ()  # --point: point ids or globs
    mode: str | None = None
    samples: int | None = None
    warmup: int | None = None
    target_sample_ms: float | None = None
    timeout_s: float | None = None
    arch: str | None = None
    skip_check: bool = False
    device: int = 0
    output: Path | None = None
    quiet: bool = False
    commit: str | None = None  # recorded as the suite's commit (a shipped tree is no checkout)
    bundle: Path | None = None  # PTX built elsewhere (python -m runner build)
    emit_partial: bool = False  # the partial document on stderr after each case (for harness run)
    budget_s: float | None = None  # the whole suite's wall-time budget; cases past it are not run
    revisions: tuple[
        tuple[str, Path], ...
    ] = ()  # labelled bundles (runner.definition.bundle), in order
    profile: bool = False  # after timing, Nsight Compute counters per implementation (ncu)
    static: bool = True  # ptxas -v resources and the SASS instruction mix, where the tools are
    # "auto": CUPTI's kernel timestamps in cold mode (refused without cupti-python), events in
    # hot mode; "events" in cold mode only as an explicit choice (timing.cupti.choose_timer)
    timer: str = "auto"
    precision: float | None = None  # the stopping rule's target half-width (0.005 is 0.5%)
    precision_max_s: float | None = None  # its time cap per case
    max_samples: int | None = None  # its sample cap per implementation
    # the sequential rule's first rounds (None: FIRST_SAMPLES; equal to samples: off)
    min_samples: int | None = None
    gpus: str | None = (
        None  # "all" or "0,1": cases dealt over those GPUs (deal_order, the threads of --gpus)
    )
    previous: Path | None = None  # an earlier result document: its case times order the dealing
    # mixed into every buffer's seed (generator.reseeded); None: drawn for the run
    input_seed: int | None = None


FIRST_SAMPLES = aa_control.CONTROL_LOADS * aa_control.MIN_PER_LOAD


"""The sequential rule's first rounds in `runner bench` (runner.measurement.timing.stopping):
MIN_PER_LOAD per load of the A/A control (24), the fewest its term is read from (a median of
two rounds is their mean, and one stray round would set every gap's interval);
tests/coverage/test_sequential.py checks A/A coverage from there for 2 to 9 sides."""


def case_mode(case: manifest.CaseSpec, options: BenchOptions) -> str:
    """The mode a case is timed in: --mode, else the manifest's."""
    return options.mode or case.settings.mode


def timing_settings(
    case: manifest.CaseSpec, options: BenchOptions, cupti_reason: str | None
) -> tuple[dict, str]:
    """(the worker's TimingSettings, why its timer: cupti.choose_timer), where CUPTI is usable
    when `cupti_reason` is None; raises TimerUnavailable as choose_timer does."""
    s = case.settings
    mode = case_mode(case, options)
    samples = options.samples or s.samples
    timer, why = cupti.choose_timer(options.timer, mode, cupti_reason)
    settings = {
        "mode": mode,
        "samples": samples,
        "warmup": s.warmup if options.warmup is None else options.warmup,
        "target_sample_s": (options.target_sample_ms or s.target_sample_ms) / 1000.0,
        "timer": timer,
    }
    first = min(options.min_samples or FIRST_SAMPLES, samples)
    if options.precision is None and first < samples:
        settings["first_samples"] = first
    if options.precision is not None:
        settings["precision"] = options.precision
        settings["max_samples"] = max(samples, options.max_samples or 1000)
        settings["precision_max_s"] = options.precision_max_s or 60.0
    return settings, why


def obtain_ptx(case: manifest.CaseSpec, impl: manifest.ImplSpec, arch: str, bundle: Bundle | None):
    """(PTX, provenance) from the bundle when it has the implementation, else built here."""
    found = bundle.lookup(case, impl) if bundle is not None else None
    if found is not None:
        return found
    b = toolchains.build_impl(impl, arch)
    return b.ptx, b.provenance()


def build_case(
    case: manifest.CaseSpec,
    arch: str,
    case_doc: dict,
    say,
    bundle: Bundle | None = None,
    revisions: dict[str, Bundle] | None = None,
) -> dict[str, str]:
    """Build (or take from the bundle) and signature-check every implementation; PTX by name.
    With `revisions`, a candidate a labelled bundle holds becomes one implementation per label
    (runner.definition.bundle), in its place in case_doc["implementations"]."""
    built: dict[str, str] = {}
    docs = case_doc["implementations"]
    for impl in case.impls:
        where = f"case {case.id}, implementation {impl.name} ({impl.source_rel})"
        try:
            found = variants(case, impl, revisions) if revisions else []
            if found and impl.role == "candidate":
                docs = _replace(docs, impl.name, [(name, label) for name, label, _, _ in found])
            for name, _, text, build in found:
                docs[name]["build"] = build
                built[name] = text
            if not found:
                text, docs[impl.name]["build"] = obtain_ptx(case, impl, arch, bundle)
                built[impl.name] = text
        except BundleError as exc:
            record_failure(case_doc, "build", f"{where}: {exc}")
            return {}
        except ToolchainMissing as exc:
            docs[impl.name]["status"] = "skipped"
            docs[impl.name]["skip_reason"] = str(exc)
            say(f"  {impl.name}: skipped: {exc}")
            continue
        except BuildError as exc:
            record_failure(case_doc, "build", f"{where}: {exc}")
            return {}
    case_doc["implementations"] = docs
    for name, text in built.items():
        impl = case.impl(docs[name].get("variant_of", name))
        where = f"case {case.id}, implementation {name} ({impl.source_rel})"
        try:
            module = ptx.parse(text)
            ptx.check_signature(module, impl.entry, case.signature(), where=where)
        except (PtxError, SignatureError) as exc:
            record_failure(case_doc, "signature", str(exc))
            return {}
        docs[name]["ptx"] = ptx.describe(module, text)
    if case.baseline.name not in built:
        record_failure(
            case_doc,
            "build",
            f"case {case.id}: the baseline {case.baseline.name} could not be built",
        )
        return {}
    return built


def _replace(docs: dict, name: str, revisions: list[tuple[str, str]]) -> dict:
    """`docs` with implementation `name` replaced, in its place, by one copy per revision."""
    out = {}
    for key, doc in docs.items():
        if key != name:
            out[key] = doc
            continue
        for variant, label in revisions:
            out[variant] = {**doc, "variant_of": name, "revision": label}
    return out


def _build_once(case, arch, options, case_doc, say, bundle, revisions, device, built: Built):
    """Build (and analyse) the case into `built` unless it holds a build already; then the
    build's blocks into `case_doc`. Returns the PTX by name ({} when the build failed)."""
    if built.ptx is None and built.failed is None:
        say(f"[{case.id}] build (arch {arch})")
        t0 = time.monotonic()
        ptx_by_name = build_case(case, arch, case_doc, say, bundle, revisions)
        built.phases_s = {"build_s": time.monotonic() - t0}
        if case_doc["status"] == "failed":
            built.failed = copy.deepcopy(case_doc)
            return {}
        if options.static:
            t0 = time.monotonic()
            record_static(case, case_doc, ptx_by_name, arch, device, bundle)
            built.phases_s["static_s"] = time.monotonic() - t0
        built.implementations, built.ptx = copy.deepcopy(case_doc["implementations"]), ptx_by_name
        return ptx_by_name
    if built.failed is not None:
        case_doc.update(status="failed", error=dict(built.failed["error"]))
        case_doc["implementations"] = copy.deepcopy(built.failed["implementations"])
        return {}
    case_doc["implementations"] = copy.deepcopy(built.implementations)
    return built.ptx


def run_one(
    suite: manifest.Suite,
    case: manifest.CaseSpec,
    arch: str,
    options: BenchOptions,
    peaks: dict,
    say,
    bundle: Bundle | None = None,
    budget_left_s: float | None = None,
    revisions: dict[str, Bundle] | None = None,
    environment_device: dict | None = None,
    cupti_reason: str | None = "not probed",
    point: str | None = None,
    built: Built | None = None,
) -> dict:
    """One case (at sweep point `point`, None: at dims) in its worker; with `budget_left_s`
    (what is left of the suite's --budget-s) the case's own timeout is cut to it, so one
    oversized case cannot spend the whole job. `cupti_reason`: why CUPTI cannot be used, None
    where it can (cupti.choose_timer). `built`: the case's build, made here when it holds none."""
    deadline = None if budget_left_s is None else time.monotonic() + budget_left_s
    measured = sweep.at_point(case, point)
    case_doc = case_skeleton(measured)
    settings, timer_reason = timing_settings(case, options, cupti_reason)
    if point is not None and point != case.sweep.headline:
        settings = settings_for_point(settings, options)
    case_timeout_s = options.timeout_s or case.settings.timeout_s
    by_budget = budget_left_s is not None and budget_left_s < case_timeout_s
    case_doc["settings"] = {
        **settings,
        "timer_reason": timer_reason,
        "timeout_s": budget_left_s if by_budget else case_timeout_s,
    }
    fresh = built is None or (built.ptx is None and built.failed is None)
    built = built or Built()
    builds = measured if measured.impls != case.impls else case  # an option point: its own way
    ptx_by_name = _build_once(
        builds, arch, options, case_doc, say, bundle, revisions, environment_device, built
    )
    host_phases = dict(built.phases_s) if fresh else {}
    label = f"{case.id}[{point}]" if point else case.id
    if case_doc["status"] == "failed":
        say(f"[{label}] FAILED in {case_doc['error']['phase']}: {case_doc['error']['message']}")
        return case_doc
    job = _worker_job(suite, case, ptx_by_name, settings, options, environment_device, case_doc)
    job["point"] = point

    def on_event(event):
        if event.get("event") == "phase":
            extra = f" ({event['mode']})" if "mode" in event else ""
            say(f"[{label}] {event['phase']}{extra}")

    timeout_s = case_doc["settings"]["timeout_s"]
    outcome = run_worker(job, timeout_s=timeout_s, on_event=on_event, echo_stderr=not options.quiet)
    record_worker_failure(case_doc, case, outcome, timeout_s, by_budget)
    if options.skip_check:
        for impl in case_doc["implementations"].values():
            impl.setdefault("check", {"status": "not_checked"})
    finish_from_worker(case_doc, measured, outcome.record, peaks)
    case_doc["worker_wall_s"] = outcome.wall_s
    case_doc.setdefault("phases_s", {}).update(host_phases)
    for key, value in (("worker_start_s", outcome.start_s), ("worker_exit_s", outcome.exit_s)):
        if value is not None:
            case_doc["phases_s"][key] = value
    if options.profile and case_doc["status"] == "ok":  # after timing, never inside it
        entries = {
            name: case.impl(doc.get("variant_of", name)).entry  # X@base: X's entry
            for name, doc in case_doc["implementations"].items()
            if name in ptx_by_name
        }
        profiling.profile_case(
            suite.path, case_doc, entries, ptx_by_name, say, options.device, deadline
        )
    say(f"[{label}] {outcome_line(case_doc)}")
    return case_doc


def _worker_job(
    suite, case, built: dict, settings: dict, options, environment_device, case_doc: dict
) -> dict:
    """What the case's worker is sent: the suite, the case, its PTX and how to time it."""
    return {
        "job": "case",
        "manifest": str(suite.path.resolve()),
        "case": case.id,
        "ptx": built,
        "timing": settings,
        "skip_check": options.skip_check,
        "input_seed": options.input_seed,
        "device": options.device,
        "device_uuid": (environment_device or {}).get("uuid"),
        "variants": {
            n: d["variant_of"] for n, d in case_doc["implementations"].items() if "variant_of" in d
        },
    }


class Progress:
    """Human progress on stderr: one line per case and phase (silent with -q)."""

    def __init__(self, quiet: bool):
        self.quiet = quiet

    def __call__(self, text: str) -> None:
        if not self.quiet:
            print(visible(text, lines=True), file=sys.stderr, flush=True)


def effective_mode(cases, options: BenchOptions) -> str | None:
    """The run's timing mode for options.mode: --mode, else the one mode the manifest gives its
    cases (so a run on the defaults and a later explicit `--mode hot` run say the same); cases
    of several modes give them joined, "cold+hot"."""
    modes = sorted({case_mode(case, options) for case in cases})
    return "+".join(modes) or None


def check_timers(cases, options: BenchOptions, cupti_reason: str | None, say) -> None:
    """Before any GPU work: refuse a timer that cannot be used (TimerUnavailable: cold mode
    without CUPTI unless events are chosen), and warn when events time cold cases as asked."""
    for case in cases:
        timing_settings(case, options, cupti_reason)
    cold = [c.id for c in cases if case_mode(c, options) == "cold"]
    if cold and options.timer == "events":
        say(f"kernelgap: {cupti.cold_events_warning(f'{len(cold)} case(s) timed')}")


def probe_environment(options: BenchOptions) -> dict:
    """The device and software block, measured in a worker (raises NoGpuError without a GPU);
    `device_count` beside it says how many CUDA devices the worker saw."""
    outcome = run_worker(
        {"job": "environment", "device": options.device},
        timeout_s=180,
        echo_stderr=not options.quiet,
    )
    record = outcome.record or {}
    if record.get("no_gpu"):
        raise NoGpuError(record["error"]["message"])
    if record.get("status") != "ok":
        why = record.get("error", {}).get("message") or (
            "timed out" if outcome.timed_out else "\n".join(outcome.stderr_tail)
        )
        raise NoGpuError(f"the environment probe failed: {why}")
    return {**record["environment"], "device_count": record.get("device_count")}


def device_block(index: int, device: dict) -> dict:
    """What a case records of the GPU it ran on."""
    return {"index": index, "uuid": device.get("uuid"), "name": device.get("name")}


def probe_devices(options: BenchOptions, env: dict) -> dict[int, dict]:
    """{ordinal: device info} of every GPU of --gpus (the first from `env`, the others probed in
    parallel, each in its own worker); {options.device: ...} without --gpus."""
    if not options.gpus:
        return {options.device: env["device"]}
    try:
        gpus = parse_gpus(options.gpus, env.get("device_count"))
    except ValueError as exc:
        raise ManifestError(str(exc)) from None
    found = {options.device: env["device"]}  # the run's first GPU, probed already
    errors: dict[int, str] = {}

    def probe(d: int) -> None:
        try:
            found[d] = probe_environment(dataclasses.replace(options, device=d))["device"]
        except NoGpuError as exc:
            errors[d] = str(exc)

    threads = [threading.Thread(target=probe, args=(d,)) for d in gpus if d not in found]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise NoGpuError("; ".join(f"GPU {d}: {e}" for d, e in sorted(errors.items())))
    return {d: found[d] for d in gpus}


def _duration(seconds: float) -> str:
    """1h02m, 3m05s, 42s."""
    seconds = round(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def position(done: int, total: int, elapsed_s: float) -> str:
    """`[3/8]`, with the time spent and, once a case has finished, an estimate of the time left
    (the mean time of the finished cases times the cases to go)."""
    where = f"[{done + 1}/{total}]"
    if done == 0:
        return where
    left_s = elapsed_s / done * (total - done)
    return f"{where} {_duration(elapsed_s)} so far, about {_duration(left_s)} left"


def run_suite(manifest_path: str | Path, options: BenchOptions) -> tuple[dict, int]:
    """Returns (result document, exit status). Raises ManifestError / NoGpuError for exit 2."""
    keep_ahead()  # each case's worker imports during the probe or the case before
    try:
        return _run_suite(manifest_path, options)
    finally:
        stop_ahead()  # the worker started for a case after the last


def _run_suite(manifest_path: str | Path, options: BenchOptions) -> tuple[dict, int]:
    say = Progress(options.quiet)
    suite, (cases, points_of), bundle, revisions, options, expected_s = _load_inputs(
        manifest_path, options
    )
    cupti_reason = cupti.unavailable_reason()
    check_timers(cases, options, cupti_reason, Progress(False))  # a warning even with -q
    started = utc_now()
    say(f"kernelgap: {suite.name} v{suite.version}, {len(cases)} case(s); probing the GPU")
    env = probe_environment(options)
    env["sensors_start"] = env.pop("sensors", None)
    device = env["device"]
    arch = options.arch or device["arch"]
    _check_bundle_arch(
        [(options.bundle, bundle), *((p, revisions[k]) for k, p in options.revisions)], arch, device
    )
    env["toolchains"] = {}
    devices = probe_devices(options, env)
    env.pop("device_count", None)
    # no worker of this run holds a context now, nor at the end: a listed process is another's
    shared_at_start = [environment.observe_sharing(d.get("uuid"), i) for i, d in devices.items()]
    env["timers"] = {"events": "usable", "cupti": cupti_reason or "usable"}
    say(
        f"kernelgap: {device['name']} ({device['arch']}, {device['sm_count']} SMs), driver {device.get('driver_version_string')}"
    )
    if len(devices) > 1:
        env["devices"] = [device_block(d, info) for d, info in devices.items()]
        names = ", ".join(f"{d} {info['name']}" for d, info in devices.items())
        say(f"kernelgap: {len(devices)} GPUs: {names}")
    running = SuiteRun(
        suite=suite,
        cases=cases,
        options=options,
        arch=arch,
        env=env,
        devices=devices,
        bundle=bundle,
        revisions=revisions,
        cupti_reason=cupti_reason,
        say=say,
        started=started,
        suite_block=_suite_block(suite, options),
        options_block=_options_block(cases, options, arch, devices),
        points_of=points_of,
    )
    run_sharded(
        deal_order(cases, expected_s),
        list(devices),
        running.case_on,
        running.finished,
        running.not_run,
        say,
    )
    return running.end(shared_at_start)


def _load_inputs(manifest_path: str | Path, options: BenchOptions):
    """Everything the run reads, refused as bad input before any GPU work: (suite, its cases to
    run, the --bundle, {label: bundle} of the revisions, the options with --gpus's first GPU as
    the run's device, the --previous document's seconds per case)."""
    suite = manifest.load(manifest_path)
    cases, points_of = select(suite, options.case_ids, options.point_ids)
    bundle = Bundle.load(options.bundle) if options.bundle else None
    revisions = {label: Bundle.load(path) for label, path in options.revisions}
    if options.gpus and options.gpus.strip() != "all":
        try:
            first = parse_gpus(options.gpus)[0]
        except ValueError as exc:
            raise ManifestError(str(exc)) from None
        options = dataclasses.replace(options, device=first)  # the probe's is the run's first
    if options.input_seed is None:  # drawn per run, recorded so the run can be replayed
        options = dataclasses.replace(options, input_seed=generator.draw_input_seed())
    try:
        expected_s = load_previous(options.previous)
    except (OSError, ValueError) as exc:
        raise ManifestError(
            f"--previous {options.previous}: not a result document to deal cases by ({exc})"
        ) from None
    return suite, (cases, points_of), bundle, revisions, options, expected_s


def _check_bundle_arch(bundles: list[tuple], arch: str, device: dict) -> None:
    """A bundle ((where, bundle) pairs) built for another arch than the run's is refused,
    saying how to match them."""
    for where, each in bundles:
        if each is not None and each.manifest["arch"] != arch:
            raise BundleError(
                f"{where}: built for {each.manifest['arch']}, but this run targets {arch} "
                f"({device['name']}); rebuild it with --arch {arch}, or pass --arch {each.manifest['arch']}"
            )


def _suite_block(suite: manifest.Suite, options: BenchOptions) -> dict:
    """The document's `suite`: what was run, from which commit."""
    block = {
        "name": suite.name,
        "version": suite.version,
        "path": str(suite.path),
        "sha256": suite.sha256,
        "gpu": suite.gpu,
        **checkout_commit(suite.root),
    }
    if suite.primary:
        block["primary"] = suite.primary
    if options.commit:  # "<sha>-dirty" from harness run: a checkout with uncommitted changes
        sha, dirty = options.commit.removesuffix("-dirty"), options.commit.endswith("-dirty")
        block.update(commit=sha, dirty=dirty)
    return block


def _options_block(cases, options: BenchOptions, arch: str, devices: dict) -> dict:
    """The document's `options`: how the run was asked to measure."""
    return {
        "mode": effective_mode(cases, options),
        "samples": options.samples,
        "warmup": options.warmup,
        "target_sample_ms": options.target_sample_ms,
        "arch": arch,
        "skip_check": options.skip_check,
        "cases": list(options.case_ids),
        **({"points": list(options.point_ids)} if options.point_ids else {}),
        "bundle": str(options.bundle) if options.bundle else None,
        **({"revisions": {k: str(p) for k, p in options.revisions}} if options.revisions else {}),
        "budget_s": options.budget_s,
        "profile": options.profile,
        "static": options.static,
        "timer": options.timer,
        "precision": options.precision,
        "min_samples": options.min_samples,
        "input_seed": options.input_seed,
        **({"gpus": list(devices)} if options.gpus else {}),
    }


@dataclasses.dataclass
class SuiteRun:
    """A run in progress: each case measured on a GPU (again, once, when it asks to be), kept in
    the suite's order and written out after every case, then the document that ends the run."""

    suite: manifest.Suite
    cases: list
    options: BenchOptions
    arch: str
    env: dict
    devices: dict[int, dict]
    bundle: Bundle | None
    revisions: dict
    cupti_reason: str | None
    say: Progress
    started: str
    suite_block: dict
    options_block: dict
    points_of: dict = dataclasses.field(default_factory=dict)  # {case id: --point's points}
    case_docs: list[dict] = dataclasses.field(default_factory=list)
    t0: float = dataclasses.field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        budget_s = self.options.budget_s
        self.deadline = self.t0 + budget_s if budget_s else None
        device = self.env["device"]
        self.peaks = {**self.env["peaks"], "l2_bytes": device.get("l2_bytes")}  # physical limits
        self.order = {c.id: i for i, c in enumerate(self.cases)}

    def _left_s(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()

    def case_on(self, case, d: int) -> dict:
        """The case's document, measured on GPU `d` (at each of its points, for a sweep): not
        run past the budget; measured a second time after a cool-down where remeasure asks
        for it and the budget allows."""
        done, total = len(self.case_docs), len(self.cases)
        self.say(f"kernelgap: {position(done, total, time.monotonic() - self.t0)}: {case.id}")
        left_s = self._left_s()
        if left_s is not None and left_s <= 0 and case.sweep is None:  # a sweep skips each point
            case_doc = over_budget(case, self.options.budget_s, done)
            self.say(f"[{case.id}] not run: {case_doc['error']['message']}")
            return case_doc
        if case.sweep is None:
            case_doc = self.measured(case, d)
        else:
            case_doc = sweep_run.run_points(
                case,
                self.points_of.get(case.id),
                lambda point, built: self.measured(case, d, point, built),
                self._left_s,
                self.options.budget_s,
                self.say,
            )
        case_doc["device"] = device_block(d, self.devices[d])
        return case_doc

    def measured(self, case, d: int, point: str | None = None, built=None) -> dict:
        """One measurement of the case (at `point`), again after a cool-down where remeasure
        asks for it (never for a point other than the headline: the sweep's budget)."""
        options = dataclasses.replace(self.options, device=d)
        case_doc = self.measure(case, options, self._left_s(), point, built)
        reason = needs_remeasure(case_doc)
        if point is not None and point != case.sweep.headline:
            reason = None
        left_s = self._left_s()
        spent_s = case_doc.get("worker_wall_s") or 0.0
        if reason and (left_s is None or left_s > COOLDOWN_S + 2 * spent_s):
            again = remeasure_options(self.options, case.settings.target_sample_ms)
            self.say(f"[{case.id}] {reason}: measuring it again after a cool-down")
            waited_s = cool_down(d, self.devices[d].get("uuid"))
            second = self.measure(
                case, dataclasses.replace(again, device=d), self._left_s(), point, built
            )
            case_doc = settle(case_doc, second, reason, waited_s, again.target_sample_ms)
        return case_doc

    def measure(
        self, case, case_options: BenchOptions, left_s: float | None, point=None, built=None
    ) -> dict:
        """One measurement of the case (run_one); a failure of any kind costs the case only."""
        extra = {} if point is None else {"point": point, "built": built}
        try:
            return run_one(
                self.suite,
                case,
                self.arch,
                case_options,
                self.peaks,
                self.say,
                self.bundle,
                left_s,
                revisions=self.revisions,
                environment_device=self.devices[case_options.device],
                cupti_reason=self.cupti_reason,
                **extra,
            )
        except Exception as exc:  # a bug or an unforeseen failure costs this case, not the run
            case_doc = case_skeleton(sweep.at_point(case, point))
            record_failure(case_doc, "unknown", f"case {case.id}: {type(exc).__name__}: {exc}")
            self.say(f"[{case.id}] FAILED: {type(exc).__name__}: {exc}")
            return case_doc

    def finished(self, case_doc: dict) -> None:
        """Keep a case's document and write the partial document out (to --output, and to stderr
        for harness run), so a crash or a dropped connection never loses the earlier ones."""
        self.case_docs.append(case_doc)
        self.case_docs.sort(key=lambda c: self.order[c["id"]])  # the suite's order
        for impl in case_doc["implementations"].values():
            if "build" in impl:
                self.env["toolchains"][impl["toolchain"]] = {"version": impl["build"]["version"]}
        partial = self.document(None)
        if self.options.output:
            try:
                write_atomic(self.options.output, encode(partial, pretty=True))
            except OSError as exc:  # a full disk must not end the run: the end tries again
                self.say(
                    f"kernelgap: could not write the partial document to {self.options.output}: {exc}"
                )
        if self.options.emit_partial:
            sys.stderr.buffer.write(PARTIAL_DOCUMENT_PREFIX + encode(partial) + b"\n")
            sys.stderr.flush()

    def not_run(self, case, why: str) -> dict:
        """A skipped case's document, saying why it was not run."""
        case_doc = case_skeleton(case)
        record_failure(case_doc, "setup", f"case {case.id}: {why}")
        case_doc["status"] = "skipped"
        return case_doc

    def document(self, finished: str | None) -> dict:
        return document.document(
            self.suite_block, self.env, self.options_block, self.case_docs, self.started, finished
        )

    def end(self, shared_at_start: list) -> tuple[dict, int]:
        """The run's document (validated; on a bad one the error carries it, so nothing
        measured is lost) and its exit status, after the clocks and sharing verdicts."""
        apply_run_clocks(self.case_docs)
        device = self.env["device"]
        self.env["sensors_end"] = environment.nvml_sensors(
            self.options.device, uuid=device.get("uuid")
        )
        ended = [environment.observe_sharing(d.get("uuid"), i) for i, d in self.devices.items()]
        self.env["sharing"] = environment.sharing_verdict(shared_at_start + ended)
        if self.env["sharing"]["shared"]:
            self.say(f"kernelgap: the GPU was shared during the run: {self.env['sharing']['why']}")
        doc = self.document(utc_now())
        try:
            validate(doc, "result", "result document")
        except DocumentError as exc:
            exc.document = doc
            raise
        status = 0 if all(c["status"] == "ok" for c in self.case_docs) else 1
        return doc, status


def apply_run_clocks(case_docs: list[dict]) -> None:
    """Flag every case's (and sweep point's) samples against the highest SM clock read on the
    same GPU in this run (cards of one host clock apart: one card's maximum says nothing of
    another's samples)."""
    by_device: dict = {}
    for case_doc in case_docs:
        where = case_doc.get("device") or {}
        by_device.setdefault(where.get("uuid") or where.get("index"), []).append(case_doc)
    for group in by_device.values():
        points = [
            (p, c["baseline"]) for c in group for p in c.get("points", ()) if "implementations" in p
        ]
        blocks = [(c, c["baseline"]) for c in group] + points  # a swept case's other points too
        run_max = document.run_max_clock([block for block, _ in blocks])
        for block, baseline in blocks:
            document.apply_clocks(block, run_max, baseline=baseline)
