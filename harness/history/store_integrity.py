"""What is wrong with a history file (harness.history.store), said plainly.

- `integrity_problems()`: what `PRAGMA integrity_check` finds; `corruption()`: the refusal
  that says so. A trusted ingest runs it once before its first write and refuses a damaged
  file: rows added to it could be lost with it, and they would make an old backup look stale
  when it is the only sound copy.
- `cause()`: what an sqlite3 error means for the person running the command. SQLite reports a
  full disk at open as a "disk I/O error" (it could not grow the -shm file), which is not a
  question of whether --db names the right file; the disk, a lock or a permission is named
  instead, and only a file SQLite cannot read as a database is called one.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

__all__ = ["LOW_SPACE_BYTES", "cause", "corruption", "integrity_problems"]

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
