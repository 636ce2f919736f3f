"""A comparison as the runner's result document case, as report rows, and as markdown.

The document case uses the result schema's python frontend: the op is the case's baseline, every
other implementation a candidate whose gap is its median time over the op's (so `harness
ingest`, `compare` and the dashboard read it unchanged); unverified rows carry no gap.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass, field

from protocol import statistics
from runner.bench import integrity
from runner.bench import workload as workload_module
from runner.bench.implementation import callable_identity
from runner.bench.options import SCHEDULE
from runner.bench.workload import Case
from runner.document import candidate_gaps, systematic_of, throughput, timing_block
from runner.measurement import aa_control, stats
from runner.measurement.gate import arrays
from runner.measurement.timing.base import declares

__all__ = [
    "Comparison",
    "ReportRow",
    "case_document",
    "markdown",
    "rows",
]

# What a row's time stands for (CallableBackend._method_class); a ratio needs the same on both
METHOD_CLASSES = {
    "graph-replay": "CUDA graph replay",
    "host-loop": "a Python loop of calls, host launch overhead included",
    "device": "the call's device time",
    "host-latency": "a call that synchronizes, the host's latency included",
}

FLOP_DTYPES = {"float64": "f64", "float32": "f32", "float16": "f16", "bfloat16": "bf16"}


def _source_block(impl) -> dict:
    name, sha = callable_identity(impl.run)
    return {
        "toolchain": "python",
        "source": name,
        "entry": name.rsplit(".", 1)[-1],
        "build": {
            "toolchain": "python",
            "version": platform.python_version(),
            "command": name,
            "flags": [],
            "source_sha256": sha,
            "build_s": 0.0,
        },
    }


def case_id(case, op_name: str, timer: str) -> str:
    """`<workload>/<case id>/<op>`; copies counted and the CUPTI timer are other timing rules,
    so they are other cases, never points of one series."""
    cid = f"{case.workload.name}/{case.id}/{op_name}"
    if case.count_copies:
        cid += "/copies-counted"
    if timer != "events":
        cid += f"/{timer}"
    return cid


NOT_REACHED = {
    "kind": "unestablished",
    "text": "not reached: the comparison stopped at an earlier error",
    "verified": False,
}


def _inputs(case) -> list[dict]:
    if not case.has_data:
        return []
    return [
        {"shape": list(x.shape), "dtype": arrays.dtype_name(x)}
        for x in case.inputs
        if arrays.is_array(x)
    ]


def case_document(runner, impls: dict, statuses: dict, timed, phases: dict, error=None) -> dict:
    """The result-document case of one comparison (`timed` = (measurement, settings, info) or
    None; `error` = (phase, message) when the comparison failed)."""
    doc = _skeleton(runner, impls, phases)
    for name, impl in impls.items():
        status = statuses.get(name)
        entry = {"role": "baseline" if name == runner.name else "candidate", **_source_block(impl)}
        entry["check"] = status.check if status else {"status": "not_checked"}
        entry["verification"] = status.verification if status else dict(NOT_REACHED)
        doc["implementations"][name] = entry
    if error:
        doc["status"] = "failed"
        doc["error"] = {"phase": error[0], "message": error[1]}
        return doc
    if timed is None:
        return doc
    measurement, settings, info = timed
    peaks = runner.device.peaks()
    _time_rows(doc, runner, measurement, settings, info, peaks)
    _ratios(doc, runner, measurement, info)
    doc["timing_wall_s"] = measurement.wall_s
    doc["round_orders"] = measurement.orders
    l2_bytes = runner.device.l2_bytes if declares(runner.device, integrity.L2Sized) else None
    integrity.judge(doc, info, {**peaks, "l2_bytes": l2_bytes}, runner.case)
    return doc


def _skeleton(runner, impls: dict, phases: dict) -> dict:
    """The case's identity, parameters and settings, with no rows yet."""
    case, op_name = runner.case, runner.name
    workload = case.workload
    others = ", ".join(n for n in impls if n != op_name) or "nothing"
    return {
        "id": case_id(case, op_name, runner.options.timer),
        "version": workload.version,
        "description": f"{op_name} against {others} on {workload.name} {case.id}",
        "frontend": "python",
        "op": op_name,
        "workload": workload.name,
        "case": case.id,
        "params": case.params,
        "inputs": _inputs(case),
        "status": "ok",
        "baseline": op_name,
        "dims": {
            k: v for k, v in case.params.items() if isinstance(v, int) and not isinstance(v, bool)
        },
        "settings": {
            "mode": runner.options.mode,
            "timer": runner.options.timer,
            "timer_reason": runner.timer_reason,
            "budget_s": runner.options.budget_s,
            "schedule": SCHEDULE,
            "count_copies": case.count_copies,
            "verify_only": runner.options.verify_only,
            "input_seed": workload_module.INPUT_SEED,  # KERNELGAP_INPUT_SEED replays the inputs
        },
        "phases_s": dict(phases),
        "implementations": {},
        **_sweep_of(runner, op_name),
    }


def _sweep_of(runner, op_name: str) -> dict:
    """For a workload with `sweep = True`: {"sweep": the case its row is a point of, the point,
    the headline point and the row's place} (runner.bench.session.group_rows groups them); else {}."""
    case, workload = runner.case, runner.case.workload
    if not getattr(workload, "sweep", False):
        return {}
    labels = [r.label for r in workload.rows]
    headline = workload.headline or labels[-1]
    whole = case_id(case, op_name, runner.options.timer).split("/")
    whole[1] = case.dtype  # <workload>/<dtype>/<op>[/copies-counted][/timer]
    return {
        "sweep": {
            "case": "/".join(whole),
            "point": f"row={case.row.label}",
            "headline": f"row={headline}",
            "order": labels.index(case.row.label),
        }
    }


def _time_rows(doc: dict, runner, measurement, settings, info: dict, peaks: dict) -> None:
    """Each row's timing block (with how the callable was launched), copies and rates."""
    case = runner.case
    for name, t in measurement.impls.items():
        if name not in doc["implementations"]:  # the hidden A/A control: its block is apart
            continue
        entry = doc["implementations"][name]
        block = timing_block(
            {
                "samples_s": t.samples_s,
                "method": info[name]["method"],
                "timer": runner.options.timer,
                "timer_reason": runner.timer_reason,
                "batch": t.batch,
                "calibration_s": t.calibration_s,
            },
            {"mode": measurement.mode, "warmup": measurement.warmup},
        )
        block["schedule"] = settings.schedule
        if info[name].get("method_class"):
            block["method_class"] = info[name]["method_class"]
        if info[name].get("fallback"):
            block["fallback"] = info[name]["fallback"]
        entry["timing"] = block
        entry["copies"] = info[name]["copies"]
        if info[name].get("graph_nodes") is not None:
            entry["graph_nodes"] = info[name]["graph_nodes"]
        entry["throughput"] = throughput(
            case.bytes, case.flops, block["stats"]["median_s"], peaks, FLOP_DTYPES.get(case.dtype)
        )


def _ratios(doc: dict, runner, measurement, info: dict) -> None:
    """Each row's time over the op's, where both stand for the same thing and are verified
    (_no_ratio), with the systematic term of the case's A/A control (_control)."""
    op_name = runner.name
    op_entry = doc["implementations"][op_name]
    copies_apply = runner.case.count_copies or runner.options.timer != "events"
    control = _control(doc, runner, measurement, info)
    candidate_gaps(
        doc,
        lambda name, entry: _no_ratio(name, entry, op_name, op_entry, copies_apply),
        lambda name: _systematic(control, op_entry, measurement.mode, info, op_name, name),
    )


CONTROL_METHOD = (
    "the op timed again as a hidden side in the same rounds, from graphs of its own; sample k "
    "on {what} copy_turn(k, {{loads}}); systematic = sqrt(2 / {{per_side}}) x sd of the "
    "per-{unit} medians of log(control / op) (graph instances: pooled with the square of "
    "their mean) x t({{df}}) / z (runner.measurement.aa_control)"
)


def _control(doc: dict, runner, measurement, info: dict) -> dict | None:
    """The case's `aa_control` (runner.measurement.aa_control.document_block): the op's samples
    against its hidden twin's, clustered by the graph instance each took where the op's
    samples take instances (then a side averages `graph_instances` of them), else by place in
    the run (the control then sees the schedule, not a capture's fixed offset)."""
    name = aa_control.control_name(runner.name)
    timing = measurement.impls.get(name)
    if timing is None or not timing.loads:
        return None
    # instances only where both sides took them (a control whose batch was not shared with
    # the op's may have replayed one graph): else its labels are places
    instances = min(info.get(n, {}).get("graph_instances", 1) for n in (runner.name, name))
    what, unit = ("graph instance", "instance") if instances > 1 else ("place group", "group")
    block = aa_control.document_block(
        measurement.impls[runner.name].samples_s,
        timing.samples_s,
        timing.loads,
        instances,
        method=CONTROL_METHOD.format(what=what, unit=unit),
        offset=instances > 1,  # places: the op's samples span every place the control's do
    )
    if block is not None:
        block["clusters"] = "graph_instances" if instances > 1 else "places"
        doc["aa_control"] = block
    return block


def _systematic(control, op_entry: dict, mode: str, info: dict, *names: str) -> tuple:
    """(term, source) of a gap: the control's where it clusters by graph instance (it sees
    what a capture fixes); by place only, the control's but never below the documented default
    (stats.systematic: a cold launch's placement, which one callable against itself cannot
    show); without a control, the default."""
    default = systematic_of(op_entry["timing"], _graph_node_s(mode, info, *names))
    if control is None:
        return default, "default"
    if control["clusters"] == "graph_instances" or control["systematic"] >= default:
        return control["systematic"], "control"
    return default, "default"


def _no_ratio(name: str, entry: dict, op_name: str, op_entry: dict, copies_apply: bool):
    """Why `entry` gets no ratio against the op, or None when it gets one.

    `copies_apply`: every row follows the case's copy policy whether or not it was captured
    (copies counted anyway, or CUPTI leaving memcpy records out); otherwise an uncaptured row's
    copies could not be left out and its time is not comparable.
    """
    if not copies_apply:
        unapplied = [n for n, e in ((name, entry), (op_name, op_entry)) if not e["copies"]["known"]]
        if unapplied:
            return (
                f"no ratio: the case leaves copies out, but {', '.join(unapplied)} could not be "
                "captured, so its copies (if any) are in its time"
            )
    ours, theirs = entry["timing"].get("method_class"), op_entry["timing"].get("method_class")
    if ours != theirs:
        return (
            f"no ratio: timed by another method than the op ({name}: {METHOD_CLASSES.get(ours, ours)}; "
            f"{op_name}: {METHOD_CLASSES.get(theirs, theirs)}), so the two times do not stand for "
            "the same thing"
        )
    if not entry["verification"]["verified"]:
        return f"no ratio: {entry['verification']['text']}"
    if not op_entry["verification"]["verified"]:
        return f"no ratio: the op is unverified ({op_entry['verification']['text']})"
    return None


def rows(doc: dict, op_name: str) -> dict:

    out = {}
    for name, entry in doc["implementations"].items():
        timing = entry.get("timing")
        row = ReportRow(
            name=name,
            role="op" if name == op_name else "implementation",
            verification=entry["verification"]["text"],
            verified=entry["verification"]["verified"],
            check_status=entry["check"]["status"],
            problems=list(entry["check"].get("problems", [])),
            flags=list(entry.get("integrity", {}).get("flags", [])),
        )
        if timing:
            s = timing["stats"]
            row.median_s, row.p10_s, row.p90_s = s["median_s"], s["p10_s"], s["p90_s"]
            row.samples = s["count"]
            row.method = timing["method"] + (
                f" (fallback: {timing['fallback']})" if timing.get("fallback") else ""
            )
            tp = entry.get("throughput", {})
            row.tflops = tp["flops_per_s"] / 1e12 if "flops_per_s" in tp else None
            row.gbps = tp["bytes_per_s"] / 1e9 if "bytes_per_s" in tp else None
            row.stable = s["stable"]
            if name == op_name:
                row.ratio = 1.0 if entry["verification"]["verified"] else None
            elif entry.get("gap"):
                row.ratio = entry["gap"]["ratio_of_medians"]
                row.stable = entry["gap"]["stable"]
        out[name] = row
    return out


def timer_label(settings: dict) -> str:
    """What a table adds to a case's label for its timer: " (cupti)" for CUPTI, and for cold
    samples read by events " (cold by events: chosen)" or the reason (they compress toward 1)."""
    timer = settings.get("timer", "events")
    if timer != "events":
        return f" ({timer})"
    if settings.get("mode") != "cold":
        return ""
    reason = (settings.get("timer_reason") or "").split(";")[0]
    if reason.startswith("chosen"):
        reason = "chosen"
    return f" (cold by events: {reason})" if reason else " (cold by events)"


def _us(x) -> str:
    return "-" if x is None else f"{x * 1e6:.2f}"


def _num(x, digits=2) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _environment_lines(env: dict, suite: dict) -> list[str]:
    device, software = env.get("device", {}), env.get("software", {})
    sensors = env.get("sensors_start") or {}
    toolchains = ", ".join(
        f"{k} {v.get('version')}" for k, v in env.get("toolchains", {}).items() if k != "python"
    )
    lines = [
        f"- GPU: {device.get('name')} ({device.get('arch')}, {device.get('sm_count')} SMs), "
        f"driver {device.get('driver_version_string', device.get('driver_version'))}",
        f"- software: Python {software.get('python')}, numpy {software.get('numpy')}, "
        f"cuda-bindings {software.get('cuda_bindings')}"
        + (f", {toolchains}" if toolchains else ""),
        f"- host: {software.get('hostname')}; commit {suite.get('commit') or 'unknown'}"
        + (" (dirty)" if suite.get("dirty") else ""),
    ]
    clocks = sensors.get("clocks_mhz") if isinstance(sensors, dict) else None
    if clocks:
        lines.append(f"- clocks at start (MHz): {clocks}")
    return lines


def markdown(document: dict) -> str:
    """Environment header, then one table per op: a row per case and implementation."""
    out = [f"# kernelgap: {document['suite']['name']}", ""]
    out += [f"{document['started_utc']} to {document['finished_utc'] or '(running)'}", ""]
    out += _environment_lines(document["environment"], document["suite"])
    out += [
        "",
        "Times are device time per call: median, p10 and p90 over all samples, taken in paired "
        "rounds (A B C or C B A, every implementation once a round). cold: each sample is the mean of `batch` calls, each after the "
        "implementation's reset and a read-only L2 flush; hot: back-to-back calls. `time / op` "
        "is the median over the op's median, given only where both rows are verified (below 1: "
        "faster than the op).",
    ]
    by_op: dict[str, list[dict]] = {}
    for case in document["cases"]:
        by_op.setdefault(case.get("op", case["baseline"]), []).append(case)
    for op, cases in by_op.items():
        out += ["", f"## {op}", ""]
        out.append(
            "| case | implementation | verification | median (us) | p10 (us) | p90 (us) | samples "
            "| method | TFLOP/s | GB/s | time / op |"
        )
        out.append("| --- | --- | --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: |")
        for case in cases:
            case_rows = rows(case, op)
            label = f"{case.get('workload', '?')}/{case.get('case', case['id'])}"
            extra = case["id"].split("#", 1)[1] if "#" in case["id"] else None
            if case["settings"].get("count_copies"):
                label += " (copies counted)"
            label += timer_label(case["settings"])
            if extra:
                label += f" #{extra}"
            if case["status"] == "failed":
                label += " (FAILED: " + case["error"]["message"] + ")"
            for name, row in case_rows.items():
                verification = (
                    row.verification
                    if row.check_status != "failed"
                    else "FAILED: " + "; ".join(row.problems)
                )
                if row.flags:
                    verification = "FLAGGED: " + "; ".join(row.flags)
                copies = case["implementations"][name].get("copies")
                method = row.method or (
                    "not timed (--bench-verify)" if case["status"] == "ok" else "not timed"
                )
                if copies and copies.get("known") and copies.get("per_call"):
                    method += f"; {copies['per_call']} copies/call {'counted' if copies['counted'] else 'left out'}"
                out.append(
                    f"| {_cell(label)} | {_cell(name)} | {_cell(verification)} | {_us(row.median_s)} | "
                    f"{_us(row.p10_s)} | {_us(row.p90_s)} | {row.samples or '-'} | {_cell(method)} | "
                    f"{_num(row.tflops, 3)} | {_num(row.gbps, 1)} | {_num(row.ratio, 3)}"
                    f"{' (unstable)' if row.ratio is not None and row.stable is False else ''} |"
                )
    geo = document["summary"]["geomean_gap"]
    if geo:
        out += ["", "Geometric mean of time / op over stable, verified cases:", ""]
        for name, g in geo.items():
            out.append(f"- {name}: {g['value']:.3f} ({g['cases']} cases)")
    noisy = [
        f"{c['id']} {n}"
        for c in document["cases"]
        for n, i in c["implementations"].items()
        if i.get("timing") and not i["timing"]["stats"]["stable"]
    ]
    if noisy:
        out += ["", f"Unstable (noise above {statistics.UNSTABLE_NOISE:.0%}): " + ", ".join(noisy)]
    unwatched = {
        i["integrity"]["window"]["reason"]
        for c in document["cases"]
        for i in c["implementations"].values()
        if i.get("integrity", {}).get("window", {}).get("checked") is False
    }
    if unwatched:
        out += ["", "Work-in-window check not made (CUPTI): " + "; ".join(sorted(unwatched))]
    return "\n".join(out) + "\n"


def _graph_node_s(mode: str, info: dict, *names: str) -> float:
    """What the graphs the rows were launched from leave fixed within the run, per call
    (stats.systematic): hot, every captured row replays graphs; cold, only a row whose copies
    are left out launches one (the others are launched as themselves)."""
    if mode == "hot":
        return stats.TORCH_GRAPH_NODE_S
    if any(integrity.copies_disabled(info.get(n, {})) for n in names):
        return stats.COLD_GRAPH_NODE_S
    return 0.0


# What a comparison returns: one ReportRow per implementation, and the Comparison around them
# (the report builds them, the runner returns them).


@dataclass
class ReportRow:
    """One implementation's line of the report."""

    name: str
    role: str  # "op" or "implementation"
    verification: str
    verified: bool
    check_status: str  # passed, failed, not_checked
    problems: list[str] = field(default_factory=list)
    median_s: float | None = None
    p10_s: float | None = None
    p90_s: float | None = None
    samples: int = 0
    method: str = ""
    tflops: float | None = None
    gbps: float | None = None
    ratio: float | None = None  # median time / the op's median time, verified rows only
    stable: bool | None = None  # noise of this row (and, for a ratio, of the op's) within limits
    flags: list[str] = field(default_factory=list)  # integrity findings: no ratio (integrity.py)


@dataclass
class Comparison:
    op: str
    case: Case
    rows: dict[str, ReportRow]
    document_case: dict
    timed: bool

    def __getitem__(self, name: str) -> ReportRow:
        return self.rows[name]
