"""A document written to a file whole or not at all, so a crash never leaves half of one."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["write_atomic"]


def write_atomic(path: Path, data: bytes) -> None:
    """`data` under `path`, whole or not at all: a temporary file in the same folder, flushed to
    disk, then renamed over `path`. On any failure (a full disk) the temporary file is removed
    and the error raised; an earlier document under `path` stays as it was."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
