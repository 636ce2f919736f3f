"""`runner bench --profile`: after a case has been timed (its worker gone, its samples final),
Nsight Compute profiles one launch of each implementation at the timed size, one ncu process per
implementation, and the counters are recorded as that implementation's `profile` block.

The block is flagged `"profiled": true` and kept apart from `timing`: ncu replays the kernel
several times with its own cache and clock control, so its numbers explain a gap, never measure
one. Where ncu is missing or fails the block says why and the timings stand as they are.

Nsight Compute (ncu): the command line that profiles one implementation, and its CSV parsed
into the `profile` block of the result document.

`ncu --csv --print-units base --metrics A,B,... -k regex:^ENTRY$ --launch-count 1 <driver>`
prints, after its `==PROF==` progress lines, one CSV row per (kernel launch, metric):

    "ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size",
    "Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"

(older releases lack some of the middle columns; rows are read by header name, so only "ID",
"Kernel Name", "Metric Name", "Metric Unit" and "Metric Value" must be there). With
`--print-units base` values are in the metric's base unit (bytes, not MB); a value may carry
thousands separators ("536,870,912"), and a metric this GPU cannot collect reads "n/a"."""

from __future__ import annotations

import csv
import io
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from protocol.codec import encode
from runner.errors import NcuOutputError
from runner.explain import static

COUNTERS = (
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "lts__t_sector_hit_rate.pct",
    "smsp__inst_executed.sum",
    "sm__warps_active.avg.pct_of_peak_sustained_active",  # achieved occupancy
    "gpu__time_duration.sum",  # ncu's own duration of the profiled launch: context, not a timing
)


# Warp-state statistics (the WarpStateStats section's metrics): the average number of warps
# stalled for each reason per issue cycle. "selected" is the warp that issued, not a stall.
STALL_REASONS = (
    "barrier",
    "branch_resolving",
    "dispatch_stall",
    "drain",
    "imc_miss",
    "lg_throttle",
    "long_scoreboard",
    "math_pipe_throttle",
    "membar",
    "mio_throttle",
    "misc",
    "no_instruction",
    "not_selected",
    "selected",
    "short_scoreboard",
    "sleeping",
    "tex_throttle",
    "wait",
)


STALL_METRIC = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"


TOP_STALLS = 3


REQUIRED_COLUMNS = ("ID", "Kernel Name", "Metric Name", "Metric Unit", "Metric Value")


_GROUPED = re.compile(r"^-?\d{1,3}(,\d{3})+(\.\d+)?$")


def metrics() -> list[str]:
    return [*COUNTERS, *(STALL_METRIC.format(r) for r in STALL_REASONS)]


def command(
    ncu: str, entry: str, driver: list[str], log_file: str, metric_names: list[str] | None = None
) -> list[str]:
    """ncu profiling the first launch of `entry` in the `driver` process, its report in CSV."""
    return [
        ncu,
        "--csv",
        "--print-units",
        "base",
        "--metrics",
        ",".join(metric_names or metrics()),
        "-k",
        f"regex:^{re.escape(entry)}$",
        "--launch-count",
        "1",
        "--clock-control",  # ncu would lock the clocks to base by default: leave the card alone
        "none",
        "--target-processes",
        "all",
        "--log-file",
        log_file,
        *driver,
    ]


def rejected_metrics(text: str, asked: list[str]) -> list[str]:
    """The metrics of `asked` that ncu's error lines name (a metric this version or GPU lacks:
    "==ERROR== Failed to find metric ...")."""
    errors = "\n".join(line for line in text.splitlines() if line.startswith("==ERROR=="))
    return [m for m in asked if m in errors or m.rsplit(".", 1)[0] in errors]


def number(text: str) -> float | None:
    """A metric value as a float; None for n/a or an empty cell."""
    text = text.strip()
    if _GROUPED.match(text):
        text = text.replace(",", "")
    try:
        return float(text)
    except ValueError:
        return None


def rows(text: str) -> list[dict]:
    """The metric rows of ncu's CSV output; progress and warning lines around it are skipped."""
    lines = text.splitlines()
    start = next((n for n, line in enumerate(lines) if line.startswith('"ID",')), None)
    if start is None:
        return []
    table = [line for line in lines[start:] if line.startswith('"')]
    reader = csv.DictReader(io.StringIO("\n".join(table)))
    missing = [c for c in REQUIRED_COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise NcuOutputError(f"ncu CSV header lacks {', '.join(missing)}: {lines[start]}")
    return [row for row in reader if row.get("Metric Name")]


def _kernel_matches(name: str, entry: str) -> bool:
    # ncu names a C++ kernel with its signature ("void k<int>(double *)"); ours are extern "C"
    return name == entry or name.startswith(f"{entry}(") or f" {entry}(" in name


def stalls(values: dict[str, dict]) -> list[dict]:
    """The stall reasons, largest first, each with its share of all stalled warps (the issuing
    warp, "selected", is left out of the ranking)."""
    found = []
    for reason in STALL_REASONS:
        metric = STALL_METRIC.format(reason)
        value = values.get(metric, {}).get("value")
        if value is not None and reason != "selected":
            found.append({"reason": reason, "metric": metric, "value": value})
    total = sum(s["value"] for s in found)
    for s in found:
        s["share"] = s["value"] / total if total > 0 else 0.0
    found.sort(key=lambda s: -s["value"])
    return found[:TOP_STALLS]


def parse(text: str, entry: str) -> dict:
    """{"metrics": {name: {"value", "unit"}}, "stalls": [...], "kernel": name, "launch_id"} for
    the first profiled launch of `entry`; NcuOutputError when the output has none."""
    table = rows(text)
    mine = [r for r in table if _kernel_matches(r["Kernel Name"], entry)]
    if not mine:
        seen = sorted({r["Kernel Name"] for r in table})
        tail = "\n".join(line for line in text.splitlines()[-15:] if line.strip())
        raise NcuOutputError(
            f"ncu reported no metrics for kernel {entry!r}"
            + (f" (kernels it profiled: {', '.join(seen)})" if seen else "")
            + f"; its output ended with:\n{tail}"
        )
    first = mine[0]["ID"]
    values = {
        r["Metric Name"]: {"value": number(r["Metric Value"]), "unit": r["Metric Unit"]}
        for r in mine
        if r["ID"] == first
    }
    return {
        "kernel": mine[0]["Kernel Name"],
        "launch_id": first,
        "metrics": values,
        "stalls": stalls(values),
    }


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
        lambda driver, log_path: command(path, entry, driver, log_path, metrics),
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
    path = static.find("ncu")
    if path is None:
        return {"status": "unavailable", "profiled": True, "reason": static.INSTALL_HINT["ncu"]}
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
        "version": static.version(path),
        "size": "timed",  # the case's dims, as timed
        "launches": 1,
    }
    asked = metrics()
    t0 = time.monotonic()
    for attempt in range(2):
        try:
            left_s = timeout_s - (time.monotonic() - t0)
            block["command"], text, status = _run_ncu(path, entry, job, asked, left_s)
        except (subprocess.TimeoutExpired, ValueError):
            return {**block, "status": "failed", "reason": f"ncu did not finish in {timeout_s:g} s"}
        block["wall_s"] = time.monotonic() - t0
        try:
            return {**block, "status": "ok", **parse(text, entry)}
        except NcuOutputError as exc:
            rejected = rejected_metrics(text, asked)
            if attempt == 0 and rejected and len(rejected) < len(asked):
                asked = [m for m in asked if m not in rejected]
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
