"""`runner bench`: build, gate and time every case of a suite, one worker process per case.

This process never creates a CUDA context: the environment probe and each case run in
worker processes (runner.isolation), so a case that faults or hangs is killed and
recorded as a structured error while the remaining cases still run.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from protocol.codec import encode
from protocol.progress import PARTIAL_DOCUMENT_PREFIX
from protocol.validation import DocumentError, validate
from runner import driver, environment, manifest, ptx, result, toolchains
from runner.bundle import Bundle, BundleError
from runner.explain import profiling
from runner.explain.static import record_static
from runner.isolation import run_worker
from runner.revisions import variants
from runner.timing import cupti


@dataclass(frozen=True)
class BenchOptions:
    case_ids: tuple[str, ...] = ()
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
    revisions: tuple[tuple[str, Path], ...] = ()  # labelled bundles (runner.revisions), in order
    profile: bool = False  # after timing, Nsight Compute counters per implementation (ncu)
    static: bool = True  # ptxas -v resources and the SASS instruction mix, where the tools are
    # "auto": CUPTI's kernel timestamps in cold mode where cupti-python works, else events
    timer: str = "auto"
    precision: float | None = None  # the stopping rule's target half-width (0.005 is 0.5%)
    precision_max_s: float | None = None  # its time cap per case
    max_samples: int | None = None  # its sample cap per implementation


class Progress:
    """Human progress on stderr: one line per case and phase (silent with -q)."""

    def __init__(self, quiet: bool):
        self.quiet = quiet

    def __call__(self, text: str) -> None:
        if not self.quiet:
            print(text, file=sys.stderr, flush=True)


def timing_settings(
    case: manifest.CaseSpec, options: BenchOptions, cupti_usable: bool = False
) -> dict:
    s = case.settings
    mode = options.mode or s.mode
    samples = options.samples or s.samples
    settings = {
        "mode": mode,
        "samples": samples,
        "warmup": s.warmup if options.warmup is None else options.warmup,
        "target_sample_s": (options.target_sample_ms or s.target_sample_ms) / 1000.0,
        "timer": cupti.resolve_timer(options.timer, mode, cupti_usable),
    }
    if options.precision is not None:
        settings["precision"] = options.precision
        settings["max_samples"] = max(samples, options.max_samples or 1000)
        settings["precision_max_s"] = options.precision_max_s or 60.0
    return settings


def effective_mode(cases, options: BenchOptions) -> str | None:
    """The run's timing mode for options.mode: --mode, else the one mode the manifest gives its
    cases (so a run on the defaults and a later explicit `--mode hot` run say the same); cases
    of several modes give them joined, "cold+hot"."""
    modes = sorted({timing_settings(case, options)["mode"] for case in cases})
    return "+".join(modes) or None


def probe_environment(options: BenchOptions) -> dict:
    """The device and software block, measured in a worker (raises NoGpuError without a GPU)."""
    outcome = run_worker(
        {"job": "environment", "device": options.device},
        timeout_s=180,
        echo_stderr=not options.quiet,
    )
    record = outcome.record or {}
    if record.get("no_gpu"):
        raise driver.NoGpuError(record["error"]["message"])
    if record.get("status") != "ok":
        why = record.get("error", {}).get("message") or (
            "timed out" if outcome.timed_out else "\n".join(outcome.stderr_tail)
        )
        raise driver.NoGpuError(f"the environment probe failed: {why}")
    return record["environment"]


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


def _fail(case_doc: dict, phase: str, message: str, cuda_error: str | None = None) -> None:
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
    (runner.revisions), in its place in case_doc["implementations"]."""
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
            _fail(case_doc, "build", f"{where}: {exc}")
            return {}
        except toolchains.ToolchainMissing as exc:
            docs[impl.name]["status"] = "skipped"
            docs[impl.name]["skip_reason"] = str(exc)
            say(f"  {impl.name}: skipped: {exc}")
            continue
        except toolchains.BuildError as exc:
            _fail(case_doc, "build", f"{where}: {exc}")
            return {}
    case_doc["implementations"] = docs
    for name, text in built.items():
        impl = case.impl(docs[name].get("variant_of", name))
        where = f"case {case.id}, implementation {name} ({impl.source_rel})"
        try:
            module = ptx.parse(text)
            ptx.check_signature(module, impl.entry, case.signature(), where=where)
        except (ptx.PtxError, ptx.SignatureError) as exc:
            _fail(case_doc, "signature", str(exc))
            return {}
        docs[name]["ptx"] = ptx.describe(module)
    if case.baseline.name not in built:
        _fail(
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
    cupti_usable: bool = False,
) -> dict:
    """One case in its worker; with `budget_left_s` (what is left of the suite's --budget-s)
    the case's own timeout is cut to it, so one oversized case cannot spend the whole job."""
    deadline = None if budget_left_s is None else time.monotonic() + budget_left_s
    case_doc = case_skeleton(case)
    settings = timing_settings(case, options, cupti_usable)
    case_timeout_s = options.timeout_s or case.settings.timeout_s
    by_budget = budget_left_s is not None and budget_left_s < case_timeout_s
    case_doc["settings"] = {
        **settings,
        "timeout_s": budget_left_s if by_budget else case_timeout_s,
    }
    say(f"[{case.id}] build (arch {arch})")
    built = build_case(case, arch, case_doc, say, bundle, revisions)
    if case_doc["status"] == "failed":
        say(f"[{case.id}] FAILED in {case_doc['error']['phase']}: {case_doc['error']['message']}")
        return case_doc
    if options.static:
        record_static(case, case_doc, built, arch, environment_device, bundle)
    job = {
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

    def on_event(event):
        if event.get("event") == "phase":
            extra = f" ({event['mode']})" if "mode" in event else ""
            say(f"[{case.id}] {event['phase']}{extra}")

    timeout_s = case_doc["settings"]["timeout_s"]
    outcome = run_worker(job, timeout_s=timeout_s, on_event=on_event, echo_stderr=not options.quiet)
    record = outcome.record
    if outcome.timed_out:
        limit = (
            f"the {timeout_s:.0f} s left of the suite's --budget-s"
            if by_budget
            else f"{timeout_s:g} s"
        )
        _fail(
            case_doc,
            "timeout",
            f"case {case.id} did not finish within {limit} (last phase: {outcome.last_phase or 'start'}); "
            "its worker process was killed, which ends its kernels and its context",
        )
    elif record is None:
        tail = "\n".join(outcome.stderr_tail[-10:])
        _fail(
            case_doc,
            "crash",
            f"case {case.id}: the worker exited with status {outcome.returncode} "
            f"during phase {outcome.last_phase or 'start'} without a result\n{tail}",
        )
    elif record.get("status") != "ok":
        err = record.get("error", {})
        _fail(
            case_doc,
            err.get("phase", "unknown"),
            err.get("message", "unknown error"),
            err.get("cuda_error"),
        )
    if options.skip_check:
        for impl in case_doc["implementations"].values():
            impl.setdefault("check", {"status": "not_checked"})
    geometry = case.geometry(case.dims)
    working_set = sum(manifest.buffer_bytes(case, geometry.lengths).values())
    result.finish_case(case_doc, record, geometry, case.flop_dtype, peaks, working_set)
    case_doc["worker_wall_s"] = outcome.wall_s
    if options.profile and case_doc["status"] == "ok":  # after timing, never inside it
        entries = {
            name: case.impl(doc.get("variant_of", name)).entry  # X@base: X's entry
            for name, doc in case_doc["implementations"].items()
            if name in built
        }
        profiling.profile_case(suite.path, case_doc, entries, built, say, options.device, deadline)
    if case_doc["status"] == "ok":
        gaps = [
            f"{n} {i['gap']['ratio_of_medians']:.3f}x [{i['gap']['ci_low']:.3f}, {i['gap']['ci_high']:.3f}]"
            for n, i in case_doc["implementations"].items()
            if i.get("gap")
        ]
        say(f"[{case.id}] ok: {'; '.join(gaps) or 'no candidates timed'}")
    else:
        say(
            f"[{case.id}] FAILED in {case_doc['error']['phase']}: {case_doc['error']['message'].splitlines()[0]}"
        )
    return case_doc


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


def write_atomic(path: Path, data: bytes) -> None:
    """`data` under `path`, whole or not at all: a temporary file in the same folder, flushed to
    disk, then renamed over `path`. On any failure (a full disk) the temporary file is removed
    and the error raised; an earlier document under `path` stays as it was."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def run_suite(manifest_path: str | Path, options: BenchOptions) -> tuple[dict, int]:
    """Returns (result document, exit status). Raises ManifestError / NoGpuError for exit 2."""
    say = Progress(options.quiet)
    suite = manifest.load(manifest_path)
    cases = [suite.case(cid) for cid in options.case_ids] if options.case_ids else list(suite.cases)
    bundle = (
        Bundle.load(options.bundle) if options.bundle else None
    )  # bad input: before any GPU work
    revisions = {label: Bundle.load(path) for label, path in options.revisions}
    started = environment.utc_now()
    say(f"kernelgap: {suite.name} v{suite.version}, {len(cases)} case(s); probing the GPU")
    env = probe_environment(options)
    env["sensors_start"] = env.pop("sensors", None)
    device = env["device"]
    arch = options.arch or device["arch"]
    for where, each in [
        (options.bundle, bundle),
        *((p, revisions[k]) for k, p in options.revisions),
    ]:
        if each is not None and each.manifest["arch"] != arch:
            raise BundleError(
                f"{where}: built for {each.manifest['arch']}, but this run targets {arch} "
                f"({device['name']}); rebuild it with --arch {arch}, or pass --arch {each.manifest['arch']}"
            )
    env["toolchains"] = {}
    cupti_reason = cupti.unavailable_reason()
    env["timers"] = {"events": "usable", "cupti": cupti_reason or "usable"}
    if options.timer == "cupti" and cupti_reason:
        raise driver.NoGpuError(f"--timer cupti cannot be used here: {cupti_reason}")
    say(
        f"kernelgap: {device['name']} ({device['arch']}, {device['sm_count']} SMs), driver {device.get('driver_version_string')}"
    )
    suite_block = {
        "name": suite.name,
        "version": suite.version,
        "path": str(suite.path),
        "sha256": suite.sha256,
        "gpu": suite.gpu,
        **environment.git_commit(suite.root),
    }
    if suite.primary:
        suite_block["primary"] = suite.primary
    if options.commit:  # "<sha>-dirty" from harness run: a checkout with uncommitted changes
        sha, dirty = options.commit.removesuffix("-dirty"), options.commit.endswith("-dirty")
        suite_block.update(commit=sha, dirty=dirty)
    options_block = {
        "mode": effective_mode(cases, options),
        "samples": options.samples,
        "warmup": options.warmup,
        "target_sample_ms": options.target_sample_ms,
        "arch": arch,
        "skip_check": options.skip_check,
        "cases": list(options.case_ids),
        "bundle": str(options.bundle) if options.bundle else None,
        **({"revisions": {k: str(p) for k, p in options.revisions}} if options.revisions else {}),
        "budget_s": options.budget_s,
        "profile": options.profile,
        "static": options.static,
        "timer": options.timer,
        "precision": options.precision,
    }
    case_docs = []
    t0 = time.monotonic()
    deadline = t0 + options.budget_s if options.budget_s else None
    peaks = {**env["peaks"], "l2_bytes": device.get("l2_bytes")}  # for the physical limits
    for index, case in enumerate(cases):
        say(f"kernelgap: {position(index, len(cases), time.monotonic() - t0)}: {case.id}")
        left_s = None if deadline is None else deadline - time.monotonic()
        if left_s is not None and left_s <= 0:
            case_docs.append(over_budget(case, options.budget_s, len(case_docs)))
            say(f"[{case.id}] not run: {case_docs[-1]['error']['message']}")
            continue
        try:
            case_docs.append(
                run_one(
                    suite,
                    case,
                    arch,
                    options,
                    peaks,
                    say,
                    bundle,
                    left_s,
                    revisions=revisions,
                    environment_device=env["device"],
                    cupti_usable=cupti_reason is None,
                )
            )
        except Exception as exc:  # a bug or an unforeseen failure costs this case, not the run
            case_doc = case_skeleton(case)
            _fail(case_doc, "unknown", f"case {case.id}: {type(exc).__name__}: {exc}")
            say(f"[{case.id}] FAILED: {type(exc).__name__}: {exc}")
            case_docs.append(case_doc)
        for impl in case_docs[-1]["implementations"].values():
            if "build" in impl:
                env["toolchains"][impl["toolchain"]] = {"version": impl["build"]["version"]}
        # After every case, so a crash or a dropped connection never loses the earlier ones.
        partial = result.document(suite_block, env, options_block, case_docs, started, None)
        if options.output:
            try:
                write_atomic(options.output, encode(partial, pretty=True))
            except OSError as exc:  # a full disk must not end the run: the end tries again
                say(f"kernelgap: could not write the partial document to {options.output}: {exc}")
        if options.emit_partial:
            sys.stderr.buffer.write(PARTIAL_DOCUMENT_PREFIX + encode(partial) + b"\n")
            sys.stderr.flush()
    run_max = result.run_max_clock(case_docs)  # clocks flagged against the whole run's maximum
    for case_doc in case_docs:
        result.apply_clocks(case_doc, run_max)
    env["sensors_end"] = environment.nvml_sensors(options.device, uuid=device.get("uuid"))
    doc = result.document(
        suite_block, env, options_block, case_docs, started, environment.utc_now()
    )
    try:
        validate(doc, "result", "result document")
    except DocumentError as exc:
        exc.document = doc  # written out all the same: nothing measured is lost
        raise
    status = 0 if all(c["status"] == "ok" for c in case_docs) else 1
    return doc, status
