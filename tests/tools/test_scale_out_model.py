"""tools/perf/scale_out_model.py: the longest-first dealing and its tables, on a recorded run."""

from __future__ import annotations

from tests.support.perf_script import ROOT, load

model = load("scale_out_model")
RECORDED = ROOT / "tests/fixtures/result-1.2.0-h200-warpforth.json"


def test_longest_first_dealing_is_bound_by_the_work_or_the_longest_task():
    assert model.lpt([4, 3, 3, 2], 2, 0.0) == 6.0  # 4+2 and 3+3
    assert model.lpt([4, 3, 3, 2], 2, 1.0) == 8.0  # each task pays its overhead
    assert model.lpt([10, 1, 1], 8, 0.5) == 10.5  # more GPUs than tasks: the longest


def test_the_swept_suite_per_case_stops_gaining_at_one_host_and_per_point_keeps_going(capsys):
    assert model.main([str(RECORDED), "--suite", str(ROOT / "benchmarks/cases.toml"),
                       "--swept-total-s", "182", "--task-overhead-s", "3"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "### 182 s of GPU work: 8 cases, " in out  # the suite's points, however many
    rows = [
        line.split("|") for line in out.splitlines() if line[:3] in ("| 1", "| 2", "| 3", "| 4")
    ]
    per_case, per_point = rows[:4], rows[4:]
    assert len({row[3] for row in per_case}) == 1  # the same wall at 1, 2, 3 and 4 hosts
    assert per_case[3][6].strip() == "the longest task (24 GPUs idle)"
    assert float(per_point[3][3]) < float(per_point[0][3]) / 3  # 4 hosts: under a third
    assert "- per case: from 1 host(s) (8 GPUs) the wall is the longest task" in out
