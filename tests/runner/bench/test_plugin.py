"""The runner.bench pytest plugin, run in a subprocess on inline test files with the CPU fake device.

A subprocess is needed so the plugin arrives the way a user gets it: through the `pytest11`
entry point of the installed package (one run also passes `-p runner.bench.pytest_plugin`, which
must be harmless beside it). The inline conftest installs FakeCallableDevice on the session the
plugin made (Session.use_device), in a pytest_configure hook that runs after the plugin's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from protocol.validation import validate

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[3]

CONFTEST = f"""
import sys

import pytest

sys.path.insert(0, {str(ROOT)!r})


@pytest.hookimpl(trylast=True)  # after the plugin's pytest_configure made its session
def pytest_configure(config):
    from tests.support.fake_callable_device import FakeCallableDevice
    from runner.bench import session

    session.current().use_device(FakeCallableDevice())
    session.current().configure(timer="events")  # cold by events, chosen: a stand-in, no CUPTI
"""

WORKLOADS = """
from pathlib import Path

import numpy as np

from runner import bench

GEN_LOG = Path(__file__).parent / "gen_inputs.log"


class Mm(bench.Workload):
    name = "mm"
    rows = [bench.Row("tiny", n=4, tier="smoke"), bench.Row("small", n=8)]
    dtypes = ["float32", "float64"]

    def gen_inputs(self, params, dtype, seed):
        with GEN_LOG.open("a") as log:
            log.write(f"{params['n']}-{dtype}\\n")
        rng = np.random.default_rng(seed)
        n = params["n"]
        return (
            rng.standard_normal((n, n)).astype(dtype),
            rng.standard_normal((n, n)).astype(dtype),
        )

    def reference(self, a, b):
        return (a.astype(np.float64) @ b.astype(np.float64)).astype(a.dtype)
"""

TEST_OPS = """
import numpy as np
import pytest
from tests.support.fake_callable_device import FakeCallableDevice
from workloads import Mm

from runner import bench

CASES = bench.cases(Mm())


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_matmul(case):
    assert isinstance(bench.current().device(), FakeCallableDevice)
    bench.Runner(np.matmul, case).compare({"np.dot": np.dot})
    assert case.has_data


def test_zz_every_case_was_released_after_its_test():
    assert [(c.id, c.has_data) for c in CASES] == [(c.id, False) for c in CASES]
"""

TEST_WRONG = """
import numpy as np
import pytest
from workloads import Mm

from runner import bench


@pytest.mark.parametrize("case", bench.cases(Mm(), tier="smoke"), ids=lambda c: c.id)
def test_off_by_one(case):
    bench.Runner(np.matmul, case).compare({"off by one": lambda a, b: a @ b + 1})
"""

TEST_MARKS = """
import numpy as np
import pytest
from workloads import Mm

from runner import bench


@pytest.mark.parametrize("case", bench.params(Mm()))
def test_marked(case):
    bench.Runner(np.matmul, case).compare({"np.dot": np.dot})
"""


@pytest.fixture
def project(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(
        workloads=WORKLOADS, test_ops=TEST_OPS, test_wrong=TEST_WRONG, test_marks=TEST_MARKS
    )
    return pytester


def literal(line: str) -> str:
    """An fnmatch pattern matching `line` literally up to a trailing '*' (test ids hold '[')."""
    return line.replace("[", "[[]")


def gen_log(pytester) -> list[str]:
    path = pytester.path / "gen_inputs.log"
    return path.read_text().splitlines() if path.exists() else []


def implementation_entries(doc):
    return [entry for case in doc["cases"] for entry in case["implementations"].values()]


def test_collection_alone_never_generates_inputs(project):
    result = project.runpytest_subprocess("--collect-only", "-q")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            literal("test_marks.py::test_marked[tiny-float32]"),
            literal("test_ops.py::test_matmul[tiny-float32]"),
            literal("test_ops.py::test_matmul[small-float64]"),
            literal("test_wrong.py::test_off_by_one[tiny-float64]"),
        ],
        consecutive=False,
    )
    assert gen_log(project) == []


def test_cases_time_through_the_entry_point_and_write_document_and_report(project):
    output, report = project.path / "out" / "result.json", project.path / "report.md"
    result = project.runpytest_subprocess(
        "test_ops.py",
        "-v",
        "--bench-output",
        str(output),
        "--bench-report",
        str(report),
        "--bench-budget",
        "0.03",
    )
    result.assert_outcomes(passed=5)
    result.stdout.fnmatch_lines(
        [
            "plugins: *kernelgap-*",  # loaded by the entry point: no -p on this command line
            literal("test_ops.py::test_matmul[tiny-float32] PASSED*"),
            literal("test_ops.py::test_matmul[tiny-float64] PASSED*"),
            literal("test_ops.py::test_matmul[small-float32] PASSED*"),
            literal("test_ops.py::test_matmul[small-float64] PASSED*"),
            "test_ops.py::test_zz_every_case_was_released_after_its_test PASSED*",
        ]
    )
    # recheck auto makes fresh inputs per sample besides the case's own
    assert sorted(set(gen_log(project))) == ["4-float32", "4-float64", "8-float32", "8-float64"]
    result.stderr.fnmatch_lines([f"kernelgap: wrote {output} (4 comparisons)"])

    doc = json.loads(output.read_text())
    validate(doc, "result")
    assert [c["id"] for c in doc["cases"]] == [
        "mm/tiny-float32/matmul",
        "mm/tiny-float64/matmul",
        "mm/small-float32/matmul",
        "mm/small-float64/matmul",
    ]
    assert doc["options"]["budget_s"] == 0.03 and doc["options"]["verify_only"] is False
    for entry in implementation_entries(doc):
        assert entry["timing"]["stats"]["count"] == 30

    text = report.read_text()
    assert "- GPU: NVIDIA H200" in text and "## matmul" in text
    table_rows = [line for line in text.splitlines() if line.startswith("| ")]
    assert len(table_rows) == 2 + 4 * 2
    assert (
        "| mm/small-float64 (cold by events: chosen) | np.dot | exact: every output, "
        "rtol=1e-12, atol=7.10543e-15 |" in text
    )


def test_bench_verify_checks_times_nothing_and_a_wrong_implementation_fails(project):
    output = project.path / "verify.json"
    result = project.runpytest_subprocess(
        "-p",  # the module the entry point registers: passing it again must be harmless
        "runner.bench.pytest_plugin",
        "--bench-verify",
        "--bench-output",
        str(output),
        "test_ops.py",
        "test_wrong.py",
    )
    result.assert_outcomes(passed=5, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*CheckFailed: case tiny-float32: 1 implementation(s) failed the check*",
            "*off by one: output 0: 16 of 16 elements outside*",
        ]
    )
    assert "already registered" not in result.stderr.str()

    doc = json.loads(output.read_text())
    validate(doc, "result")
    assert len(doc["cases"]) == 6
    assert doc["options"]["verify_only"] is True
    assert all("timing" not in entry for entry in implementation_entries(doc))
    assert all("timing_wall_s" not in case for case in doc["cases"])
    statuses = {c["id"]: c["status"] for c in doc["cases"]}
    assert statuses["mm/small-float64/matmul"] == "ok"
    # test_wrong compares the same op on the same cases again, with another implementation:
    # recorded under an id that says what differs
    assert [i for i, s in statuses.items() if s == "failed"] == [
        "mm/tiny-float32/matmul#cold:off by one",
        "mm/tiny-float64/matmul#cold:off by one",
    ]


def test_smoke_mark_selects_only_the_smoke_rows(project):
    result = project.runpytest_subprocess("test_marks.py", "-v", "-m", "smoke")
    result.assert_outcomes(passed=2, deselected=2)
    result.stdout.fnmatch_lines(
        [
            literal("test_marks.py::test_marked[tiny-float32] PASSED*"),
            literal("test_marks.py::test_marked[tiny-float64] PASSED*"),
        ]
    )
    assert "small-" not in result.stdout.str()
    # recheck auto makes fresh inputs of the smoke rows too; never of the others
    assert sorted(set(gen_log(project))) == ["4-float32", "4-float64"]

    full = project.runpytest_subprocess("test_marks.py", "-q", "-m", "full", "--bench-verify")
    full.assert_outcomes(passed=2, deselected=2)
