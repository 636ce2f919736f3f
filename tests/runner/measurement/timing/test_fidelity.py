"""Timing fidelity on the CPU (issue 18): the precision stopping rule, the clocks per sample and
their flags, the CUPTI figures' arithmetic, and timers kept apart in the history."""

from __future__ import annotations

import copy

import pytest
from click.testing import CliRunner

from harness.analysis.compare import compare
from harness.history.series import series_id, series_key
from harness.history.store import Store
from protocol.validation import validate
from runner import document as document_clocks
from runner.cli import main
from runner.cli_suite import Percent
from runner.errors import TimerUnavailable
from runner.measurement import stats
from runner.measurement.timing import TimingSettings, base, clocks, cupti, measure
from tests.support.fake_device import FakeBackend
from tests.support.harness_docs import make_document, samples

# -- the precision stopping rule -------------------------------------------------------------


def stopped(noise: float, mode: str = "hot", schedule: str = "rounds", seed: int = 1):
    backend = FakeBackend({"base": 1e-4, "cand": 1.3e-4}, noise=noise, seed=seed, overhead_s=0)
    settings = TimingSettings(  # cold: one launch a sample, so `noise` is a sample's
        mode=mode,
        samples=30,
        precision=0.005,
        max_samples=1000,
        schedule=schedule,
        cold_launches=1 if mode == "cold" else None,
    )
    return measure(backend, ["base", "cand"], settings, baseline="base")


@pytest.mark.parametrize("mode", ["hot", "cold"])
@pytest.mark.parametrize("noise", [0.005, 0.02])
def test_the_stopping_rule_converges_at_half_a_percent_and_two_percent_noise(noise, mode):
    m = stopped(noise, mode)
    p = m.precision
    assert p["converged"] is True and p["stopped_by"] == "precision", p
    assert p["half_width"] <= 0.005
    n = len(m.impls["base"].samples_s)
    assert n == len(m.impls["cand"].samples_s) == p["samples"] >= 30
    if noise == 0.02:  # needs more than the first 30: it kept sampling, in whole AB/BA pairs
        assert n > 30 and n % 2 == 0
    # the continuation keeps the rounds' Thue-Morse order, so drift still cancels
    assert [o[0] for o in m.orders[:4]] == ["base", "cand", "cand", "base"]
    assert m.orders == [base.round_order(["base", "cand"], r) for r in range(n)]


def test_the_stopping_rule_reports_twenty_percent_noise_as_not_converged():
    m = stopped(0.20)
    p = m.precision
    assert p["converged"] is False and p["stopped_by"] == "max_samples", p
    assert p["half_width"] > 0.005 and p["samples"] == len(m.impls["cand"].samples_s) <= 1000


def test_a_target_under_a_cold_short_kernels_placement_floor_stops_after_the_first_samples():
    """Cold, a 2 us kernel's gaps are never narrower than +-0.53% (stats.systematic): a 0.5%
    target stops at once, saying why, instead of sampling to the caps; hot it converges."""
    for mode, floor in (("cold", True), ("hot", False)):
        backend = FakeBackend({"base": 1.3e-6, "cand": 1.3e-6}, noise=0.005, seed=3)
        settings = TimingSettings(mode=mode, samples=30, precision=0.005, cold_launches=1)
        m = measure(backend, ["base", "cand"], settings)
        p = m.precision
        if floor:
            assert p["stopped_by"] == "floor" and p["samples"] == 30 and not p["converged"]
            # the fake's cold launch is 1.5x, 1.95 us: a floor of +-0.53%
            floor = stats.floor_half_width(systematic=stats.systematic("cold", 1.95e-6))
            assert 0.005 < floor <= p["half_width"]
        else:
            assert p["stopped_by"] == "precision" and p["converged"]


def test_the_stopping_rule_stops_at_its_time_cap():
    backend = FakeBackend({"base": 1e-4, "cand": 1.3e-4}, noise=0.2, seed=2, overhead_s=0)
    settings = TimingSettings(samples=30, precision=0.005, precision_max_s=1e-9)
    m = measure(backend, ["base", "cand"], settings)
    assert m.precision["stopped_by"] == "precision_max_s" and m.precision["samples"] == 30


def test_the_passes_schedule_continues_in_whole_passes():
    m = stopped(0.02, mode="cold", schedule="passes")
    assert m.precision["converged"]
    n = len(m.impls["base"].samples_s)
    assert n > 30 and all(len(o) == 2 for o in m.orders)


def test_without_a_target_the_sample_count_is_exact():
    backend = FakeBackend({"a": 1e-4, "b": 1e-4}, noise=0.2)
    m = measure(backend, ["a", "b"], TimingSettings(samples=30))
    assert m.precision is None and len(m.impls["a"].samples_s) == 30


@pytest.mark.parametrize(
    ("kwargs", "label"),
    [
        ({"precision": 0.0}, "precision"),
        ({"precision": 1.5}, "precision"),
        ({"samples": 40, "max_samples": 30}, "max_samples"),
        ({"timer": "wallclock"}, "timer"),
    ],
)
def test_stopping_rule_settings_are_checked(kwargs, label):
    with pytest.raises(ValueError, match=f"TimingSettings.{label}"):
        TimingSettings(**kwargs)


def test_precision_on_the_command_line_is_a_percentage():
    assert Percent().convert("0.5%", None, None) == pytest.approx(0.005)
    assert Percent().convert("2", None, None) == pytest.approx(0.02)
    out = CliRunner().invoke(main, ["bench", "x.toml", "--precision", "half"])
    assert out.exit_code == 2 and "not a percentage such as 0.5%" in out.output
    out = CliRunner().invoke(main, ["bench", "x.toml", "--precision", "150%"])
    assert out.exit_code == 2 and "between 0% and 100%" in out.output


def test_a_precision_below_the_default_floor_is_left_to_the_stopping_rule():
    """With the in-run A/A control a gap's floor is the control's term, known only after the
    first samples: a target under the documented default (+-0.0588%) is accepted, and the rule
    stops at the floor where the term it uses is above the target."""
    settings = TimingSettings(samples=30, precision=0.0005)
    backend = FakeBackend({"base": 1e-4, "cand": 1e-4}, noise=0.001, seed=4)
    m = measure(backend, ["base", "cand"], settings)
    p = m.precision
    assert p["stopped_by"] == "floor" and p["systematic_source"] == "default", p
    assert p["systematic"] == pytest.approx(stats.INSTANCE_SD)


# -- clocks per sample ---------------------------------------------------------------------


class Clocks:
    """A programmable NVML reading (the monitor of runner.measurement.timing.clocks needs a GPU)."""

    source = "test"

    def __init__(self, readings):
        self.readings = iter(readings)

    def read(self):
        return next(self.readings)


def test_clocks_are_read_around_every_sample_and_kept_with_it():
    backend = FakeBackend({"a": 1e-4, "b": 1e-4})
    readings = [(1980, 0), (1980, 0)] * 3 + [(1755, 0x4), (1740, 0)] + [(1980, 0)] * 100
    m = measure(backend, ["a", "b"], TimingSettings(samples=4), Clocks(readings))
    assert m.clocks_source == "test"
    assert m.impls["a"].clocks[0] == [1980, 1980, 0]
    assert m.impls["a"].clocks[1] == [1755, 1740, 0x4]  # a b | b a: the fourth sample is a's second
    assert all(len(t.clocks) == len(t.samples_s) == 4 for t in m.impls.values())


def test_samples_that_depart_from_the_cases_usual_clocks_are_flagged():
    readings = [
        [1980, 1980, 0],
        [1980, 1980, 0x1],
        [1980, 1965, 0],
        [1980, 1980, 0x4],
        [1900, 1980, 0x40],
    ]
    flags = clocks.sample_flags(readings, 1980)
    assert flags[0] is None and flags[1] is None  # idle is not a slowdown
    assert flags[2] is None  # one clock step (0.8%) below the usual is the usual
    assert flags[3] == "power cap (SwPowerCap)"
    assert "thermal (HwThermalSlowdown)" in flags[4]
    assert "SM clock 1900 MHz below the case's usual 1980 MHz" in flags[4]
    # a case at its power limit: the cap is its own state, a dip below its usual clock is not
    own = clocks.sample_flags(
        [[1755, 1755, 0x4], [1600, 1755, 0x4]], 1755, ["power cap (SwPowerCap)"]
    )
    assert own == [None, "SM clock 1600 MHz below the case's usual 1755 MHz"]


class Counters(Clocks):
    """Clocks whose edges read clean while NVML's violation counters grow inside one sample:
    a power cap that came and went within it."""

    def __init__(self, readings, counters):
        super().__init__(readings)
        self.counters = iter(counters)

    def violation_ns(self):
        return next(self.counters)


def test_a_throttle_inside_a_sample_is_seen_by_the_violation_counters():
    backend = FakeBackend({"a": 1e-4, "b": 1e-4})
    edges = [(1980, 0)] * 200  # every edge reads full speed and no reason
    # before/after pairs of each sample: the third sample (b's second... a b | b a) grew 2.5 ms
    counters = [10, 10, 10, 10, 10, 2_500_010] + [2_500_010] * 200
    m = measure(backend, ["a", "b"], TimingSettings(samples=4), Counters(edges, counters))
    clocks_seen = m.impls["a"].clocks + m.impls["b"].clocks
    assert sorted(c[3] for c in clocks_seen) == [0] * 7 + [2_500_000]
    flags = clocks.sample_flags([c for c in clocks_seen if c[3]], 1980)
    assert flags == ["throttled inside the sample (NVML violation counters): 2500 us held down"]
    assert clocks.sample_flags([[1980, 1980, 0, 0]], 1980) == [None]


def test_the_run_maximum_is_per_gpu_not_pooled_across_cards():
    """A slower card of the same host must not flag all of its samples against a faster one's
    clock: each case is judged against the maximum read on its own GPU."""
    fast = timed_case({"cuda": [[1980, 1980, 0]] * 30, "forth": [[1980, 1980, 0]] * 30})
    slow = timed_case({"cuda": [[1755, 1755, 0]] * 30, "forth": [[1755, 1755, 0]] * 30})
    fast_case, slow_case = fast["cases"][0], slow["cases"][0]
    fast_case["device"], slow_case["device"] = (
        {"index": 0, "uuid": "GPU-a"},
        {"index": 1, "uuid": "GPU-b"},
    )
    from runner.execution.suite import apply_run_clocks

    apply_run_clocks([fast_case, slow_case])
    assert slow_case["clocks"]["flagged"] == 0 and slow_case["clocks"]["run_max_sm_mhz"] == 1755
    assert fast_case["clocks"]["run_max_sm_mhz"] == 1980


def test_a_sweep_points_clocks_are_judged_with_its_cases_baseline():
    """A point's block names no baseline of its own (its case does): the run's clock pass must
    read the case's, and a mostly throttled point's gap becomes unstable as a case's would."""
    full = [[1980, 1980, 0]] * 30
    throttled = [[1980, 1980, 0x4]] * 30
    case = timed_case({"cuda": full, "forth": full})["cases"][0]
    point_case = timed_case({"cuda": throttled, "forth": throttled})["cases"][0]
    point = {"point": "n=2^11", "implementations": point_case["implementations"]}
    case["points"] = [{"point": "n=2^27", "headline": True}, point]
    from runner.execution.suite import apply_run_clocks

    apply_run_clocks([case])
    # a point capped in every sample is measured at its power limit (its own state), not
    # unstable; one whose clock dips in a third of its samples departs from its usual and is
    assert case["clocks"]["unstable"] is False and point["clocks"]["unstable"] is False
    assert point["clocks"]["own_state"] == ["power cap (SwPowerCap)"]
    dipping = [[1980, 1980, 0]] * 20 + [[1500, 1500, 0x4]] * 10
    for name in ("cuda", "forth"):
        point["implementations"][name]["timing"]["clocks"] = dipping
    apply_run_clocks([case])
    assert point["clocks"]["unstable"] is True
    assert point["implementations"]["forth"]["gap"]["stable"] is False
    assert case["implementations"]["forth"]["gap"]["stable"] is True


def timed_case(clocks_per_impl: dict) -> dict:
    doc = make_document({"axpy": {"cuda": samples(1e-3), "forth": samples(1.2e-3, seed=1)}})
    case = doc["cases"][0]
    for name, readings in clocks_per_impl.items():
        case["implementations"][name]["timing"]["clocks"] = readings
    case["timing_wall_s"] = 1.0
    return doc


def test_a_case_at_its_power_limit_is_tracked_as_such_and_one_that_departs_is_unstable():
    capped = [[1755, 1755, 0x4]] * 20 + [[1755, 1770, 0]] * 10
    doc = timed_case({"cuda": capped, "forth": capped})
    case = doc["cases"][0]
    document_clocks.apply_clocks(case, 1980, "nvml")
    assert case["clocks"]["unstable"] is False and case["clocks"]["flagged"] == 0
    assert case["clocks"]["own_state"] == ["power cap (SwPowerCap)"]
    assert case["clocks"]["usual_sm_mhz"] == 1755
    assert case["implementations"]["forth"]["gap"]["stable"] is True
    assert any(
        "usual 1755 MHz (power cap (SwPowerCap)), below the run's 1980" in n for n in case["notes"]
    )
    validate(doc, "result", "power-limited document")
    dips = [[1980, 1980, 0]] * 20 + [[1700, 1700, 0x20]] * 10
    for name in ("cuda", "forth"):
        case["implementations"][name]["timing"]["clocks"] = dips
    document_clocks.apply_clocks(case, 1980, "nvml")
    assert case["clocks"]["unstable"] is True and case["clocks"]["flagged"] == 20
    assert case["implementations"]["forth"]["gap"]["stable"] is False
    assert any("20 of 60 samples departed from the case's usual clocks" in n for n in case["notes"])
    assert case["implementations"]["cuda"]["timing"]["clock_flags"][0] is None
    assert (
        "thermal (SwThermalSlowdown)"
        in case["implementations"]["cuda"]["timing"]["clock_flags"][-1]
    )
    validate(doc, "result", "throttled document")
    # a few flagged samples do not make a case unstable; apply_clocks can run again
    calm = [[1980, 1980, 0x4]] * 5 + [[1980, 1980, 0]] * 25
    for name in ("cuda", "forth"):
        case["implementations"][name]["timing"]["clocks"] = calm
    document_clocks.apply_clocks(case, 1980)
    assert case["clocks"]["unstable"] is False and "notes" not in case
    assert case["implementations"]["forth"]["gap"]["stable"] is True


def test_a_case_below_the_runs_maximum_is_said_not_excluded():
    low = timed_case({"cuda": [[1800, 1800, 0]] * 30, "forth": [[1800, 1800, 0]] * 30})
    high = timed_case({"cuda": [[1980, 1980, 0]] * 30, "forth": [[1980, 1980, 0]] * 30})
    cases = [low["cases"][0], high["cases"][0]]
    run_max = document_clocks.run_max_clock(cases)
    assert run_max == 1980
    document_clocks.apply_clocks(cases[0], run_max)
    assert cases[0]["clocks"]["unstable"] is False and cases[0]["clocks"]["usual_sm_mhz"] == 1800
    assert any("below the run's 1980 MHz" in n for n in cases[0]["notes"])


# -- CUPTI's figures -------------------------------------------------------------------------


def test_cold_is_the_union_and_hot_the_span_per_launch():
    launches = [(1000, 3000), (3500, 5500), (6000, 8000)]  # 2 us kernels, 0.5 us apart
    assert cupti.union_s(launches) == pytest.approx(6e-6)
    assert cupti.span_s(launches) == pytest.approx(7e-6)  # the spacing is kept in hot mode
    assert cupti.union_s([(0, 10), (5, 20)]) == pytest.approx(20e-9)  # overlaps counted once
    assert cupti.span_s([]) == 0.0


@pytest.mark.parametrize(
    ("timer", "mode", "usable", "resolved", "why"),
    [
        ("auto", "cold", True, "cupti", "auto: CUPTI"),
        ("auto", "hot", True, "events", "auto: CUDA events"),
        ("auto", "hot", False, "events", "auto: CUDA events"),
        ("events", "cold", True, "events", "chosen: events in cold mode"),
        ("events", "cold", False, "events", "chosen: events in cold mode"),
        ("events", "hot", False, "events", "chosen: events, asked for"),
        ("cupti", "hot", True, "cupti", "chosen: cupti"),
    ],
)
def test_the_timer_and_why(timer, mode, usable, resolved, why):
    chosen, reason = cupti.choose_timer(timer, mode, None if usable else "not installed")
    assert chosen == resolved and reason.startswith(why)
    if mode == "cold" and chosen == "events":  # what events cost a short cold launch, said
        assert "compresses cold gaps toward 1" in reason


@pytest.mark.parametrize(("timer", "mode"), [("auto", "cold"), ("cupti", "cold"), ("cupti", "hot")])
def test_cold_auto_and_cupti_without_cupti_are_refused_naming_the_fix(timer, mode):
    """Cold mode never falls back to events silently: auto without CUPTI is refused."""
    with pytest.raises(TimerUnavailable) as caught:
        cupti.choose_timer(timer, mode, "cupti-python is not usable: ModuleNotFoundError")
    message = str(caught.value)
    assert "cupti-python is not usable: ModuleNotFoundError" in message
    assert "pip install cupti-python" in message and "harness run --install" in message
    assert "--timer events" in message and 'timer="events"' in message


# -- methods never mix ---------------------------------------------------------------------


def with_timer(document: dict, timer: str) -> dict:
    document = copy.deepcopy(document)
    for case in document["cases"]:
        for impl in case["implementations"].values():
            if "timing" in impl:
                impl["timing"]["timer"] = timer
    return document


def run_doc(k: int, mode: str = "cold") -> dict:
    return make_document(
        {"axpy": {"cuda": samples(1e-3, seed=k), "forth": samples(1.2e-3, seed=100 + k)}},
        mode=mode,
        commit=f"{k:040x}",
        started_utc=f"2026-12-01T10:00:{k:02d}Z",
    )


def points_by_mode(tmp_path, documents) -> dict:
    """Each document validated and stored in a fresh history: the forth series' points by mode."""
    with Store(tmp_path / "h.sqlite") as store:
        for d in documents:
            validate(d, "result", "document")
            assert store.ingest(d, trusted=True).stored
        return {s["mode"]: s["points"] for s in store.list_series("axpy") if s["impl"] == "forth"}


def test_a_timer_is_part_of_the_series_key_and_events_keep_the_old_series(tmp_path):
    events, cuptied = run_doc(0), with_timer(run_doc(1), "cupti")
    case = events["cases"][0]
    assert series_key(events, case, "forth")["mode"] == "cold"
    assert series_key(with_timer(events, "events"), case, "forth")["mode"] == "cold"
    key = series_key(cuptied, cuptied["cases"][0], "forth")
    assert key["mode"] == "cold/cupti"
    assert series_id(key) != series_id(series_key(events, case, "forth"))
    forth = points_by_mode(tmp_path, (events, cuptied, with_timer(run_doc(2), "cupti")))
    assert forth == {"cold": 1, "cold/cupti": 2}


def with_schema(document: dict, version: str) -> dict:
    document = copy.deepcopy(document)
    document["schema_version"] = version
    return document


def test_cold_samples_that_are_means_of_their_batch_start_a_series_of_their_own(tmp_path):
    """Result schema 1.7.0 made a cold sample the mean of `batch` launches: for a short kernel
    another figure than the median of single launches, so it must not continue their series."""
    single, mean = with_schema(run_doc(0), "1.6.0"), with_schema(run_doc(1), "1.7.0")
    case = single["cases"][0]
    assert series_key(single, case, "forth")["mode"] == "cold"
    assert series_key(mean, mean["cases"][0], "forth")["mode"] == "cold-mean"
    cuptied = with_timer(mean, "cupti")
    assert series_key(cuptied, cuptied["cases"][0], "forth")["mode"] == "cold-mean/cupti"
    hot = with_schema(run_doc(2, mode="hot"), "1.7.0")  # hot samples did not change
    assert series_key(hot, hot["cases"][0], "forth")["mode"] == "hot"
    forth = points_by_mode(tmp_path, (single, mean, with_schema(run_doc(3), "1.7.0")))
    assert forth == {"cold": 1, "cold-mean": 2}
    found = compare(single, mean)  # nor is one compared with the other
    assert not found.times and not found.gaps and found.not_compared


def test_two_runs_read_by_different_timers_are_not_compared():
    found = compare(run_doc(0), with_timer(run_doc(1), "cupti"))
    assert not found.times and not found.gaps
    assert found.not_compared and all("mode" in n.reason for n in found.not_compared)
    same = compare(with_timer(run_doc(0), "cupti"), with_timer(run_doc(1), "cupti"))
    assert same.gaps


def test_runner_bench_cupti_spans_start_a_series_apart_from_its_unions(tmp_path):
    """runner.bench's CUPTI figure was the union of a sample's kernels; from result schema 1.8.0
    it is their span (first start to last end), another figure for a call of several kernels,
    so its points never continue the union's series. The PTX runner's CUPTI time was the span
    already and keeps its series."""
    union = with_timer(with_schema(run_doc(0), "1.7.0"), "cupti")
    span = with_timer(with_schema(run_doc(1), "1.8.0"), "cupti")
    for document in (union, span):
        document["options"]["frontend"] = "python"
    for impl in span["cases"][0]["implementations"].values():
        impl["timing"]["cupti_span"] = "first-start-to-last-end"
    assert series_key(union, union["cases"][0], "forth")["mode"] == "cold-mean/cupti"
    assert series_key(span, span["cases"][0], "forth")["mode"] == "cold-mean/cupti-span"
    ptx = with_timer(with_schema(run_doc(2), "1.8.0"), "cupti")
    for impl in ptx["cases"][0]["implementations"].values():
        impl["timing"]["cupti_span"] = "first-start-to-last-end"
    assert series_key(ptx, ptx["cases"][0], "forth")["mode"] == "cold-mean/cupti"
