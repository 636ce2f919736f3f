"""Issue 50's general defences that need no GPU: non-finite values compare by class (class 6),
partial work is a null model a tolerance must refuse (class 3), initcheck runs under --sanitize
by default (class 7, in tests/runner/execution/test_sanitize.py). Each with a cheat of its class
and an honest control; the device's twins run in the *_gpu.py files beside this one."""

from __future__ import annotations

import shutil
import zlib

import numpy as np
import pytest

from runner import bench
from runner.definition import manifest
from runner.measurement.gate import elements, null_models
from runner.measurement.gate.correctness import passing_null_models
from tests.conftest import ROOT
from tests.runner.bench import test_api as test_bench_api

make_session = test_bench_api.make_session  # the fixture: a fresh session on the fake device

LOOSE = elements.Tolerance(rtol=0.5, atol=1.0, exact=False)


# -- class 6: non-finite values -------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_the_largest_finite_value_where_the_reference_is_infinite_fails(dtype):
    """The cheat: FLT_MAX written where the answer is +inf (|FLT_MAX - inf| = inf <= rtol * inf)."""
    big = np.finfo(dtype).max
    want = np.array([np.inf, -np.inf, 1.0, np.nan], dtype)
    for got in ([big, -big, 1.0, np.nan], [np.inf, np.inf, 1.0, np.nan], [np.inf, -np.inf, 1, 0]):
        found = elements.compare(np.array(got, dtype), want, LOOSE)
        assert found["mismatches"] == 1 + (got[0] == big), (got, found)
        assert found["nonfinite_errors"] == found["mismatches"]


def test_honest_non_finite_outputs_pass_and_finite_ones_keep_their_tolerance():
    """The control: the same infinities and NaNs pass, against a float64 reference too, and
    finite values within the tolerance still do."""
    got = np.array([np.inf, -np.inf, np.nan, 1.0, 3e38], np.float32)
    assert elements.compare(got, got.copy(), LOOSE)["mismatches"] == 0
    wide = np.array([np.inf, -np.inf, np.nan, 1.4, 2.9e38], np.float64)
    assert elements.compare(got, wide, LOOSE)["mismatches"] == 0


# -- class 3: partial work ------------------------------------------------------------------------


def test_a_suite_tolerance_that_admits_half_the_work_is_refused_with_its_figure(tmp_path):
    shutil.copytree(
        ROOT / "benchmarks", tmp_path / "s", ignore=shutil.ignore_patterns("perf", "ops")
    )
    cases = tmp_path / "s" / "cases.toml"
    text = cases.read_text()
    start = text.index('id = "reduce_sum_f64"')
    head, tail = text[:start], text[start:]
    tail = tail.replace(
        "tolerance = { rtol = 1e-13, atol = 1e-13 }", "tolerance = { rtol = 0.5, atol = 1e-13 }", 1
    )
    tail = tail.replace(
        'dist = "uniform", low = -1.0, high = 1.0', 'dist = "uniform", low = 0.0, high = 1.0', 1
    )
    cases.write_text(head + tail)
    suite = manifest.load(cases)
    admitted = passing_null_models(suite, suite.case("reduce_sum_f64"))
    partial = [a for a in admitted if a.startswith("partial work")]
    assert partial and "every second element of x, doubled" in partial[0], admitted
    assert "(max relative error 0." in partial[0] and "0.5 * |ref|" in partial[0], partial


class RowSums(bench.Workload):
    """Sums of rows whose scales differ (1 to 100): a constant is far off, half the work is not."""

    name = "row_sums"
    rows = (bench.Row("rows", n=64),)
    dtypes = ("float64",)

    def __init__(self, verification):
        self.verification = verification

    def gen_inputs(self, params, dtype, seed):
        rng = np.random.default_rng(seed)
        scale = np.linspace(1.0, 100.0, params["n"])[:, None]
        return ((scale * rng.uniform(0.5, 1.5, (params["n"], 256))).astype(dtype),)

    def reference(self, x):
        return x.sum(axis=1)


def row_sums(x):
    return x.sum(axis=1)


def test_a_python_tolerance_that_admits_half_the_work_is_refused(make_session):
    make_session()
    loose = bench.Exact(rtol=0.2, atol=0.0)
    with pytest.raises(bench.DeclarationError, match="partial work") as failure:
        bench.Runner(row_sums, bench.cases(RowSums(loose))[0]).compare()
    assert "every second element of input 0" in str(failure.value)
    assert "a constant" not in str(failure.value) and "all zeros" not in str(failure.value)


def test_a_tolerance_tight_enough_for_an_honest_sum_is_kept(make_session):
    make_session()
    tight = bench.Exact(rtol=1e-9, atol=1e-9)
    assert bench.Runner(row_sums, bench.cases(RowSums(tight))[0]).compare().timed


def test_partial_work_models_leave_integers_and_scalars_alone():
    found = null_models.partial_models(
        [np.arange(8), 3.0, np.ones(8, np.float32)], ["i", "s", "f"], lambda changed: changed
    )
    assert list(found) == [null_models.PARTIAL.format(input="f")]
    assert found[null_models.PARTIAL.format(input="f")][2].tolist() == [2, 0] * 4


# -- class 8: the Python front end ------------------------------------------------------------------


def test_an_answer_kept_in_a_private_argument_and_returned_is_refused(make_session):
    """8a, the cheat: the answer computed once and handed back as the call's output (the replay
    and reset checks leave outputs that are arguments unpoisoned)."""
    make_session()
    case = bench.cases(test_bench_api.Scale())[0]
    kept = case.inputs[0] * 2
    cheat = bench.Implementation(run=lambda answer: answer, args=(kept,))
    with pytest.raises(bench.DeclarationError, match="a private argument that the call did not"):
        bench.Runner(test_bench_api.double, case).compare({"kept": cheat})


def test_an_in_place_op_that_writes_its_private_copy_passes(make_session):
    """8a, the control: an in-place op returns its argument, written by the call and restored
    by its reset."""
    make_session()
    case = bench.cases(test_bench_api.Scale())[0]
    private = case.inputs[0].copy()
    op = bench.Implementation(
        run=lambda y: np.multiply(y, 2, out=y),
        args=(private,),
        reset=lambda: np.copyto(private, case.inputs[0]),
    )
    assert bench.Runner(test_bench_api.double, case).compare({"in place": op})["in place"].verified


def test_recheck_off_is_said_in_every_row_and_its_text(make_session):
    """8b: recheck=False cannot be silent: each row's integrity block says it is off and why,
    and its verification text says it was checked once."""
    make_session(options=bench.TimingOptions(budget_s=0.03, timer="events", recheck=False))
    case = bench.cases(test_bench_api.Scale())[0]
    c = bench.Runner(test_bench_api.double, case).compare({"same": test_bench_api.double})
    for entry in c.document_case["implementations"].values():
        block = entry["integrity"]["recheck"]
        assert (
            block["mode"] == "off" and not block["verified"] and "not ruled out" in block["reason"]
        )
        assert entry["verification"]["text"].endswith("recheck off: checked once, on these inputs")


# -- item 9: what a cold callable sample held ----------------------------------------------------------


def test_a_cold_samples_kernel_count_and_summed_gap_come_from_its_records():
    """Two kernels 40 us apart (host dispatch between eager launches) and a copy left out: two
    kernels, 40 us of gap; a graph replay's back-to-back kernels leave none."""
    from runner.bench import integrity, watch

    timer = watch.KernelSpanTimer(include_copies=False)
    eager = [(0, 10_000, "k1", 7), (50_000, 60_000, "k2", 7), (60_000, 70_000, "memcpy DtoD", 7)]
    graph = [(0, 10_000, "k1", 7), (10_500, 20_500, "k2", 7)]
    assert timer.shape(eager) == (2, pytest.approx(40e-6))
    assert timer.shape(graph) == (2, pytest.approx(0.5e-6))
    block = integrity.cold_sample([timer.shape(eager), timer.shape(graph), timer.shape(graph)])
    assert block == {"kernels": 2, "gap_s": pytest.approx(0.5e-6), "samples": 3}


# -- class 2: inputs drawn per run ------------------------------------------------------------------


def test_every_buffer_seed_is_mixed_with_the_runs_and_the_same_seed_replays_it():
    from runner.gpu import generator
    from runner.measurement.gate.correctness import host_inputs

    suite = manifest.load(ROOT / "benchmarks" / "cases.toml")
    case = suite.case("axpy_f64")
    geometry = case.geometry(case.check_dims)
    first, second = generator.draw_input_seed(), generator.draw_input_seed()
    assert first != second and 0 <= first < 2**53
    runs = [generator.reseeded(case, s) for s in (first, second, first)]
    declared = host_inputs(case, geometry)
    drawn = [host_inputs(r, geometry) for r in runs]
    for name, x in declared.items():
        assert not np.array_equal(drawn[0][name], x)  # not what the suite's files determine
        assert not np.array_equal(drawn[0][name], drawn[1][name])  # nor what another run saw
        assert np.array_equal(drawn[0][name], drawn[2][name])  # the recorded seed replays it
    assert generator.reseeded(case, None) is case
    assert [b.name for b in runs[0].buffers] == [b.name for b in case.buffers]


def test_the_run_seed_is_drawn_once_and_recorded_in_the_options_and_each_workers_job():
    from runner.execution import suite as suite_run

    path = ROOT / "benchmarks" / "cases.toml"
    _, _, _, _, drawn, _ = suite_run._load_inputs(path, suite_run.BenchOptions())
    _, _, _, _, given, _ = suite_run._load_inputs(path, suite_run.BenchOptions(input_seed=7))
    assert isinstance(drawn.input_seed, int) and given.input_seed == 7
    block = suite_run._options_block([], given, "sm_90", {0: {}})
    assert block["input_seed"] == 7
    suite = manifest.load(path)
    job = suite_run._worker_job(suite, suite.cases[0], {}, {}, given, None, {"implementations": {}})
    assert job["input_seed"] == 7


def test_a_python_case_seed_mixes_the_process_input_seed_recorded_in_its_settings(make_session):
    from runner.bench import workload

    make_session()
    case = bench.cases(test_bench_api.Scale())[0]
    c = bench.Runner(test_bench_api.double, case).compare()
    assert c.document_case["settings"]["input_seed"] == workload.INPUT_SEED
    fixed = zlib.crc32(f"{case.workload.name}/{case.id}".encode()) ^ case.workload.seed
    assert case.seed == (fixed ^ workload.INPUT_SEED) & 0xFFFFFFFF


@pytest.mark.parametrize(
    ("owner", "name"),
    [("arrays", "compare"), ("elements", "compare"), ("numpy", "isnan"), ("code", None)],
)
def test_a_callable_that_patches_the_comparison_is_refused(make_session, monkeypatch, owner, name):
    """8c, the cheat: a call that makes the comparison pass whatever it returns (a module's
    function replaced, numpy's, or the code inside one) before it is compared."""
    from runner.measurement.gate import arrays

    make_session()
    case = bench.cases(test_bench_api.Scale())[0]
    target = {"arrays": arrays, "elements": elements, "numpy": np}.get(owner)

    def patching(x):
        if owner == "code":
            monkeypatch.setattr(elements.compare, "__code__", (lambda *a: None).__code__)
        else:
            monkeypatch.setattr(target, name, lambda *a, **k: None)
        return x * 0

    with pytest.raises(bench.DeclarationError, match="changed the comparison that checks it"):
        bench.Runner(test_bench_api.double, case).compare({"patching": patching})


def test_the_document_says_where_the_comparison_ran(make_session):
    make_session()
    case = bench.cases(test_bench_api.Scale())[0]
    c = bench.Runner(test_bench_api.double, case).compare()
    text = c.document_case["implementations"]["double"]["integrity"]["comparison"]
    assert text.startswith("in process;") and "checked unchanged before every comparison" in text


# -- the PTX cheats of tests/cheats/third_pass.toml, emulated on the fake device ----------------------


def test_the_largest_finite_value_for_an_infinity_is_refused_by_the_gate(monkeypatch):
    """Class 6 through the real gate (tests/cheats/third_pass.toml's inf_as_max, emulated): the
    edges input set overflows a * x; the cheat writes FLT_MAX there, the honest kernel inf."""
    from runner.definition.reference import load_reference
    from tests.support.fake_gate_device import run_gate

    suite = manifest.load(ROOT / "tests" / "cheats" / "third_pass.toml")
    case = suite.case("inf_as_max")

    def honest(m):
        with np.errstate(over="ignore"):
            m["out"][:] = np.float32(m.scalar("a")) * m["x"]

    def cheat(m):
        honest(m)
        big = np.finfo(np.float32).max
        m["out"][:] = np.where(np.isinf(m["out"]), np.copysign(big, m["out"]), m["out"])

    reference = load_reference(suite, case)
    assert run_gate(case, reference, honest, monkeypatch=monkeypatch)["status"] == "passed"
    record = run_gate(case, reference, cheat, monkeypatch=monkeypatch)
    assert record["status"] == "failed" and record["inputs_passed"] == ["declared"], record
    assert any("inf" in p for p in record["problems"]), record["problems"]


def test_the_third_pass_suite_has_teeth_and_builds_on_the_cpu():
    """tests/cheats/third_pass.toml: no null model passes any case (the cheats are refused for
    what they do, not for a loose tolerance)."""
    suite = manifest.load(ROOT / "tests" / "cheats" / "third_pass.toml")
    assert [c.id for c in suite.cases] == [
        "timed_size_drift",
        "globaltimer_honest",
        "inf_as_max",
        "cadence",
        "shared_uninit",
        "heap_uninit",
        "nan_left_unwritten",
    ]
    assert all(passing_null_models(suite, case) == [] for case in suite.cases)


def test_the_honest_controls_suite_has_teeth():
    """tests/cheats/honest_third.toml (issue 50's honest controls): no null model passes any
    case, fast math's loose-looking tolerance included (the controls pass for what they compute)."""
    suite = manifest.load(ROOT / "tests" / "cheats" / "honest_third.toml")
    assert [c.id for c in suite.cases] == [
        "fast_math",
        "tiled_vs_naive",
        "cg_dynamic_shared",
        "l2_resident_faster",
        "in_place_near_l2",
    ]
    assert all(passing_null_models(suite, case) == [] for case in suite.cases)
