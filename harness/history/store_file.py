"""The SQLite file under a history (harness.history.store): opening it, refusing the wrong one, getting it
ready for writes, and the one gate every read goes through.

A file is opened read-only (readonly=True: an error if it is missing) or for reading until the
first trusted ingest makes it writable (`_prepare_writes`): then it is created if need be, with
its schema (harness.history.store_schema.lay), or migrated if it is older, in WAL mode (a file
it creates keeps its rollback journal: no reader waits on a history that does not exist yet).
A foreign file, one newer than this kernelgap or one without a migration is refused whatever
the mode; a damaged one is refused before the first write (harness.history.store_integrity). The last writer to
close puts the file back in rollback-journal mode, so at rest it is one file and a read-only
open creates nothing beside it. Readers see a file that does not exist yet as an empty history.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import Self

from harness.history.store_integrity import cause, corruption
from harness.history.store_schema import (
    APPLICATION_ID,
    MIGRATIONS,
    STORE_SCHEMA_VERSION,
    StoreError,
    lay,
    migrate,
)

__all__ = ["HistoryFile", "StoreError"]

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
