"""runner.bench_lint: each rule on files that keep it and files that break it, the ways a file
can spell runner.bench, bad input, the directory walk and the command line's exit statuses."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from runner.bench_lint import Finding, benchmark_files, lint_file, lint_paths, main
from runner.errors import InputError
from tests.conftest import ROOT

CLEAN = """\
import pytest
import torch
from workloads import Matmul

from runner import bench


@pytest.mark.parametrize("case", bench.cases(Matmul()), ids=lambda c: c.id)
def test_bmm(case):
    bench.Runner(torch.bmm, case).compare({"torch.matmul": torch.matmul})
"""

# a header every snippet below shares: line 7 is the first line of the snippet
HEADER = """\
import pytest
import torch
from workloads import Matmul

from runner import bench

"""


def write(folder: Path, name: str, source: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source))
    return path


def lint(tmp_path: Path, source: str, name: str = "bench_op.py") -> list[Finding]:
    return lint_file(write(tmp_path, name, source))


def rules(findings: list[Finding]) -> list[tuple[int, str]]:
    return [(f.line, f.rule) for f in findings]


# -- files that keep every rule --------------------------------------------------------------

CLEAN_VARIANTS = {
    "the example": CLEAN,
    "bench.params sets the ids itself": """\
        import pytest, torch
        from runner import bench
        from workloads import Matmul

        @pytest.mark.parametrize("case", bench.params(Matmul()))
        def test_bmm(case):
            bench.Runner(torch.bmm, case).compare({"torch.matmul": torch.matmul})
        """,
    "a module-level name, a Runner variable, keyword argvalues": """\
        import pytest, torch
        from runner import bench
        from workloads import Matmul

        CASES = [c for c in bench.cases(Matmul(), tier="smoke") if c.dtype == "float16"]
        SOME = CASES[:2]

        @pytest.mark.parametrize(argnames="case", argvalues=SOME, ids=lambda case: case.id)
        def test_bmm(case):
            runner = bench.Runner(torch.bmm, case, name="bmm")
            result = runner.compare({"torch.matmul": torch.matmul})
            assert result["torch.matmul"].verified
        """,
    "correctness tests: bench.check and workload.check": """\
        import pytest, torch
        from runner import bench
        from workloads import Matmul

        W = Matmul()

        @pytest.mark.parametrize("case", bench.params(W))
        def test_bench_check(case):
            bench.check(torch.bmm, *case.inputs, reference=case.reference)

        @pytest.mark.parametrize("case", bench.params(W))
        def test_workload_check(case):
            W.check(torch.bmm, *case.inputs)
        """,
    "from runner import bench as kb": """\
        import pytest, torch
        from runner import bench as kb
        from workloads import Matmul

        @pytest.mark.parametrize("case", kb.cases(Matmul()), ids=lambda c: c.id)
        def test_bmm(case):
            kb.Runner(torch.bmm, case).compare({"torch.matmul": torch.matmul})
        """,
    "import runner.bench as bench": """\
        import pytest, torch
        import runner.bench as bench
        from workloads import Matmul

        @pytest.mark.parametrize("case", bench.cases(Matmul()), ids=lambda c: c.id)
        def test_bmm(case):
            bench.Runner(torch.bmm, case).compare({"torch.matmul": torch.matmul})
        """,
    "import runner.bench, spelled out": """\
        import pytest, torch
        import runner.bench
        from workloads import Matmul

        @pytest.mark.parametrize("case", runner.bench.cases(Matmul()), ids=lambda c: c.id)
        def test_bmm(case):
            runner.bench.Runner(torch.bmm, case).compare({"torch.matmul": torch.matmul})
        """,
    "names imported from runner.bench and its modules, ids from a function": """\
        import pytest, torch
        from pytest import mark
        from runner.bench import cases
        from runner.bench.comparison import Runner
        from workloads import Matmul

        def case_id(case):
            \"\"\"The case's own id.\"\"\"
            return case.id

        @mark.parametrize("case", cases(Matmul()), ids=case_id)
        def test_bmm(case):
            Runner(torch.bmm, case).compare({"torch.matmul": torch.matmul})
        """,
    "a Test class parametrized as a whole, attrgetter ids, a helper that compares": """\
        import operator
        import pytest, torch
        from runner import bench
        from workloads import Matmul

        def compare_with_matmul(op, case):
            bench.Runner(op, case).compare({"torch.matmul": torch.matmul})

        @pytest.mark.parametrize("case", bench.cases(Matmul()), ids=operator.attrgetter("id"))
        class TestBmm:
            def test_bmm(self, case):
                compare_with_matmul(torch.bmm, case)
        """,
    "pytest.param with the case id, getattr ids, a stacked parametrize": """\
        import pytest, torch
        from runner import bench
        from workloads import Matmul

        ROWS = [pytest.param(c, id=c.id) for c in bench.cases(Matmul())]

        @pytest.mark.parametrize("case", ROWS)
        def test_bmm(case):
            bench.Runner(torch.bmm, case).compare({"torch.matmul": torch.matmul})

        @pytest.mark.parametrize("mode", ["a", "b"])
        @pytest.mark.parametrize("case", bench.cases(Matmul()), ids=lambda v: getattr(v, "id", None))
        def test_modes(case, mode):
            bench.Runner(torch.bmm, case).compare({mode: torch.matmul})
        """,
    "events and sleeps that do not time": """\
        import time
        import pytest, torch
        from runner import bench
        from workloads import Matmul

        @pytest.mark.parametrize("case", bench.params(Matmul()))
        def test_bmm(case):
            done = torch.cuda.Event()
            other = torch.cuda.Event(enable_timing=False)
            torch.cuda.synchronize()
            time.sleep(0.01)
            assert isinstance(case, bench.Case)
            bench.Runner(torch.bmm, case).compare({"torch.matmul": torch.matmul})
        """,
}


@pytest.mark.parametrize("source", CLEAN_VARIANTS.values(), ids=CLEAN_VARIANTS.keys())
def test_a_file_that_keeps_every_rule_has_no_findings(tmp_path, source):
    assert lint(tmp_path, source) == []


# -- BL001 ------------------------------------------------------------------------------------


def test_bl001_a_file_without_runner_bench_is_told_to_import_it(tmp_path):
    findings = lint(tmp_path, "import torch\n\n\ndef test_bmm():\n    torch.bmm\n")
    assert rules(findings) == [(1, "BL001")]
    assert "from runner import bench" in findings[0].message


def test_bl001_cases_looped_over_inside_a_test_are_pointed_at(tmp_path):
    source = HEADER + textwrap.dedent("""\
        def test_every_case():
            for case in bench.cases(Matmul()):
                bench.Runner(torch.bmm, case).compare({"torch.matmul": torch.matmul})
        """)
    findings = lint(tmp_path, source)
    assert rules(findings) == [(8, "BL001")]
    assert "bench.cases(...) is called but no test is parametrized over its cases" in (
        findings[0].message
    )


@pytest.mark.parametrize(
    "decorated",
    [
        '@pytest.mark.parametrize("case", [1, 2])\ndef test_bmm(case):\n',
        '@pytest.mark.parametrize("case", bench.params(Matmul()))\ndef bmm_helper(case):\n',
        "def test_bmm():\n",
    ],
    ids=["values not from bench", "not a test function", "no parametrize"],
)
def test_bl001_no_test_takes_bench_cases(tmp_path, decorated):
    body = "    bench.Runner(torch.bmm, case).compare({})\n"
    findings = lint(tmp_path, HEADER + decorated + body)
    assert [f.rule for f in findings] == ["BL001"]


# -- BL002 ------------------------------------------------------------------------------------


def test_bl002_a_test_that_never_compares_or_checks(tmp_path):
    source = HEADER + textwrap.dedent("""\
        @pytest.mark.parametrize("case", bench.params(Matmul()))
        def test_bmm(case):
            torch.bmm(*case.inputs)
        """)
    findings = lint(tmp_path, source)
    assert rules(findings) == [(8, "BL002")]
    assert findings[0].message.startswith("test_bmm: takes bench cases but neither compares")


@pytest.mark.parametrize(
    "body",
    [
        "bench.Runner(torch.bmm, case)",
        "runner = bench.Runner(torch.bmm, case)\n    runner.check({})",
        "bench.Runner(torch.bmm, case).check({})",
    ],
    ids=["never compared", "a variable, checked only", "Runner.check is not a correctness test"],
)
def test_bl002_a_runner_without_compare(tmp_path, body):
    source = HEADER + (
        '@pytest.mark.parametrize("case", bench.params(Matmul()))\n'
        f"def test_bmm(case):\n    {body}\n"
    )
    findings = lint(tmp_path, source)
    assert rules(findings) == [(8, "BL002")]
    assert "creates bench.Runner(...) but never calls .compare(...)" in findings[0].message


def test_bl002_names_the_method_of_a_test_class(tmp_path):
    source = HEADER + textwrap.dedent("""\
        class TestBmm:
            @pytest.mark.parametrize("case", bench.params(Matmul()))
            def test_bmm(self, case):
                pass
        """)
    findings = lint(tmp_path, source)
    assert rules(findings) == [(9, "BL002")]
    assert findings[0].message.startswith("TestBmm.test_bmm: ")


# -- BL003 ------------------------------------------------------------------------------------

TIMING = {
    "time.perf_counter": ("import time", "t0 = time.perf_counter()", "time.perf_counter"),
    "perf_counter imported as pc": (
        "from time import perf_counter as pc",
        "t0 = pc()",
        "pc (time.perf_counter)",
    ),
    "time.time": ("import time", "t0 = time.time()", "time.time"),
    "time.monotonic_ns": ("import time as clock", "t0 = clock.monotonic_ns()", "time.monotonic_ns"),
    "time.process_time, passed not called": (
        "import time",
        "timer = dict(clock=time.process_time)",
        "time.process_time",
    ),
    "timeit.timeit": ("import timeit", "timeit.timeit(lambda: 0)", "timeit.timeit"),
    "timeit.Timer.timeit": ("import timeit", "timeit.Timer.timeit", "timeit.Timer.timeit"),
    "timeit's default_timer": (
        "from timeit import default_timer",
        "default_timer()",
        "default_timer (timeit.default_timer)",
    ),
    "triton do_bench": (
        "import triton",
        "triton.testing.do_bench(lambda: 0)",
        "triton.testing.do_bench",
    ),
    "do_bench_cudagraph": (
        "from triton.testing import do_bench_cudagraph",
        "do_bench_cudagraph(lambda: 0)",
        "triton.testing.do_bench_cudagraph",
    ),
    "torch.utils.benchmark.Timer": (
        "from torch.utils import benchmark",
        "benchmark.Timer(stmt='x')",
        "torch.utils.benchmark.Timer",
    ),
    "cupyx benchmark": (
        "import cupyx.profiler",
        "cupyx.profiler.benchmark(print)",
        "cupyx.profiler.benchmark",
    ),
    "torch.cuda.Event with timing": (
        "",
        "start = torch.cuda.Event(enable_timing=True)",
        "a timing event with torch.cuda.Event(enable_timing=True)",
    ),
    "Event imported, timing positional": (
        "from torch.cuda import Event",
        "start = Event(True)",
        "a timing event with Event(True)",
    ),
    "cupy events time by default": (
        "import cupy",
        "start = cupy.cuda.Event()",
        "a timing event with cupy.cuda.Event()",
    ),
    "elapsed_time": ("", "ms = start.elapsed_time(end)", "event times with start.elapsed_time"),
}


@pytest.mark.parametrize("imported, line, shown", TIMING.values(), ids=TIMING.keys())
def test_bl003_timing_outside_the_runner(tmp_path, imported, line, shown):
    source = (
        f"{imported}\n{HEADER}"
        '@pytest.mark.parametrize("case", bench.params(Matmul()))\n'
        "def test_bmm(case):\n"
        f"    {line}\n"
        "    bench.Runner(torch.bmm, case).compare({})\n"
    )
    findings = lint(tmp_path, source)
    assert rules(findings) == [(10, "BL003")]
    assert findings[0].message.startswith("test_bmm: ")
    assert shown in findings[0].message
    assert "time through bench.Runner(op, case).compare(...)" in findings[0].message


def test_bl003_message_names_the_test_and_what_to_do(tmp_path):
    source = HEADER.replace("import pytest\n", "import time\n\nimport pytest\n") + textwrap.dedent(
        """\
        @pytest.mark.parametrize("case", bench.params(Matmul()))
        def test_bmm(case):
            bench.Runner(torch.bmm, case).compare({})


        def helper():
            return time.perf_counter_ns()


        START = time.perf_counter()
        """
    )
    path = write(tmp_path, "bench_op.py", source)
    assert [str(f) for f in lint_file(path)] == [
        f"{path}:15: BL003 helper: times with time.perf_counter_ns; time through "
        "bench.Runner(op, case).compare(...) so the result is checked and recorded",
        f"{path}:18: BL003 module level: times with time.perf_counter; time through "
        "bench.Runner(op, case).compare(...) so the result is checked and recorded",
    ]


# -- BL004 ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "imported, made",
    [
        ("", "bench.Case(Matmul(), row, 'float32', False)"),
        ("from runner.bench import Case", "Case(Matmul(), row, 'float32', False)"),
        ("from runner.bench.workload import Case as C", "C(Matmul(), row, 'float32', False)"),
    ],
    ids=["bench.Case", "Case imported", "from the workload module, renamed"],
)
def test_bl004_a_case_built_by_hand(tmp_path, imported, made):
    source = (
        f"{imported}\n{HEADER}"
        '@pytest.mark.parametrize("case", bench.params(Matmul()))\n'
        "def test_bmm(case):\n"
        f"    mine = {made}\n"
        "    bench.Runner(torch.bmm, mine).compare({})\n"
    )
    findings = lint(tmp_path, source)
    assert rules(findings) == [(10, "BL004")]
    assert findings[0].message.startswith("test_bmm: builds a case by hand with ")
    assert "take cases from bench.cases(W) or bench.params(W)" in findings[0].message


def test_bl004_leaves_a_case_class_of_another_module_alone(tmp_path):
    source = CLEAN + "\n\nfrom mylib import Case\n\nEXTRA = Case(1)\n"
    assert lint(tmp_path, source) == []


# -- BL005 ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "parametrize, complaint",
    [
        ('"case", bench.cases(Matmul())', "parametrizes over bench.cases(...) without ids"),
        ('"case", bench.cases(Matmul()), ids=str', "ids=str does not give the case ids"),
        (
            '"case", bench.cases(Matmul()), ids=lambda c: c.label',
            "ids=lambda c: c.label does not give the case ids",
        ),
        ('"case", CASES', "parametrizes over bench.cases(...) without ids"),
    ],
    ids=["no ids", "ids=str", "a lambda returning something else", "through a module name"],
)
def test_bl005_bench_cases_without_the_case_ids(tmp_path, parametrize, complaint):
    source = HEADER + (
        "CASES = bench.cases(Matmul())\n"
        f"@pytest.mark.parametrize({parametrize})\n"
        "def test_bmm(case):\n"
        "    bench.Runner(torch.bmm, case).compare({})\n"
    )
    findings = lint(tmp_path, source)
    assert rules(findings) == [(8, "BL005")]
    assert findings[0].message.startswith(f"test_bmm: {complaint}; add ids=lambda c: c.id")


# -- spelling runner.bench ----------------------------------------------------------------------


def test_messages_use_the_alias_the_file_uses(tmp_path):
    source = textwrap.dedent("""\
        import time
        import pytest
        from runner import bench as kb

        @pytest.mark.parametrize("case", kb.cases(W), ids=lambda c: c.id)
        def test_op(case):
            kb.Runner(op, case)
            time.time()
        """)
    findings = lint(tmp_path, source)
    assert rules(findings) == [(6, "BL002"), (8, "BL003")]
    assert "kb.Runner(op, case).compare({...})" in findings[0].message
    assert "time through kb.Runner(op, case).compare(...)" in findings[1].message


def test_a_star_import_of_runner_bench_is_understood(tmp_path):
    source = textwrap.dedent("""\
        import pytest
        from runner.bench import *

        @pytest.mark.parametrize("case", cases(W))
        def test_op(case):
            Runner(op, Case(W, r, "f", False)).compare({})
        """)
    assert rules(lint(tmp_path, source)) == [(4, "BL005"), (6, "BL004")]


def test_a_name_bench_that_is_not_runner_bench_counts_for_nothing(tmp_path):
    source = CLEAN.replace("from runner import bench", "from mylib import bench")
    findings = lint(tmp_path, source)
    assert [f.rule for f in findings] == ["BL001"]
    assert "from runner import bench" in findings[0].message


# -- bad input --------------------------------------------------------------------------------


def test_a_file_that_does_not_parse_is_named_with_its_line(tmp_path):
    good = write(tmp_path, "bench_good.py", CLEAN)
    bad = write(tmp_path, "bench_bad.py", "import pytest\n\ndef test_x(:\n    pass\n")
    with pytest.raises(InputError) as raised:
        lint_paths([good, bad])
    assert len(raised.value.problems) == 1
    assert raised.value.problems[0].startswith(f"{bad}:3: does not parse: ")


def test_a_missing_path_is_bad_input(tmp_path):
    with pytest.raises(InputError) as raised:
        lint_paths([tmp_path / "nowhere", write(tmp_path, "bench_ok.py", CLEAN)])
    assert raised.value.problems == [f"{tmp_path / 'nowhere'}: no such file or directory"]


def test_a_folder_without_benchmark_files_is_bad_input(tmp_path):
    write(tmp_path, "conftest.py", "")
    with pytest.raises(InputError, match="no benchmark file"):
        lint_paths([tmp_path])


# -- the directory walk -----------------------------------------------------------------------


def test_the_walk_takes_benchmark_files_only(tmp_path):
    write(tmp_path, "conftest.py", "import time\nT = time.perf_counter()\n")
    write(tmp_path, "workloads.py", "class Matmul: pass\n")
    write(tmp_path, "notes.txt", "")
    write(tmp_path, ".cache/bench_hidden.py", "")
    write(tmp_path, "sub/__pycache__/bench_compiled.py", "")
    clean = write(tmp_path, "bench_clean.py", CLEAN)
    nested = write(tmp_path, "sub/deeper/test_nested.py", "import torch\n")
    assert benchmark_files([tmp_path]) == [clean, nested]
    assert rules(lint_paths([tmp_path])) == [(1, "BL001")]
    # each file once, however often it is named; a helper named explicitly is still skipped
    assert benchmark_files([clean, tmp_path, tmp_path / "conftest.py"]) == [clean, nested]


# -- the command line -------------------------------------------------------------------------


def bench_lint(*args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "runner.bench_lint", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_command_line_exit_statuses_and_output(tmp_path):
    clean = write(tmp_path / "clean", "bench_clean.py", CLEAN)
    write(tmp_path / "clean", "conftest.py", "import time\nT = time.perf_counter()\n")
    failing = write(
        tmp_path / "failing",
        "bench_failing.py",
        HEADER + '@pytest.mark.parametrize("case", bench.cases(Matmul()))\ndef test_bmm(case):\n'
        "    pass\n",
    )
    done = bench_lint(clean.parent)
    assert (done.returncode, done.stdout) == (0, "")
    assert done.stderr.strip() == "bench_lint: 1 files, 0 findings"

    done = bench_lint(clean.parent, failing)
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    assert lines == [
        f"{failing}:7: BL005 test_bmm: parametrizes over bench.cases(...) without ids; add "
        "ids=lambda c: c.id (or use bench.params(W), which sets them) so the test ids are the "
        "case ids of the result document",
        f"{failing}:8: BL002 test_bmm: takes bench cases but neither compares them "
        "(bench.Runner(op, case).compare(...)) nor checks them (bench.check(...) or "
        "workload.check(...)); time it through Runner or make it a correctness test",
    ]
    assert all(re.fullmatch(r"\S+:\d+: BL00\d \S.*", line) for line in lines)
    assert done.stderr.strip() == "bench_lint: 2 files, 2 findings"

    bad = write(tmp_path, "bench_bad.py", "def test_x(\n")
    done = bench_lint(clean, tmp_path / "missing.py", bad)
    assert (done.returncode, done.stdout) == (2, "")
    assert f"error: {tmp_path / 'missing.py'}: no such file or directory" in done.stderr
    done = bench_lint(clean, bad)
    assert (done.returncode, done.stdout) == (2, "")
    assert f"error: {bad}:1: does not parse: " in done.stderr


def test_command_line_help_and_arguments():
    runner = CliRunner()
    helped = runner.invoke(main, ["--help"])
    assert helped.exit_code == 0
    assert "PATH..." in helped.output and "bench_*.py and" in helped.output
    for rule in ("BL001", "BL002", "BL003", "BL004", "BL005"):
        assert rule in helped.output
    assert "Exit status: 0 clean, 1 findings, 2 bad input" in helped.output
    no_paths = runner.invoke(main, [])
    assert no_paths.exit_code == 2 and "Missing argument 'PATH...'" in no_paths.output


def test_command_line_notes_an_explicit_file_it_skips(tmp_path):
    clean = write(tmp_path, "bench_clean.py", CLEAN)
    helper = write(tmp_path, "workloads.py", "")
    done = CliRunner().invoke(main, [str(clean), str(helper)])
    assert done.exit_code == 0
    assert f"bench_lint: skipped {helper}: not a benchmark file" in done.output
    assert "bench_lint: 1 files, 0 findings" in done.output
