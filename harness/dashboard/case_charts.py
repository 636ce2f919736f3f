"""Each case's chart data in data.js: its series, one trace per series key, as drawn.

A series never joins points of different series keys: each key is its own trace, labelled with
what changed against the implementation's previous key ("source changed", "suite v2", "mode
cold", ...). The compiler that built a point (toolchain, version, sha256) is not part of the
key: it is shown on hover, from data["compilers"] (each distinct description once; a series'
`compiler` holds indices into it, -1 where unknown). Times are in one unit per case: the one
that puts its baseline's newest median in [1, 1000).

What is drawn is trimmed for display only (the store keeps every point): a series of more than
max_points points shows every k-th point, k = ceil(n / (max_points - TAIL_POINTS)) counted back
from the newest, plus the newest TAIL_POINTS, every unstable point and both sides of every step
(a change of more than STEP_FRACTION from the previous point in the median time or the gap).
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from harness.analysis.regressions import Policy
from harness.history.series import COMPILER_FIELDS, describe_compiler, series_label
from harness.history.store import RECENT_LOOKBACK, SeriesValues, Store, series_columns

__all__ = [
    "MAX_POINTS",
    "STEP_FRACTION",
    "TAIL_POINTS",
    "Series",
    "case_anchor",
    "case_chart",
    "case_order",
    "display_indices",
    "key_change",
    "line_colors",
    "read_series",
    "rounded",
    "run_modes",
]

MAX_POINTS = 300  # per drawn series; enough to see a trend across a 1400 px wide chart
TAIL_POINTS = 30  # the newest points are always drawn: they are the ones people check
STEP_FRACTION = 0.05  # the regression rule's minimum effect; a step this big is always drawn
CHANGE_WORDS = {  # key field -> how a change of it is named in a legend
    "gpu": lambda v: f"GPU {v}",
    "mode": lambda v: f"mode {v}",
    "suite_version": lambda v: f"suite v{v}",
    "case_version": lambda v: f"case v{v}",
    "source_sha256": lambda v: "source changed",
    "baseline_source_sha256": lambda v: "baseline source changed",
}


def display_indices(
    n: int,
    unstable: np.ndarray,
    values: tuple[np.ndarray, ...] = (),
    max_points: int = MAX_POINTS,
    tail: int = TAIL_POINTS,
) -> np.ndarray:
    """Indices (ascending) of the points of an n-point series that are drawn (module doc)."""
    if n <= max_points:
        return np.arange(n)
    keep = np.zeros(n, dtype=bool)
    stride = math.ceil(n / max(1, max_points - tail))
    keep[(n - 1) % stride :: stride] = True
    keep[0] = True
    keep[-tail:] = True
    keep |= unstable
    for v in values:
        with np.errstate(divide="ignore", invalid="ignore"):
            step = np.abs(v[1:] / v[:-1] - 1.0) > STEP_FRACTION  # NaN compares False
        keep[1:] |= step
        keep[:-1] |= step
    return np.flatnonzero(keep)


def rounded(values: np.ndarray, digits: int = 6) -> list:
    """`values` to `digits` significant digits as a list (NaN -> None): a smaller data.js."""
    a = np.asarray(values, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        magnitude = np.floor(np.log10(np.abs(a)))
    scale = 10.0 ** (digits - 1 - np.where(np.isfinite(magnitude), magnitude, 0))
    out = np.round(a * scale) / scale
    return [None if math.isnan(x) else x for x in out.tolist()]


def key_change(previous: dict | None, key: dict) -> str:
    """What differs in `key` from the implementation's previous key, in words ('' if first)."""
    if previous is None:
        return ""
    words = [
        describe(key[name])
        for name, describe in CHANGE_WORDS.items()
        if name in key
        and key[name] != previous[name]
        # A baseline's own source hash is also its baseline source hash: say it once.
        and not (name == "baseline_source_sha256" and key.get("role") == "baseline")
    ]
    return ", ".join(words) or "key changed"


# Series.every: the newest points the regression review reads at the default window
# (Store.recent's reach), copied so that the whole-history arrays are freed once read.
EVERY_WINDOW = Policy().window
EVERY_POINTS = RECENT_LOOKBACK * EVERY_WINDOW + 1
MAX_FAILED_MARKS = 50  # runs where a case failed, marked on its charts (the newest ones)
PALETTE = ("#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#8c564b", "#7f7f7f")
BASELINE_COLOR = "#333333"
UNITS = ((1e-6, "ns", 1e9), (1e-3, "µs", 1e6), (1.0, "ms", 1e3), (math.inf, "s", 1.0))
TEXT = ("case_status", "error_phase", "error_message", "check_status", "gpu_uuid", *COMPILER_FIELDS)
NUMBERS = ("median_s", "mad_s", "noise", "stable", "gap", "gap_ci_low", "gap_ci_high", "gap_stable")


@dataclass
class Series:
    """One series' points as arrays (the ok ones), and the runs where its case failed."""

    info: dict
    run: np.ndarray
    median_s: np.ndarray
    mad_s: np.ndarray
    noise: np.ndarray
    stable: np.ndarray
    gap: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    gap_stable: np.ndarray
    failed: dict[int, str]  # run -> 'status: phase: message' of each run where the case failed
    compiler: tuple[np.ndarray, ...]  # per ok point: its COMPILER_FIELDS (None when unknown)
    gpu_uuid: np.ndarray  # per ok point: the card it ran on (None when unknown)
    values: SeriesValues  # every point, for harness.dashboard.alerts (runs as store rowids)
    every: dict[str, np.ndarray]  # the newest EVERY_POINTS points' columns (failed ones too)


def read_series(store: Store, runs: list[dict]) -> list[Series]:
    """Every series of the store (list_series() order) in one scan of the points; runs are
    given as indices into `runs` (store.runs())."""
    infos = store.list_series()
    columns = series_columns(store, [i["series_id"] for i in infos], TEXT, NUMBERS)
    empty = {name: np.array([], dtype=object) for name in ("run_id", *TEXT)}
    empty.update({name: np.array([], dtype=np.float64) for name in NUMBERS})
    empty["run"] = np.array([], dtype=np.int64)
    run_index = {r["run_id"]: i for i, r in enumerate(runs)}
    return [_series(info, columns.get(info["series_id"], empty), run_index) for info in infos]


def _series(info: dict, c: dict[str, np.ndarray], run_index: dict[str, int]) -> Series:
    status = c["case_status"]
    stable, gap_stable = c["stable"] == 1, c["gap_stable"] == 1
    ok = (status == "ok") & ~np.isnan(c["median_s"])
    failed = {
        run_index[c["run_id"][k]]: f"{status[k]}: {c['error_phase'][k]}: {c['error_message'][k]}"
        for k in np.flatnonzero(status == "failed").tolist()
    }
    return Series(
        info,
        np.fromiter(map(run_index.__getitem__, c["run_id"][ok].tolist()), dtype=np.int64),
        c["median_s"][ok],
        c["mad_s"][ok],
        c["noise"][ok],
        stable[ok],
        c["gap"][ok],
        c["gap_ci_low"][ok],
        c["gap_ci_high"][ok],
        gap_stable[ok],
        failed,
        tuple(c[name][ok] for name in COMPILER_FIELDS),
        c["gpu_uuid"][ok],
        SeriesValues(c["run"], c["median_s"], stable, c["gap"], gap_stable),
        {name: column[-EVERY_POINTS:].copy() for name, column in c.items()},
    )


def run_modes(all_series: list[Series]) -> dict[int, str]:
    """Run index -> the timing mode its points were stored under (a run has one mode)."""
    modes: dict[int, str] = {}
    for s in all_series:
        modes.update(dict.fromkeys(s.run.tolist(), s.info["mode"]))
        modes.update(dict.fromkeys(s.failed, s.info["mode"]))
    return modes


def line_colors(all_series: list[Series]) -> dict[str, str]:
    """One colour per candidate name, the same in every chart; baselines are dark grey."""
    names = sorted({s.info["impl"] for s in all_series if s.info["role"] == "candidate"})
    out = {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(names)}
    for s in all_series:
        if s.info["role"] == "baseline":
            out.setdefault(s.info["impl"], BASELINE_COLOR)
    return out


def case_order(latest_doc: dict, all_series: list[Series]) -> list[str]:
    """The newest run's cases in its order, then cases no longer run, by id."""
    order = [c["id"] for c in latest_doc["cases"]]
    rest = sorted({s.info["case_id"] for s in all_series} - set(order))
    present = {s.info["case_id"] for s in all_series}
    return [c for c in order if c in present] + rest


def case_anchor(case_id: str, taken: set) -> str:
    """The case's element id on the page ('case-' and its id made safe), unique among `taken`."""
    name = "case-" + (re.sub(r"[^A-Za-z0-9_-]+", "-", case_id).strip("-") or "x")
    while name in taken:
        name += "-"
    taken.add(name)
    return name


def _unit(seconds: float | None) -> tuple[str, float]:
    """The display unit of a case's times: the one that puts its baseline in [1, 1000)."""
    for limit, name, scale in UNITS:
        if seconds is not None and seconds < limit:
            return name, scale
    return "µs", 1e6


def _compiler_indices(s: Series, keep: np.ndarray, compilers: dict) -> list[int]:
    """Indices into data["compilers"] (added there when new) of the kept points' compilers."""
    known: dict[tuple, int] = {}  # a series' points mostly share one compiler: described once
    out = []
    for fields in zip(*(field[keep].tolist() for field in s.compiler), strict=True):
        index = known.get(fields)
        if index is None:
            words = describe_compiler(*fields)
            index = known[fields] = compilers.setdefault(words, len(compilers)) if words else -1
        out.append(index)
    return out


def case_chart(
    case_id: str,
    members: list[Series],
    colors: dict[str, str],
    used: set,
    anchor: str,
    compilers: dict[str, int],
    max_points: int = MAX_POINTS,
) -> dict:
    """One case's chart data: its series (one trace per series key), times in one unit. The
    runs it draws are added to `used`; new compiler descriptions to `compilers`."""
    failed = {run: text for s in members for run, text in s.failed.items()}
    members = [s for s in members if len(s.run)]
    members.sort(key=lambda s: (s.info["role"] != "baseline", s.info["impl"], s.info["first_utc"]))
    latest = max(members, key=lambda s: s.info["last_utc"]) if members else None
    baseline = latest.info["baseline"] if latest else ""
    base_medians = [s.median_s[-1] for s in members if s.info["role"] == "baseline"]
    unit, scale = _unit(
        base_medians[-1] if base_medians else (latest.median_s[-1] if latest else None)
    )
    previous: dict[tuple, dict] = {}
    segments: dict[tuple, int] = defaultdict(int)
    series = []
    for s in members:
        info = s.info
        line = (info["impl"], info["mode"])  # one line per implementation in each mode's chart
        change = key_change(previous.get(line), info)
        previous[line] = info
        # A baseline has no gap: only its own stability counts.
        unstable = ~s.stable | (~s.gap_stable & ~np.isnan(s.gap))
        keep = display_indices(len(s.run), unstable, (s.median_s, s.gap), max_points)
        used.update(s.run[keep].tolist())
        name = info["impl"] + (" (baseline)" if info["role"] == "baseline" else "")
        entry = {
            "impl": info["impl"],
            "role": info["role"],
            "mode": info["mode"],
            "gpu": info["gpu"],
            "name": f"{name} · {change}" if change else name,
            "change": change,
            "segment": segments[line],
            "color": colors[info["impl"]],
            "key": series_label(info),
            "stored": info["points"],
            "run": s.run[keep].tolist(),
            "t": rounded(s.median_s[keep] * scale),
            "mad": rounded(s.mad_s[keep] * scale, 3),
            "noise": rounded(s.noise[keep], 3),
            "ok": s.stable[keep].astype(int).tolist(),
            "compiler": _compiler_indices(s, keep, compilers),
        }
        segments[line] += 1
        if info["role"] == "candidate":
            entry.update(
                gap=rounded(s.gap[keep]),
                lo=rounded(s.ci_low[keep]),
                hi=rounded(s.ci_high[keep]),
                gap_ok=s.gap_stable[keep].astype(int).tolist(),
            )
        series.append(entry)
    version = latest.info["case_version"] if latest else None
    newest_failed = sorted(failed)[-MAX_FAILED_MARKS:]
    used.update(newest_failed)
    return {
        "id": case_id,
        "version": version,
        "anchor": anchor,
        "baseline": baseline,
        "unit": unit,
        "series": series,
        "failed": {
            "run": newest_failed,
            "error": [failed[r].splitlines()[0] for r in newest_failed],
        },
        "failed_runs": len(failed),
    }
