"""The history store: one SQLite file of runs and of points on series that never mix.

`Store` is the history as a program sees it: `ingest()` a result document, then read it back as
series (`list_series`), their points (`points`, `recent`), runs (`runs`) and the documents
themselves (`raw_document`, exactly as ingested). Its pieces, one concern each:
- harness.history.store_schema: the tables (runs, series, points), the forms of their columns, the
  schema version and the forward migrations from every older one;
- harness.history.store_file: the SQLite file: opening it, refusing a foreign, newer or damaged one,
  WAL mode while writing, the one gate every read goes through;
- harness.history.store_ingest: what a result document becomes: its run row and planned points;
- harness.history.store_integrity: what is wrong with a file, said plainly;
- harness.history.store_values: whole-history reads as numpy arrays, for change points and drift.

An older file migrates forward (harness.history.store_schema) at its first trusted ingest, in that
ingest's transaction; until then it is read as it is, with None for what it lacks.

Writes happen only in a trusted ingest, one transaction per batch, in WAL mode (a file the
ingest creates keeps its rollback journal); the last writer to close puts the file back in
rollback-journal mode, so at rest it is one file and a read-only open creates nothing beside it
(harness.history.store_file). An untrusted ingest validates and plans but never opens the file
for writing (nor creates it). Readers see a file that does not
exist yet as an empty history, except with readonly=True (an error).
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import sqlite3
import zlib
from collections.abc import Iterable
from pathlib import Path

import orjson

from harness.history.series import COMPILER_FIELDS, KEY_FIELDS, series_label
from harness.history.store_file import HistoryFile, StoreError
from harness.history.store_ingest import (
    VALUE_COLUMNS,
    GpuMismatchError,
    IngestReport,
    PlannedPoint,
    plan,
    prepared,
    run_id,
    run_row,
)
from harness.history.store_integrity import cause
from harness.history.store_schema import (
    STORE_SCHEMA_VERSION,
    counter_set,
    microseconds,
    samples_list,
)
from protocol.points import as_rows
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
    *("suite_version", "suite_sha256", "suite_gpu", "schema_version", "ingested_utc"),
)


@contextlib.contextmanager
def _collection_paused():
    """Python's cyclic garbage collector off for a bulk plan: documents and plans hold no
    cycles, and its full passes over the growing batch cost a quarter of a 10,000-run ingest."""
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
        """Store many planned runs (store_ingest.prepared: a report and its `runs` row) in one
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
        with _collection_paused():  # documents and plans hold no cycles; the batch grows
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
            if self._query("SELECT 1 FROM runs LIMIT 1"):
                return
        except StoreError:
            pass  # unreadable: ours, and never held a run of anyone's
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
            timing["samples_s"] = samples_list(samples)
        return document
