"""runner.bench's integrity checks on the CPU (issue 13): work stays in the window, outputs are
plain arrays, recheck, null models, impossible rates.

The watch's classifier is fed synthetic CUPTI records; whole comparisons run on
tests/support/fake_callable_device with a stand-in for CUPTI (its clock and activity records), so the
path from a record to a flagged row, IntegrityFailed and the document is exercised without a GPU.
tests/integrity/test_cheats_gpu.py runs the real cheats on the GPU box.
"""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

from protocol.validation import validate
from runner import bench
from runner.bench import integrity, watch
from runner.bench.report import markdown
from runner.bench.watch import Bracket, Classifier, KernelSpanTimer
from runner.errors import NoKernelTimed
from runner.measurement.gate import null_models
from runner.measurement.timing import cupti
from tests.runner.bench import test_api as test_bench_api
from tests.support.fake_callable_device import FakeCallableBackend, FakeCallableDevice

make_session = test_bench_api.make_session  # the fixture: a fresh session on the fake device
TS = 7  # the timing stream's CUPTI id in these tests
K = "void scale_kernel<float>(float*, const float*, long)"
FAST = test_bench_api.FAST


def timed(name, t0, t1, elapsed_ns):
    return Bracket("timed", name, t0, t1, elapsed_ns)


def untimed(name, t0, t1):
    return Bracket("untimed", name, t0, t1)


# -- the classifier -------------------------------------------------------------------------------


def test_work_inside_its_window_on_the_timing_stream_and_any_untimed_work_are_clean():
    c = Classifier(TS)
    reset = [(10_000, 20_000, K, TS), (30_000, 40_000, "memset 64 B", 3)]  # any stream
    assert c.add(untimed("op", 0, 100_000), reset) == []
    work = [(210_000, 240_000, K, TS), (241_000, 260_000, "memcpy DtoD 64 B", TS)]
    assert c.add(timed("op", 200_000, 300_000, 60_000), work) == work
    assert c.summary("op") == {
        "checked": True,
        "method": watch.METHOD,
        "windows": 1,
        "timing_stream": TS,
        "findings": [],
    }


def test_a_side_stream_is_flagged_naming_the_kernel_and_both_streams():
    c = Classifier(TS)
    for k in range(3):
        t = k * 1_000_000
        c.add(timed("side", t, t + 100_000, 5_000), [(t + 10_000, t + 60_000, K, 21)])
    summary = c.summary("side")
    assert summary["findings"] == [
        {"kind": "side", "record": K, "stream": 21, "count": 3, "worst_us": 0.0}
    ]
    assert summary["message"] == (
        f"work outside the timed window: kernel {K!r} ran on stream 21, not the timing stream 7, "
        "during a timed window (3x)"
    )


def test_work_that_ran_after_the_end_event_is_flagged_with_how_late():
    # the events measured 5 us; the timing stream's records span 30 us: 25 us after the end event
    c = Classifier(TS)
    records = [(10_000, 12_000, "memcpy DtoD 64 B", TS), (15_000, 40_000, K, TS)]
    c.add(timed("late", 0, 100_000, 5_000), records)
    (finding,) = c.summary("late")["findings"]
    assert finding == {"kind": "late", "record": K, "stream": TS, "count": 1, "worst_us": 25.0}
    assert "ended at least 25.0 us after the end event" in c.summary("late")["message"]


def test_a_record_still_running_when_its_window_ended_arrives_later_and_is_flagged():
    c = Classifier(TS)
    c.add(timed("thread", 0, 100_000, 50_000), [])  # nothing had finished at the window's end
    c.add(untimed("thread", 200_000, 300_000), [(90_000, 130_000, K, TS)])
    kinds = {f["kind"]: f for f in c.summary("thread")["findings"]}
    assert set(kinds) == {"none", "after"}
    assert kinds["after"]["worst_us"] == 30.0
    assert "was still running 30.0 us after a timed window ended" in c.summary("thread")["message"]


def test_a_record_flushed_while_still_running_is_charged_to_the_window_it_was_taken_after():
    c = Classifier(TS)
    c.add(timed("thread", 0, 100_000, 50_000), [(0, 0, K, TS)])
    c.add(untimed("next", 200_000, 300_000), [(0, 0, "memset 64 B", 21)])
    summary = c.summary("thread")
    assert [(f["kind"], f["stream"]) for f in summary["findings"]] == [
        ("unfinished", TS),
        ("unfinished", 21),
    ]
    assert (
        "was still running when a timed window ended (CUPTI had no timestamps"
        in (summary["message"])
    )
    assert c.summary("next")["findings"] == []


def test_work_outside_every_bracket_is_charged_to_the_timed_window_before_it():
    c = Classifier(TS)
    c.add(timed("a", 0, 100_000, 50_000), [(10_000, 50_000, K, TS)])
    c.add(timed("b", 200_000, 300_000, 50_000), [(210_000, 250_000, K, TS)])
    c.add(untimed("a", 400_000, 500_000), [(350_000, 360_000, K, 21), (410_000, 420_000, K, TS)])
    assert c.summary("a")["findings"] == []
    (finding,) = c.summary("b")["findings"]
    assert (finding["kind"], finding["stream"], finding["worst_us"]) == ("outside", 21, 50.0)
    assert (
        "on stream 21 ran outside every window, 50.0 us after a timed window ended"
        in (c.summary("b")["message"])
    )


def test_windows_placed_together_read_and_flag_as_when_each_is_placed_on_its_own():
    """Watch.defer: a cold sample's windows and untimed brackets, their records delivered in
    one flush at the end, give each window its own records and the same findings."""
    brackets, records = [], []
    for k, name in enumerate(["a", "side", "a", "cached", "late", "a"]):
        t = k * 1_000_000
        brackets.append(untimed(name, t, t + 100_000))
        records.append([(t + 10_000, t + 20_000, "memcpy DtoD 64 B", TS)])
        brackets.append(timed(name, t + 200_000, t + 300_000, 30_000))
        own = {"side": [(t + 210_000, t + 240_000, K, 21)], "cached": []}
        own["late"] = [(t + 210_000, t + 280_000, K, TS)]  # 70 us, the events said 30 us
        records.append(own.get(name, [(t + 210_000, t + 240_000, K, TS)]))
    one_by_one, together = Classifier(TS), Classifier(TS)
    pairs = zip(brackets, records, strict=True)
    insides = [one_by_one.add(b, r) for b, r in pairs if b.kind == "timed"]
    together.recent.extend(brackets)
    timed_ones = [b for b in brackets if b.kind == "timed"]
    assert together.place([r for rs in records for r in rs], timed_ones) == insides
    assert [len(i) for i in insides] == [1, 0, 1, 0, 1, 1]  # side: not its own work
    for name in ("a", "side", "cached", "late"):
        assert together.summary(name) == one_by_one.summary(name), name
    assert {
        f["kind"] for n in ("side", "cached", "late") for f in together.summary(n)["findings"]
    } == {
        "side",
        "none",
        "late",
    }


def test_a_window_without_device_work_is_flagged_unless_its_copies_were_disabled():
    c = Classifier(TS, exempt_no_work={"copy"})
    c.add(timed("cached", 0, 100_000, 2_000), [])
    c.add(timed("copy", 200_000, 300_000, 2_000), [])
    assert c.summary("copy")["findings"] == []
    assert c.summary("cached")["message"] == (
        "work outside the timed window: no kernel or copy ran on the device during 1 of 1 timed "
        "windows (a result cached, made on the host or by another thread)"
    )


def test_clock_slack_keeps_an_honest_sample_clean_and_more_than_three_findings_are_counted():
    c = Classifier(TS)
    # ends 2 us after the window (within the slack); spans 1 us more than the events measured
    c.add(timed("op", 100_000, 200_000, 90_000), [(111_000, 200_000 + 2_000, K, TS)])
    assert c.summary("op")["findings"] == []
    records = [(10_000, 20_000, f"kernel_{i}", 20 + i) for i in range(5)]
    c.add(timed("many", 0, 100_000, 50_000), records)
    assert c.summary("many")["message"].endswith("during a timed window; and 2 more")


def test_only_the_runners_own_status_read_is_left_out():
    assert watch.runner_own((0, 1, "memcpy DtoH 4 B", 3))
    assert not watch.runner_own((0, 1, "memcpy DtoH 4096 B", 3))
    assert not watch.runner_own((0, 1, "memcpy HtoD 4 B", 3))
    assert not watch.runner_own((0, 1, K, 3))


def test_cupti_names_copies_by_kind_and_size_and_the_span_timer_leaves_them_out():
    ns = types.SimpleNamespace
    assert cupti._name(ns(name=K)) == K
    assert cupti._name(ns(name="", bytes=4096, copy_kind=8)) == "memcpy DtoD 4096 B"
    assert cupti._name(ns(bytes=4, copy_kind=2)) == "memcpy DtoH 4 B"
    assert cupti._name(ns(bytes=64, value=0)) == "memset 64 B"
    assert cupti.is_copy("memset 64 B") and not cupti.is_copy(K)
    records = [(0, 1_000, K, TS), (500, 3_000, "memcpy DtoD 8 B", TS), (4_000, 5_000, K, TS)]
    # first start to last end: the gap between the two kernels counts; copies only when counted
    assert KernelSpanTimer(False).seconds(records) == pytest.approx(5e-6)
    assert KernelSpanTimer(True).seconds(records) == pytest.approx(5e-6)
    assert KernelSpanTimer(False).seconds(records[:2]) == pytest.approx(1e-6)
    assert KernelSpanTimer(True).seconds(records[:2]) == pytest.approx(3e-6)


def test_a_window_keeps_what_started_after_it_began_without_flushing_at_begin(monkeypatch):
    """begin() takes a host stamp and does not flush; end_records() flushes once and keeps the
    records that started at or after the stamp (or have no timestamps yet), not the runner's
    own launches (known by their function: tests/runner/measurement/timing/test_own_launches.py)."""
    from runner.measurement.timing import cupti
    from tests.support.fake_cupti import FakeCupti

    fake = FakeCupti(TS)
    monkeypatch.setitem(sys.modules, "cupti", types.SimpleNamespace(cupti=fake))
    monkeypatch.setattr(cupti._Collector, "registered", False)
    monkeypatch.setattr(cupti._Collector, "records", [])
    monkeypatch.setattr(cupti._State, "functions", {0xF00D})
    window = cupti.ActivityWindow(1, 2)
    fake.launch(0xBEEF, K, start=900)  # before: a warm-up
    window.begin()
    assert fake.flushes == 0 and window.begun_ns == 1_000
    fake.launch(0xBEEF, K, start=1_200)  # the window's launch
    with cupti.launching():
        fake.launch(0xF00D, "kg_flush_l2", start=1_100)  # the runner's own
    fake.launch(0xBEEF, K, start=0)  # still running when flushed: kept
    fake.pending[-1].end = 0
    assert window.end() == [(1_200, 1_300), (0, 0)]
    assert fake.flushes == 1
    window.close()


# -- whole comparisons with a stand-in for CUPTI --------------------------------------------------


class Scale(bench.Workload):
    name = "scale"
    rows = (bench.Row("vec", n=64),)
    dtypes = ("float64",)

    def __init__(self, verification=None):
        if verification is not None:
            self.verification = verification

    def gen_inputs(self, params, dtype, seed):
        return (np.random.default_rng(seed).standard_normal(params["n"]).astype(dtype),)

    def reference(self, x):
        return x * 2

    def bytes(self, params, dtype):
        return 16.0 * params["n"]


def double(x):
    return x * 2


class StandInCupti:
    """CUPTI's clock (1 ms a reading) and activity records, for runner.measurement.timing.cupti."""

    STEP = 1_000_000

    def __init__(self):
        self.t, self.pending = 0, []

    def now_ns(self):
        self.t += self.STEP
        return self.t

    def window(self, context, stream, include_copies=False):
        stand_in = self

        class Activity:
            stream_id = TS

            def begin(self):
                stand_in.pending.clear()

            def end_records(self):
                out, stand_in.pending[:] = list(stand_in.pending), []
                return out

            def close(self):
                stand_in.closed = True

        return Activity()


# what each implementation's timed call leaves on the device, from the window's first stamp t;
# the fake times a call at 10 us, so honest work spans 7 us of it
RECORDS = {
    "honest": lambda t: [(t + 1_000, t + 8_000, K, TS)],
    "side": lambda t: [(t + 1_000, t + 8_000, K, 21)],
    "cached": lambda t: [],
    "thread": lambda t: [(t + 500_000, t + 1_500_000, K, TS)],  # past the window's end, t + 1 ms
    "deferred": lambda t: [(t + 1_200_000, t + 1_300_000, K, TS)],  # before the next bracket
}


class WatchedFakeBackend(FakeCallableBackend):
    def __init__(self, stand_in, *args):
        super().__init__(*args)
        self.stand_in = stand_in

    def _leave(self, name):
        self.stand_in.pending += RECORDS[name if name in RECORDS else "honest"](self.stand_in.t)

    def timed_cold(self, name):
        self._leave(name)
        return super().timed_cold(name)

    def timed_batch(self, name, batch):
        self._leave(name)
        return super().timed_batch(name, batch)


@pytest.fixture
def watched(monkeypatch):
    """A fresh session on a fake device whose backends record through a stand-in CUPTI."""
    stand_in = StandInCupti()
    monkeypatch.setattr(cupti, "ActivityWindow", stand_in.window)
    monkeypatch.setattr(cupti, "now_ns", stand_in.now_ns)
    monkeypatch.setattr("runner.bench.watch.unavailable_reason", lambda: None)
    device = FakeCallableDevice()
    device.backend = lambda impls, case, options: WatchedFakeBackend(
        stand_in, device, impls, case, options
    )
    device.cupti_handles = lambda: (1, 2)  # what CUPTI takes: the context and the timing stream
    device.synchronize_device = lambda: None
    session = bench.reset(bench.Session(device=device, options=FAST))
    yield session, stand_in
    bench.reset()


@pytest.mark.parametrize("mode", ["cold", "hot"])
def test_untimed_work_of_many_implementations_is_placed_though_its_brackets_do_not_flush(
    watched, monkeypatch, mode
):
    """Untimed brackets do not flush CUPTI; the warm-up of 90 implementations (180 brackets, more
    than the classifier keeps) must still find its records' brackets, not flag them."""
    session, _ = watched
    session.configure(mode=mode, timer="cupti")

    def warmup(self, name, launches):  # leaves a kernel inside its own bracket
        self.stand_in.pending.append((self.stand_in.t + 1_000, self.stand_in.t + 2_000, K, TS))
        return FakeCallableBackend.warmup(self, name, launches)

    monkeypatch.setattr(WatchedFakeBackend, "warmup", warmup)
    (case,) = bench.cases(Scale())
    comparison = bench.Runner(double, case).compare({f"copy{i}": double for i in range(90)})
    windows = [
        e["integrity"]["window"] for e in comparison.document_case["implementations"].values()
    ]
    assert all(w["checked"] and not w["findings"] for w in windows), windows[0]


@pytest.mark.parametrize(("mode", "timer"), [("cold", "cupti")])
def test_rows_whose_work_left_the_window_are_flagged_and_honest_rows_keep_their_ratio(
    watched, mode, timer
):
    session, stand_in = watched
    session.configure(mode=mode, timer=timer)  # the cupti timer finds no kernel in some windows
    (case,) = bench.cases(Scale())
    names = ("side", "cached", "thread", "deferred")
    with pytest.raises(bench.IntegrityFailed) as failure:
        bench.Runner(double, case, name="honest").compare(
            {"same": double, **dict.fromkeys(names, double)}
        )
    rows = failure.value.comparison.rows
    assert rows["same"].flags == [] and rows["same"].ratio == pytest.approx(1.0)
    assert rows["honest"].flags == [] and rows["honest"].ratio == 1.0
    expected = {
        "side": "ran on stream 21, not the timing stream 7, during a timed window",
        "cached": "no kernel or copy ran on the device during",
        "thread": "was still running 500.0 us after a timed window ended",
        "deferred": "ran outside every window, 200.0 us after a timed window ended",
    }
    for name, text in expected.items():
        (flag,) = rows[name].flags
        assert text in flag and flag.startswith("work outside the timed window: "), flag
        assert rows[name].ratio is None
        if timer == "events":  # by CUPTI, nothing of it ran on the timing stream: 0
            assert rows[name].median_s > 0
    doc = failure.value.comparison.document_case
    assert doc["status"] == "failed" and doc["error"]["phase"] == "timing"
    assert all(f"{n}: work outside" in doc["error"]["message"] for n in names)
    assert "same:" not in doc["error"]["message"] and "honest:" not in doc["error"]["message"]
    entry = doc["implementations"]["side"]
    assert entry["gap"] is None and "integrity.flags" in entry["gap_note"]
    if mode == "cold":  # the probes, then every launch of every sample; hot: calibration too
        launches = integrity.COLD_PROBES + rows["side"].samples * entry["timing"]["batch"]
        assert entry["integrity"]["window"]["windows"] == launches
    else:
        assert entry["integrity"]["window"]["windows"] > rows["side"].samples
    assert doc["implementations"]["same"]["gap"]["ratio_of_medians"] == pytest.approx(1.0)
    assert getattr(stand_in, "closed", False), "the CUPTI recording must be closed"
    validate(session.document(), "result", "flagged comparison")
    assert "FLAGGED: work outside the timed window" in markdown(session.document())


def test_the_cupti_timer_takes_its_time_from_the_windows_records(watched):
    session, _ = watched
    session.configure(timer="cupti")
    (case,) = bench.cases(Scale())
    c = bench.Runner(double, case, name="honest").compare({"same": double})
    assert c["honest"].method.startswith("CUPTI span (first start to last end")
    assert c["honest"].median_s == pytest.approx(7e-6)  # the record, not the fake's 10 us
    assert c.document_case["implementations"]["same"]["integrity"]["flags"] == []
    timing = c.document_case["implementations"]["same"]["timing"]
    assert timing["cupti_span"] == "first-start-to-last-end"
    validate(session.document(), "result", "cupti timing")


def test_a_cold_sample_by_cupti_flushes_once_for_all_its_launches(watched, monkeypatch):
    """CUPTI's forced flush costs about 0.7 ms: a cold sample's launches (2 here, 10 us each)
    leave their records until the sample's last launch, and each still reads its own record."""
    session, stand_in = watched
    session.configure(mode="cold", timer="cupti")
    flushes = []
    window = stand_in.window

    def counted(*args, **kwargs):
        activity = window(*args, **kwargs)
        take = activity.end_records
        activity.end_records = lambda: flushes.append(1) or take()
        return activity

    monkeypatch.setattr(cupti, "ActivityWindow", counted)
    (case,) = bench.cases(Scale())
    c = bench.Runner(double, case, name="honest").compare({"same": double})
    doc = c.document_case["implementations"]
    batch, samples = doc["same"]["timing"]["batch"], c["same"].samples
    assert batch >= 2, batch
    windows = doc["same"]["integrity"]["window"]["windows"]
    assert windows == integrity.COLD_PROBES + samples * batch
    assert c["honest"].median_s == pytest.approx(7e-6) and c["same"].ratio == pytest.approx(1.0)
    assert doc["same"]["integrity"]["flags"] == [] and doc["honest"]["integrity"]["flags"] == []
    launches = 3 * (integrity.COLD_PROBES + samples * batch)  # both and the A/A control
    assert len(flushes) < launches / batch + 3 * integrity.COLD_PROBES + 8, (len(flushes), launches)


def test_the_sample_budget_of_cupti_cold_samples_is_probed_as_they_are_taken(watched, monkeypatch):
    """Without a stated wall time (a real device), the budget's cost of a launch comes from a
    batch of 1 and of BATCH_PROBE launches read at their end: their windows are judged too."""
    session, _ = watched
    session.configure(mode="cold", timer="cupti")
    monkeypatch.setattr(WatchedFakeBackend, "sample_wall_s", None, raising=False)
    walls = []
    batched_wall = integrity.WatchedBackend._batched_wall
    monkeypatch.setattr(
        integrity.WatchedBackend,
        "_batched_wall",
        lambda self, name, s: walls.append(batched_wall(self, name, s)) or walls[-1],
    )
    (case,) = bench.cases(Scale())
    c = bench.Runner(double, case, name="honest").compare({"same": double})
    entry = c.document_case["implementations"]["same"]
    probes = integrity.COLD_PROBES + 1 + integrity.BATCH_PROBE
    batch = entry["timing"]["batch"]
    assert entry["integrity"]["window"]["windows"] == probes + c["same"].samples * batch
    assert entry["integrity"]["flags"] == [] and c["same"].ratio == pytest.approx(1.0)
    assert len(walls) == 3 and all(0 < w < 0.1 for w in walls), walls  # with the A/A control


def test_hot_samples_timed_by_events_are_not_watched_and_a_cupti_that_cannot_record_raises(
    watched, monkeypatch
):
    session, _ = watched
    session.configure(mode="hot", timer="events")
    (case,) = bench.cases(Scale())
    c = bench.Runner(double, case).compare({"cached": double})  # it would be flagged if watched
    window = c.document_case["implementations"]["cached"]["integrity"]["window"]
    assert window == {"checked": False, "reason": integrity.HOT_EVENTS}

    def refuse(*args, **kwargs):
        raise RuntimeError("CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED\nmore")

    monkeypatch.setattr(cupti, "ActivityWindow", refuse)
    session.configure(timer="cupti")
    with pytest.raises(RuntimeError, match="MULTIPLE_SUBSCRIBERS"):
        bench.Runner(double, case).compare({"same": double})


def test_cold_samples_timed_by_events_are_not_watched_and_the_document_says_why(watched):
    session, _ = watched
    session.configure(mode="cold", timer="events")
    (case,) = bench.cases(Scale())
    c = bench.Runner(double, case).compare({"cached": double})  # it would be flagged if watched
    window = c.document_case["implementations"]["cached"]["integrity"]["window"]
    assert window == {"checked": False, "reason": integrity.COLD_EVENTS}
    assert "not made for cold samples timed by events" in window["reason"]


def test_without_cupti_the_window_check_is_recorded_as_not_made(make_session):
    session, _ = make_session()
    (case,) = bench.cases(Scale())
    c = bench.Runner(double, case).compare({"same": double})
    window = c.document_case["implementations"]["same"]["integrity"]["window"]
    assert window == {"checked": False, "reason": "the device is a stand-in without CUDA"}
    assert "Work-in-window check not made (CUPTI): the device is a stand-in without CUDA" in (
        markdown(session.document())
    )


def test_an_impossible_rate_flags_the_row_with_both_figures_without_failing_the_comparison(
    make_session,
):
    class Claims(Scale):
        name = "claims"

        def bytes(self, params, dtype):
            return 1e12  # a terabyte a call in 10 us

    session, _ = make_session()
    (case,) = bench.cases(Claims())
    c = bench.Runner(double, case).compare({"same": double})  # flagged rows, no exception
    flag = c["same"].flags[0]
    assert flag.startswith("physically impossible timing")
    assert "GB/s is above the device's measured" in flag and "1e+12 bytes a call" in flag
    assert c["same"].ratio is None and c.document_case["status"] == "ok"
    bound = c.document_case["implementations"]["same"]["throughput"]["bound"]
    assert bound["exceeded"] and bound["achieved_bytes_per_s"] > bound["ceiling_bytes_per_s"]
    assert "L2" in bound["method"] and bound["l2_allowance_bytes"] == 0  # a stand-in: no L2
    validate(session.document(), "result")
    # a noncomparable row computes something else: the case's bytes do not describe it
    other = bench.Implementation(run=double, noncomparable_reason="another computation")
    c = bench.Runner(double, case).compare({"other": other})
    assert c["other"].flags == [] and c["double"].flags
    assert "bound" not in c.document_case["implementations"]["other"]["throughput"]


# -- outputs are plain arrays ---------------------------------------------------------------------


class Device:
    def __init__(self, kind):
        self.type = kind

    def __str__(self):
        return f"{self.type}:0"


class Tensor:
    def __init__(self, kind="cuda", meta=False):
        self.device, self.is_meta = Device(kind), meta


class LazyTensor(Tensor):
    pass


def test_output_problems_name_subclasses_meta_values_host_data_and_other_types():
    outputs = (Tensor(), LazyTensor(), Tensor(meta=True), Tensor("cpu"), 3.0)
    assert integrity.output_problems(outputs, Tensor, "cuda") == [
        f"output 1 is a {__name__}.LazyTensor, a subclass of {__name__}.Tensor",
        f"output 2 is a meta {__name__}.Tensor (it has no data)",
        "output 3 is on device cpu:0, not on cuda",
        f"output 4 is a float, not a {__name__}.Tensor",
    ]
    assert integrity.output_problems(None, Tensor, "cuda") == []


class Deferred(np.ndarray):
    """A subclass standing for a lazy tensor: the check would see whatever it computes late."""


def test_a_subclass_output_is_refused_before_timing_naming_the_implementation_and_type(
    make_session,
):
    session, device = make_session()
    (case,) = bench.cases(Scale())
    with pytest.raises(bench.DeclarationError) as failure:
        bench.Runner(double, case).compare({"lazy": lambda x: (x * 2).view(Deferred)})
    message = str(failure.value)
    assert f"implementation 'lazy' returned output 0 is a {__name__}.Deferred" in message
    assert "a subclass of numpy.ndarray" in message and "must be plain numpy.ndarray" in message
    assert session.cases[-1]["error"]["phase"] == "check" and not device.backends


# -- recheck --------------------------------------------------------------------------------------


def cached_by_pointer():
    cache = {}

    def op(x):
        key = x.__array_interface__["data"][0]
        if key not in cache:
            cache[key] = x * 2
        return cache[key]

    return op


def test_a_result_cached_by_pointer_passes_once_and_fails_recheck(make_session):
    session, _ = make_session(options=bench.TimingOptions(recheck=False, timer="events"))
    (case,) = bench.cases(Scale())
    original = case.inputs[0].copy()
    c = bench.Runner(double, case).compare({"cached": cached_by_pointer()})
    assert c["cached"].ratio is not None  # checked once, it looks right
    session.configure(recheck="auto")  # the default
    with pytest.raises(bench.RecheckFailed) as failure:
        bench.Runner(double, case).compare({"cached": cached_by_pointer()})
    message = str(failure.value)
    assert "recheck: implementation 'cached' after a timed sample on fresh inputs (seed" in message
    assert "does not match the reference" in message and "computed from its inputs" in message
    assert session.cases[-1]["status"] == "failed"
    assert session.cases[-1]["error"]["phase"] == "timing"
    assert np.array_equal(case.inputs[0], original), "the case's own data is restored"


def test_recheck_passes_honest_rows_and_private_arguments_refilled_from_the_inputs(make_session):
    session, _ = make_session(
        options=bench.TimingOptions(budget_s=0.03, recheck=True, timer="events")
    )
    (case,) = bench.cases(Scale())
    (x,) = case.inputs
    private = x.copy()

    def in_place(y):
        y *= 2
        return y

    op = bench.Implementation(run=in_place, args=(private,), reset=lambda: np.copyto(private, x))
    c = bench.Runner(double, case).compare({"in place": op, "same": double})
    block = c.document_case["implementations"]["in place"]["integrity"]["recheck"]
    assert block["verified"] and block["verified_samples"] >= c["in place"].samples
    assert block["fresh_inputs"] > 3 * c["same"].samples  # every sample of every row
    assert session.document()["options"]["recheck"] is True

    snapshot = x.copy()  # restored from its own snapshot: stale under fresh inputs
    stale = bench.Implementation(
        run=in_place, args=(private,), reset=lambda: np.copyto(private, snapshot)
    )
    # the reset probe (runner.bench.reset_probe) refuses it before recheck would
    with pytest.raises(bench.ResetRefused, match=r"does not refill its private arguments"):
        bench.Runner(double, case).compare({"stale": stale})


def test_recheck_refuses_inputs_whose_shape_changes_with_the_seed(make_session):
    class Ragged(Scale):
        name = "ragged"

        def gen_inputs(self, params, dtype, seed):
            rng = np.random.default_rng(seed)
            return (rng.standard_normal(params["n"] + seed % 2).astype(dtype),)

    make_session(options=bench.TimingOptions(budget_s=0.03, recheck=True, timer="events"))
    (case,) = bench.cases(Ragged())
    with pytest.raises(bench.DeclarationError, match="only the data may change"):
        bench.Runner(double, case).compare()


def test_recheck_must_be_a_bool_or_auto():
    assert bench.TimingOptions().recheck == "auto"
    with pytest.raises(bench.DeclarationError, match="recheck must be True, False or 'auto'"):
        bench.TimingOptions(recheck="yes")


# -- null models ----------------------------------------------------------------------------------


def test_null_models_of_a_case_cover_zeros_a_constant_an_input_and_lower_precision():
    x = np.random.default_rng(1).standard_normal(16)
    models = null_models.null_models((x,), (x * 2,), lambda y: y * 2, lambda fn: fn())
    assert list(models) == [
        "all zeros",
        "a constant (the mean of each expected output)",
        "a copy of input 0",
        "partial work (the reference on every second element of input 0, doubled)",
        "the reference on inputs rounded to f32",
        "the reference computed in f32",
        "the reference on inputs rounded to f16",
        "the reference computed in f16",
        "the reference on inputs rounded to bf16",
        "the reference computed in bf16 (inputs and result rounded to bf16)",  # numpy: no bf16
    ]
    assert np.array_equal(models["a copy of input 0"][0], x)
    assert models["the reference on inputs rounded to f32"][0].dtype == np.float64
    assert np.array_equal(models["the reference computed in f16"][0], x.astype(np.float16) * 2)


@pytest.mark.parametrize(
    ("declaration", "passing"),
    [
        (
            bench.Exact(rtol=0, atol=100),
            "'all zeros', 'a constant (the mean of each expected output)'",
        ),
        (
            bench.Exact(rtol=1e-7, atol=1e-7),
            "'the reference on inputs rounded to f32', 'the reference computed in f32'",
        ),
        (bench.Custom(lambda outputs, expected: True, "anything goes"), "'all zeros'"),
    ],
)
def test_a_declaration_a_null_model_passes_is_refused_before_timing(
    make_session, declaration, passing
):
    session, device = make_session()
    (case,) = bench.cases(Scale(declaration))
    with pytest.raises(bench.DeclarationError, match="null model") as failure:
        bench.Runner(double, case).compare({"same": double})
    assert passing in str(failure.value) and "outputs that did not do the work" in str(
        failure.value
    )
    assert not device.backends and session.cases[-1]["error"]["phase"] == "check"


def test_declared_controls_stand_in_for_null_models_and_the_defaults_have_teeth(make_session):
    make_session()
    loose = bench.Exact(rtol=0, atol=100, controls=(bench.zeroed_input(0),))
    with pytest.raises(bench.DeclarationError, match="negative control 'input 0 zeroed' passed"):
        bench.Runner(double, bench.cases(Scale(loose))[0]).compare()
    controlled = bench.Exact(rtol=1e-7, atol=1e-7, controls=(bench.zeroed_input(0),))
    assert bench.Runner(double, bench.cases(Scale(controlled))[0]).compare().timed
    assert bench.Runner(double, bench.cases(Scale())[0]).compare().timed  # f64 default: 1e-12


def test_timer_auto_falls_back_to_events_when_cupti_finds_no_kernel_in_a_row(
    watched, monkeypatch, capsys
):
    """A call that only copies, with copies left out, leaves CUPTI's kernel timer nothing to
    time: under timer auto the whole comparison is timed by events and every row says why;
    asked for explicitly, the cupti timer raises instead."""
    session, _ = watched
    monkeypatch.setattr(cupti, "unavailable_reason", lambda: None)  # auto chooses cupti
    monkeypatch.setitem(
        RECORDS, "copy only", lambda t: [(t + 1_000, t + 8_000, "memcpy DtoD 64 B", TS)]
    )
    session.configure(mode="cold", timer="auto")
    (case,) = bench.cases(Scale())
    c = bench.Runner(double, case).compare({"copy only": double})
    impls = c.document_case["implementations"]
    for name in ("double", "copy only"):
        assert impls[name]["timing"]["timer"] == "events", impls[name]["timing"]
        assert (
            "timer auto: events, since CUPTI found no kernel to time in 'copy only'"
            in (impls[name]["timing"]["fallback"])
        )
        assert impls[name]["timing"]["timer_reason"].startswith(
            "timer auto: events, since CUPTI found no kernel to time in 'copy only'; CUDA events"
        )
    assert "WARNING: case" in capsys.readouterr().err  # loud, as an explicit choice would be
    assert not c.document_case["id"].endswith("/cupti")
    session.configure(timer="cupti")
    with pytest.raises(NoKernelTimed, match="'copy only': CUPTI recorded no kernel"):
        bench.Runner(double, case).compare({"copy only": double})
