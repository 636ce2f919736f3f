"""`python -m runner.bench_lint PATH...`: check runner.bench benchmark files from their source.

A benchmark file is a pytest module named bench_*.py or test_*.py (conftest.py and helper
modules such as workloads.py are not benchmark files; a directory is searched recursively,
skipping hidden folders and __pycache__). Its tests take their cases from `bench.cases(W)` or
`bench.params(W)` and time only through `bench.Runner(op, case).compare(...)`, so every number
is checked against the reference first and lands in the result document:

    @pytest.mark.parametrize("case", bench.cases(Matmul()), ids=lambda c: c.id)
    def test_bmm(case):
        bench.Runner(torch.bmm, case).compare({"torch.matmul": torch.matmul})

Rules:

- BL001 the file has at least one test parametrized over bench cases: the argvalues of
  `@pytest.mark.parametrize(...)` (on the function or its Test class) contain a
  `bench.cases(...)` or `bench.params(...)` call, or a module-level name assigned from one.
- BL002 every such test compares: it calls `bench.Runner(...)` and `.compare(...)` on that
  Runner (chained, or through a variable, in the test or in a module-level function it calls),
  or it is a correctness test that calls `bench.check(...)` or `<workload>.check(...)`.
- BL003 nothing is timed outside bench.Runner: time.perf_counter, time.time, time.monotonic,
  time.process_time, time.thread_time (and their _ns variants), anything from timeit,
  triton.testing.do_bench and do_bench_cudagraph, torch.utils.benchmark.Timer,
  cupyx.profiler.benchmark, cupy.cuda.get_elapsed_time, CUDA events made with timing on
  (torch.cuda.Event(enable_timing=True), torch.Event(enable_timing=True), cupy.cuda.Event()) and
  every `.elapsed_time(...)` call. Uses are found however they were imported
  (`from time import perf_counter as pc` too).
- BL004 cases are not built by hand: no `bench.Case(...)` (or `Case(...)` imported from
  runner.bench).
- BL005 a parametrize over `bench.cases(...)` gives the case ids: `ids=lambda c: c.id` (any
  one-argument lambda returning `<arg>.id` or `getattr(<arg>, "id", ...)`), a module-level
  function that returns `<arg>.id`, or `operator.attrgetter("id")`. `bench.params(...)` and
  `pytest.param(c, id=c.id, ...)` set the ids themselves and need no `ids=`.

runner.bench is recognised under whatever name the file binds it to (`from runner import bench`,
`from runner import bench as kb`, `import runner.bench as bench`, `import runner.bench`,
`from runner.bench import Runner, cases`, module-level `Runner = bench.Runner`). The files are
parsed with the standard library's ast, never imported: no torch, no GPU needed. Not seen:
cases that reach a test through a fixture, `pytest_generate_tests` or `pytestmark`.

Output: one `path:line: RULE message` per finding on stdout, `bench_lint: N files, M findings` on
stderr. Exit status: 0 clean, 1 findings, 2 bad input (a path that does not exist, no benchmark
file under the paths given, a file that cannot be read or parsed).

Here: which files are checked, reading and parsing each (a path that does not exist, no
benchmark file under the paths given, or a file that cannot be read or parsed is an InputError
naming each one), and the command line; the rules (BL001-BL005), with what a file's names refer
to and the shapes of statements they look for, are runner.bench_lint.rules."""

from __future__ import annotations

import ast
import fnmatch
import os
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

import click

from runner.bench_lint.rules import FileLinter, Finding
from runner.errors import InputError

__all__ = [
    "BENCHMARK_FILE_PATTERNS",
    "Finding",
    "benchmark_files",
    "is_benchmark_file",
    "lint_file",
    "lint_files",
    "lint_paths",
    "lint_source",
    "main",
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


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument(
    "paths", nargs=-1, required=True, type=click.Path(path_type=Path), metavar="PATH..."
)
def main(paths: tuple[Path, ...]) -> None:
    """Check runner.bench benchmark files from their source (nothing is imported: no torch or
    GPU needed).

    Each PATH is a benchmark file or a directory searched recursively for bench_*.py and
    test_*.py (conftest.py and helper modules such as workloads.py are not benchmark files).

    \b
    Rules:
      BL001  the file has a test parametrized over bench.cases(W) or bench.params(W):
             @pytest.mark.parametrize("case", bench.cases(W), ids=lambda c: c.id)
      BL002  every such test calls bench.Runner(op, case).compare({...}), or is a
             correctness test calling bench.check(...) or workload.check(...)
      BL003  nothing is timed outside bench.Runner: no time.perf_counter/time/monotonic/
             process_time, timeit, CUDA timing events or .elapsed_time(), triton's do_bench,
             torch.utils.benchmark.Timer, cupyx.profiler.benchmark
      BL004  no case built by hand with bench.Case(...)
      BL005  a parametrize over bench.cases(...) sets ids=lambda c: c.id
             (bench.params(W) sets the ids itself)

    \b
    Findings go to stdout, one per line: path:line: RULE message
    A summary goes to stderr: bench_lint: N files, M findings
    Exit status: 0 clean, 1 findings, 2 bad input (a path that does not exist, no
    benchmark file found, a file that does not parse).

    \b
    Example:
      python -m runner.bench_lint examples/ops
    """
    try:
        files = benchmark_files(paths)
        findings = lint_files(files)
    except InputError as exc:
        for problem in exc.problems:
            click.echo(f"error: {problem}", err=True)
        sys.exit(2)
    for path in paths:
        if path.is_file() and not is_benchmark_file(path):
            click.echo(
                f"bench_lint: skipped {path}: not a benchmark file "
                f"({' or '.join(BENCHMARK_FILE_PATTERNS)})",
                err=True,
            )
    for finding in findings:
        click.echo(str(finding))
    click.echo(f"bench_lint: {len(files)} files, {len(findings)} findings", err=True)
    sys.exit(1 if findings else 0)
