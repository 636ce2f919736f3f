"""Files named on a command line. Reading one given as input (a suite manifest, a result
document) with bounds: a regular file of at most a stated size, or an error naming the file.
An output (`--out`, `-o`) is checked before any work (`output_problem`), so a run never measures
for a path that cannot take its result.

Opening a FIFO blocks until a writer comes, /dev/zero never ends and a 50 MB string is read
whole: each is refused here before any byte is parsed. Both the runner and the harness read
manifests through this, so they refuse the same files with the same words.

Bounds of a run request that the runner, the host's client and schemas/run-request.schema.json
share: a number past them is refused as input, never carried into a timer or a deadline, and
nesting past them is refused before anything (a schema check, an error message's repr) recurses
into it.

`read_toml()`: a suite manifest or lock file read within those bounds and parsed, one refusal for
the runner and the harness alike. `checkout_commit()`: the git commit (and whether it is dirty)
of the checkout a named file lies in, which a result document records and the harness names its
result files by."""

from __future__ import annotations

import os
import stat
import subprocess
import tomllib
from pathlib import Path

from protocol.errors import InputFileError

__all__ = [
    "GIT_TIMEOUT_S",
    "MAX_DOCUMENT_BYTES",
    "MAX_MANIFEST_BYTES",
    "checkout_commit",
    "os_error_line",
    "output_problem",
    "read_bounded",
    "read_toml",
]


# One day: far past any kernel a test launches, and far inside what a thread's timed wait, a
# timestamp or a deadline sum can hold (threading.TIMEOUT_MAX is about 9.2e9 s on Linux).
MAX_TIMEOUT_S = 86400.0


# One array's host copy is bounded: a device array is allocated whole, so `count` alone can
# ask for any size.
MAX_ARRAY_BYTES = 1 << 36


# The JSON text of one request a JSON runner reads (stdin or a request file), so its cost stays
# predictable.
MAX_REQUEST_BYTES = 1 << 30


# A run request nests 4 levels (request, params, a param, its values).
MAX_DEPTH = 16


_CONTAINERS = frozenset((dict, list))  # what a JSON decoder builds


def nested_deeper_than(document, limit: int = MAX_DEPTH) -> bool:
    """Whether `document` nests dicts and lists more than `limit` levels (1 for a flat dict),
    found without recursion; a long list of numbers is passed over in C."""
    stack = [(document, 1)]
    while stack:
        value, depth = stack.pop()
        if not isinstance(value, dict | list):
            continue
        if depth > limit:
            return True
        items = value.values() if isinstance(value, dict) else value
        if _CONTAINERS.isdisjoint(map(type, items)):
            continue
        stack.extend((item, depth + 1) for item in items if type(item) in _CONTAINERS)
    return False


MAX_MANIFEST_BYTES = 4 * 1024 * 1024  # benchmarks/cases.toml is 13 KB; hundreds of cases fit


MAX_DOCUMENT_BYTES = 1024 * 1024 * 1024  # a result document or bundle.json: raw samples fit


_KINDS = {
    stat.S_ISDIR: "a folder",
    stat.S_ISFIFO: "a FIFO (named pipe)",
    stat.S_ISCHR: "a character device",
    stat.S_ISBLK: "a block device",
    stat.S_ISSOCK: "a socket",
}


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


def output_problem(path: str | Path, *, folder: bool) -> str | None:
    """Why `path` cannot be written as an output (a file, or a folder; either is made with its
    missing parents), or None. The one line names the path and the reason."""
    path = Path(path)
    if path.exists():
        if folder and not path.is_dir():
            return f"{path}: exists and is not a folder"
        if not folder and path.is_dir():
            return f"{path}: is a folder; give a file name"
        writable = path if path.is_dir() else path.parent
        return None if os.access(writable, os.W_OK) else f"{path}: not writable (permission denied)"
    above = next(p for p in path.absolute().parents if p.exists())
    if not above.is_dir():
        return f"{path}: cannot be made: {above} is a file, not a folder"
    if not os.access(above, os.W_OK | os.X_OK):
        return f"{path}: cannot be made: {above} is not writable (permission denied)"
    return None


def os_error_line(exc: OSError) -> str | None:
    """A file error as one line naming the file and the reason (both CLIs' last word on a path
    they could not read or write), or None for an error that names no file."""
    if exc.filename is None:
        return None
    return f"{exc.filename}: {exc.strerror or exc}"


def read_toml(path: Path, what: str) -> tuple[bytes, dict]:
    """The bytes of the TOML file `path` (a suite manifest, a lock file: at most
    MAX_MANIFEST_BYTES; a manifest's sha256 is taken of them) and what they parse to;
    InputFileError naming the file and `what` it is where it cannot be read or is not TOML."""
    raw = read_bounded(path, MAX_MANIFEST_BYTES, what)
    try:
        return raw, tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputFileError(f"{path}: malformed TOML: {exc}") from None
    except RecursionError:
        raise InputFileError(
            f"{path}: malformed TOML: arrays or tables nested too deeply to parse"
        ) from None


GIT_TIMEOUT_S = 10.0


def checkout_commit(path: str | Path) -> dict:
    """{"commit": sha, "dirty": bool} of the git checkout holding `path` (a file or a folder),
    else both None: where a suite named on a command line comes from, for the runner's
    document (provenance) and the harness's result file names alike."""
    target = Path(path)
    directory = target if target.is_dir() else target.parent
    unknown = {"commit": None, "dirty": None}
    try:
        head, status = (
            subprocess.run(
                ["git", "-C", str(directory), *args],
                capture_output=True,
                text=True,
                timeout=GIT_TIMEOUT_S,
            )
            for args in (["rev-parse", "HEAD"], ["status", "--porcelain"])
        )
    except (OSError, subprocess.SubprocessError):
        return unknown
    sha = head.stdout.strip()
    if head.returncode != 0 or status.returncode != 0 or not sha:
        return unknown
    return {"commit": sha, "dirty": bool(status.stdout.strip())}
