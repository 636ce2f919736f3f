"""The history store: one SQLite file of runs and of points on series that never mix.

Layout (schema version STORE_SCHEMA_VERSION, kept in PRAGMA user_version; PRAGMA application_id
marks the file as kernelgap's):
- runs: one row per result document; run_id = sha256 of the document's canonical JSON (sorted
  keys, compact), so the same run ingested twice is stored once whatever its formatting. The raw
  document is kept zlib-compressed with its environment (a JSON column of its own) and every
  samples_s array set to null; the samples live in `points` as little-endian float64 blobs, and
  `raw_document()` puts both back (float64 round-trips exactly: the document read back equals
  the one ingested).
- series: one row per series key (harness.series), with its point count and first/last date;
  since version 3 its GPU is the key's one spelling of the model (harness.series.gpu_model).
- points: one row per implementation per case per run: status (a failed case is a point with
  its error), check status, samples, statistics, for candidates the gap, and (since version 2)
  the compiler's identity as metadata (harness.series.compiler_identity: not part of the key).
  Rows refer to runs and series by integer rowid and are indexed by (series, start time).

An older file migrates forward (harness.store_migrations) at its first trusted ingest, in that
ingest's transaction; until then it is read as it is, with None for what it lacks.

Writes happen only in a trusted ingest, one transaction per document, in WAL mode; the last
writer to close puts the file back in rollback-journal mode, so at rest it is one file and a
read-only open creates nothing beside it. An untrusted ingest validates and plans but never
opens the file for writing (nor creates it). Readers see a
file that does not exist yet as an empty history, except with readonly=True (an error).
"""

from __future__ import annotations

import array
import contextlib
import hashlib
import operator
import sqlite3
import sys
import zlib
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import orjson

from harness.escaping import terminal
from harness.series import (
    COMPILER_FIELDS,
    KEY_FIELDS,
    compiler_identity,
    gpu_model,
    series_id,
    series_key,
    series_label,
)
from harness.store_integrity import cause, corruption
from harness.store_migrations import MIGRATIONS, migrate
from protocol.validation import validate
from protocol.version import RESULT_SCHEMA_VERSION, check_version

__all__ = [
    "STORE_SCHEMA_VERSION",
    "GpuMismatchError",
    "IngestReport",
    "Store",
    "StoreError",
    "run_id",
]

STORE_SCHEMA_VERSION = 3
APPLICATION_ID = 0x4B474150  # "KGAP": tells a kernelgap history from any other SQLite file
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
WAL_CHECKPOINT_PAGES = 16384
ZLIB_LEVEL = 1  # ~9x on a result document without samples, twice as fast as the default 6

SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE runs (
    run INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL UNIQUE,
    started_utc TEXT NOT NULL,
    finished_utc TEXT,
    commit_sha TEXT,
    dirty INTEGER,
    gpu TEXT NOT NULL,
    suite_name TEXT NOT NULL,
    suite_version INTEGER NOT NULL,
    suite_sha256 TEXT NOT NULL,
    suite_gpu TEXT,
    schema_version TEXT NOT NULL,
    environment BLOB NOT NULL,
    document BLOB NOT NULL,
    ingested_utc TEXT NOT NULL
);
CREATE INDEX runs_by_date ON runs (started_utc);
CREATE TABLE series (
    series INTEGER PRIMARY KEY,
    series_id TEXT NOT NULL UNIQUE,
    gpu TEXT NOT NULL,
    mode TEXT,
    suite_version INTEGER NOT NULL,
    case_id TEXT NOT NULL,
    case_version INTEGER NOT NULL,
    impl TEXT NOT NULL,
    source_sha256 TEXT,
    baseline_source_sha256 TEXT,
    role TEXT NOT NULL,
    baseline TEXT NOT NULL,
    points INTEGER NOT NULL DEFAULT 0,
    first_utc TEXT,
    last_utc TEXT
);
CREATE INDEX series_by_case ON series (case_id);
CREATE TABLE points (
    series INTEGER NOT NULL REFERENCES series (series),
    started_us INTEGER NOT NULL,
    run INTEGER NOT NULL REFERENCES runs (run),
    case_index INTEGER NOT NULL,
    case_status TEXT NOT NULL,
    error_phase TEXT,
    error_message TEXT,
    check_status TEXT,
    samples BLOB,
    median_s REAL,
    mad_s REAL,
    noise REAL,
    stable INTEGER,
    p95_s REAL,
    min_s REAL,
    max_s REAL,
    mean_s REAL,
    count INTEGER,
    gap REAL,
    gap_median_of_round_ratios REAL,
    gap_ci_low REAL,
    gap_ci_high REAL,
    gap_confidence REAL,
    gap_stable INTEGER,
    toolchain TEXT,
    toolchain_version TEXT,
    compiler_sha256 TEXT
);
CREATE UNIQUE INDEX points_by_series ON points (series, started_us, run);
CREATE INDEX points_by_run ON points (run);
"""

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
)
# What points() returns: the run's commit comes from a join, the samples only on request. A
# version 1 file, read before its migration, has no compiler columns: they read as None.
POINT_FIELDS_V1 = (
    "r.run_id, r.started_utc, r.commit_sha, p.case_status, p.error_phase, p.error_message, "
    "p.check_status, p.median_s, p.mad_s, p.noise, p.stable, p.p95_s, p.min_s, p.max_s, "
    "p.mean_s, p.count, p.gap, p.gap_median_of_round_ratios, p.gap_ci_low, p.gap_ci_high, "
    "p.gap_stable"
)
POINT_FIELDS = POINT_FIELDS_V1 + "".join(f", p.{c}" for c in COMPILER_FIELDS)
BOOL_FIELDS = ("stable", "gap_stable")
RECENT_LOOKBACK = 5  # recent() reads 5 x window points back: 1 in 5 stable fills the window
RUN_FIELDS = (
    *("run_id", "started_utc", "finished_utc", "commit_sha", "dirty", "gpu", "suite_name"),
    *("suite_version", "suite_sha256", "suite_gpu", "schema_version", "ingested_utc"),
)


class StoreError(RuntimeError):
    """The history database cannot be used as asked; the message names the file and why."""


class GpuMismatchError(StoreError):
    """A run on another GPU model than the suite pins: refused for the canonical history."""


def run_id(document: dict) -> str:
    """sha256 (hex) of the document's canonical JSON: sorted keys, compact, orjson floats."""
    return hashlib.sha256(orjson.dumps(document, option=orjson.OPT_SORT_KEYS)).hexdigest()


def normalize_utc(text: str) -> str:
    """'YYYY-MM-DDTHH:MM:SS[.f]Z' with exactly 6 fraction digits, so text order is time order."""
    body = text[:-1] if text.endswith("Z") else text
    whole, _, fraction = body.partition(".")
    return f"{whole}.{(fraction + '000000')[:6]}Z"


def _microseconds(normalized_utc: str) -> int:
    """Microseconds since 1970-01-01 UTC of a normalize_utc() string (exact integer)."""
    moment = datetime.strptime(normalized_utc, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    return (moment - EPOCH) // timedelta(microseconds=1)


def _now_utc() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _samples_blob(samples_s: list[float]) -> bytes:
    """Little-endian float64 bytes (array is several times faster than numpy for 30 floats)."""
    values = array.array("d", samples_s)
    if sys.byteorder == "big":
        values.byteswap()
    return values.tobytes()


def _samples_list(blob: bytes) -> list[float]:
    return np.frombuffer(blob, dtype="<f8").tolist()


@dataclass
class PlannedPoint:
    """One point an ingest stores (or would store)."""

    key: dict
    series_id: str
    role: str
    baseline: str
    row: tuple  # VALUE_COLUMNS
    new_series: bool = False

    @property
    def values(self) -> dict:
        return dict(zip(VALUE_COLUMNS, self.row, strict=True))


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

    @property
    def new_series(self) -> list[PlannedPoint]:
        return [p for p in self.points if p.new_series]

    def headline(self) -> str:
        if self.already_stored:
            return f"{self.what}: run {self.run_id[:12]} already stored in {self.path}; nothing written"
        verb = "stored" if self.stored else "would store (untrusted: nothing written)"
        failed = sum(p.values["case_status"] != "ok" for p in self.points)
        return (
            f"{self.what}: {verb} run {self.run_id[:12]} in {self.path}: {len(self.points)} points "
            f"({failed} failed), {len(self.new_series)} new series"
        )

    def text(self) -> str:
        """The headline, the run's identity and one line per point, each line safe to print
        on a terminal (harness.escaping.terminal: names from the document may hold escapes)."""
        lines = [
            self.headline(),
            f"  run {self.run_id}  commit {self.commit or '-'}  started {self.started_utc}",
            f"  gpu {self.gpu}  suite {self.suite}",
        ]
        if self.skipped_cases:
            lines.append(f"  {self.skipped_cases} skipped case(s) not stored")
        for p in self.points:
            v = p.values
            if v["case_status"] != "ok":
                what = f"{v['case_status']}: {v['error_phase']}: {v['error_message']}"
            elif v["median_s"] is None:
                what = f"no timing (check {v['check_status']})"
            else:
                what = f"median {v['median_s'] * 1e6:.3f} us" + ("" if v["stable"] else " unstable")
                if v["gap"] is not None:
                    what += f", gap {v['gap']:.4f}x [{v['gap_ci_low']:.4f}, {v['gap_ci_high']:.4f}]"
            tag = "new series" if p.new_series else "series"
            lines.append(f"  {tag} {p.series_id}  {series_label(p.key)}: {what}")
        return "\n".join(terminal(line) for line in lines)


class Store:
    """The history database at `path`; use as a context manager.

    readonly=True opens an existing file read-only (an error if it is missing). Otherwise the
    file is created, with its schema, at the first trusted ingest, and reads of a file that does
    not exist yet see an empty history.
    """

    def __init__(self, path: str | Path, readonly: bool = False):
        self.path = Path(path)
        self.readonly = readonly
        self._db: sqlite3.Connection | None = None
        self._empty = True
        self._version = STORE_SCHEMA_VERSION  # the file's, once opened
        self._writes_ready = False
        self._series_cache: dict[str, int] = {}
        if readonly and not self.path.exists():
            raise StoreError(
                f"{self.path}: no history database here; create one with "
                "`python -m harness ingest RESULT.json --db PATH --trusted`"
            )
        if self.path.exists():
            self._open()

    # -- opening and checking the file ------------------------------------------------------
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
        db.execute("PRAGMA journal_mode=WAL")
        # In WAL mode NORMAL may lose the last commits on power loss, never integrity.
        db.execute("PRAGMA synchronous=NORMAL")
        # Checkpoint every 64 MiB of WAL rather than 4 MiB: a bulk ingest commits ~40% faster.
        db.execute(f"PRAGMA wal_autocheckpoint={WAL_CHECKPOINT_PAGES}")
        if self._empty:
            db.execute("BEGIN IMMEDIATE")  # executescript would commit between statements
            if self._check_file():  # still empty now that this connection holds the write lock
                for statement in SCHEMA.split(";"):
                    if statement.strip():
                        db.execute(statement)
                db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                db.execute(f"PRAGMA user_version = {STORE_SCHEMA_VERSION}")
                db.execute(
                    "INSERT INTO meta VALUES ('application', 'kernelgap history'), "
                    "('created_utc', ?)",
                    (_now_utc(),),
                )
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
            self._series_cache = {}  # a migration may rename or merge series
        self._writes_ready = True
        return migrated

    def close(self) -> None:
        if self._db is not None:
            if self._writes_ready:
                self._leave_wal()
            self._db.close()
            self._db = None

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

    def __enter__(self) -> Store:
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

    # -- ingest ------------------------------------------------------------------------------
    def ingest(
        self, document: dict, trusted: bool = False, *, what: str = "result", check: bool = True
    ) -> IngestReport:
        """Store one result document (trusted) or only say what would be stored (untrusted).

        check=False skips schema validation for a document the caller validated already.
        Raises protocol's DocumentError/VersionError for a bad document, GpuMismatchError for
        a run on another GPU model than the suite pins, StoreError for an incomplete document
        or an unusable database.
        """
        if check:
            check_version(document.get("schema_version"), RESULT_SCHEMA_VERSION, what)
            validate(document, "result", what)
        report = self._plan(document, trusted, what)
        if not trusted or report.already_stored:
            return report
        if self.readonly:
            raise StoreError(f"{self.path}: opened read-only; a trusted ingest writes")
        try:
            migrated = self._prepare_writes()
        except sqlite3.DatabaseError as exc:
            self._rollback()
            why = cause(exc, self.path) or str(exc)
            raise StoreError(f"{self.path}: cannot write the history: {why}") from None
        if migrated:  # the plan was made against the file before its migration
            report = self._plan(document, trusted, what)
            if report.already_stored:
                return report
        self._write(document, report)
        return report

    def _plan(self, document: dict, trusted: bool, what: str) -> IngestReport:
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
        rid = run_id(document)
        started = normalize_utc(document["started_utc"])
        report = IngestReport(
            path=self.path,
            what=what,
            run_id=rid,
            trusted=trusted,
            commit=suite.get("commit"),
            started_utc=started,
            gpu=device["name"],
            suite=f"{suite['name']} v{suite['version']}",
        )
        if self._query("SELECT 1 FROM runs WHERE run_id = ?", (rid,)):
            report.already_stored = True
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
                        _values(index, case, impl),
                    )
                )
        known = self._series_rowids()
        for p in report.points:
            p.new_series = p.series_id not in known
        return report

    def _series_rowids(self) -> dict[str, int]:
        """series_id -> series rowid of every stored series (cached: series are never removed)."""
        if not self._series_cache:
            self._series_cache = dict(self._query("SELECT series_id, series FROM series"))
        return self._series_cache

    def _write(self, document: dict, report: IngestReport) -> None:
        suite = document["suite"]
        db = self._db
        try:
            db.execute("BEGIN IMMEDIATE")
            if db.execute("SELECT 1 FROM runs WHERE run_id = ?", (report.run_id,)).fetchone():
                db.execute("ROLLBACK")  # another writer stored it since the plan
                report.already_stored = True
                return
            run = db.execute(
                "INSERT INTO runs VALUES (NULL,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
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
                    orjson.dumps(document["environment"]),
                    zlib.compress(orjson.dumps(_stripped(document)), ZLIB_LEVEL),
                    _now_utc(),
                ),
            ).lastrowid
            rowids = {**self._series_rowids(), **self._insert_series(report.points)}
            started_us = _microseconds(report.started_utc)
            db.executemany(
                f"INSERT INTO points VALUES ({','.join('?' * (3 + len(VALUE_COLUMNS)))})",
                [(rowids[p.series_id], started_us, run, *p.row) for p in report.points],
            )
            db.executemany(
                "UPDATE series SET points = points + 1, "
                "first_utc = min(coalesce(first_utc, ?1), ?1), "
                "last_utc = max(coalesce(last_utc, ?1), ?1) WHERE series = ?2",
                [(report.started_utc, rowids[p.series_id]) for p in report.points],
            )
            db.execute("COMMIT")
        except sqlite3.IntegrityError as exc:
            db.execute("ROLLBACK")
            raise StoreError(
                f"{report.what}: cannot store run {report.run_id[:12]}: {exc} "
                "(a case id or implementation listed twice?)"
            ) from None
        except sqlite3.DatabaseError as exc:
            self._rollback()
            why = cause(exc, self.path) or str(exc)
            raise StoreError(f"{self.path}: writing the history failed: {why}") from None
        self._series_cache = rowids  # only after COMMIT: a rolled-back rowid must not linger
        report.stored = True

    def _insert_series(self, points: list[PlannedPoint]) -> dict[str, int]:
        """Insert the series this run starts; their rowids. Inside the ingest's transaction."""
        added: dict[str, int] = {}
        for p in points:
            if p.series_id in self._series_cache or p.series_id in added:
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
        identity: metadata, not part of the key) and samples_s when asked."""
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
        fields = (POINT_FIELDS if current else POINT_FIELDS_V1) + (
            ", p.samples" if with_samples else ""
        )
        sql = (
            f"SELECT {fields} FROM points p JOIN runs r ON r.run = p.run WHERE p.series = ? {tail}"
        )
        names = [f.strip().split(".")[-1] for f in fields.split(",")]
        out = []
        for row in self._query(sql, (rowid, *params)):
            point = dict(zip(names, row, strict=True))
            if not current:
                point.update(dict.fromkeys(COMPILER_FIELDS))
            for flag in BOOL_FIELDS:
                if point[flag] is not None:
                    point[flag] = bool(point[flag])
            if with_samples:
                blob = point.pop("samples")
                point["samples_s"] = None if blob is None else _samples_list(blob)
            out.append(point)
        return out

    def runs(self) -> list[dict]:
        """Every run, oldest first: run_id, started_utc, finished_utc, commit_sha, dirty, gpu,
        suite_name, suite_version, suite_sha256, suite_gpu, schema_version, ingested_utc."""
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
            timing["samples_s"] = _samples_list(samples)
        return document


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


def _values(index: int, case: dict, impl: dict) -> tuple:
    """The VALUE_COLUMNS of one implementation's point."""
    error = case.get("error") or {}
    timing = impl.get("timing")
    gap = impl.get("gap")
    return (
        index,
        case["status"],
        error.get("phase"),
        error.get("message"),
        (impl.get("check") or {}).get("status"),
        _samples_blob(timing["samples_s"]) if timing else None,
        *(_STATS_OF(timing["stats"]) if timing else _NO_STATS),
        *(_GAP_OF(gap) if gap else _NO_GAP),
        *compiler_identity(impl),
    )


# The schema requires every key of a stats and a gap block, so itemgetter cannot miss.
_STATS_OF, _NO_STATS = operator.itemgetter(*STAT_COLUMNS), (None,) * len(STAT_COLUMNS)
_GAP_OF, _NO_GAP = operator.itemgetter(*GAP_COLUMNS.values()), (None,) * len(GAP_COLUMNS)
