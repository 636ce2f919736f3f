"""Cold mode's timer in both front ends: CUPTI, refused without it unless events are chosen, a
choice that is warned about and recorded in every row (timing.timer_reason)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from runner import bench
from runner.cli import main
from runner.execution import result, suite
from runner.execution import suite as case_job
from runner.measurement.timing import cupti
from tests.conftest import ROOT
from tests.runner.bench import test_api as test_bench_api
from tests.runner.bench.test_api import FAST, Scale
from tests.runner.document.test_assembly import GEOMETRY, PEAKS, samples, skeleton, worker_record

CASES = ROOT / "benchmarks" / "cases.toml"
make_session = test_bench_api.make_session  # the fixture: a fresh session on the fake device
needs_no_cupti = pytest.mark.skipif(
    cupti.unavailable_reason() is None, reason="checks the refusal; cupti-python works here"
)


def double(x):
    return 2 * x


@needs_no_cupti
def test_runner_bench_cold_without_cupti_is_refused_before_any_gpu_work_naming_the_fix():
    done = CliRunner().invoke(main, ["bench", str(CASES), "--mode", "cold", "--case", "axpy_f64"])
    assert done.exit_code == 2
    message = " ".join(done.stderr.split())
    assert message.startswith("error: cold mode is timed by CUPTI's kernel timestamps")
    assert "pip install cupti-python" in message and "harness run --install" in message
    assert "--timer events" in message and "probing the GPU" not in done.stderr
    assert done.stdout == ""


def test_events_chosen_for_cold_cases_are_warned_about_and_hot_ones_are_not():
    said: list[str] = []
    cases = [case_job.manifest.load(CASES).case("axpy_f64")]
    chosen = case_job.BenchOptions(mode="cold", timer="events")
    suite.check_timers(cases, chosen, "cupti-python is not usable", said.append)
    assert len(said) == 1 and "WARNING: 1 case(s) timed cold by CUDA events, as asked" in said[0]
    assert "compresses cold gaps toward 1" in said[0]
    hot = case_job.BenchOptions(mode="hot", timer="events")
    suite.check_timers(cases, hot, "cupti-python is not usable", said.append)
    assert len(said) == 1


def test_every_row_of_a_ptx_case_records_why_its_timer():
    doc = skeleton({"cuda": "baseline", "handptx": "candidate"})
    doc["settings"] = {"mode": "hot", "timer": "events", "timer_reason": "auto: CUDA events"}
    base = samples(7.8e-4, 0.002, seed=1)
    record = worker_record({"cuda": base, "handptx": base}, {"cuda": "passed", "handptx": "passed"})
    finished = result.finish_case(doc, record, GEOMETRY, "f64", PEAKS)
    for impl in finished["implementations"].values():
        assert impl["timing"]["timer_reason"] == "auto: CUDA events"


def test_runner_bench_rows_record_the_chosen_events_and_warn_once(make_session, capsys):
    make_session(options=FAST)  # cold, timer "events": chosen
    (case,) = bench.cases(Scale())
    for _ in range(2):
        c = bench.Runner(double, case).compare({"same": double})
    for impl in c.document_case["implementations"].values():
        assert impl["timing"]["timer"] == "events"
        assert impl["timing"]["timer_reason"].startswith("chosen: events in cold mode")
    assert c.document_case["settings"]["timer_reason"].startswith("chosen: events in cold mode")
    assert capsys.readouterr().err.count("cold by CUDA events, as asked") == 1


@needs_no_cupti
def test_runner_bench_cold_auto_without_cupti_is_refused_and_verify_only_is_not(make_session):
    session, _ = make_session(options=bench.TimingOptions(budget_s=0.03))  # cold, auto
    (case,) = bench.cases(Scale())
    with pytest.raises(bench.DeclarationError, match=r"pip install cupti-python"):
        bench.Runner(double, case).compare({"same": double})
    session.configure(verify_only=True)  # nothing is timed: no timer needed
    assert bench.Runner(double, case).compare({"same": double}).rows["same"].verified
