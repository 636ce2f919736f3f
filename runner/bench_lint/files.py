"""Which files runner.bench_lint checks, and reading and parsing each one.

A benchmark file is a pytest module named bench_*.py or test_*.py (conftest.py and helper
modules such as workloads.py are not benchmark files); a directory is searched recursively,
skipping hidden folders and __pycache__. The files are parsed with the standard library's ast,
never imported. A path that does not exist, no benchmark file under the paths given, or a file
that cannot be read or parsed is an InputError naming each one.
"""

from __future__ import annotations

import ast
import fnmatch
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from runner.bench_lint.rules import FileLinter, Finding
from runner.errors import InputError

__all__ = [
    "BENCHMARK_FILE_PATTERNS",
    "InputError",
    "benchmark_files",
    "is_benchmark_file",
    "lint_file",
    "lint_files",
    "lint_paths",
    "lint_source",
]

BENCHMARK_FILE_PATTERNS = ("bench_*.py", "test_*.py")
_SKIPPED_FOLDERS = ("__pycache__",)  # and every folder whose name starts with "."


def is_benchmark_file(path: Path) -> bool:
    """bench_*.py or test_*.py: what the linter checks (conftest.py and helpers are not)."""
    return any(fnmatch.fnmatchcase(path.name, pattern) for pattern in BENCHMARK_FILE_PATTERNS)


def _walk(folder: Path) -> Iterator[Path]:
    for root, folders, files in os.walk(folder):
        folders[:] = sorted(
            f for f in folders if not f.startswith(".") and f not in _SKIPPED_FOLDERS
        )
        for name in sorted(files):
            path = Path(root, name)
            if is_benchmark_file(path):
                yield path


def benchmark_files(paths: Iterable[str | Path]) -> list[Path]:
    """The benchmark files named by `paths` (files, or folders searched recursively), in order,
    each once. A file whose name is not a benchmark file's is left out.

    Raises InputError for a path that does not exist, or when no benchmark file was found."""
    paths = [Path(p) for p in paths]
    missing = [f"{p}: no such file or directory" for p in paths if not p.exists()]
    if missing:
        raise InputError(missing)
    found: list[Path] = []
    seen: set[Path] = set()
    for path in paths:
        for file in _walk(path) if path.is_dir() else [path] if is_benchmark_file(path) else []:
            if file.resolve() not in seen:
                seen.add(file.resolve())
                found.append(file)
    if not found:
        names = ", ".join(str(p) for p in paths)
        raise InputError(
            [f"{names}: no benchmark file ({' or '.join(BENCHMARK_FILE_PATTERNS)}) to check"]
        )
    return found


def lint_file(path: str | Path) -> list[Finding]:
    """The findings of one benchmark file. Raises InputError when it cannot be read or parsed."""
    try:
        source = Path(path).read_bytes()
    except OSError as exc:
        raise InputError([f"{path}: cannot be read: {exc.strerror or exc}"]) from exc
    return lint_source(source, str(path))


def lint_files(files: Iterable[str | Path]) -> list[Finding]:
    """The findings of every file, in order. Raises one InputError naming every file that could
    not be read or parsed."""
    findings: list[Finding] = []
    problems: list[str] = []
    for file in files:
        try:
            findings.extend(lint_file(file))
        except InputError as exc:
            problems.extend(exc.problems)
    if problems:
        raise InputError(problems)
    return findings


def lint_paths(paths: Iterable[str | Path]) -> list[Finding]:
    """Lint every benchmark file under `paths` (what `python -m runner.bench_lint` runs)."""
    return lint_files(benchmark_files(paths))


def lint_source(source: str | bytes, path: str) -> list[Finding]:
    """The findings of one benchmark file's source; `path` is only used to name it."""
    try:
        tree = ast.parse(source, filename=path)
    except SyntaxError as exc:
        where = f"{path}:{exc.lineno}" if exc.lineno else path
        raise InputError([f"{where}: does not parse: {exc.msg}"]) from exc
    except ValueError as exc:  # null bytes (Python 3.11 raises ValueError, not SyntaxError)
        raise InputError([f"{path}: does not parse: {exc}"]) from exc
    return FileLinter(path, tree).lint()
