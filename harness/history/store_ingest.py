"""What a result document becomes in the history (harness.history.store): its run row and its points.

`plan()` checks that a document may enter the canonical history (complete; on the GPU model
its suite pins) and lays out one PlannedPoint per implementation per case, keyed by its series
(harness.history.series), with the values of its `points` row (VALUE_COLUMNS); skipped cases and
implementations are left out. `run_row()` is the document's `runs` row: the identity columns,
the environment as JSON and the rest of the document zlib-compressed without its samples
(they are in the points). Nothing here touches the file: the store decides what is already
there and writes (harness.history.store); the IngestReport says what was stored, or would be.
"""

from __future__ import annotations

import hashlib
import operator
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import GpuMismatchError
from harness.escaping import terminal
from harness.history.series import (
    COMPILER_FIELDS,
    compiler_identity,
    gpu_model,
    series_id,
    series_key,
    series_label,
)
from harness.history.store_schema import (
    StoreError,
    canonical_json,
    counter_blobs,
    normalize_utc,
    now_utc,
    point_uuid,
    samples_blob,
    stored_json,
)
from protocol.points import as_rows

__all__ = [
    "VALUE_COLUMNS",
    "GpuMismatchError",
    "IngestReport",
    "PlannedPoint",
    "plan",
    "prepared",
    "run_id",
    "run_row",
]

ZLIB_LEVEL = 1  # ~9x on a result document without samples, twice as fast as the default 6
STAT_COLUMNS = "median_s mad_s noise stable p95_s min_s max_s mean_s count".split()  # noqa: SIM905
GAP_COLUMNS = {  # points column: key of the document's gap block
    "gap": "ratio_of_medians",
    "gap_median_of_round_ratios": "median_of_round_ratios",
    "gap_ci_low": "ci_low",
    "gap_ci_high": "ci_high",
    "gap_confidence": "confidence",
    "gap_stable": "stable",
}
# The points columns after (series, started_us, run), which the write adds.
VALUE_COLUMNS = (
    *("case_index", "case_status", "error_phase", "error_message", "check_status", "samples"),
    *STAT_COLUMNS,
    *GAP_COLUMNS,
    *COMPILER_FIELDS,
    "gpu_uuid",
)

_STATUS_AT = VALUE_COLUMNS.index("case_status")
_SHOWN = operator.itemgetter(  # what IngestReport.text() shows of a point
    *map(
        VALUE_COLUMNS.index,
        "case_status error_phase error_message check_status median_s stable gap gap_ci_low "  # noqa: SIM905
        "gap_ci_high".split(),
    )
)


def run_id(document: dict, what: str = "result") -> str:
    """sha256 (hex) of the document's canonical JSON: sorted keys, compact, orjson floats."""
    return hashlib.sha256(canonical_json(document, what)).hexdigest()


@dataclass
class PlannedPoint:
    """One point an ingest stores (or would store)."""

    key: dict
    series_id: str
    role: str
    baseline: str
    row: tuple  # VALUE_COLUMNS
    new_series: bool = False
    counters: tuple[bytes | None, bytes | None] = (None, None)  # the `counters` row's maps

    @property
    def values(self) -> dict:
        return dict(zip(VALUE_COLUMNS, self.row, strict=True))

    def __reduce__(self):
        """Pickled as its fields (a quarter of the default's unpickling time): the plans of a
        bulk ingest come back from worker processes (harness.commands.ingest)."""
        fields = (self.key, self.series_id, self.role, self.baseline, self.row)
        return PlannedPoint, (*fields, self.new_series, self.counters)


@dataclass
class IngestReport:
    """What an ingest stored, or (untrusted) would store."""

    path: Path
    what: str
    run_id: str
    trusted: bool
    commit: str | None
    started_utc: str
    gpu: str
    suite: str
    points: list[PlannedPoint] = field(default_factory=list)
    already_stored: bool = False
    stored: bool = False
    skipped_cases: int = 0
    shown: list[str] | None = None  # prerender(): each point's line after its tag

    @property
    def new_series(self) -> list[PlannedPoint]:
        return [p for p in self.points if p.new_series]

    def headline(self) -> str:
        if self.already_stored:
            return f"{self.what}: run {self.run_id[:12]} already stored in {self.path}; nothing written"
        verb = "stored" if self.stored else "would store (untrusted: nothing written)"
        failed = sum(p.row[_STATUS_AT] != "ok" for p in self.points)
        return (
            f"{self.what}: {verb} run {self.run_id[:12]} in {self.path}: {len(self.points)} points "
            f"({failed} failed), {len(self.new_series)} new series"
        )

    def prerender(self) -> None:
        """Render each point's line now, but for its tag (new series or not: the store's to
        say): a bulk ingest does it in its worker processes, so the writer's reports at the
        end are joins (harness.commands.ingest)."""
        self.shown = [_point_text(p) for p in self.points]

    def text(self, every_point: bool = True) -> str:
        """The headline, the run's identity and one line per point, each line safe to print
        on a terminal (harness.escaping.terminal: names from the document may hold escapes).
        Without every_point, the headline alone and the lines of the points that start a
        series or did not run ok: the news of a run in a bulk ingest (harness ingest)."""
        if not every_point:
            news = [p for p in self.points if p.new_series or p.row[_STATUS_AT] != "ok"]
            return "\n".join(
                [terminal(self.headline()), *(_tagged(p, _point_text(p)) for p in news)]
            )
        lines = [
            self.headline(),
            f"  run {self.run_id}  commit {self.commit or '-'}  started {self.started_utc}",
            f"  gpu {self.gpu}  suite {self.suite}",
        ]
        if self.skipped_cases:
            lines.append(f"  {self.skipped_cases} skipped case(s) not stored")
        lines = [terminal(line) for line in lines]
        shown = self.shown if self.shown is not None else map(_point_text, self.points)
        lines.extend(_tagged(p, line) for p, line in zip(self.points, shown, strict=True))
        return "\n".join(lines)


def _tagged(p: PlannedPoint, line: str) -> str:
    return f"  {'new series' if p.new_series else 'series'} {line}"


def _point_text(p: PlannedPoint) -> str:
    """A point's report line after its tag, safe to print (the row's values by position: a
    dict per point cost 1 ms a run)."""
    status, phase, message, check, median_s, stable, gap, low, high = _SHOWN(p.row)
    if status != "ok":
        what = f"{status}: {phase}: {message}"
    elif median_s is None:
        what = f"no timing (check {check})"
    else:
        what = f"median {median_s * 1e6:.3f} us" + ("" if stable else " unstable")
        if gap is not None:
            what += f", gap {gap:.4f}x [{low:.4f}, {high:.4f}]"
    return terminal(f"{p.series_id}  {series_label(p.key)}: {what}")


def bundle_statics(bundle: dict | None) -> dict[tuple[str, str, str], dict]:
    """{(case, impl, ptx sha256): static block} of a bundle manifest (runner build)."""
    return {
        (e["case"], e["impl"], e["build"]["ptx_sha256"]): e["static"]
        for e in (bundle or {}).get("implementations", ())
        if e.get("static")
    }


def plan(
    document: dict, *, path: Path, trusted: bool, what: str, bundle: dict | None = None
) -> IngestReport:
    """The report of ingesting `document` into the store at `path`, its points laid out; what
    the file holds already (the run, the series) is the store's to fill in. A `bundle` manifest
    gives the static counters of implementations the document carries no `static` for, where
    its PTX is the very same (same sha256)."""
    try:  # before any of it is stored: nested too deep, numbers past what the history holds
        identity = hashlib.sha256(canonical_json(document, what)).hexdigest()
    except StoreError as exc:
        raise StoreError(f"{exc}; refused for the history") from None
    statics = bundle_statics(bundle)
    suite, device = document["suite"], document["environment"]["device"]
    if not document["complete"] or document["finished_utc"] is None:
        raise StoreError(
            f"{what}: an incomplete result document (complete: false) is not history; "
            "ingest the final document the run wrote"
        )
    pinned = suite.get("gpu")
    if pinned is not None and gpu_model(pinned) != gpu_model(device["name"]):
        raise GpuMismatchError(
            f"{what}: ran on {device['name']!r} but suite {suite['name']!r} pins the GPU "
            f"model {pinned!r}; refused for the canonical history"
        )
    models = {gpu_model(device["name"])} | {
        gpu_model(c["device"]["name"])
        for c in document["cases"]
        if (c.get("device") or {}).get("name")
    }
    if len(models) > 1:  # runner bench --gpus on a host with GPUs of two models
        raise GpuMismatchError(
            f"{what}: its cases were measured on different GPU models ({', '.join(sorted(models))}); "
            "a series is one model, so a run mixing models is refused for the canonical history"
        )
    report = IngestReport(
        path=path,
        what=what,
        run_id=identity,
        trusted=trusted,
        commit=suite.get("commit"),
        started_utc=normalize_utc(document["started_utc"]),
        gpu=device["name"],
        suite=f"{suite['name']} v{suite['version']}",
    )
    for index, case in enumerate(document["cases"]):
        if case["status"] == "skipped":
            report.skipped_cases += 1
            continue
        for name, impl in case["implementations"].items():
            if impl.get("status") == "skipped":
                continue
            key = series_key(document, case, name)
            report.points.append(
                PlannedPoint(
                    key,
                    series_id(key),
                    impl["role"],
                    case["baseline"],
                    _values(index, case, impl, point_uuid(device, case)),
                    counters=counter_blobs(impl, statics.get(_built(case, name, impl))),
                )
            )
    return report


def prepared(
    document: dict, *, path: Path, what: str, bundle: dict | None = None
) -> tuple[IngestReport, tuple]:
    """A trusted ingest's plan of `document` and its `runs` row: all the store needs to write
    the run (Store.ingest_planned), so the document itself can go. A sweep's points are rows
    of their own (protocol.points.as_rows), as Store.ingest stores them."""
    document = as_rows(document)
    report = plan(document, path=path, trusted=True, what=what, bundle=bundle)
    return report, run_row(document, report)


def _built(case: dict, name: str, impl: dict) -> tuple[str, str, str | None]:
    return case["id"], name, (impl.get("build") or {}).get("ptx_sha256")


def run_row(document: dict, report: IngestReport) -> tuple:
    """The `runs` columns after the rowid, for the run `report` planned."""
    suite = document["suite"]
    return (
        report.run_id,
        report.started_utc,
        document["finished_utc"],
        suite.get("commit"),
        suite.get("dirty"),
        report.gpu,
        suite["name"],
        suite["version"],
        suite["sha256"],
        suite.get("gpu"),
        document["schema_version"],
        stored_json(document["environment"], f"{report.what}: environment"),
        zlib.compress(stored_json(_stripped(document), report.what), ZLIB_LEVEL),
        now_utc(),
    )


def _stripped(document: dict) -> dict:
    """A shallow copy of `document` without what has its own column: environment and every
    timing.samples_s are set to None (the input is left as it was)."""

    def impl_copy(impl: dict) -> dict:
        timing = impl.get("timing")
        return {**impl, "timing": {**timing, "samples_s": None}} if timing else impl

    cases = [
        {**c, "implementations": {n: impl_copy(i) for n, i in c["implementations"].items()}}
        for c in document["cases"]
    ]
    return {**document, "environment": None, "cases": cases}


def _values(index: int, case: dict, impl: dict, uuid: str | None) -> tuple:
    """The VALUE_COLUMNS of one implementation's point; `uuid` the card it ran on."""
    error = case.get("error") or {}
    timing = impl.get("timing")
    gap = impl.get("gap")
    return (
        index,
        case["status"],
        error.get("phase"),
        error.get("message"),
        (impl.get("check") or {}).get("status"),
        samples_blob(timing["samples_s"]) if timing else None,
        *(_STATS_OF(timing["stats"]) if timing else _NO_STATS),
        *(_GAP_OF(gap) if gap else _NO_GAP),
        *compiler_identity(impl),
        uuid,
    )


# The schema requires every key of a stats and a gap block, so itemgetter cannot miss.
_STATS_OF, _NO_STATS = operator.itemgetter(*STAT_COLUMNS), (None,) * len(STAT_COLUMNS)
_GAP_OF, _NO_GAP = operator.itemgetter(*GAP_COLUMNS.values()), (None,) * len(GAP_COLUMNS)
