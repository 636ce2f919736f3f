"""`runner bench --profile`: after a case has been timed (its worker gone, its samples final),
Nsight Compute profiles one launch of each implementation at the timed size, one ncu process per
implementation, and the counters are recorded as that implementation's `profile` block.

The block is flagged `"profiled": true` and kept apart from `timing`: ncu replays the kernel
several times with its own cache and clock control, so its numbers explain a gap, never measure
one. Where ncu is missing or fails the block says why and the timings stand as they are.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from protocol.codec import encode
from runner.explain import ncu, tools

TIMEOUT_S = 600.0
REPO_ROOT = Path(__file__).resolve().parent.parent.parent


# The one-launch program the tools run (runner.execution.profile_launch): named, not imported,
# since it runs in a process of its own under the tool; the command line is not in the way.
DRIVER_MODULE = "runner.execution.profile_launch"


def _driver_command(job_path: str) -> list[str]:
    return [sys.executable, "-m", DRIVER_MODULE, job_path]


def _environment() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    env["LC_ALL"] = "C"  # a decimal point, never a locale's comma, in ncu's numbers
    return env


def under_tool(job: dict, wrap, timeout_s: float, name: str):
    """One launch of `job` (`python -m runner.execution.profile_launch JOB`) under a tool: `wrap(driver argv,
    log path)` gives the tool's argv. (that argv, the finished process, the tool's log file's
    text); TimeoutExpired passes up. ncu (here) and compute-sanitizer (runner.execution.sanitize)
    both run this way."""
    with tempfile.TemporaryDirectory(prefix=f"kernelgap-{name}-") as tmp:
        job_path, log_path = str(Path(tmp) / "job.json"), str(Path(tmp) / f"{name}.log")
        Path(job_path).write_bytes(encode(job))
        argv = wrap(_driver_command(job_path), log_path)
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            cwd=REPO_ROOT,
            env=_environment(),
        )
        log = Path(log_path).read_text(errors="replace") if Path(log_path).exists() else ""
    return argv, done, log


def _run_ncu(path: str, entry: str, job: dict, metrics: list[str], timeout_s: float):
    """(argv without the log file, ncu's text output, exit status); TimeoutExpired passes up."""
    argv, done, log = under_tool(
        job,
        lambda driver, log_path: ncu.command(path, entry, driver, log_path, metrics),
        timeout_s,
        "ncu",
    )
    shown = ["ncu", *argv[1 : argv.index("--log-file")]]
    return shown, "\n".join(filter(None, [log, done.stdout, done.stderr])), done.returncode


def profile_impl(
    manifest_path: Path,
    case_id: str,
    impl_name: str,
    entry: str,
    ptx_text: str,
    device: int = 0,
    timeout_s: float = TIMEOUT_S,
) -> dict:
    """The `profile` block of one implementation (status ok, failed or unavailable). Metrics
    that this ncu or GPU does not know (named in ncu's ==ERROR== lines) are dropped and ncu is
    run once more without them; the block lists them as `dropped_metrics`."""
    path = tools.find("ncu")
    if path is None:
        return {"status": "unavailable", "profiled": True, "reason": tools.INSTALL_HINT["ncu"]}
    job = {
        "manifest": str(manifest_path.resolve()),
        "case": case_id,
        "impl": impl_name,
        "ptx": ptx_text,
        "device": device,
    }
    block = {
        "profiled": True,
        "tool": "ncu",
        "version": tools.version(path),
        "size": "timed",  # the case's dims, as timed
        "launches": 1,
    }
    metrics = ncu.metrics()
    t0 = time.monotonic()
    for attempt in range(2):
        try:
            left_s = timeout_s - (time.monotonic() - t0)
            block["command"], text, status = _run_ncu(path, entry, job, metrics, left_s)
        except (subprocess.TimeoutExpired, ValueError):
            return {**block, "status": "failed", "reason": f"ncu did not finish in {timeout_s:g} s"}
        block["wall_s"] = time.monotonic() - t0
        try:
            return {**block, "status": "ok", **ncu.parse(text, entry)}
        except ncu.NcuOutputError as exc:
            rejected = ncu.rejected_metrics(text, metrics)
            if attempt == 0 and rejected and len(rejected) < len(metrics):
                metrics = [m for m in metrics if m not in rejected]
                block["dropped_metrics"] = rejected
                continue
            reason = str(exc)
            if status != 0:
                reason = f"ncu exited with status {status}: {reason}"
            return {**block, "status": "failed", "reason": reason}
    raise AssertionError("unreachable")


def profile_case(
    manifest_path: Path,
    case_doc: dict,
    entries: dict[str, str],
    built: dict[str, str],
    say,
    device: int = 0,
    deadline: float | None = None,
) -> None:
    """Profile every built implementation of an ok case, in place (`profile` per implementation);
    implementations left when `deadline` (time.monotonic) has passed are marked not profiled."""
    for name, ptx_text in built.items():
        doc = case_doc["implementations"][name]
        left_s = TIMEOUT_S if deadline is None else min(TIMEOUT_S, deadline - time.monotonic())
        if left_s <= 0:
            doc["profile"] = {
                "status": "unavailable",
                "profiled": True,
                "reason": "not profiled: the suite's time budget (--budget-s) was spent",
            }
            continue
        say(f"[{case_doc['id']}] profile {name} (ncu)")
        doc["profile"] = profile_impl(
            manifest_path, case_doc["id"], name, entries[name], ptx_text, device, left_s
        )
        if doc["profile"]["status"] != "ok":
            say(f"  {name}: not profiled: {doc['profile']['reason'].splitlines()[0]}")
