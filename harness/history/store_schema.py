"""The history file's layout (harness.history.store): the tables of this version, the forms of its
columns, and the forward migrations from every older version.

Layout (schema version STORE_SCHEMA_VERSION, kept in PRAGMA user_version; PRAGMA application_id
marks the file as kernelgap's):
- runs: one row per result document; run_id = sha256 of the document's canonical JSON (sorted
  keys, compact), so the same run ingested twice is stored once whatever its formatting. The raw
  document is kept zlib-compressed with its environment (a JSON column of its own) and every
  samples_s array set to null; the samples live in `points` as little-endian float64 blobs, and
  `raw_document()` puts both back (float64 round-trips exactly: the document read back equals
  the one ingested).
- series: one row per series key (harness.history.series), with its point count and first/last date;
  since version 3 its GPU is the key's one spelling of the model (harness.history.series.gpu_model).
- points: one row per implementation per case per run: status (a failed case is a point with
  its error), check status, samples, statistics, for candidates the gap, and (since version 2)
  the compiler's identity as metadata (harness.history.series.compiler_identity: not part of the key),
  and (since version 4) the UUID of the card it ran on (gpu_uuid: not part of the key either;
  harness.history.cards estimates what differs from card to card from it).
- counters (since version 5): one row per point that has counters (harness.history.counters):
  its implementation's static figures (a reference to `counter_sets`, which keeps each distinct
  analysis once: the same build gives the same bytes) and, for a profiled run, its ncu metrics
  (an orjson map {name: [value, unit]}); keyed by the point's series and run, so a counter
  series is a timing series' key plus a counter name, and its values never sit in a time column.
  Rows refer to runs and series by integer rowid and are indexed by (series, start time).
Times are text in one form (`normalize_utc`), so text order is time order; a point's start is
also an integer of microseconds (`microseconds`), its samples a blob (`samples_blob`).

`lay()` writes this layout into an empty file. MIGRATIONS[v] takes a file of schema version v to
v + 1; `migrate()` runs the chain inside the caller's write transaction and sets PRAGMA
user_version, so a file is either fully migrated or left as it was. A store migrates only when
it is about to be written (a trusted ingest); until then readers see an older file as it is
(harness.history.store says what they get for missing columns). Every migrated file must read exactly as
if its documents had been ingested by the current version: tests check that against a frozen
file of each old version (tests/fixtures).
"""

from __future__ import annotations

import array
import sqlite3
import sys
import zlib
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import orjson

from harness.errors import StoreError
from harness.history.counters import essentials, profile_counters
from harness.history.series import (
    COMPILER_FIELDS,
    KEY_FIELDS,
    compiler_identity,
    gpu_model,
    series_id,
)

__all__ = [
    "APPLICATION_ID",
    "MAX_DEPTH",
    "MAX_INTEGER",
    "MIGRATIONS",
    "STORE_SCHEMA_VERSION",
    "canonical_json",
    "counter_blobs",
    "counter_set",
    "lay",
    "microseconds",
    "migrate",
    "normalize_utc",
    "now_utc",
    "point_uuid",
    "samples_blob",
    "samples_list",
    "stored_json",
    "unheld",
]

STORE_SCHEMA_VERSION = 5
APPLICATION_ID = 0x4B474150  # "KGAP": tells a kernelgap history from any other SQLite file
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MAX_DEPTH = 254  # containers nested in one another, the root's included: what orjson writes
MAX_INTEGER = 2**53 - 1  # SQLite keeps 64-bit integers, the dashboards' JavaScript 53-bit exactly
# (orjson's OPT_STRICT_INTEGER holds a document to it)
_SCALAR_LISTS = {float, str, bool, type(None)}  # a list of these holds nothing to check


def unheld(value, what: str) -> str | None:
    """Why the store cannot keep `value` (a document, or part of one), naming the first field
    nested deeper than MAX_DEPTH or holding an integer past +-MAX_INTEGER; None if it can. One
    walk, lists of samples passed over whole."""
    stack = [(value, 1, ())]
    while stack:
        node, depth, path = stack.pop()
        if isinstance(node, dict):
            items = node.items()
        elif _SCALAR_LISTS.issuperset(map(type, node)):
            continue
        else:
            items = enumerate(node)
        for key, item in items:
            kind = type(item)
            if kind is int and not -MAX_INTEGER <= item <= MAX_INTEGER:
                return (
                    f"{what}: {_field(path, key)}: the integer {item} is past what the history "
                    f"holds (+-{MAX_INTEGER}: what SQLite and the dashboards' JavaScript keep "
                    "exactly)"
                )
            if kind is dict or kind is list:
                if depth >= MAX_DEPTH:
                    return (
                        f"{what}: {_field(path, key)}: nested deeper than the {MAX_DEPTH} "
                        "levels the history's JSON writer takes"
                    )
                stack.append((item, depth + 1, (*path, key)))
    return None


def _field(path: tuple, key) -> str:
    """A field's path as `cases[0].implementations.cuda.timing`, its middle elided when long."""
    parts = [*path, key]
    if len(parts) > 12:
        parts = [*parts[:6], f"...({len(parts) - 10} more)...", *parts[-4:]]
    text = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts).lstrip(".")
    return text or "the document"


def canonical_json(document: dict, what: str) -> bytes:
    """The document's canonical JSON (sorted keys, compact) when the store can keep all of it,
    else StoreError naming the first field it cannot (stored_json)."""
    return stored_json(document, what, sort_keys=True)


def stored_json(value, what: str, *, sort_keys: bool = False) -> bytes:
    """`value` as the JSON the store keeps (compact; sort_keys for a canonical form): the one
    encoder for everything written to the history. orjson itself bounds it (its depth, and
    integers within +-MAX_INTEGER: OPT_STRICT_INTEGER); where it cannot write the value, a
    StoreError names the field (unheld), never orjson's TypeError."""
    option = orjson.OPT_STRICT_INTEGER | (orjson.OPT_SORT_KEYS if sort_keys else 0)
    try:
        return orjson.dumps(value, option=option)
    except orjson.JSONEncodeError as exc:  # too deep, past 53 bits, a key that is not text
        raise StoreError(
            unheld(value, what) or f"{what}: cannot be stored as JSON: {exc}"
        ) from None


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
    compiler_sha256 TEXT,
    gpu_uuid TEXT
);
CREATE UNIQUE INDEX points_by_series ON points (series, started_us, run);
CREATE INDEX points_by_run ON points (run);
CREATE TABLE counter_sets (
    counter_set INTEGER PRIMARY KEY,
    essentials BLOB NOT NULL UNIQUE
);
CREATE TABLE counters (
    series INTEGER NOT NULL REFERENCES series (series),
    started_us INTEGER NOT NULL,
    run INTEGER NOT NULL REFERENCES runs (run),
    static INTEGER REFERENCES counter_sets (counter_set),
    profile BLOB,
    PRIMARY KEY (series, started_us, run)
) WITHOUT ROWID;
"""


def lay(db: sqlite3.Connection) -> None:
    """Write this version's tables, marks and meta rows into an empty file. Inside a write
    transaction (executescript would commit between statements)."""
    for statement in SCHEMA.split(";"):
        if statement.strip():
            db.execute(statement)
    db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    db.execute(f"PRAGMA user_version = {STORE_SCHEMA_VERSION}")
    db.execute(
        "INSERT INTO meta VALUES ('application', 'kernelgap history'), ('created_utc', ?)",
        (now_utc(),),
    )


def normalize_utc(text: str) -> str:
    """'YYYY-MM-DDTHH:MM:SS[.f]Z' with exactly 6 fraction digits, so text order is time order."""
    body = text[:-1] if text.endswith("Z") else text
    whole, _, fraction = body.partition(".")
    return f"{whole}.{(fraction + '000000')[:6]}Z"


def microseconds(normalized_utc: str) -> int:
    """Microseconds since 1970-01-01 UTC of a normalize_utc() string (exact integer)."""
    moment = datetime.strptime(normalized_utc, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    return (moment - EPOCH) // timedelta(microseconds=1)


def now_utc() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def samples_blob(samples_s: list[float]) -> bytes:
    """Little-endian float64 bytes (array is several times faster than numpy for 30 floats)."""
    values = array.array("d", samples_s)
    if sys.byteorder == "big":
        values.byteswap()
    return values.tobytes()


def samples_list(blob: bytes) -> list[float]:
    """The floats of a samples_blob (array, not numpy: an ingest need not import numpy)."""
    values = array.array("d")
    values.frombytes(blob)
    if sys.byteorder == "big":
        values.byteswap()
    return values.tolist()


# -- migrations ------------------------------------------------------------------------------


def _stored_impls(db: sqlite3.Connection, version: int, columns: str):
    """(point row, its implementation's block in the run's stored document) for every point,
    run by run; `columns` (of points p joined with series s) end with p.case_index and s.impl.
    A document that is corrupt or does not match its points stops the migration to `version`."""
    for run, blob in db.execute("SELECT run, document FROM runs ORDER BY run").fetchall():
        points = db.execute(
            f"SELECT {columns} FROM points p JOIN series s ON s.series = p.series WHERE p.run = ?",
            (run,),
        ).fetchall()
        try:
            cases = orjson.loads(zlib.decompress(blob))["cases"]
            found = [(row, cases[row[-2]]["implementations"][row[-1]]) for row in points]
        except (zlib.error, orjson.JSONDecodeError, LookupError, TypeError) as exc:
            raise sqlite3.DatabaseError(
                f"migrating to version {version}: run {run}: stored document is corrupt or does "
                f"not match its points ({exc!r})"
            ) from None
        yield from found


def _v1_to_v2(db: sqlite3.Connection) -> None:
    """Version 2 records each point's compiler identity (harness.history.series.COMPILER_FIELDS) as
    metadata beside its values; series keys are unchanged. Old points get theirs from the raw
    document stored with their run (toolchain and version; compiler_sha256 is absent from
    documents older than result schema 1.2.0 and stays NULL)."""
    for column in COMPILER_FIELDS:
        db.execute(f"ALTER TABLE points ADD COLUMN {column} TEXT")
    updates = [
        (*compiler_identity(impl), rowid)
        for (rowid, _, _), impl in _stored_impls(db, 2, "p.rowid, p.case_index, s.impl")
    ]
    assignments = ", ".join(f"{column} = ?" for column in COMPILER_FIELDS)
    db.executemany(f"UPDATE points SET {assignments} WHERE rowid = ?", updates)


def _v2_to_v3(db: sqlite3.Connection) -> None:
    """Version 3 keys series by one spelling of the GPU model (harness.history.series.gpu_model), so a
    model spelt two ways ("NVIDIA GeForce RTX 4090", " nvidia geforce rtx 4090") is one series.
    A series whose GPU was not in that form takes the form and its new key's id; where a series
    of that key exists already, its points join that one (counts and first/last dates summed up)
    and the duplicate row goes. Series already in the form (CUDA's names for data-centre parts
    are) keep their ids: no series splits, and only misspelt ones merge."""
    names = ("series", "series_id", *KEY_FIELDS, "points", "first_utc", "last_utc")
    rows = [
        dict(zip(names, row, strict=True))
        for row in db.execute(f"SELECT {', '.join(names)} FROM series ORDER BY series")
    ]
    rowid_of = {row["series_id"]: row["series"] for row in rows}
    for row in rows:
        gpu = gpu_model(row["gpu"])
        if gpu == row["gpu"]:
            continue
        new_id = series_id({**{f: row[f] for f in KEY_FIELDS}, "gpu": gpu})
        target = rowid_of.get(new_id)
        if target is None:
            db.execute(
                "UPDATE series SET gpu = ?, series_id = ? WHERE series = ?",
                (gpu, new_id, row["series"]),
            )
            rowid_of[new_id] = row["series"]
            continue
        db.execute("UPDATE points SET series = ? WHERE series = ?", (target, row["series"]))
        db.execute(
            "UPDATE series SET points = points + ?1, "
            "first_utc = min(coalesce(first_utc, ?2), coalesce(?2, first_utc)), "
            "last_utc = max(coalesce(last_utc, ?3), coalesce(?3, last_utc)) WHERE series = ?4",
            (row["points"], row["first_utc"], row["last_utc"], target),
        )
        db.execute("DELETE FROM series WHERE series = ?", (row["series"],))


def _v3_to_v4(db: sqlite3.Connection) -> None:
    """Version 4 records the UUID of the card each point ran on (points.gpu_uuid), metadata
    beside the series key, never in it. Old points get theirs from their run's stored document:
    the case's device (runner bench --gpus) or the run's environment device."""
    columns = {row[1] for row in db.execute("PRAGMA table_info(points)")}
    if "gpu_uuid" not in columns:  # a file marked older by hand may have it already
        db.execute("ALTER TABLE points ADD COLUMN gpu_uuid TEXT")
    updates = []
    for run, environment, blob in db.execute(
        "SELECT run, environment, document FROM runs ORDER BY run"
    ).fetchall():
        points = db.execute("SELECT rowid, case_index FROM points WHERE run = ?", (run,)).fetchall()
        try:
            device = (orjson.loads(environment) or {}).get("device") or {}
            cases = orjson.loads(zlib.decompress(blob))["cases"]
            for rowid, index in points:
                updates.append((point_uuid(device, cases[index]), rowid))
        except (zlib.error, orjson.JSONDecodeError, LookupError, TypeError) as exc:
            raise sqlite3.DatabaseError(
                f"migrating to version 4: run {run}: stored document is corrupt or does not "
                f"match its points ({exc!r})"
            ) from None
    db.executemany("UPDATE points SET gpu_uuid = ? WHERE rowid = ?", updates)


def point_uuid(run_device: dict, case: dict) -> str | None:
    """The UUID of the card a case ran on: its own device block's (runner bench --gpus), else
    the run's device's; None when neither recorded one."""
    return (case.get("device") or {}).get("uuid") or run_device.get("uuid")


def counter_blobs(impl: dict, static: dict | None = None) -> tuple[bytes | None, bytes | None]:
    """(static essentials, profile map) of one implementation of a document, as orjson bytes
    (None where it has none); `static` stands in for a missing static block."""
    found = essentials(impl.get("static")) or essentials(static)
    profiled = profile_counters(impl.get("profile"))
    return (
        stored_json(found, "static counters") if found else None,
        stored_json(profiled, "profile metrics") if profiled else None,
    )


def counter_set(db: sqlite3.Connection, blob: bytes, known: dict[bytes, int]) -> int:
    """The `counter_sets` rowid of `blob`, inserted if new; `known` caches blob -> rowid."""
    found = known.get(blob)
    if found is None:
        db.execute("INSERT OR IGNORE INTO counter_sets (essentials) VALUES (?)", (blob,))
        sql = "SELECT counter_set FROM counter_sets WHERE essentials = ?"
        found = known[blob] = db.execute(sql, (blob,)).fetchone()[0]
    return found


def _v4_to_v5(db: sqlite3.Connection) -> None:
    """Version 5 keeps counters (harness.history.counters) beside the points: the static figures
    and profiled metrics of every implementation. Old runs get theirs from the `static` and
    `profile` blocks of their stored documents (none before result schema 1.3.0)."""
    start = SCHEMA.index("CREATE TABLE counter_sets")
    for statement in SCHEMA[start:].split(";"):
        if statement.strip():
            db.execute(statement.replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS"))
    rows, known = [], {}
    columns = "p.series, p.started_us, p.run, p.case_index, s.impl"
    for (series, started_us, run, _, _), impl in _stored_impls(db, 5, columns):
        static, profile = counter_blobs(impl)
        if static or profile:
            static = counter_set(db, static, known) if static else None
            rows.append((series, started_us, run, static, profile))
    db.executemany("INSERT OR IGNORE INTO counters VALUES (?,?,?,?,?)", rows)


MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {
    1: _v1_to_v2,
    2: _v2_to_v3,
    3: _v3_to_v4,
    4: _v4_to_v5,
}


def migrate(db: sqlite3.Connection, found: int, target: int) -> None:
    """Run MIGRATIONS[found] ... MIGRATIONS[target - 1] and record `target` as the version.
    Call inside a write transaction (BEGIN IMMEDIATE), with `found` read under its lock."""
    for version in range(found, target):
        MIGRATIONS[version](db)
    db.execute(f"PRAGMA user_version = {int(target)}")
