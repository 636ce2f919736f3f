"""Where `harness run` keeps a result document: whole, under a name of its own, or elsewhere.

The document a GPU produced is the one thing a run must not lose. It is written to a temporary
file in the destination folder and flushed to disk (fsync) before it gets its final name, by a
hard link that fails when the name is taken: nothing is overwritten, and a final name never
holds part of a document. When the folder cannot take it (a full disk, a read-only or missing
folder) the temporary file is removed and the document is kept elsewhere: under the system's
temporary folder (kernelgap-results/), else, as a last resort, on stdout. The caller then
exits 2 naming the cause (`Kept.problem`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["FALLBACK_FOLDER", "Kept", "describe", "keep", "save_new"]

FALLBACK_FOLDER = "kernelgap-results"  # under tempfile.gettempdir()
MAX_NAMES = 1000
NO_LINKS = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS, errno.EMLINK}


def describe(exc: OSError) -> str:
    """An OSError as its cause: 'the disk is full (No space left on device)', else its text."""
    text = exc.strerror or str(exc)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"the disk is full ({text})"
    return text


def _names(name: str):
    stem, dot, suffix = name.partition(".")
    yield name
    for index in range(2, MAX_NAMES + 1):
        yield f"{stem}-{index}{dot}{suffix}"


def _give_name(tmp: Path, directory: Path, name: str) -> Path:
    """Link the finished `tmp` to the first free one of name, name-2, ...; never overwrites."""
    for candidate in _names(name):
        path = directory / candidate
        try:
            os.link(tmp, path)
            return path
        except FileExistsError:
            continue
        except OSError as exc:
            if exc.errno not in NO_LINKS:
                raise
        # A filesystem without hard links: reserve the name, then rename the whole file over
        # the empty reservation (a crash in between leaves an empty file, never a part).
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        except FileExistsError:
            continue
        os.replace(tmp, path)
        return path
    raise OSError(errno.EEXIST, f"no free name for {name} in {directory} (tried {MAX_NAMES})")


def save_new(directory: Path, name: str, data: bytes) -> Path:
    """Write `data` to directory/name, or name-2, name-3 ... when taken: whole or not at all.
    Raises OSError (the folder keeps no temporary file and no part of `data`)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        path = _give_name(Path(tmp), directory, name)
    finally:
        Path(tmp).unlink(missing_ok=True)
    with contextlib.suppress(OSError):  # the new name itself on disk; not every folder fsyncs
        folder = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)
    return path


@dataclass(frozen=True)
class Kept:
    """Where a document ended up: `path` (None: written to stdout) and, when that is not the
    folder asked for, `problem`, which names the cause and where it went instead."""

    path: Path | None
    problem: str | None = None


def keep(directory: Path, name: str, data: bytes, what: str = "the result document") -> Kept:
    """Save `data` as save_new() does, or keep it elsewhere (see the module's docstring)."""
    try:
        return Kept(save_new(directory, name, data))
    except OSError as exc:
        first = f"{directory}: cannot save {what} there: {describe(exc)}"
    fallback = Path(tempfile.gettempdir()) / FALLBACK_FOLDER
    if fallback.resolve() != Path(directory).resolve():
        try:
            path = save_new(fallback, name, data)
            return Kept(path, f"{first}; it is kept in {path} instead")
        except OSError as exc:
            first += f"; nor in {fallback}: {describe(exc)}"
    try:
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    except OSError as exc:
        return Kept(None, f"{first}; nor on stdout: {describe(exc)}; it is lost")
    return Kept(None, f"{first}; it was written to stdout instead")
