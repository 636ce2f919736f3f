"""`python -m runner.bench_lint PATH...` (runner.bench_lint)."""

from runner.bench_lint import main

main(prog_name="python -m runner.bench_lint")
