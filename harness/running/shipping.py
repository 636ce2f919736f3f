"""What `harness run` ships to a target: the source tree the runner needs, as one tar stream.

From a checkout the tree holds `runner/`, `protocol/`, `schemas/`, `pyproject.toml` and
`README.md` (so `pip install .` works there), the suite file's folder at its place in the
repository (or under `suite/` for a suite kept elsewhere) plus any file the suite references
outside that folder, `tests/` (and `harness/`, which some tests import) when GPU tests run
remotely, and a PTX bundle under `bundle/` when one is given (labelled bundles, one per
compiler revision, under `bundle/<label>/`). From an installed package (a
wheel: no checkout around it) it holds the installed `runner/` and `protocol/` (whose package
data carries the schemas, `protocol/schemas/`) and the suite under `suite/`; GPU tests need a
checkout. On the target `in_shipped_tree` unpacks it into a fresh temporary directory, runs the
command there and removes the directory.

The tar is written as it is sent (`Shipment.stream()`), a piece at a time, never whole in
memory; a file past MAX_FILE_BYTES or a tree past MAX_TREE_BYTES is refused at `plan()`, naming
it, from its size alone (a sparse 20 GB file is never read).
"""

from __future__ import annotations

import inspect
import io
import os
import re
import stat
import tarfile
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from harness.errors import ShippingError, SuiteTomlError
from harness.running import manifest_check

# The folder holding the packages: a checkout's root, or site-packages for an installed wheel.
REPO_ROOT = manifest_check.REPO_ROOT
RUNNER_TREE = ("runner", "protocol", "schemas", "pyproject.toml", "README.md")
INSTALLED_RUNNER_TREE = ("runner", "protocol")  # protocol/schemas/ is its package data
TEST_TREE = ("tests", "harness", "tools")  # pytest imports every test module: harness, tools
SKIPPED_NAMES = {"__pycache__"}  # and every name starting with a dot
BUNDLE_DIR = "bundle"
OUTSIDE_SUITE_DIR = "suite"
MAX_FILE_BYTES = 256 * 2**20  # the largest PTX the runner reads (runner.definition.ptx)
MAX_TREE_BYTES = 2**30  # a checkout's tree with its tests is about 4 MB
CHUNK_BYTES = 2**20


@dataclass(frozen=True)
class Shipment:
    """Files to ship as (local path, path inside the tree), and where the suite file lands."""

    files: tuple[tuple[Path, str], ...]
    cases: str  # the suite file's path inside the tree, relative (the runner's argument)
    bundle: str | None  # the bundle folder inside the tree, when one is shipped
    revisions: tuple[tuple[str, str], ...] = ()  # (label, folder inside the tree) per revision

    def chunks(self) -> Iterator[bytes]:
        """The tree as one uncompressed PAX tar stream (files in a fixed order), a header or
        at most CHUNK_BYTES of a file at a time. A link ships as the file it names; a file that
        changed size since `plan()` stops the stream with ShippingError naming it."""
        written = 0
        for path, name in self.files:
            found = path.stat()  # follows a link inside the suite: its file ships
            if found.st_size > MAX_FILE_BYTES:
                raise ShippingError(_too_large(path, found.st_size))
            info = tarfile.TarInfo(name)
            info.size, info.mtime = found.st_size, int(found.st_mtime)
            info.mode = stat.S_IMODE(found.st_mode)
            header = info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")
            yield header
            with path.open("rb") as file:
                left = info.size
                while left:
                    chunk = file.read(min(CHUNK_BYTES, left))
                    if not chunk:
                        raise ShippingError(f"{path}: shrank while it was being shipped")
                    left -= len(chunk)
                    yield chunk
            padding = -info.size % tarfile.BLOCKSIZE
            yield tarfile.NUL * padding
            written += len(header) + info.size + padding
        end = 2 * tarfile.BLOCKSIZE  # two zero blocks, then up to a whole record
        yield tarfile.NUL * (end + -(written + end) % tarfile.RECORDSIZE)

    def stream(self) -> io.BufferedReader:
        """The tar stream as a binary file to read (what a transport sends as stdin): made as
        it is read, so the tree is never whole in memory."""
        return io.BufferedReader(_ChunkReader(self.chunks()), CHUNK_BYTES)


class _ChunkReader(io.RawIOBase):
    """A readable binary stream over an iterator of byte strings."""

    def __init__(self, chunks: Iterator[bytes]):
        self._chunks = chunks
        self._left = memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while not self._left:
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self._left = memoryview(chunk)
        count = min(len(buffer), len(self._left))
        buffer[:count] = self._left[:count]
        self._left = self._left[count:]
        return count


def _link_target(link: Path, folder: Path) -> Path:
    """The file a symbolic link under `folder` names, when it is a regular file inside `folder`;
    ShippingError naming the link otherwise (a loop, a dangling link, a link leaving the folder,
    a link to a folder: following those copies files from outside or never ends)."""
    try:
        target = link.resolve(strict=True)
    except (OSError, RuntimeError) as exc:  # ELOOP; RuntimeError from Python 3.11's loop check
        raise ShippingError(
            f"{link}: a symbolic link that cannot be followed ({exc}); remove it from {folder}"
        ) from None
    if not target.is_relative_to(folder.resolve()):
        raise ShippingError(
            f"{link}: a symbolic link to {target}, outside {folder}; only files inside the "
            "folder are shipped: copy the file in or remove the link"
        )
    if not target.is_file():
        raise ShippingError(
            f"{link}: a symbolic link to {'a folder' if target.is_dir() else 'a special file'} "
            f"({target}); only regular files are shipped: remove the link"
        )
    return target


def _walk(folder: Path):
    """Regular files under `folder`, sorted, skipping caches and hidden entries; a symbolic link
    ships as the file it names when that is a regular file inside `folder`, and anything else
    (a link out of the folder, to a folder, a loop, a FIFO or device) is refused, named."""
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        here = Path(dirpath)
        dirnames[:] = sorted(d for d in dirnames if d not in SKIPPED_NAMES and d[0] != ".")
        for name in [d for d in dirnames if (here / d).is_symlink()]:
            _link_target(here / name, folder)  # raises: never a folder through a link
        for name in sorted(filenames):
            if name[0] == "." or name.endswith(".pyc"):
                continue
            path = here / name
            if path.is_symlink():
                _link_target(path, folder)
            elif not stat.S_ISREG(path.lstat().st_mode):
                raise ShippingError(
                    f"{path}: not a regular file (a FIFO, socket or device); only regular files "
                    f"are shipped: remove it from {folder}"
                )
            yield path


def _add_tree(files: dict[str, Path], path: Path, name: str) -> None:
    """`path` (a folder or file the caller chose, followed when it is a link) under `name` in
    the tree; links inside a folder are checked by _walk."""
    if not path.exists():
        raise ShippingError(f"{path}: not found (needed on the target as {name})")
    path = path.resolve()
    if path.is_dir():
        for file in _walk(path):
            files[str(PurePosixPath(name, *file.relative_to(path).parts))] = file
    elif path.is_file():
        files[name] = path
    else:
        raise ShippingError(
            f"{path}: not a regular file or folder (needed on the target as {name})"
        )


def _too_large(path: Path, size: int) -> str:
    return (
        f"{path}: {_mib(size)}, past the {_mib(MAX_FILE_BYTES)} a shipped file may have; "
        "keep large data out of the shipped folders (a case's inputs are generated on the GPU)"
    )


def _mib(size: int) -> str:
    return f"{size / 2**20:,.1f} MiB"


def _check_sizes(files: dict[str, Path]) -> None:
    """ShippingError naming a file past MAX_FILE_BYTES or one that cannot be read, or the
    largest files of a tree past MAX_TREE_BYTES, from their sizes alone (nothing is read)."""
    sizes = []
    for path in files.values():
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise ShippingError(_too_large(path, size))
        if not os.access(path, os.R_OK):  # found now, not halfway through the stream
            raise ShippingError(f"{path}: cannot be read (permissions); it would be shipped")
        sizes.append((size, path))
    total = sum(size for size, _ in sizes)
    if total > MAX_TREE_BYTES:
        largest = ", ".join(f"{p} ({_mib(n)})" for n, p in sorted(sizes, reverse=True)[:3])
        raise ShippingError(
            f"the tree to ship is {_mib(total)}, past the {_mib(MAX_TREE_BYTES)} a shipment may "
            f"have; its largest files: {largest}"
        )


def is_checkout(root: Path) -> bool:
    """A source tree (schemas/ and pyproject.toml beside the packages), not an installed one."""
    return (root / "schemas").is_dir() and (root / "pyproject.toml").is_file()


def runner_tree(root: Path) -> tuple[str, ...]:
    """The paths under `root` that make the runner work on the target."""
    return RUNNER_TREE if is_checkout(root) else INSTALLED_RUNNER_TREE


def referenced_files(cases: Path) -> list[str]:
    """Paths the suite names, relative to its folder: each case's reference file and sources.

    A suite that is not TOML (malformed, nested too deeply to parse, unreadable) is refused
    here, naming the file, before any target is reached or rented; the rest of its checks are
    the runner's, on the target.
    """
    try:
        _, doc = manifest_check.read(cases)
    except SuiteTomlError as exc:
        raise ShippingError(str(exc)) from None
    found = []
    for case in doc.get("case", []) if isinstance(doc.get("case"), list) else []:
        if isinstance(case, dict) and isinstance(case.get("reference"), str):
            found.append(case["reference"].split(":", 1)[0])
        for impl in case.get("impl", []) if isinstance(case, dict) else []:
            if isinstance(impl, dict) and isinstance(impl.get("source"), str):
                found.append(impl["source"])
    return found


def plan(
    cases: Path,
    *,
    bundle: Path | None = None,
    tests: bool = False,
    root: Path = REPO_ROOT,
    revisions: tuple[tuple[str, Path], ...] = (),
) -> Shipment:
    """The tree for running the suite `cases` (a cases.toml) on a target; `revisions` are
    labelled bundles ((label, folder), ...), shipped under bundle/<label>."""
    cases = Path(cases).resolve()
    if not cases.exists():  # not a regular file: manifest_check.read says what it is
        raise ShippingError(f"{cases}: suite file not found")
    references = referenced_files(cases)  # first: a FIFO or device as the suite is refused here
    root = root.resolve()
    checkout = is_checkout(root)
    if tests and not checkout:
        raise ShippingError(
            f"--pytest-gpu ships the tests, which an installed package lacks ({root}); run it "
            "from a checkout of kernelgap"
        )
    suite_dir = cases.parent
    inside = checkout and suite_dir.is_relative_to(root)
    suite_name = (
        str(PurePosixPath(*suite_dir.relative_to(root).parts)) if inside else OUTSIDE_SUITE_DIR
    )
    files: dict[str, Path] = {}
    for name in runner_tree(root) + (TEST_TREE if tests else ()):
        _add_tree(files, root / name, name)
    _add_tree(files, suite_dir, suite_name if suite_name != "." else "")
    for reference in references:
        path = (suite_dir / reference).resolve()
        if path.is_relative_to(suite_dir) or not path.is_file():
            continue  # shipped with the folder, or missing: the runner names it
        if not (inside and path.is_relative_to(root)):
            raise ShippingError(
                f"{cases}: {reference!r} lies outside the suite's folder"
                + (" and outside the repository" if inside else "")
                + "; keep a suite's files under its folder so they can be shipped"
            )
        _add_tree(files, path, str(PurePosixPath(*path.relative_to(root).parts)))
    if bundle is not None:
        if not Path(bundle).is_dir():
            raise ShippingError(f"{bundle}: --bundle must be a folder (a PTX bundle)")
        _add_tree(files, Path(bundle).resolve(), BUNDLE_DIR)
    for label, folder in revisions:
        if not Path(folder).is_dir():
            raise ShippingError(f"{folder}: the {label} bundle must be a folder (a PTX bundle)")
        _add_tree(files, Path(folder).resolve(), f"{BUNDLE_DIR}/{label}")
    files.pop("", None)
    _check_sizes(files)
    cases_name = str(PurePosixPath(suite_name, cases.name)) if suite_name != "." else cases.name
    return Shipment(
        files=tuple(sorted((path, name) for name, path in files.items())),
        cases=cases_name,
        bundle=BUNDLE_DIR if bundle is not None else None,
        revisions=tuple((label, f"{BUNDLE_DIR}/{label}") for label, _ in revisions),
    )


_EXTRA_MARKER = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?")


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared(root: Path) -> tuple[list[str], dict[str, list[str]]]:
    """(dependencies, optional dependencies by extra): a checkout's pyproject.toml, else the
    installed distribution's metadata."""
    if is_checkout(root):
        project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
        extras = project.get("optional-dependencies", {})
        return list(project["dependencies"]), {_normalized(k): v for k, v in extras.items()}
    from importlib import metadata

    try:
        requires = metadata.requires("kernelgap") or []
    except metadata.PackageNotFoundError:
        raise ShippingError(
            f"{root}: neither a checkout (no pyproject.toml) nor an installed kernelgap; cannot "
            "tell what the runner needs"
        ) from None
    base: list[str] = []
    extras: dict[str, list[str]] = {}
    for line in requires:
        requirement, _, marker = line.partition(";")
        found = _EXTRA_MARKER.search(marker)
        if found:
            extras.setdefault(_normalized(found.group(1)), []).append(requirement.strip())
        else:
            base.append(requirement.strip())
    return base, extras


def _expand(extras: dict[str, list[str]], name: str, seen: frozenset = frozenset()) -> list[str]:
    """The requirements of extra `name`, with self-references (kernelgap[harness]) expanded."""
    out = []
    for requirement in extras.get(_normalized(name), []):
        match = _NAME.match(requirement)
        if match and _normalized(match.group(1)) == "kernelgap":
            for inner in (match.group(2) or "").split(","):
                if inner.strip() and _normalized(inner) not in seen:
                    out += _expand(extras, inner.strip(), seen | {_normalized(name)})
        else:
            out.append(requirement)
    return out


def runner_requirements(tests: bool = False, root: Path = REPO_ROOT) -> list[str]:
    """What `pip install` needs on the GPU box: the project's dependencies (the runner's; never
    the harness extra's plotly and scipy), the cupti extra's (cupti-python: cold mode's timer)
    and, for GPU tests, the test extra's, expanded."""
    base, extras = _declared(root)
    return [*base, *_expand(extras, "cupti"), *(_expand(extras, "test") if tests else [])]


def unpack_main() -> None:
    """Runs on the target as `python -c <this source> ARGV...` (standard library only).

    Extracts the tar archive on stdin into a fresh temporary directory, runs ARGV there with no
    stdin, removes the directory, and exits with ARGV's status (2 when the archive is unreadable).
    """
    import shutil
    import signal
    import subprocess
    import sys
    import tarfile
    import tempfile

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # still remove the directory
    workdir = tempfile.mkdtemp(prefix="kernelgap-")
    status = 2
    try:
        try:
            with tarfile.open(fileobj=sys.stdin.buffer, mode="r|") as archive:
                if hasattr(tarfile, "data_filter"):  # Python >= 3.11.4: refuse escaping paths
                    archive.extraction_filter = tarfile.data_filter
                archive.extractall(workdir)
            sys.stdin.buffer.read()  # the archive's padding, up to the end of the payload
        except (tarfile.TarError, OSError) as exc:
            print(
                f"kernelgap: cannot unpack the shipped tree into {workdir}: {exc}", file=sys.stderr
            )
        else:
            status = subprocess.call(sys.argv[1:], cwd=workdir, stdin=subprocess.DEVNULL)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    sys.exit(status if status >= 0 else 128 - status)


UNPACK_SOURCE = inspect.getsource(unpack_main) + "\nunpack_main()\n"


def in_shipped_tree(python: str, command: list[str]) -> list[str]:
    """argv that unpacks the tar on its stdin into a fresh directory and runs `command` there."""
    return [python, "-c", UNPACK_SOURCE, *command]
