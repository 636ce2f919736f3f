"""One case of `runner bench`, from the host's side: its skeleton in the document, its build
(or its PTX from a bundle), its job for a worker process, and what comes back folded in.

runner.execution.suite runs the cases of a suite in order, one `run_one` each; nothing here creates a
CUDA context: the worker (runner.execution.isolation, runner.execution.case) does.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field
from pathlib import Path

from runner.definition import manifest, spec, sweep, toolchains
from runner.definition.bundle import Bundle, BundleError
from runner.definition.revisions import variants
from runner.execution import point_timing, result
from runner.execution.isolation import run_worker
from runner.explain import profiling
from runner.explain.static import record_static
from runner.gpu import ptx
from runner.measurement.timing import timer_choice


@dataclass(frozen=True)
class BenchOptions:
    case_ids: tuple[str, ...] = ()  # case ids, point ids or globs (runner.execution.selection)
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
    ] = ()  # labelled bundles (runner.definition.revisions), in order
    profile: bool = False  # after timing, Nsight Compute counters per implementation (ncu)
    static: bool = True  # ptxas -v resources and the SASS instruction mix, where the tools are
    # "auto": CUPTI's kernel timestamps in cold mode (refused without cupti-python), events in
    # hot mode; "events" in cold mode only as an explicit choice (timing.timer_choice)
    timer: str = "auto"
    precision: float | None = None  # the stopping rule's target half-width (0.005 is 0.5%)
    precision_max_s: float | None = None  # its time cap per case
    max_samples: int | None = None  # its sample cap per implementation
    # the sequential rule's first rounds (None: FIRST_SAMPLES; equal to samples: off)
    min_samples: int | None = None
    gpus: str | None = (
        None  # "all" or "0,1": cases dealt over those GPUs (runner.execution.sharding)
    )
    previous: Path | None = None  # an earlier result document: its case times order the dealing


FIRST_SAMPLES = 16
"""The sequential rule's first rounds in `runner bench` (runner.measurement.timing.stopping):
two per load of the A/A control; tests/coverage/test_sequential.py checks A/A coverage from
there for 2 to 9 sides."""


def case_mode(case: manifest.CaseSpec, options: BenchOptions) -> str:
    """The mode a case is timed in: --mode, else the manifest's."""
    return options.mode or case.settings.mode


def timing_settings(
    case: manifest.CaseSpec, options: BenchOptions, cupti_reason: str | None
) -> tuple[dict, str]:
    """(the worker's TimingSettings, why its timer: timer_choice), where CUPTI is usable
    when `cupti_reason` is None; raises TimerUnavailable as timer_choice does."""
    s = case.settings
    mode = case_mode(case, options)
    samples = options.samples or s.samples
    timer, why = timer_choice.choose_timer(options.timer, mode, cupti_reason)
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


def access_split(
    case: manifest.CaseSpec, sizes: dict[str, int], nbytes: float | None
) -> tuple[float, float] | None:
    """The case's declared `nbytes` a call as (read, written), in the proportion of its input
    and output buffers (an inout buffer counts on both sides); None without declared bytes."""
    reads = sum(sizes[b.name] for b in case.buffers if b.role in ("input", "inout"))
    writes = sum(sizes[b.name] for b in case.buffers if b.role in ("output", "inout"))
    if nbytes is None or reads + writes == 0:
        return None
    return nbytes * reads / (reads + writes), nbytes * writes / (reads + writes)


def case_skeleton(case: manifest.CaseSpec) -> dict:
    canonical, check = case.geometry(case.dims), case.geometry(case.check_dims)
    return {
        "id": case.id,
        "version": case.version,
        "description": case.description,
        "status": "ok",
        "baseline": case.baseline.name,
        "dims": canonical.dims,
        "check_dims": check.dims,
        "launch": {
            "grid": list(canonical.grid),
            "block": list(canonical.block),
            "shared_bytes": canonical.shared_bytes,
        },
        "implementations": {
            i.name: {
                "role": i.role,
                "toolchain": i.toolchain,
                "source": i.source_rel,
                "entry": i.entry,
            }
            for i in case.impls
        },
    }


def record_failure(case_doc: dict, phase: str, message: str, cuda_error: str | None = None) -> None:
    case_doc["status"] = "failed"
    case_doc["error"] = {"phase": phase, "message": message}
    if cuda_error:
        case_doc["error"]["cuda_error"] = cuda_error


def obtain_ptx(case: manifest.CaseSpec, impl: manifest.ImplSpec, arch: str, bundle: Bundle | None):
    """(PTX, provenance) from the bundle when it has the implementation, else built here."""
    found = bundle.lookup(case, impl) if bundle is not None else None
    if found is not None:
        return found
    b = toolchains.build(impl.toolchain, impl.source, arch, impl.flags, impl.command)
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
    (runner.definition.revisions), in its place in case_doc["implementations"]."""
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
        except toolchains.ToolchainMissing as exc:
            docs[impl.name]["status"] = "skipped"
            docs[impl.name]["skip_reason"] = str(exc)
            say(f"  {impl.name}: skipped: {exc}")
            continue
        except toolchains.BuildError as exc:
            record_failure(case_doc, "build", f"{where}: {exc}")
            return {}
    case_doc["implementations"] = docs
    for name, text in built.items():
        impl = case.impl(docs[name].get("variant_of", name))
        where = f"case {case.id}, implementation {name} ({impl.source_rel})"
        try:
            module = ptx.parse(text)
            ptx.check_signature(module, impl.entry, case.signature(), where=where)
        except (ptx.PtxError, ptx.SignatureError) as exc:
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


@dataclass
class Built:
    """A case's build, kept for its other points (a sweep builds once): the implementations'
    document blocks after build and static analysis, the PTX by name and the host's seconds."""

    implementations: dict | None = None
    ptx: dict | None = None
    failed: dict | None = None  # the case document of a build that failed
    phases_s: dict = field(default_factory=dict)


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
    where it can (timer_choice). `built`: the case's build, made here when it holds none."""
    deadline = None if budget_left_s is None else time.monotonic() + budget_left_s
    measured = sweep.at_point(case, point)
    case_doc = case_skeleton(measured)
    settings, timer_reason = timing_settings(case, options, cupti_reason)
    if point is not None and point != case.sweep.headline:
        settings = point_timing.settings_for_point(settings, options)
    case_timeout_s = options.timeout_s or case.settings.timeout_s
    by_budget = budget_left_s is not None and budget_left_s < case_timeout_s
    case_doc["settings"] = {
        **settings,
        "timer_reason": timer_reason,
        "timeout_s": budget_left_s if by_budget else case_timeout_s,
    }
    fresh = built is None or (built.ptx is None and built.failed is None)
    built = built or Built()
    ptx_by_name = _build_once(
        case, arch, options, case_doc, say, bundle, revisions, environment_device, built
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
    _record_worker_failure(case_doc, case, outcome, timeout_s, by_budget)
    if options.skip_check:
        for impl in case_doc["implementations"].values():
            impl.setdefault("check", {"status": "not_checked"})
    _finish(case_doc, measured, outcome.record, peaks)
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
    say(f"[{label}] {_outcome_line(case_doc)}")
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
        "device": options.device,
        "device_uuid": (environment_device or {}).get("uuid"),
        "variants": {
            n: d["variant_of"] for n, d in case_doc["implementations"].items() if "variant_of" in d
        },
    }


def _record_worker_failure(
    case_doc: dict, case, outcome, timeout_s: float, by_budget: bool
) -> None:
    """A worker that timed out (killed, with its kernels and context), crashed without a
    record, or reported an error fails the case with that phase and message."""
    record = outcome.record
    if outcome.timed_out:
        limit = (
            f"the {timeout_s:.0f} s left of the suite's --budget-s"
            if by_budget
            else f"{timeout_s:g} s"
        )
        record_failure(
            case_doc,
            "timeout",
            f"case {case.id} did not finish within {limit} (last phase: {outcome.last_phase or 'start'}); "
            "its worker process was killed, which ends its kernels and its context",
        )
    elif record is None:
        tail = "\n".join(outcome.stderr_tail[-10:])
        record_failure(
            case_doc,
            "crash",
            f"case {case.id}: the worker exited with status {outcome.returncode} "
            f"during phase {outcome.last_phase or 'start'} without a result\n{tail}",
        )
    elif record.get("status") != "ok":
        err = record.get("error", {})
        record_failure(
            case_doc,
            err.get("phase", "unknown"),
            err.get("message", "unknown error"),
            err.get("cuda_error"),
        )


def _finish(case_doc: dict, case, record: dict | None, peaks: dict) -> None:
    """The case's document from the worker's record (runner.execution.result), with its working
    set and its bytes read and written a call for the rate ceiling."""
    geometry = case.geometry(case.dims)
    sizes = spec.buffer_bytes(case, geometry.lengths)
    result.finish_case(
        case_doc,
        record,
        geometry,
        case.flop_dtype,
        peaks,
        sum(sizes.values()),
        access_split(case, sizes, geometry.bytes),
    )


def _outcome_line(case_doc: dict) -> str:
    """The case's last progress line: its gaps (and its A/A control's), or why it failed."""
    if case_doc["status"] != "ok":
        return (
            f"FAILED in {case_doc['error']['phase']}: "
            f"{case_doc['error']['message'].splitlines()[0]}"
        )
    gaps = [
        f"{n} {i['gap']['ratio_of_medians']:.3f}x [{i['gap']['ci_low']:.3f}, {i['gap']['ci_high']:.3f}]"
        for n, i in case_doc["implementations"].items()
        if i.get("gap")
    ]
    if aa := case_doc.get("aa_control"):  # the hidden A/A control and the term it set
        gaps.append(
            f"A/A control {aa['ratio_of_medians']:.4f}x [{aa['ci_low']:.4f}, "
            f"{aa['ci_high']:.4f}], systematic {aa['systematic']:.3%}"
        )
    return f"ok: {'; '.join(gaps) or 'no candidates timed'}"


def over_budget(case: manifest.CaseSpec, budget_s: float, done: int) -> dict:
    """A case left out because the suite's time budget was spent: skipped, saying why."""
    case_doc = case_skeleton(case)
    case_doc["status"] = "skipped"
    case_doc["error"] = {
        "phase": "timeout",
        "message": f"not run: the suite's time budget (--budget-s {budget_s:g}) was spent after "
        f"{done} case(s)",
    }
    return case_doc
