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

from harness.series import COMPILER_FIELDS, compiler_identity

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


MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {1: _v1_to_v2}


def migrate(db: sqlite3.Connection, found: int, target: int) -> None:
    """Run MIGRATIONS[found] ... MIGRATIONS[target - 1] and record `target` as the version.
    Call inside a write transaction (BEGIN IMMEDIATE), with `found` read under its lock."""
    for version in range(found, target):
        MIGRATIONS[version](db)
    db.execute(f"PRAGMA user_version = {int(target)}")
