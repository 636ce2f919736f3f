"""Reading a file given as input (a suite manifest, a result document) with bounds: a regular file of at most
a stated size, or an error naming the file.

Opening a FIFO blocks until a writer comes, /dev/zero never ends and a 50 MB string is read
whole: each is refused here before any byte is parsed. Both the runner and the harness read
manifests through this, so they refuse the same files with the same words.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = ["MAX_DOCUMENT_BYTES", "MAX_MANIFEST_BYTES", "InputFileError", "read_bounded"]

MAX_MANIFEST_BYTES = 4 * 1024 * 1024  # benchmarks/cases.toml is 13 KB; hundreds of cases fit
MAX_DOCUMENT_BYTES = 1024 * 1024 * 1024  # a result document or bundle.json: raw samples fit

_KINDS = {
    stat.S_ISDIR: "a folder",
    stat.S_ISFIFO: "a FIFO (named pipe)",
    stat.S_ISCHR: "a character device",
    stat.S_ISBLK: "a block device",
    stat.S_ISSOCK: "a socket",
}


class InputFileError(ValueError):
    """The file cannot be read, is not a regular file, or is over its size limit; the message
    names the file."""


def read_bounded(path: str | Path, max_bytes: int, what: str) -> bytes:
    """The bytes of regular file `path` (links followed), at most `max_bytes` of them.

    Opened non-blocking, so a FIFO is refused instead of waiting for a writer; its kind is
    taken from the open descriptor, so it cannot change between the check and the read.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise InputFileError(f"{path}: cannot read the {what}: {exc.strerror}") from None
    try:
        status = os.fstat(fd)
        mode = status.st_mode
        if not stat.S_ISREG(mode):
            kind = next((name for test, name in _KINDS.items() if test(mode)), "not a file")
            raise InputFileError(f"{path}: the {what} must be a regular file, not {kind}")
        # Sized from the file, not the limit: read(limit + 1) allocates the whole limit (1 GiB
        # for a document) first. One byte more than the size shows a file that grew since.
        expected = min(status.st_size, max_bytes)
        with os.fdopen(fd, "rb", closefd=False) as file:
            data = file.read(expected + 1)
            if len(data) > expected:
                data += file.read(max_bytes + 1 - len(data))
    except OSError as exc:
        raise InputFileError(f"{path}: cannot read the {what}: {exc.strerror}") from None
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise InputFileError(
            f"{path}: the {what} is larger than {max_bytes} bytes, the most kernelgap reads; "
            "split it or check that this is the file you meant"
        )
    return data
