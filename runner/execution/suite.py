"""`runner bench`: build, gate and time every case of a suite, one worker process per case.

This process never creates a CUDA context: the environment probe and each case run in
worker processes (runner.execution.isolation), so a case that faults or hangs is killed and
recorded as a structured error while the remaining cases still run.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
import time
from pathlib import Path

from protocol.codec import encode
from protocol.progress import PARTIAL_DOCUMENT_PREFIX
from protocol.terminal_text import visible
from protocol.validation import DocumentError, validate
from runner.definition import manifest, provenance
from runner.definition.bundle import Bundle, BundleError
from runner.document import clocks, run
from runner.document.writing import write_atomic
from runner.execution import remeasure, sharding
from runner.execution.case_job import (
    BenchOptions,
    case_mode,
    case_skeleton,
    over_budget,
    record_failure,
    run_one,
    timing_settings,
)
from runner.execution.isolation import keep_ahead, run_worker, stop_ahead
from runner.gpu import driver
from runner.measurement import environment, sharing
from runner.measurement.timing import cupti, timer_choice


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
        say(f"kernelgap: {timer_choice.cold_events_warning(f'{len(cold)} case(s) timed')}")


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
        raise driver.NoGpuError(record["error"]["message"])
    if record.get("status") != "ok":
        why = record.get("error", {}).get("message") or (
            "timed out" if outcome.timed_out else "\n".join(outcome.stderr_tail)
        )
        raise driver.NoGpuError(f"the environment probe failed: {why}")
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
        gpus = sharding.parse_gpus(options.gpus, env.get("device_count"))
    except ValueError as exc:
        raise manifest.ManifestError(str(exc)) from None
    found = {options.device: env["device"]}  # the run's first GPU, probed already
    errors: dict[int, str] = {}

    def probe(d: int) -> None:
        try:
            found[d] = probe_environment(dataclasses.replace(options, device=d))["device"]
        except driver.NoGpuError as exc:
            errors[d] = str(exc)

    threads = [threading.Thread(target=probe, args=(d,)) for d in gpus if d not in found]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise driver.NoGpuError("; ".join(f"GPU {d}: {e}" for d, e in sorted(errors.items())))
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
    suite = manifest.load(manifest_path)
    cases = [suite.case(cid) for cid in options.case_ids] if options.case_ids else list(suite.cases)
    bundle = (
        Bundle.load(options.bundle) if options.bundle else None
    )  # bad input: before any GPU work
    revisions = {label: Bundle.load(path) for label, path in options.revisions}
    if options.gpus and options.gpus.strip() != "all":  # its form before any GPU work
        try:
            first = sharding.parse_gpus(options.gpus)[0]
        except ValueError as exc:
            raise manifest.ManifestError(str(exc)) from None
        options = dataclasses.replace(options, device=first)  # the probe's is the run's first
    try:  # a bad file, before any GPU work
        expected_s = sharding.load_previous(options.previous)
    except (OSError, ValueError) as exc:
        raise manifest.ManifestError(
            f"--previous {options.previous}: not a result document to deal cases by ({exc})"
        ) from None
    cupti_reason = cupti.unavailable_reason()
    check_timers(cases, options, cupti_reason, Progress(False))  # a warning even with -q
    started = provenance.utc_now()
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
    devices = probe_devices(options, env)
    env.pop("device_count", None)
    # no worker of this run holds a context now, nor at the end: a listed process is another's
    shared_at_start = [sharing.observe(d.get("uuid"), i) for i, d in devices.items()]
    env["timers"] = {"events": "usable", "cupti": cupti_reason or "usable"}
    say(
        f"kernelgap: {device['name']} ({device['arch']}, {device['sm_count']} SMs), driver {device.get('driver_version_string')}"
    )
    suite_block = {
        "name": suite.name,
        "version": suite.version,
        "path": str(suite.path),
        "sha256": suite.sha256,
        "gpu": suite.gpu,
        **provenance.git_commit(suite.root),
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
        **({"gpus": list(devices)} if options.gpus else {}),
    }
    case_docs: list[dict] = []
    t0 = time.monotonic()
    deadline = t0 + options.budget_s if options.budget_s else None
    peaks = {**env["peaks"], "l2_bytes": device.get("l2_bytes")}  # for the physical limits
    if len(devices) > 1:
        env["devices"] = [device_block(d, info) for d, info in devices.items()]
        names = ", ".join(f"{d} {info['name']}" for d, info in devices.items())
        say(f"kernelgap: {len(devices)} GPUs: {names}")

    def one(case, d: int) -> dict:
        say(f"kernelgap: {position(len(case_docs), len(cases), time.monotonic() - t0)}: {case.id}")
        left_s = None if deadline is None else deadline - time.monotonic()
        if left_s is not None and left_s <= 0:
            case_doc = over_budget(case, options.budget_s, len(case_docs))
            say(f"[{case.id}] not run: {case_doc['error']['message']}")
            return case_doc
        case_doc = measure_case(case, dataclasses.replace(options, device=d), left_s)
        reason = remeasure.needs_remeasure(case_doc)
        left_s = None if deadline is None else deadline - time.monotonic()
        spent_s = case_doc.get("worker_wall_s") or 0.0
        if reason and (left_s is None or left_s > remeasure.COOLDOWN_S + 2 * spent_s):
            again = remeasure.remeasure_options(options, case.settings.target_sample_ms)
            say(f"[{case.id}] {reason}: measuring it again after {remeasure.COOLDOWN_S:.0f} s")
            remeasure.cool_down()
            left_s = None if deadline is None else deadline - time.monotonic()
            second = measure_case(case, dataclasses.replace(again, device=d), left_s)
            case_doc = remeasure.settle(
                case_doc, second, reason, remeasure.COOLDOWN_S, again.target_sample_ms
            )
        case_doc["device"] = device_block(d, devices[d])
        return case_doc

    def measure_case(case, case_options: BenchOptions, left_s: float | None) -> dict:
        try:
            return run_one(
                suite,
                case,
                arch,
                case_options,
                peaks,
                say,
                bundle,
                left_s,
                revisions=revisions,
                environment_device=devices[case_options.device],
                cupti_reason=cupti_reason,
            )
        except Exception as exc:  # a bug or an unforeseen failure costs this case, not the run
            case_doc = case_skeleton(case)
            record_failure(case_doc, "unknown", f"case {case.id}: {type(exc).__name__}: {exc}")
            say(f"[{case.id}] FAILED: {type(exc).__name__}: {exc}")
            return case_doc

    def finished(case_doc: dict) -> None:
        case_docs.append(case_doc)
        case_docs.sort(key=lambda c: order[c["id"]])  # the suite's order, whatever ran first
        for impl in case_doc["implementations"].values():
            if "build" in impl:
                env["toolchains"][impl["toolchain"]] = {"version": impl["build"]["version"]}
        # After every case, so a crash or a dropped connection never loses the earlier ones.
        partial = run.document(suite_block, env, options_block, case_docs, started, None)
        if options.output:
            try:
                write_atomic(options.output, encode(partial, pretty=True))
            except OSError as exc:  # a full disk must not end the run: the end tries again
                say(f"kernelgap: could not write the partial document to {options.output}: {exc}")
        if options.emit_partial:
            sys.stderr.buffer.write(PARTIAL_DOCUMENT_PREFIX + encode(partial) + b"\n")
            sys.stderr.flush()

    def not_run(case, why: str) -> dict:
        case_doc = case_skeleton(case)
        record_failure(case_doc, "setup", f"case {case.id}: {why}")
        case_doc["status"] = "skipped"
        return case_doc

    order = {c.id: i for i, c in enumerate(cases)}
    dealt = sharding.deal_order(cases, expected_s)
    sharding.run_sharded(dealt, list(devices), one, finished, not_run, say)
    apply_run_clocks(case_docs)
    env["sensors_end"] = environment.nvml_sensors(options.device, uuid=device.get("uuid"))
    ended = [sharing.observe(d.get("uuid"), i) for i, d in devices.items()]
    env["sharing"] = sharing.verdict(shared_at_start + ended)
    if env["sharing"]["shared"]:
        say(f"kernelgap: the GPU was shared during the run: {env['sharing']['why']}")
    doc = run.document(suite_block, env, options_block, case_docs, started, provenance.utc_now())
    try:
        validate(doc, "result", "result document")
    except DocumentError as exc:
        exc.document = doc  # written out all the same: nothing measured is lost
        raise
    status = 0 if all(c["status"] == "ok" for c in case_docs) else 1
    return doc, status


def apply_run_clocks(case_docs: list[dict]) -> None:
    """Flag every case's samples against the highest SM clock read on the same GPU in this run
    (cards of one host clock apart: one card's maximum says nothing of another's samples)."""
    by_device: dict = {}
    for case_doc in case_docs:
        where = case_doc.get("device") or {}
        by_device.setdefault(where.get("uuid") or where.get("index"), []).append(case_doc)
    for group in by_device.values():
        run_max = clocks.run_max_clock(group)
        for case_doc in group:
            clocks.apply_clocks(case_doc, run_max)
