"""The history store: one SQLite file of runs and of points on series that never mix, read and
written here; its tables and migrations are harness.history.store_schema's.

`Store` is the history as a program sees it: `ingest()` a result document, then read it back as
series (`list_series`), their points (`points`, `recent`), runs (`runs`) and the documents
themselves (`raw_document`, exactly as ingested). By section:
- what is wrong with a file, said plainly: `integrity_problems()` (`PRAGMA integrity_check`),
  `corruption()` (the refusal; a trusted ingest checks once before its first write), `cause()`
  (what an sqlite3 error means: a full disk at open is a "disk I/O error", not a wrong --db);
- the file (`HistoryFile`): opened read-only (an error if missing) or for reading until the first
  trusted ingest makes it writable, created with its schema or migrated forward in that ingest's
  transaction, in WAL mode; a foreign, newer or unmigratable file is refused whatever the mode;
  the last writer to close puts it back in rollback-journal mode, so at rest it is one file and
  a read-only open creates nothing beside it; a missing file reads as an empty history;
- what a document becomes: `plan()` (complete, on the GPU model its suite pins; one PlannedPoint
  per implementation per case, keyed by its series) and `run_row()` (identity columns, the
  environment as JSON, the rest zlib-compressed without its samples); an untrusted ingest plans
  but never opens the file for writing;
- whole-history reads as numpy arrays for change points, drift and the dashboard
  (`series_values`, `series_columns`, `run_info`), through the one read gate `Store._query`."""

from __future__ import annotations

import contextlib
import gc
import hashlib
import itertools
import operator
import shutil
import sqlite3
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Self

import orjson

from harness.errors import GpuMismatchError, StoreError
from harness.escaping import terminal
from harness.history.series import (
    COMPILER_FIELDS,
    KEY_FIELDS,
    compiler_identity,
    gpu_model,
    series_id,
    series_key,
    series_label,
)
from harness.history.store_schema import (
    APPLICATION_ID,
    MIGRATIONS,
    STORE_SCHEMA_VERSION,
    canonical_json,
    counter_blobs,
    counter_set,
    lay,
    microseconds,
    migrate,
    normalize_utc,
    now_utc,
    point_uuid,
    samples_blob,
    samples_list,
    stored_json,
)
from protocol.points import as_rows
from protocol.validation import validate
from protocol.version import RESULT_SCHEMA_VERSION, check_version

if TYPE_CHECKING:  # numpy is imported by the whole-history reads: an ingest does not need it
    import numpy as np

__all__ = [
    "LOW_SPACE_BYTES",
    "STORE_SCHEMA_VERSION",
    "VALUE_COLUMNS",
    "HistoryFile",
    "IngestReport",
    "PlannedPoint",
    "RunInfo",
    "SeriesValues",
    "Store",
    "cause",
    "collection_paused",
    "corruption",
    "integrity_problems",
    "plan",
    "prepared",
    "run_id",
    "run_info",
    "run_row",
    "series_columns",
    "series_values",
]


PROBLEMS_SHOWN = 5


LOW_SPACE_BYTES = 1 << 20  # an I/O error with less free space than this is a full disk


# SQLite's primary result codes (the low byte of an extended code such as SQLITE_IOERR_SHMSIZE)
SQLITE_PERM, SQLITE_BUSY, SQLITE_LOCKED, SQLITE_READONLY = 3, 5, 6, 8


SQLITE_IOERR, SQLITE_FULL, SQLITE_CANTOPEN = 10, 13, 14


def integrity_problems(db: sqlite3.Connection, shown: int = PROBLEMS_SHOWN) -> list[str]:
    """The first `shown` findings of PRAGMA integrity_check; empty when the file is sound.
    Every page, index entry and constraint is read: about a second per 100 MB of history."""
    found = [row[0] for row in db.execute(f"PRAGMA integrity_check({int(shown)})")]
    return [] if found == ["ok"] else found


def corruption(db: sqlite3.Connection, path: Path) -> str | None:
    """Why the store at `path` must not be written (integrity_problems() found damage), or None."""
    problems = integrity_problems(db)
    if not problems:
        return None
    return (
        f"{path}: the history database is corrupt; nothing was written. PRAGMA integrity_check: "
        f"{'; '.join(problems)}. Restore it from a copy (the example workflow keeps every "
        "version on the benchmark-history branch)"
    )


def _free_bytes(path: Path) -> int | None:
    folder = Path(path).resolve().parent
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return None


def cause(exc: sqlite3.Error, path: Path) -> str | None:
    """`exc` as the cause a user can act on: the disk is full, an I/O error, the file cannot be
    opened, another process holds a lock, it is read-only. None for anything else (a corrupt
    or foreign file: the caller's own message applies)."""
    code = getattr(exc, "sqlite_errorcode", None)
    name = getattr(exc, "sqlite_errorname", None) or "?"
    said = f"SQLite: {exc} ({name})"
    primary = None if code is None else code & 0xFF
    free = _free_bytes(path) if primary in (SQLITE_IOERR, SQLITE_FULL) else None
    if primary == SQLITE_FULL or (
        primary == SQLITE_IOERR and free is not None and free < LOW_SPACE_BYTES
    ):
        room = "" if free is None else f", {free} bytes free in {Path(path).resolve().parent}"
        return f"the disk is full ({said}{room}); free some space and run it again"
    if primary == SQLITE_IOERR:
        return (
            f"an I/O error reading or writing it or its -wal/-shm files ({said}); "
            "check the disk and the filesystem"
        )
    if primary in (SQLITE_CANTOPEN, SQLITE_PERM):
        return f"it cannot be opened ({said}); check that its folder exists and may be written"
    if primary in (SQLITE_BUSY, SQLITE_LOCKED):
        return f"another process holds a lock on it ({said}); run it again when that one is done"
    if primary == SQLITE_READONLY:
        return f"it cannot be written here ({said}); check the file's and its folder's permissions"
    return None


WAL_CHECKPOINT_PAGES = 16384


class HistoryFile:
    """The history database at `path`, as a file; use as a context manager.

    readonly=True opens an existing file read-only (an error if it is missing). Otherwise the
    file is created, with its schema, at the first `_prepare_writes()`, and reads of a file that
    does not exist yet see an empty history.
    """

    def __init__(self, path: str | Path, readonly: bool = False):
        self.path = Path(path)
        self.readonly = readonly
        self._db: sqlite3.Connection | None = None
        self._empty = True
        self._version = STORE_SCHEMA_VERSION  # the file's, once opened
        self._writes_ready = False
        self._created = False  # this connection created the file; WAL after its first commit
        if readonly and not self.path.exists():
            raise StoreError(
                f"{self.path}: no history database here; create one from a result document "
                "with `python -m harness ingest RESULT.json --db PATH --trusted --cases "
                "<checkout>/benchmarks/cases.toml` (the suite's manifest gives the GPU pin), "
                "or pass --db the history's path"
            )
        if self.path.exists():
            self._open()

    def _open(self) -> None:
        try:
            if self.readonly:
                db = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True)
            else:
                db = sqlite3.connect(self.path)
            db.isolation_level = None  # transactions are explicit: BEGIN IMMEDIATE per ingest
            self._db = db
            self._empty = self._check_file()
        except sqlite3.DatabaseError as exc:
            self.close()
            why = cause(exc, self.path)  # a full disk, an I/O error, a lock: not the wrong file
            raise StoreError(
                f"{self.path}: cannot open the history database: {why}"
                if why
                else f"{self.path}: not a readable SQLite database ({exc}); "
                "is --db pointing at the right file? kernelgap will not overwrite it"
            ) from None

    def _check_file(self) -> bool:
        """Refuse a file that is not a kernelgap history of this schema; True if it is empty."""
        db = self._db
        app_id = db.execute("PRAGMA application_id").fetchone()[0]
        version = db.execute("PRAGMA user_version").fetchone()[0]
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        if app_id == 0 and version == 0 and not tables:
            return True
        if app_id != APPLICATION_ID:
            raise StoreError(
                f"{self.path}: not a kernelgap history database (application_id {app_id:#x}, "
                f"expected {APPLICATION_ID:#x}; tables: {', '.join(tables) or 'none'})"
            )
        if version > STORE_SCHEMA_VERSION:
            raise StoreError(
                f"{self.path}: history schema version {version} is newer than this kernelgap "
                f"understands ({STORE_SCHEMA_VERSION}); upgrade kernelgap to read it"
            )
        if any(v not in MIGRATIONS for v in range(version, STORE_SCHEMA_VERSION)):
            raise StoreError(
                f"{self.path}: history schema version {version} is older than "
                f"{STORE_SCHEMA_VERSION} and has no migration"
            )
        self._version = version
        return False

    def _prepare_writes(self) -> bool:
        """Open (creating the file) in WAL mode, and lay the schema if the file is new or
        migrate it if it is older; True when it was migrated (series may have new ids)."""
        if self._db is None:
            self._open()
        db = self._db
        if self._writes_ready:
            return False
        if not self._empty and (damage := corruption(db, self.path)):
            raise StoreError(damage)  # before any write, the WAL switch and a migration included
        # A new file keeps its rollback journal until its first write commits (`_committed`):
        # nobody reads a history that is not there yet, and a WAL would write a bulk ingest's
        # every page twice (once more at its checkpoint).
        self._created = self._empty
        db.execute(f"PRAGMA journal_mode={'DELETE' if self._empty else 'WAL'}")
        # In WAL mode NORMAL may lose the last commits on power loss, never integrity.
        db.execute("PRAGMA synchronous=NORMAL")
        # Checkpoint every 64 MiB of WAL rather than 4 MiB: a bulk ingest commits ~40% faster.
        db.execute(f"PRAGMA wal_autocheckpoint={WAL_CHECKPOINT_PAGES}")
        if self._empty:
            db.execute("BEGIN IMMEDIATE")
            if self._check_file():  # still empty now that this connection holds the write lock
                lay(db)
            db.execute("COMMIT")
            self._empty = False
        migrated = False
        if self._version < STORE_SCHEMA_VERSION:
            db.execute("BEGIN IMMEDIATE")
            try:
                self._check_file()  # under the write lock: another writer may have migrated it
                migrate(db, self._version, STORE_SCHEMA_VERSION)
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
            migrated = True  # by this writer or, since the plan, by another
            self._version = STORE_SCHEMA_VERSION
        self._writes_ready = True
        return migrated

    def _committed(self) -> None:
        """After a write transaction's COMMIT: a file this connection created goes to WAL
        mode, as an existing one is opened, so readers can open it while the next transactions
        write, and each of those commits without a rollback journal's sync (10,000 runs of one
        transaction each were 40% slower in a file that stayed in that mode)."""
        if self._created:
            self._created = False
            with contextlib.suppress(sqlite3.DatabaseError):  # it works on in its journal mode
                self._db.execute("PRAGMA journal_mode=WAL")

    def close(self) -> None:
        if self._db is not None:
            if self._writes_ready:
                self._leave_wal()
            self._db.close()
            self._db = None

    def _remove(self) -> None:
        """Close the file and delete it (with any -wal, -shm or -journal beside it): the store
        is again one whose file does not exist yet."""
        self.close()
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{self.path}{suffix}").unlink(missing_ok=True)
        self._empty, self._writes_ready, self._created = True, False, False
        self._version = STORE_SCHEMA_VERSION

    def _rollback(self) -> None:
        """Undo the open transaction, if any; a failing ROLLBACK (a full disk, an I/O error)
        leaves it to SQLite, which rolls back at close or at the next open."""
        if self._db is not None and self._db.in_transaction:
            with contextlib.suppress(sqlite3.DatabaseError):
                self._db.execute("ROLLBACK")

    def _leave_wal(self) -> None:
        """Back to a rollback journal at rest, so a read-only open (an untrusted ingest,
        `history`) needs no -wal or -shm file and leaves none beside the store. Only possible
        for the last connection; while another is open the file stays in WAL mode (it works
        as before) and that connection's own close switches it."""
        try:
            self._db.execute("PRAGMA busy_timeout = 0")  # another connection: give up at once
            self._db.execute("PRAGMA journal_mode = DELETE")
        except sqlite3.DatabaseError:
            pass

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def _query(self, sql: str, params=()) -> list[tuple]:
        if self._db is None or self._empty:
            return []  # not created yet: an empty history
        try:
            return self._db.execute(sql, params).fetchall()
        except sqlite3.DatabaseError as exc:
            why = cause(exc, self.path) or str(exc)
            raise StoreError(f"{self.path}: reading the history failed: {why}") from None


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


# What points() returns: the run's commit comes from a join, the samples only on request. A
# version 1 file, read before its migration, has no compiler columns: they read as None.
POINT_FIELDS_V1 = (
    "r.run_id, r.started_utc, r.commit_sha, p.case_status, p.error_phase, p.error_message, "
    "p.check_status, p.median_s, p.mad_s, p.noise, p.stable, p.p95_s, p.min_s, p.max_s, "
    "p.mean_s, p.count, p.gap, p.gap_median_of_round_ratios, p.gap_ci_low, p.gap_ci_high, "
    "p.gap_stable"
)


POINT_FIELDS_V2 = POINT_FIELDS_V1 + "".join(f", p.{c}" for c in COMPILER_FIELDS)


POINT_FIELDS = POINT_FIELDS_V2 + ", p.gpu_uuid"  # version 4: the card (not in the key)


BOOL_FIELDS = ("stable", "gap_stable")


RECENT_LOOKBACK = 5  # recent() reads 5 x window points back: 1 in 5 stable fills the window


RUN_FIELDS = (
    *("run_id", "started_utc", "finished_utc", "commit_sha", "dirty", "gpu", "suite_name"),
    *("suite_version", "suite_sha256", "suite_gpu", "schema_version"),
)  # not ingested_utc: it lies after the two blobs, so reading it walks every stored document


@contextlib.contextmanager
def collection_paused():
    """Python's cyclic garbage collector off for a bulk pass that makes no cycles (an ingest's
    plans, a dashboard build's arrays of every point), whose full passes over all it holds are
    only cost (their share: benchmarks/perf/RESULTS.md)."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


class SeriesCounts:
    """The series rows' point counts and first/last dates that a write adds to, summed in memory
    and written once per series at the end of its transaction (not once per point)."""

    def __init__(self):
        self._of: dict[int, list] = {}  # series rowid -> [points, first_utc, last_utc]

    def add(self, series: list[int], started_utc: str) -> None:
        for rowid in series:
            found = self._of.get(rowid)
            if found is None:
                self._of[rowid] = [1, started_utc, started_utc]
            else:
                found[0] += 1
                found[1] = min(found[1], started_utc)
                found[2] = max(found[2], started_utc)

    def write(self, db: sqlite3.Connection) -> None:
        db.executemany(
            "UPDATE series SET points = points + ?1, "
            "first_utc = min(coalesce(first_utc, ?2), ?2), "
            "last_utc = max(coalesce(last_utc, ?3), ?3) WHERE series = ?4",
            [(n, first, last, rowid) for rowid, (n, first, last) in self._of.items()],
        )


class Store(HistoryFile):
    """The history database at `path`; use as a context manager.

    readonly=True opens an existing file read-only (an error if it is missing). Otherwise the
    file is created, with its schema, at the first trusted ingest, and reads of a file that does
    not exist yet see an empty history.
    """

    def __init__(self, path: str | Path, readonly: bool = False):
        self._series_cache: dict[str, int] = {}
        self._counter_sets: dict[bytes, int] = {}  # essentials -> counter_sets rowid
        super().__init__(path, readonly)

    # -- ingest ------------------------------------------------------------------------------
    def ingest(
        self,
        document: dict,
        trusted: bool = False,
        *,
        what: str = "result",
        check: bool = True,
        bundle: dict | None = None,
    ) -> IngestReport:
        """Store one result document (trusted) or only say what would be stored (untrusted).

        check=False skips schema validation for a document the caller validated already.
        `bundle` (a bundle manifest) gives static counters to implementations that lack them.
        Raises protocol's DocumentError/VersionError for a bad document, GpuMismatchError for
        a run on another GPU model than the suite pins, StoreError for an incomplete document
        or an unusable database.
        """
        if check:
            check_version(document.get("schema_version"), RESULT_SCHEMA_VERSION, what)
            validate(document, "result", what)
        document = as_rows(document)  # a sweep's points: series of their own
        report = plan(document, path=self.path, trusted=trusted, what=what, bundle=bundle)
        self._mark(report)
        if not trusted or report.already_stored:
            return report
        self._ready_to_write()
        self._mark(report)  # again: a migration may rename or merge series
        if not report.already_stored:
            self._write([(report, run_row(document, report))])
        return report

    def _mark(self, report: IngestReport) -> None:
        """Fill in what the file holds already: the run (already_stored), each point's series
        (new_series)."""
        if self._query("SELECT 1 FROM runs WHERE run_id = ?", (report.run_id,)):
            report.already_stored = True
        known = self._series_rowids()
        for p in report.points:
            p.new_series = p.series_id not in known

    def _series_rowids(self) -> dict[str, int]:
        """series_id -> series rowid of every stored series (cached: series are never removed)."""
        if not self._series_cache:
            self._series_cache = dict(self._query("SELECT series_id, series FROM series"))
        return self._series_cache

    def _ready_to_write(self) -> None:
        """The file created, checked and migrated for a trusted ingest (StoreError if not)."""
        if self.readonly:
            raise StoreError(f"{self.path}: opened read-only; a trusted ingest writes")
        try:
            if self._prepare_writes():
                self._series_cache = {}  # a migration may rename or merge series
        except sqlite3.DatabaseError as exc:
            self._rollback()
            why = cause(exc, self.path) or str(exc)
            raise StoreError(f"{self.path}: cannot write the history: {why}") from None

    def ingest_many(
        self, documents: Iterable[tuple[dict, str]], bundle: dict | None = None
    ) -> list[IngestReport]:
        """Store many validated result documents ((document, what) pairs) in one transaction
        (ingest_planned): an iterator that reads them keeps one document in memory at a time,
        not all of them. `bundle` as in ingest."""
        return self.ingest_planned(
            prepared(document, path=self.path, what=what, bundle=bundle)
            for document, what in documents
        )

    def ingest_planned(self, planned: Iterable[tuple[IngestReport, tuple]]) -> list[IngestReport]:
        """Store many planned runs (store.prepared: a report and its `runs` row) in one
        transaction: a backfill of thousands of runs pays one commit, not one per run. Each
        run is written as it arrives, so the writes overlap the planning of the next (in the
        worker processes of `harness ingest`). A run already stored (or given twice) is
        reported as such; any error, a plan's own included, stores none of them: the
        transaction rolls back, and a file this call created is removed (a bad file leaves
        no history behind). A file that needs a migration (which commits on its own) sees
        every run planned before it is touched. A point is `new_series` in the run that starts its
        series (the batch's first, where the store had none)."""
        if self.readonly:
            raise StoreError(f"{self.path}: opened read-only; a trusted ingest writes")
        reports: list[IngestReport] = []
        with collection_paused():  # documents and plans hold no cycles; the batch grows
            planned = iter(planned)
            first = list(itertools.islice(planned, 1))  # a bad first file touches nothing
            if self._migration_due():
                first.extend(planned)
            created = not self.path.exists()
            try:
                self._ready_to_write()
                known = self._series_rowids()
                self._write(self._marked(itertools.chain(first, planned), known, reports))
            except BaseException:
                if created:
                    self._remove_if_unused()
                if hasattr(planned, "close"):  # a generator: stop its producers (worker processes)
                    planned.close()
                raise
        return reports

    def _migration_due(self) -> bool:
        """Whether an existing file is older than this schema (its first write migrates it)."""
        return self._db is not None and not self._empty and self._version < STORE_SCHEMA_VERSION

    @staticmethod
    def _marked(planned, known: dict[str, int], reports: list[IngestReport]):
        """Each (report, row) of `planned`, its points' new_series set where the run starts the
        series: neither in `known` (the series stored before the batch) nor in a run before it
        in the batch; its report added to `reports`."""
        started: set[str] = set()
        for report, row in planned:
            for p in report.points:
                p.new_series = p.series_id not in known and p.series_id not in started
            started.update(p.series_id for p in report.points)
            reports.append(report)
            yield report, row

    def _remove_if_unused(self) -> None:
        """After a failed ingest into a file it created: the file removed, unless another
        writer stored a run in it meanwhile."""
        try:
            used = bool(self._query("SELECT 1 FROM runs LIMIT 1"))
        except StoreError:
            used = False  # unreadable: ours, and never held a run of anyone's
        if used:
            return
        self._series_cache, self._counter_sets = {}, {}
        self._remove()

    def _write(self, batch: Iterable[tuple[IngestReport, tuple]]) -> None:
        """Insert each planned run of `batch` (its report and `runs` row) not stored yet, all
        in one transaction; an error, one raised by the iterable included, rolls it back."""
        db = self._db
        rowids = dict(self._series_rowids())
        done: list[IngestReport] = []
        batch_ids: set[str] = set()
        counts = SeriesCounts()
        report = None
        try:
            db.execute("BEGIN IMMEDIATE")
            for report, row in batch:
                if (
                    report.run_id in batch_ids
                    or db.execute(
                        "SELECT 1 FROM runs WHERE run_id = ?", (report.run_id,)
                    ).fetchone()
                ):
                    report.already_stored = True  # another writer, or this batch, stored it
                    continue
                self._insert_run(report, row, rowids, counts)
                done.append(report)
                batch_ids.add(report.run_id)
            counts.write(db)
            db.execute("COMMIT")
        except sqlite3.IntegrityError as exc:
            self._counter_sets = {}
            db.execute("ROLLBACK")
            raise StoreError(  # only an INSERT of the loop's run raises it
                f"{report.what}: cannot store run {report.run_id[:12]}: {exc} "
                "(a case id or implementation listed twice?)"
            ) from None
        except sqlite3.DatabaseError as exc:
            self._counter_sets = {}
            self._rollback()
            why = cause(exc, self.path) or str(exc)
            raise StoreError(f"{self.path}: writing the history failed: {why}") from None
        except BaseException:  # a bad file, a refused run, an interrupt: none of the batch
            self._counter_sets = {}
            self._rollback()
            raise
        self._series_cache = rowids  # only after COMMIT: a rolled-back rowid must not linger
        for r in done:
            r.stored = True
        self._committed()  # after: an interrupt while it waits for a reader loses no report

    def _insert_run(
        self, report: IngestReport, row: tuple, rowids: dict[str, int], counts: SeriesCounts
    ) -> None:
        """One run's rows (run, new series, points, counters); inside a transaction. `rowids`
        (series_id -> rowid) gains the series it starts, `counts` its points."""
        db = self._db
        run = db.execute(
            "INSERT INTO runs VALUES (NULL,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", row
        ).lastrowid
        rowids.update(self._insert_series(report.points, rowids))
        started_us = microseconds(report.started_utc)
        series = [rowids[p.series_id] for p in report.points]
        db.executemany(
            f"INSERT INTO points VALUES ({','.join('?' * (3 + len(VALUE_COLUMNS)))})",
            [(s, started_us, run, *p.row) for s, p in zip(series, report.points, strict=True)],
        )
        counters = [
            (s, started_us, run, self._set_of(p.counters[0]), p.counters[1])
            for s, p in zip(series, report.points, strict=True)
            if p.counters != (None, None)
        ]
        if counters:
            db.executemany("INSERT INTO counters VALUES (?,?,?,?,?)", counters)
        counts.add(series, report.started_utc)

    def _set_of(self, blob: bytes | None) -> int | None:
        """The counter_sets rowid of a static analysis' essentials (inside the ingest's
        transaction; a rolled-back one is forgotten by `_write`)."""
        return None if blob is None else counter_set(self._db, blob, self._counter_sets)

    def _insert_series(self, points: list[PlannedPoint], known: dict[str, int]) -> dict[str, int]:
        """Insert the series this run starts (not in `known`); their rowids. Inside the
        ingest's transaction."""
        added: dict[str, int] = {}
        for p in points:
            if p.series_id in known or p.series_id in added:
                continue
            cursor = self._db.execute(
                "INSERT OR IGNORE INTO series (series_id, gpu, mode, suite_version, case_id, "
                "case_version, impl, source_sha256, baseline_source_sha256, role, baseline) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (p.series_id, *(p.key[f] for f in KEY_FIELDS), p.role, p.baseline),
            )
            if cursor.rowcount:
                added[p.series_id] = cursor.lastrowid
            else:  # another writer added it since this store loaded its cache
                added[p.series_id] = self._db.execute(
                    "SELECT series FROM series WHERE series_id = ?", (p.series_id,)
                ).fetchone()[0]
        return added

    # -- reading -----------------------------------------------------------------------------
    def list_series(self, case_id: str | None = None) -> list[dict]:
        """Every series (optionally of one case): series_id, label, the KEY_FIELDS, role,
        baseline, points (count), first_utc and last_utc; ordered by case, impl, last date."""
        sql = (
            f"SELECT series_id, {', '.join(KEY_FIELDS)}, role, baseline, points, first_utc, "
            "last_utc FROM series"
        )
        params: tuple = ()
        if case_id is not None:
            sql, params = f"{sql} WHERE case_id = ?", (case_id,)
        names = ("series_id", *KEY_FIELDS, "role", "baseline", "points", "first_utc", "last_utc")
        rows = [dict(zip(names, r, strict=True)) for r in self._query(sql, params)]
        for row in rows:
            row["label"] = series_label(row)
        rows.sort(key=lambda r: (r["case_id"], r["impl"], r["gpu"], r["mode"] or "", r["last_utc"]))
        return rows

    def points(self, series_id: str, *, with_samples: bool = False) -> list[dict]:
        """The series' points, oldest first: run_id, started_utc, commit_sha, case_status,
        error_phase, error_message, check_status, median_s, mad_s, noise, stable, p95_s, min_s,
        max_s, mean_s, count, gap (ratio of medians), gap_median_of_round_ratios, gap_ci_low,
        gap_ci_high, gap_stable, toolchain, toolchain_version, compiler_sha256 (the compiler's
        identity: metadata, not part of the key), gpu_uuid (the card: metadata too) and
        samples_s when asked."""
        return self._points("ORDER BY p.started_us, p.run", series_id, (), with_samples)

    def recent(self, series_id: str, window: int) -> list[dict]:
        """What a regression check needs, oldest first: the newest point and, before it, up to
        `window` points with stable times and up to `window` with stable gaps, looked for
        among the RECENT_LOOKBACK x window points before the newest (a bounded read)."""
        latest = self._points(
            "ORDER BY p.started_us DESC, p.run DESC LIMIT ?",
            series_id,
            (RECENT_LOOKBACK * window + 1,),
        )
        if not latest:
            return []
        keep = {id(latest[0])}
        for flag in BOOL_FIELDS:
            keep.update(id(p) for p in [p for p in latest[1:] if p[flag]][:window])
        return [p for p in reversed(latest) if id(p) in keep]

    def _points(self, tail: str, sid: str, params: tuple, with_samples: bool = False) -> list:
        rowid = self._series_rowids().get(sid)
        if rowid is None:
            rows = self._query("SELECT series FROM series WHERE series_id = ?", (sid,))
            if not rows:
                return []
            rowid = rows[0][0]
        current = self._version >= 2
        fields = (
            POINT_FIELDS if self._version >= 4 else POINT_FIELDS_V2 if current else POINT_FIELDS_V1
        ) + (", p.samples" if with_samples else "")
        sql = (
            f"SELECT {fields} FROM points p JOIN runs r ON r.run = p.run WHERE p.series = ? {tail}"
        )
        names = [f.strip().split(".")[-1] for f in fields.split(",")]
        out = []
        for row in self._query(sql, (rowid, *params)):
            point = dict(zip(names, row, strict=True))
            if not current:
                point.update(dict.fromkeys(COMPILER_FIELDS))
            point.setdefault("gpu_uuid", None)  # read before its migration to version 4
            for flag in BOOL_FIELDS:
                if point[flag] is not None:
                    point[flag] = bool(point[flag])
            if with_samples:
                blob = point.pop("samples")
                point["samples_s"] = None if blob is None else samples_list(blob)
            out.append(point)
        return out

    def cards_of(self, series_id: str, runs: set[int]) -> dict[int, str | None]:
        """{run rowid: the UUID of the card the series' point in that run ran on} for `runs`
        (None where unrecorded, or in a file older than version 4)."""
        rowid = self._series_rowids().get(series_id)
        if rowid is None or not runs or self._version < 4:
            return dict.fromkeys(runs)
        wanted = sorted(runs)
        sql = (
            f"SELECT run, gpu_uuid FROM points WHERE series = ? "
            f"AND run IN ({','.join('?' * len(wanted))})"
        )
        return {**dict.fromkeys(runs), **dict(self._query(sql, (rowid, *wanted)))}

    def card_gaps(self, gpu: str | None = None) -> list[tuple]:
        """(series rowid, card UUID, gap, gap_ci_low, gap_ci_high, gap_confidence) of every
        candidate point that has a gap and a recorded card, of series on GPU model `gpu` (a
        series key's spelling) or of every model: what harness.history.cards estimates the
        between-card term from, in one query (none in a file older than version 4)."""
        if self._version < 4:
            return []
        sql = (
            "SELECT p.series, p.gpu_uuid, p.gap, p.gap_ci_low, p.gap_ci_high, p.gap_confidence "
            "FROM points p JOIN series s ON s.series = p.series WHERE s.role = 'candidate' "
            "AND p.gap > 0 AND p.gpu_uuid IS NOT NULL"
        )
        if gpu is None:
            return self._query(sql, ())
        return self._query(f"{sql} AND s.gpu = ?", (gpu,))

    def runs(self) -> list[dict]:
        """Every run, oldest first: run_id, started_utc, finished_utc, commit_sha, dirty, gpu,
        suite_name, suite_version, suite_sha256, suite_gpu, schema_version."""
        rows = self._query(f"SELECT {', '.join(RUN_FIELDS)} FROM runs ORDER BY started_utc, run")
        return [dict(zip(RUN_FIELDS, r, strict=True)) for r in rows]

    def raw_document(self, run_id: str) -> dict:
        """The result document of run `run_id` exactly as ingested (samples put back)."""
        sql = "SELECT run, environment, document FROM runs WHERE run_id = ?"
        rows = self._query(sql, (run_id,))
        if not rows:
            raise KeyError(f"{self.path}: no run {run_id!r}")
        run, environment, blob = rows[0]
        try:
            document = orjson.loads(zlib.decompress(blob))
            document["environment"] = orjson.loads(environment)
        except (zlib.error, orjson.JSONDecodeError) as exc:
            raise StoreError(
                f"{self.path}: run {run_id}: stored document is corrupt: {exc}"
            ) from None
        sql = (
            "SELECT p.case_index, s.impl, p.samples FROM points p JOIN series s "
            "ON s.series = p.series WHERE p.run = ? AND p.samples IS NOT NULL"
        )
        for index, impl, samples in self._query(sql, (run,)):
            timing = document["cases"][index]["implementations"][impl]["timing"]
            timing["samples_s"] = samples_list(samples)
        return document


MISSING = -1.0  # stands for NULL in the numeric columns (values are > 0, flags 0 or 1)


@dataclass(frozen=True)
class SeriesValues:
    """One series' points, oldest first: run rowid, median_s, stable, gap, gap_stable (NaN and
    False where the point has none: a failed case, an unchecked candidate)."""

    run: np.ndarray
    median_s: np.ndarray
    stable: np.ndarray
    gap: np.ndarray
    gap_stable: np.ndarray

    def metric(self, value: str, flag: str) -> tuple[np.ndarray, np.ndarray]:
        """(positions, values) of the points whose `value` exists, is > 0 and whose `flag` is set."""
        import numpy as np

        values, flags = getattr(self, value), getattr(self, flag)
        keep = np.flatnonzero(flags & (values > 0))
        return keep, values[keep]


@dataclass(frozen=True)
class RunInfo:
    run_id: str
    commit: str | None
    started_utc: str


COLUMNS = (
    f"series, started_us, run, coalesce(median_s, {MISSING}), coalesce(gap, {MISSING}), "
    "coalesce(stable, 0) + 2 * coalesce(gap_stable, 0)"
)


def _as_series_values(part: np.ndarray) -> SeriesValues:
    import numpy as np

    flags = part[:, 5].astype(np.int64)
    return SeriesValues(
        run=part[:, 2].astype(np.int64),
        median_s=np.where(part[:, 3] == MISSING, np.nan, part[:, 3]),
        stable=(flags & 1) == 1,
        gap=np.where(part[:, 4] == MISSING, np.nan, part[:, 4]),
        gap_stable=(flags & 2) == 2,
    )


def series_values(
    store: Store, series_ids: list[str], last: int | None = None
) -> dict[str, SeriesValues]:
    """The points of every series in `series_ids` (unknown ids are left out); with `last`, only
    each one's newest `last` points (one indexed query per series)."""
    import numpy as np

    rowids = store._series_rowids()
    wanted = {rowids[s]: s for s in series_ids if s in rowids}
    if not wanted:
        return {}
    if last is not None:
        out = {}
        sql = f"SELECT {COLUMNS} FROM points WHERE series = ? ORDER BY started_us DESC, run DESC LIMIT ?"
        for rowid, sid in wanted.items():
            rows = store._query(sql, (rowid, last))
            if rows:
                out[sid] = _as_series_values(np.array(rows[::-1], dtype=np.float64))
        return out
    where, params = _only(wanted, rowids)  # and no ORDER BY: a numpy sort
    rows = store._query(f"SELECT {COLUMNS} FROM points {where}", params)
    if not rows:
        return {}
    table = np.array(rows, dtype=np.float64)
    table = table[np.lexsort((table[:, 2], table[:, 1], table[:, 0]))]
    edges = np.flatnonzero(np.diff(table[:, 0])) + 1
    out = {}
    for part in np.split(table, edges):
        sid = wanted.get(int(part[0, 0]))
        if sid is not None:
            out[sid] = _as_series_values(part)
    return out


def series_columns(
    store: Store, series_ids: list[str], text: tuple[str, ...], numbers: tuple[str, ...]
) -> dict[str, dict[str, np.ndarray]]:
    """Every point of each series in `series_ids` (unknown ids are left out), oldest first, as
    one array per column: "run" (the run's rowid) and "run_id" (str), then the `text` columns
    (object arrays, None where NULL) and the `numbers` columns (float64, NaN where NULL).
    Compiler columns of a version 1 file, read before its migration, are all None. One scan of
    the table, as series_values."""
    import numpy as np

    rowids = store._series_rowids()
    wanted = {rowids[s]: s for s in series_ids if s in rowids}
    if not wanted:
        return {}
    missing = (() if store._version >= 2 else COMPILER_FIELDS) + (
        () if store._version >= 4 else ("gpu_uuid",)
    )
    names = (*text, *numbers)
    where, params = _only(wanted, rowids)
    picked = ", ".join("NULL" if n in missing else n for n in names)
    rows = store._query(f"SELECT series, started_us, run, {picked} FROM points {where}", params)
    if not rows:
        return {}
    table = np.array(rows, dtype=object)  # faster than a zip into columns
    series, started, run = (table[:, k].astype(np.int64) for k in range(3))
    order = np.lexsort((run, started, series))
    table, run = table[order], run[order]
    columns = {"run": run, "run_id": _run_ids(store)[run]}
    for k, name in enumerate(names, start=3):
        columns[name] = table[:, k] if name in text else table[:, k].astype(np.float64)
    series = series[order]
    edges = [0, *(np.flatnonzero(np.diff(series)) + 1).tolist(), series.size]
    out = {}
    for start, stop in itertools.pairwise(edges):
        sid = wanted.get(int(series[start]))
        if sid is not None:
            out[sid] = {name: column[start:stop] for name, column in columns.items()}
    return out


def _run_ids(store: Store) -> np.ndarray:
    """An object array of every run's run_id at the index of its rowid (None between)."""
    import numpy as np

    rows = store._query("SELECT run, run_id FROM runs")
    out = np.full(max((r for r, _ in rows), default=0) + 1, None, dtype=object)
    if rows:
        rowid, run_id = zip(*rows, strict=True)
        out[list(rowid)] = run_id
    return out


def _only(wanted: dict[int, str], rowids: dict[str, int]) -> tuple[str, tuple]:
    """The WHERE clause that reads only the `wanted` series: for a few, through the index; for
    many, none (one sequential scan, then a numpy sort, is several times faster than walking the
    index, whose order sends every row to another page of a table holding the samples)."""
    if len(wanted) <= min(500, len(rowids) // 4):
        return f"WHERE series IN ({','.join('?' * len(wanted))})", tuple(wanted)
    return "", ()


def run_info(store: Store, runs) -> dict[int, RunInfo]:
    """run rowid -> (run_id, commit, started_utc) for the given rowids."""
    runs = sorted({int(r) for r in runs})
    out: dict[int, RunInfo] = {}
    for start in range(0, len(runs), 500):  # SQLite's limit on bound parameters
        chunk = runs[start : start + 500]
        sql = (
            "SELECT run, run_id, commit_sha, started_utc FROM runs "
            f"WHERE run IN ({','.join('?' * len(chunk))})"
        )
        for run, rid, commit, started in store._query(sql, tuple(chunk)):
            out[run] = RunInfo(rid, commit, started)
    return out
