"""`python -m runner.bench_lint PATH...` (runner.bench_lint.cli)."""

from runner.bench_lint.cli import main

main(prog_name="python -m runner.bench_lint")
