"""`python -m runner.bench_lint PATH...`: the command line of the benchmark-file lint."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from runner.bench_lint.files import (
    BENCHMARK_FILE_PATTERNS,
    InputError,
    benchmark_files,
    is_benchmark_file,
    lint_files,
)

__all__ = ["main"]


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
