"""Forward migrations of the history store (harness.store), one function per schema version.

MIGRATIONS[v] takes a file of schema version v to v + 1; `migrate()` runs the chain inside the
caller's write transaction and sets PRAGMA user_version, so a file is either fully migrated or
left as it was. A store migrates only when it is about to be written (a trusted ingest); until
then readers see an older file as it is (harness.store says what they get for missing columns).
Every migrated file must read exactly as if its documents had been ingested by the current
version: tests check that against a frozen file of each old version (tests/fixtures).
"""

from __future__ import annotations

import sqlite3
import zlib
from collections.abc import Callable

import orjson

from harness.series import COMPILER_FIELDS, KEY_FIELDS, compiler_identity, gpu_model, series_id

__all__ = ["MIGRATIONS", "migrate"]


def _v1_to_v2(db: sqlite3.Connection) -> None:
    """Version 2 records each point's compiler identity (harness.series.COMPILER_FIELDS) as
    metadata beside its values; series keys are unchanged. Old points get theirs from the raw
    document stored with their run (toolchain and version; compiler_sha256 is absent from
    documents older than result schema 1.2.0 and stays NULL)."""
    for column in COMPILER_FIELDS:
        db.execute(f"ALTER TABLE points ADD COLUMN {column} TEXT")
    updates = []
    for run, blob in db.execute("SELECT run, document FROM runs ORDER BY run").fetchall():
        points = db.execute(
            "SELECT p.rowid, p.case_index, s.impl FROM points p JOIN series s "
            "ON s.series = p.series WHERE p.run = ?",
            (run,),
        ).fetchall()
        try:
            cases = orjson.loads(zlib.decompress(blob))["cases"]
            for rowid, index, impl in points:
                updates.append((*compiler_identity(cases[index]["implementations"][impl]), rowid))
        except (zlib.error, orjson.JSONDecodeError, LookupError, TypeError) as exc:
            raise sqlite3.DatabaseError(
                f"migrating to version 2: run {run}: stored document is corrupt or does not "
                f"match its points ({exc!r})"
            ) from None
    assignments = ", ".join(f"{column} = ?" for column in COMPILER_FIELDS)
    db.executemany(f"UPDATE points SET {assignments} WHERE rowid = ?", updates)


def _v2_to_v3(db: sqlite3.Connection) -> None:
    """Version 3 keys series by one spelling of the GPU model (harness.series.gpu_model), so a
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


MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {1: _v1_to_v2, 2: _v2_to_v3}


def migrate(db: sqlite3.Connection, found: int, target: int) -> None:
    """Run MIGRATIONS[found] ... MIGRATIONS[target - 1] and record `target` as the version.
    Call inside a write transaction (BEGIN IMMEDIATE), with `found` read under its lock."""
    for version in range(found, target):
        MIGRATIONS[version](db)
    db.execute(f"PRAGMA user_version = {int(target)}")
