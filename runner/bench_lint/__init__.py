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

The package, one concern a module: `files` (which files, reading and parsing them), `names`
(what a file's names refer to, from its imports), `syntax` (the shapes of statements the rules
look for), `rules` (BL001, BL002, BL005: the tests and what they do with their cases), `calls`
(BL003, BL004: calls anywhere in the file) and `cli` (the command line).
"""

from runner.bench_lint.cli import main
from runner.bench_lint.files import (
    BENCHMARK_FILE_PATTERNS,
    InputError,
    benchmark_files,
    is_benchmark_file,
    lint_file,
    lint_files,
    lint_paths,
    lint_source,
)
from runner.bench_lint.rules import Finding

__all__ = [
    "BENCHMARK_FILE_PATTERNS",
    "Finding",
    "InputError",
    "benchmark_files",
    "is_benchmark_file",
    "lint_file",
    "lint_files",
    "lint_paths",
    "lint_source",
    "main",
]
