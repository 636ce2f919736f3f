"""runner.bench on the CPU: ordering, checks, verification kinds, copies, cases and the document.

Every test runs on tests/support/fake_callable_device.FakeCallableDevice (numpy callables, programmed
times, every backend call recorded) in a fresh bench session, so no GPU is needed.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.history.series import KEY_FIELDS, series_key
from protocol.validation import validate
from runner import bench
from runner.bench import integrity
from runner.bench.report import markdown
from runner.measurement import stats
from runner.measurement.timing import cold as cold_timing
from runner.measurement.timing import round_order
from tests.support.fake_callable_device import FakeCallableDevice

# -- workloads ------------------------------------------------------------------------------


class Matmul(bench.Workload):
    """a @ b on small square matrices; two rows (one smoke), two dtypes."""

    name = "mm"
    rows = (bench.Row("tiny", n=8, tier="smoke"), bench.Row("small", n=16))
    dtypes = ("float32", "float64")

    def __init__(self, verification=None):
        if verification is not None:
            self.verification = verification
        self.gen_calls = 0
        self.reference_calls = 0

    def gen_inputs(self, params, dtype, seed):
        self.gen_calls += 1
        rng = np.random.default_rng(seed)
        n = params["n"]
        return (
            rng.standard_normal((n, n)).astype(dtype),
            rng.standard_normal((n, n)).astype(dtype),
        )

    def reference(self, a, b):
        self.reference_calls += 1
        return (a.astype(np.float64) @ b.astype(np.float64)).astype(a.dtype)

    def flops(self, params, dtype):
        return 2 * params["n"] ** 3

    def bytes(self, params, dtype):
        return 3 * params["n"] ** 2 * np.dtype(dtype).itemsize


class _Vector(bench.Workload):
    """One random vector of n elements in; `verification` may be given per instance."""

    def __init__(self, verification=None):
        if verification is not None:
            self.verification = verification

    def gen_inputs(self, params, dtype, seed):
        return (np.random.default_rng(seed).standard_normal(params["n"]).astype(dtype),)


class Scale(_Vector):
    """2 * x: the smallest workload an in-place implementation can get wrong."""

    name = "scale"
    rows = (bench.Row("vec", n=64),)
    dtypes = ("float64",)

    def reference(self, x):
        return x * 2


class ThreeOutputs(_Vector):
    """(x + 1, x * 2, x - 3): for declarations that check only some outputs."""

    name = "three"
    rows = (bench.Row("vec", n=32),)
    dtypes = ("float32",)

    def reference(self, x):
        return x + 1, x * 2, x - 3


def double(x):
    return x * 2


def three(x):
    return x + 1, x * 2, x - 3


# -- fixtures and helpers --------------------------------------------------------------------

# the minimum of 30 samples per implementation; cold by events, chosen explicitly, as the
# stand-in device has no CUPTI (timer "auto" refuses cold mode without it)
FAST = bench.TimingOptions(budget_s=0.03, timer="events")


@pytest.fixture
def make_session():
    """make_session(options=..., **FakeCallableDevice arguments) -> (session, device), fresh."""

    def make(options=FAST, **device_kwargs):
        device = FakeCallableDevice(**device_kwargs)
        return bench.reset(bench.Session(device=device, options=options)), device

    yield make
    bench.reset()


@pytest.fixture
def session(make_session):
    return make_session()


def only_case(workload, index=0, **kwargs):
    return bench.cases(workload, **kwargs)[index]


def timed_names(calls, kind):
    return [c[1] for c in calls if c[0] == kind]


def doc_batch(comparison, name) -> int:
    """Launches per sample of `name` (cold: the mean of that many launches)."""
    return comparison.document_case["implementations"][name]["timing"]["batch"]


# -- 1. ordering and sample counts -------------------------------------------------------------


def test_cold_timing_runs_paired_rounds_in_the_ptx_engines_round_order(make_session):
    _, device = make_session(per_call_s={"matmul": 3e-5, "B": 2e-5, "C": 1e-5})
    case = only_case(Matmul())
    comparison = bench.Runner(np.matmul, case).compare({"B": np.dot, "C": lambda a, b: a @ b})

    samples = {name: row.samples for name, row in comparison.rows.items()}
    assert samples == {"matmul": 30, "B": 30, "C": 30}
    timed = timed_names(device.backends[-1].calls, "timed_cold")
    # one probe launch each; then every sample is the mean of the batch the fastest (C, 10 us)
    # needs, for every implementation alike
    batches = {e["timing"]["batch"] for e in comparison.document_case["implementations"].values()}
    assert batches == {cold_timing.launches_for(1e-5)} == {8}
    sides = ["matmul", "B", "C", "matmul~aa"]  # the op's hidden A/A control: one more side
    orders = [round_order(sides, r) for r in range(30)]
    sampled = [n for order in orders for n in order]
    probes = [n for n in sides for _ in range(integrity.COLD_PROBES)]
    assert timed == probes + [n for n in sampled for _ in range(8)]
    assert comparison.document_case["round_orders"] == orders
    assert comparison.document_case["settings"]["schedule"] == "rounds"
    assert comparison.rows["B"].median_s == pytest.approx(2e-5)


def test_hot_timing_replays_batches_in_paired_rounds_after_calibration(make_session):
    options = bench.TimingOptions(mode="hot", budget_s=0.03)
    _, device = make_session(options=options, per_call_s={"matmul": 1e-5, "B": 2e-5, "C": 1e-5})
    case = only_case(Matmul())
    comparison = bench.Runner(np.matmul, case).compare({"B": np.dot, "C": lambda a, b: a @ b})

    n = comparison.rows["matmul"].samples
    assert n == 30 and comparison.rows["B"].samples == n and comparison.rows["C"].samples == n
    batches = [c for c in device.backends[-1].calls if c[0] == "timed_batch"]
    sides = ["matmul", "B", "C", "matmul~aa"]  # the op's hidden A/A control: one more side
    sampled, calibration = batches[-4 * n :], batches[: -4 * n]
    orders = [round_order(sides, r) for r in range(n)]
    assert [c[1] for c in sampled] == [name for order in orders for name in order]
    # Calibration (and the untimed warm replay) runs per implementation before any sample; then
    # the rows within a factor of 2 share the smallest batch (runner.measurement.timing.hot.SharedBatchHot), whose
    # graphs matmul and C warm untimed
    calibrated = [c[1] for c in calibration]
    warmed = ["matmul", "C", "matmul~aa"]
    assert calibrated[-3:] == warmed and all(c[2] == 500 for c in calibration[-3:])
    calibrated = calibrated[:-3]
    assert calibrated == sorted(calibrated, key=sides.index)
    assert set(calibrated) == set(sides)
    doc_batches = {
        name: entry["timing"]["batch"]
        for name, entry in comparison.document_case["implementations"].items()
    }
    assert doc_batches == {"matmul": 500, "B": 500, "C": 500}
    assert all(c[2] == doc_batches[c[1].removesuffix("~aa")] for c in sampled)
    assert comparison.document_case["round_orders"] == orders
    # hot gaps of torch graphs add what the graph instances leave (1.2 ns a call over 10 us)
    gap = comparison.document_case["implementations"]["B"]["gap"]
    assert gap["systematic"] == pytest.approx(math.hypot(3e-4, 1.2e-9 / 1e-5))


@pytest.mark.parametrize(
    ("budget_s", "sample_wall_s", "min_samples", "max_samples", "expected"),
    [
        (0.2, 1e-3, 30, 1000, 66),  # budget / (2 implementations and the A/A control x 1 ms)
        (0.01, 1e-3, 30, 1000, 30),  # raised to min_samples
        (10.0, 1e-3, 30, 60, 60),  # capped at max_samples
        (0.25, 1e-3, 30, 1000, 82),  # 83 rounded down to an even count (whole AB/BA pairs)
        (0.2, 4e-3, 10, 1000, 16),  # 16.7, even
    ],
)
def test_cold_sample_count_follows_the_budget_within_the_limits(
    make_session, budget_s, sample_wall_s, min_samples, max_samples, expected
):
    options = bench.TimingOptions(
        budget_s=budget_s, min_samples=min_samples, max_samples=max_samples, timer="events"
    )
    # calls of 0.1 ms: one launch per cold sample, so a sample lasts the stated wall time
    _, device = make_session(options=options, sample_wall_s=sample_wall_s, default_s=1e-4)
    comparison = bench.Runner(np.matmul, only_case(Matmul())).compare({"B": np.dot})
    assert comparison.rows["matmul"].samples == expected
    assert comparison.rows["B"].samples == expected
    timed = timed_names(device.backends[-1].calls, "timed_cold")
    assert len(timed) == 3 * integrity.COLD_PROBES + 3 * expected  # with the A/A control


def test_cold_gaps_of_rows_launched_from_graphs_add_the_graph_node_term(make_session):
    """Cold, a row whose copies are left out replays its graph (disabled copies); one without
    copies is launched as itself and adds no graph term."""
    _, _ = make_session(per_call_s={"matmul": 1e-4, "B": 1e-4, "C": 1e-4}, copy_s={"B": 1e-5})
    comparison = bench.Runner(np.matmul, only_case(Matmul())).compare({"B": np.dot, "C": np.dot})
    impls = comparison.document_case["implementations"]
    assert impls["B"]["copies"]["per_call"] == 1 and not impls["B"]["copies"]["counted"]
    assert impls["B"]["gap"]["systematic"] == pytest.approx(
        stats.systematic("cold", 1e-4, stats.COLD_GRAPH_NODE_S)
    )
    assert impls["C"]["gap"]["systematic"] == pytest.approx(stats.systematic("cold", 1e-4))


def test_the_cold_budget_counts_every_launch_of_a_sample(make_session):
    """Calls of 2 us are averaged 16 to a sample (20 us in whole periods of 8 launches):
    3.2 s / (2 implementations and the A/A control x 16 x 1 ms), 66."""
    options = bench.TimingOptions(budget_s=3.2, timer="events")
    _, device = make_session(options=options, sample_wall_s=1e-3, default_s=2e-6)
    comparison = bench.Runner(np.matmul, only_case(Matmul())).compare({"B": np.dot})
    assert {r.samples for r in comparison.rows.values()} == {66}
    timed = timed_names(device.backends[-1].calls, "timed_cold")
    assert len(timed) == 3 * integrity.COLD_PROBES + 3 * 66 * 16
    timing = comparison.document_case["implementations"]["B"]["timing"]
    assert timing["batch"] == 16 and timing["samples_s"] == pytest.approx([2e-6] * 66)
    assert timing["calibration_s"] > 0  # the probes that chose the batch


# -- 2. names ------------------------------------------------------------------------------------


def test_the_op_name_is_reserved(session):
    case = only_case(Matmul())
    with pytest.raises(bench.DeclarationError, match=r"'matmul' is reserved"):
        bench.Runner(np.matmul, case).compare({"matmul": np.dot})
    with pytest.raises(bench.DeclarationError, match=r"'mine' is reserved"):
        bench.Runner(np.matmul, case, name="mine").compare({"mine": np.dot})
    assert not session[1].backends


def test_a_single_implementation_is_reported_as_baseline(session):
    comparison = bench.Runner(np.matmul, only_case(Matmul())).compare(np.dot)
    assert list(comparison.rows) == ["matmul", "baseline"]
    assert comparison.rows["matmul"].role == "op"
    assert comparison.rows["baseline"].role == "implementation"
    assert comparison.rows["baseline"].check_status == "passed"


# -- 3. and 4. shared inputs and the reset contract ----------------------------------------------


def test_an_implementation_writing_the_shared_inputs_is_refused_before_timing(session):
    _, device = session
    case = only_case(Scale())
    spoiled = case.inputs[0]
    fresh = only_case(Scale()).inputs[0]

    with pytest.raises(bench.InputsModified, match=r"'in place' wrote case.inputs\[0\]"):
        bench.Runner(double, case).compare({"in place": lambda x: np.multiply(x, 2, out=x)})

    assert not device.backends  # no backend, so not a single timed call
    assert not np.array_equal(spoiled, fresh)  # the implementation did write it
    assert case.inputs[0] is not spoiled
    assert case.inputs[0].tobytes() == fresh.tobytes()


def test_a_private_copy_restored_by_reset_passes_and_reset_precedes_every_flush(session):
    _, device = session
    case = only_case(Scale())
    log = []
    private = case.inputs[0].copy()

    def restore():
        log.append("reset")
        np.copyto(private, case.inputs[0])

    def double_in_place(x):
        log.append("call")
        np.multiply(x, 2, out=x)
        return x

    impl = bench.Implementation(run=double_in_place, args=(private,), reset=restore)
    comparison = bench.Runner(double, case).compare({"in place": impl})

    row = comparison.rows["in place"]
    assert row.check_status == "passed" and row.verified
    assert row.median_s is not None and row.samples == 30
    assert log[:2] == ["reset", "call"]  # the checked call starts from restored data
    assert all(log[i - 1] == "reset" for i, entry in enumerate(log) if entry == "call")
    calls = device.backends[-1].calls
    flushes = [i for i, c in enumerate(calls) if c == ("flush",)]
    batch = doc_batch(comparison, "in place")
    # probes, then samples, of both rows and the A/A control
    assert len(flushes) == 3 * integrity.COLD_PROBES + 3 * 30 * batch
    for i in flushes:
        assert calls[i + 1][0] == "timed_cold"
        assert calls[i - 1] == ("reset", calls[i + 1][1])
    assert calls.count(("reset", "in place")) >= 30
    assert case.inputs[0].tobytes() == only_case(Scale()).inputs[0].tobytes()


# -- 5. verification kinds -----------------------------------------------------------------------


def test_exact_with_default_tolerances_names_them_and_gives_a_ratio(make_session):
    make_session(per_call_s={"matmul": 2e-5, "np.dot": 1e-5})
    comparison = bench.Runner(np.matmul, only_case(Matmul())).compare({"np.dot": np.dot})
    op, other = comparison.rows["matmul"], comparison.rows["np.dot"]
    assert op.verification == "exact: every output, rtol=1e-05, atol=3.8147e-06"
    assert other.verification == op.verification
    assert op.ratio == 1.0
    assert other.ratio == pytest.approx(other.median_s / op.median_s)
    assert other.ratio == pytest.approx(0.5)
    gap = comparison.document_case["implementations"]["np.dot"]["gap"]
    assert gap["ratio_of_medians"] == pytest.approx(0.5)


def test_exact_default_tolerance_is_per_output_dtype(session):
    case = only_case(Matmul(), 1)  # tiny-float64: rtol 1e-12, atol 32 f64 ulps at 1
    assert case.id == "tiny-float64"
    within = bench.Runner(np.matmul, case).compare({"near": lambda a, b: (a @ b) * (1 + 1e-13)})
    assert within.rows["near"].verification == "exact: every output, rtol=1e-12, atol=7.10543e-15"
    with pytest.raises(bench.CheckFailed, match=r"far: output 0: 64 of 64 elements outside"):
        bench.Runner(np.matmul, case).compare({"far": lambda a, b: a @ b + 1e-9})
    # an absolute error the old atol (= rtol, 1e-12) let through everywhere: now the values
    # below about 0.5 in magnitude (8 of these 64) are judged on their own scale
    with pytest.raises(bench.CheckFailed, match=r"off: output 0: [1-9]\d* of 64 elements outside"):
        bench.Runner(np.matmul, case).compare({"off": lambda a, b: a @ b + 5e-13})


def test_exact_with_explicit_tolerances(session):
    # so loose that an f16 computation passes: a declared control stands in for the null models
    loose = bench.Exact(rtol=0, atol=0.5, controls=(bench.zeroed_input(0),))
    case = only_case(Matmul(loose))
    comparison = bench.Runner(np.matmul, case).compare({"off by 0.4": lambda a, b: a @ b + 0.4})
    assert comparison.rows["off by 0.4"].verification == "exact: every output, rtol=0, atol=0.5"
    assert comparison.rows["off by 0.4"].ratio is not None
    with pytest.raises(bench.CheckFailed, match=r"off by 0\.6"):
        bench.Runner(np.matmul, case).compare({"off by 0.6": lambda a, b: a @ b + 0.6})
    bit_exact = only_case(Scale(bench.Exact(rtol=0, atol=0)))
    comparison = bench.Runner(double, bit_exact).compare({"x + x": lambda x: x + x})
    assert comparison.rows["x + x"].verification == "exact: every output, bit-exact"


def test_a_wrong_output_fails_the_check_times_nothing_and_is_recorded(session):
    s, device = session
    case = only_case(Matmul())
    with pytest.raises(bench.CheckFailed) as failure:
        bench.Runner(np.matmul, case).compare({"np.dot": np.dot, "wrong": lambda a, b: a @ b + 1})
    message = str(failure.value)
    assert "case tiny-float32: 1 implementation(s) failed" in message
    assert "wrong: output 0:" in message and "nothing was timed" in message
    assert "np.dot:" not in message
    assert not device.backends

    assert len(s.cases) == 1
    recorded = s.cases[0]
    assert recorded["status"] == "failed"
    assert recorded["error"]["phase"] == "check" and "wrong" in recorded["error"]["message"]
    assert recorded["implementations"]["wrong"]["check"]["status"] == "failed"
    assert recorded["implementations"]["np.dot"]["check"]["status"] == "passed"
    assert all("timing" not in entry for entry in recorded["implementations"].values())
    doc = s.document()
    validate(doc, "result")
    assert doc["summary"]["failed"] == 1
    assert "FAILED" in markdown(doc)


def test_partial_checks_only_the_leading_outputs_and_names_the_others(session):
    case = only_case(ThreeOutputs(bench.Partial(1, "outputs 1 and 2 are scratch space")))
    comparison = bench.Runner(three, case).compare(
        {"scratch differs": lambda x: (x + 1, x * 0, x * 0)}
    )
    row = comparison.rows["scratch differs"]
    assert row.check_status == "passed" and row.ratio is not None
    assert row.verification == (
        "partial: output 0 checked (rtol=1e-05, atol=3.8147e-06); outputs 1-2 not checked: "
        "outputs 1 and 2 are scratch space"
    )
    with pytest.raises(bench.CheckFailed, match="first wrong: output 0"):
        bench.Runner(three, case).compare({"first wrong": lambda x: (x + 2, x * 2, x - 3)})

    two = only_case(ThreeOutputs(bench.Partial(2, "output 2 is scratch")))
    text = bench.Runner(three, two).compare().rows["three"].verification
    assert text == (
        "partial: outputs 0-1 checked (rtol=1e-05, atol=3.8147e-06); output 2 not checked: "
        "output 2 is scratch"
    )


def _same_values(outputs, expected) -> bool:
    return bool(np.array_equal(np.sort(outputs[0]), np.sort(expected[0])))


def accept_all(outputs, expected):
    """Passes (None) any permutation of the expected output; says why otherwise."""
    return None if _same_values(outputs, expected) else "not a permutation of the result"


def accept_true(outputs, expected):
    return _same_values(outputs, expected)


def reject_false(outputs, expected):
    return False


def reject_text(outputs, expected):
    return "the sum is off by 3"


def reject_raising(outputs, expected):
    raise ValueError("cannot compare the permutation")


@pytest.mark.parametrize("validator", [accept_all, accept_true])
def test_custom_validator_returning_none_or_true_passes(session, validator):
    case = only_case(Scale(bench.Custom(validator, "any permutation of the result is right")))
    comparison = bench.Runner(double, case).compare({"other": lambda x: x + x})
    row = comparison.rows["other"]
    assert row.check_status == "passed" and row.verified and row.ratio is not None
    assert row.verification == (
        f"custom: {validator.__qualname__}: any permutation of the result is right"
    )


@pytest.mark.parametrize(
    ("validator", "reason"),
    [
        (reject_false, "the validator returned False"),
        (reject_text, "the sum is off by 3"),
        (reject_raising, "ValueError: cannot compare the permutation"),
    ],
)
def test_custom_validator_returning_false_text_or_raising_fails_with_the_reason(
    session, validator, reason
):
    case = only_case(Scale(bench.Custom(validator, "order does not matter")))
    with pytest.raises(bench.CheckFailed, match=f"double: {reason}") as failure:
        bench.Runner(double, case).compare({"other": lambda x: x + x})
    assert f"other: {reason}" in str(failure.value)
    assert not session[1].backends


UNCHECKED = [
    (
        bench.Unestablished("no agreed reference for this op yet"),
        "unverified: no reference established: no agreed reference for this op yet",
    ),
    (
        bench.ReferenceInfeasible("a float128 reference", "numpy lacks float128 here"),
        "unverified: reference infeasible, missing a float128 reference: numpy lacks float128 here",
    ),
    (
        bench.Noncomparable("the implementations round differently by design"),
        "unverified: noncomparable: the implementations round differently by design",
    ),
]


@pytest.mark.parametrize(("declaration", "text"), UNCHECKED, ids=lambda v: getattr(v, "kind", ""))
def test_unchecked_kinds_time_every_row_without_a_check_or_a_ratio(session, declaration, text):
    case = only_case(Scale(declaration))
    comparison = bench.Runner(double, case).compare({"wrong": lambda x: x * 3})
    assert comparison.timed
    for name, row in comparison.rows.items():
        assert row.verification == text
        assert not row.verified and row.check_status == "not_checked"
        assert row.ratio is None, name
        assert row.median_s is not None and row.samples == 30
    entry = comparison.document_case["implementations"]["wrong"]
    assert entry["gap"] is None and entry["gap_note"] == f"no ratio: {text}"
    assert entry["verification"]["kind"] == declaration.kind


@pytest.mark.parametrize(
    "declare",
    [
        lambda: bench.Partial(1, ""),
        lambda: bench.Custom(accept_all, "   "),
        lambda: bench.Unestablished(""),
        lambda: bench.ReferenceInfeasible("", "numpy lacks it"),
        lambda: bench.ReferenceInfeasible("a float128 reference", ""),
        lambda: bench.Noncomparable(""),
        lambda: bench.Noncomparable(None),
    ],
)
def test_empty_reasons_are_declaration_errors(declare):
    with pytest.raises(bench.DeclarationError, match="needs a reason"):
        declare()


def test_malformed_declarations_are_declaration_errors():
    with pytest.raises(bench.DeclarationError, match=r"Exact.rtol must be a number >= 0"):
        bench.Exact(rtol=-1)
    with pytest.raises(bench.DeclarationError, match=r"Partial.outputs must be an int >= 1"):
        bench.Partial(0, "reason")
    with pytest.raises(bench.DeclarationError, match=r"Custom.validator must be callable"):
        bench.Custom("not callable", "reason")
    with pytest.raises(bench.DeclarationError, match=r"Exact.controls takes bench.Control"):
        bench.Exact(controls=("input 0 zeroed",))


@pytest.mark.parametrize(
    "declare",
    [
        lambda: bench.Partial(1, "scratch", controls=("input 0 zeroed",)),
        lambda: bench.Custom(accept_all, "any order", controls=("input 0 zeroed",)),
    ],
)
def test_partial_and_custom_controls_must_be_controls(declare):
    with pytest.raises(bench.DeclarationError, match=r"controls takes bench\.Control"):
        declare()


def test_reference_infeasible_never_runs_the_reference(session):
    class NoReference(bench.Workload):
        name = "noref"
        rows = (bench.Row("vec", n=8),)
        verification = bench.ReferenceInfeasible("a float128 reference", "numpy lacks float128")

        def gen_inputs(self, params, dtype, seed):
            return (np.arange(params["n"], dtype=dtype),)

        # no reference(): the declaration says it cannot be computed

    comparison = bench.Runner(np.negative, only_case(NoReference())).compare({"b": np.negative})
    assert comparison.rows["b"].ratio is None


# -- 6. negative controls -------------------------------------------------------------------------


def test_a_zeroed_input_control_passes_a_sound_declaration(session):
    case = only_case(Matmul(bench.Exact(controls=(bench.zeroed_input(0),))))
    comparison = bench.Runner(np.matmul, case).compare({"np.dot": np.dot})
    assert comparison.rows["np.dot"].verified and comparison.timed


def test_a_declaration_the_control_passes_is_a_declaration_error(session):
    case = only_case(Matmul(bench.Exact(rtol=1e9, atol=1e9, controls=(bench.zeroed_input(0),))))
    with pytest.raises(bench.DeclarationError, match=r"negative control 'input 0 zeroed' passed"):
        bench.Runner(np.matmul, case).compare({"np.dot": np.dot})
    assert not session[1].backends


def test_a_control_naming_a_missing_input_is_a_declaration_error(session):
    case = only_case(Matmul(bench.Exact(controls=(bench.zeroed_input(2),))))
    with pytest.raises(bench.DeclarationError, match=r"'input 2 zeroed': the case has 2 inputs"):
        bench.Runner(np.matmul, case).compare()


# -- 7. copy policy --------------------------------------------------------------------------------


@pytest.mark.parametrize("count_copies", [True, False])
def test_the_case_copy_policy_decides_whether_copies_are_timed(make_session, count_copies):
    make_session(per_call_s={"matmul": 1e-5, "B": 1e-5}, copy_s={"B": 4e-6})
    case = only_case(Matmul(), count_copies=count_copies)
    assert case.count_copies is count_copies
    comparison = bench.Runner(np.matmul, case).compare({"B": np.dot})
    doc = comparison.document_case
    assert doc["settings"]["count_copies"] is count_copies
    # the two policies time different things, so they never share a case id (a history series)
    assert doc["id"] == "mm/tiny-float32/matmul" + ("/copies-counted" if count_copies else "")
    for entry in doc["implementations"].values():
        assert entry["copies"]["counted"] is count_copies
    expected_b = 1.4e-5 if count_copies else 1e-5
    assert comparison.rows["B"].median_s == pytest.approx(expected_b)
    assert comparison.rows["matmul"].median_s == pytest.approx(1e-5)


def test_copies_are_a_case_policy_not_an_implementation_option():
    with pytest.raises(TypeError, match="count_copies"):
        bench.Implementation(run=np.dot, count_copies=True)
    with pytest.raises(bench.DeclarationError, match=r"count_copies=...\) takes True or False"):
        bench.cases(Matmul(), count_copies="yes")


# -- 8. case ids, params and declaration errors ----------------------------------------------------


class Gemm(bench.Workload):
    name = "gemm"
    rows = (bench.Row("square-1k", m=1024, n=1024, tier="smoke"), bench.Row("tall", m=4096, n=64))
    dtypes = ("float16", "float32")

    def gen_inputs(self, params, dtype, seed):
        raise AssertionError("not needed to build cases")


def test_case_ids_and_params_are_row_label_and_dtype_and_stable():
    first, again = bench.cases(Gemm()), bench.cases(Gemm())
    ids = [c.id for c in first]
    assert ids == ["square-1k-float16", "square-1k-float32", "tall-float16", "tall-float32"]
    assert [c.id for c in again] == ids
    assert [c.seed for c in again] == [c.seed for c in first]
    assert len({c.seed for c in first}) == 4
    assert first[0].params == {"row": "square-1k", "m": 1024, "n": 1024, "dtype": "float16"}
    assert first[3].params == {"row": "tall", "m": 4096, "n": 64, "dtype": "float32"}
    assert [c.id for c in bench.cases(Gemm(), tier="smoke")] == ids[:2]
    assert [c.id for c in bench.cases(Gemm(), tier="full")] == ids[2:]


@pytest.mark.parametrize("label", ["bad label", "", "-leading-dash", "a/b", 5])
def test_bad_row_labels_are_declaration_errors(label):
    with pytest.raises(bench.DeclarationError, match=r"Row label .* must be letters, digits"):
        bench.Row(label, n=1)


def test_bad_row_tier_is_a_declaration_error():
    with pytest.raises(bench.DeclarationError, match=r"Row 'x': tier must be one of .*'medium'"):
        bench.Row("x", tier="medium")


def _workload(**attributes):
    return type("Declared", (Gemm,), attributes)()


@pytest.mark.parametrize(
    ("workload", "message"),
    [
        (_workload(rows=[]), r"workload Declared: rows is empty; declare at least one bench.Row"),
        (
            _workload(rows=[bench.Row("a"), bench.Row("b"), bench.Row("a")]),
            r"workload Declared: row labels repeat: \['a', 'b', 'a'\]",
        ),
        (_workload(name=""), r"workload Declared: name must be set"),
        (_workload(dtypes=[]), r"workload Declared: dtypes must be a non-empty list"),
        (_workload(version=0), r"workload Declared: version must be an int >= 1"),
        (object(), r"bench.cases takes a Workload instance \(got object\)"),
        (Gemm, r"bench.cases takes a Workload instance"),
    ],
)
def test_bad_workloads_are_declaration_errors(workload, message):
    with pytest.raises(bench.DeclarationError, match=message):
        bench.cases(workload)


def test_bad_tier_filter_and_runner_arguments_are_declaration_errors(session):
    with pytest.raises(bench.DeclarationError, match=r"cases\(tier=...\) takes one of"):
        bench.cases(Gemm(), tier="huge")
    with pytest.raises(bench.DeclarationError, match=r"Runner takes a bench Case \(got str\)"):
        bench.Runner(np.matmul, "tiny-float32")
    with pytest.raises(bench.DeclarationError, match=r"implementation 'x' must be callable"):
        bench.Runner(np.matmul, only_case(Matmul())).compare({"x": 3})


def test_a_row_parameter_cannot_hide_the_row_label():
    try:
        row = bench.Row("lab", row=5)
    except bench.DeclarationError:
        return  # refusing the reserved name is a correct answer too
    case = only_case(_workload(rows=[row]))
    assert case.params["row"] == "lab"


# -- 9. lazy data ----------------------------------------------------------------------------------


def test_case_data_is_made_on_first_access_and_remade_identically_after_release():
    workload = Matmul()
    built = bench.cases(workload)
    assert workload.gen_calls == 0 and workload.reference_calls == 0
    case = built[0]
    assert not case.has_data

    first = case.inputs
    assert case.inputs is first
    assert workload.gen_calls == 1 and case.has_data
    expected = case.expected
    assert case.expected is expected
    assert workload.reference_calls == 1

    case.release()
    assert not case.has_data
    assert workload.gen_calls == 1  # release does not remake anything
    again = case.inputs
    assert workload.gen_calls == 2 and again is not first
    assert [x.tobytes() for x in again] == [x.tobytes() for x in first]
    assert case.expected is not expected and workload.reference_calls == 2
    assert case.expected.tobytes() == expected.tobytes()
    assert not any(c.has_data for c in built[1:])


# -- 10. reference out of memory --------------------------------------------------------------------


class OutOfMemory(Scale):
    name = "oom"

    def __init__(self, error):
        self.error = error

    def reference(self, x):
        raise self.error


def test_a_reference_out_of_memory_times_everything_unverified_without_ratios(session):
    case = only_case(OutOfMemory(MemoryError("cannot allocate 64 GiB")))
    comparison = bench.Runner(double, case).compare(
        {"other": lambda x: x + x, "wrong": np.negative}
    )
    assert comparison.timed
    for name, row in comparison.rows.items():
        assert "ran out of memory" in row.verification, name
        assert "cannot allocate 64 GiB" in row.verification
        assert not row.verified and row.check_status == "not_checked" and row.ratio is None
        assert row.median_s is not None and row.samples == 30
    assert comparison.document_case["implementations"]["other"]["gap"] is None
    timed = timed_names(session[1].backends[-1].calls, "timed_cold")
    assert timed.count("wrong") == integrity.COLD_PROBES + 30 * doc_batch(comparison, "wrong")


def test_a_reference_raising_a_bare_memory_error_is_out_of_memory(session):
    case = only_case(OutOfMemory(MemoryError()))
    assert "ran out of memory" in case.expected.reason


# -- 11. the reference as an implementation ---------------------------------------------------------


def test_the_reference_unchanged_inherits_the_op_status_and_a_wrapper_is_checked(make_session):
    make_session(per_call_s={"matmul": 2e-5})
    case = only_case(Matmul())
    comparison = bench.Runner(np.matmul, case).compare(
        {"ref": case.reference, "wrapped": lambda *a: case.reference(*a)}
    )
    ref, wrapped = comparison.rows["ref"], comparison.rows["wrapped"]
    assert ref.check_status == "not_checked" and ref.verified
    assert ref.verification == (
        "the reference, unchanged: not checked against itself; verified as the op is"
    )
    assert ref.ratio == pytest.approx(0.5)
    assert wrapped.check_status == "passed" and wrapped.verified
    assert wrapped.verification == "exact: every output, rtol=1e-05, atol=3.8147e-06"
    assert comparison.document_case["implementations"]["ref"]["verification"]["kind"] == "reference"


def test_the_reference_unchanged_is_unverified_when_the_op_is(session):
    case = only_case(Scale(bench.Unestablished("no agreed reference")))
    comparison = bench.Runner(double, case).compare({"ref": case.reference})
    ref = comparison.rows["ref"]
    assert ref.check_status == "not_checked" and not ref.verified and ref.ratio is None
    assert "unverified as the op is" in ref.verification


# -- 12. noncomparable implementations ------------------------------------------------------------


def test_a_noncomparable_implementation_is_timed_unchecked_without_a_ratio(session):
    case = only_case(Scale())
    other = bench.Implementation(run=np.negative, noncomparable_reason="computes -x, not 2x")
    comparison = bench.Runner(double, case).compare({"negate": other})
    row = comparison.rows["negate"]
    assert row.check_status == "not_checked" and not row.verified and row.ratio is None
    assert row.verification == "unverified: noncomparable implementation: computes -x, not 2x"
    assert row.median_s is not None and row.samples == 30
    assert comparison.rows["double"].ratio == 1.0
    entry = comparison.document_case["implementations"]["negate"]
    assert entry["gap"] is None and "computes -x, not 2x" in entry["gap_note"]


@pytest.mark.parametrize("reason", ["", "   ", 3])
def test_an_empty_noncomparable_reason_is_a_declaration_error(reason):
    with pytest.raises(bench.DeclarationError, match="noncomparable_reason must be a non-empty"):
        bench.Implementation(run=np.negative, noncomparable_reason=reason)


def test_the_op_cannot_be_noncomparable(session):
    op = bench.Implementation(run=np.negative, noncomparable_reason="x")
    with pytest.raises(bench.DeclarationError, match="the op under test cannot be noncomparable"):
        bench.Runner(op, only_case(Scale()))


# -- 13. verify only -------------------------------------------------------------------------------


def test_verify_only_checks_but_times_nothing(session):
    s, device = session
    s.configure(verify_only=True)
    case = only_case(Matmul())
    comparison = bench.Runner(np.matmul, case).compare({"np.dot": np.dot})
    assert not comparison.timed and not device.backends
    for row in comparison.rows.values():
        assert row.check_status == "passed" and row.median_s is None and row.samples == 0
    assert comparison.rows["np.dot"].ratio is None
    assert all("timing" not in e for e in comparison.document_case["implementations"].values())
    with pytest.raises(bench.CheckFailed, match="wrong"):
        bench.Runner(np.matmul, case).compare({"wrong": lambda a, b: a @ b + 1})
    validate(s.document(), "result")


# -- 14. the document, the harness and the report -----------------------------------------------


def test_the_document_validates_and_the_harness_reads_it(make_session):
    s, _ = make_session(per_call_s={"matmul": 2e-5, "np.dot": 1e-5})
    workload = Matmul()
    for case in bench.cases(workload):
        bench.Runner(np.matmul, case).compare({"np.dot": np.dot, "ref": case.reference})
    scale = only_case(Scale(bench.Unestablished("no agreed reference")))
    bench.Runner(double, scale).compare({"twice": lambda x: x + x})
    doc = s.document()
    validate(doc, "result")

    assert [c["id"] for c in doc["cases"]] == [
        "mm/tiny-float32/matmul",
        "mm/tiny-float64/matmul",
        "mm/small-float32/matmul",
        "mm/small-float64/matmul",
        "scale/vec-float64/double",
    ]
    keys = set()
    for case in doc["cases"]:
        for name in case["implementations"]:
            key = series_key(doc, case, name)
            assert set(key) == set(KEY_FIELDS)
            assert (
                key["gpu"] == "NVIDIA H200" and key["mode"] == "cold-mean"
            )  # means of a batch (1.7.0)
            assert key["impl"] == name and key["case_id"] == case["id"]
            assert key["source_sha256"] and key["baseline_source_sha256"]
            keys.add(tuple(key.values()))
    assert len(keys) == 4 * 3 + 2

    text = markdown(doc)
    assert text.startswith("# kernelgap: python-api\n")
    assert "- GPU: NVIDIA H200" in text
    assert "## matmul" in text and "## double" in text
    table_rows = [line for line in text.splitlines() if line.startswith("| ")]
    assert len(table_rows) == 2 * 2 + 4 * 3 + 2  # two header lines per table
    assert (
        "| mm/tiny-float32 (cold by events: chosen) | np.dot | exact: every output, rtol=1e-05, "
        "atol=3.8147e-06 | 10.00 |" in text
    )
    assert (
        "| scale/vec-float64 (cold by events: chosen) | twice | unverified: no reference established: no agreed"
        in text
    )
    assert "- np.dot: 0.500 (4 cases)" in text


def test_check_passes_a_correct_op_and_names_the_mismatch_of_a_wrong_one():
    workload = Matmul()
    a, b = workload.gen_inputs({"n": 8}, "float32", 1)
    out = bench.check(np.dot, a, b, reference=workload.reference)
    assert np.array_equal(out, np.dot(a, b))

    def wrong(a, b):
        return a @ b + 1

    with pytest.raises(AssertionError, match=r"wrong does not match the reference") as failure:
        bench.check(wrong, a, b, reference=workload.reference)
    assert "output 0: 64 of 64 elements outside rtol=1e-05, atol=3.8147e-06" in str(failure.value)
    with pytest.raises(AssertionError, match=r"output 0: 64 of 64 elements outside"):
        workload.check(wrong, a, b)
    assert np.array_equal(workload.check(np.matmul, a, b), a @ b)
    loose = bench.Exact(atol=2)
    workload.check(wrong, a, b, verification=loose)
    with pytest.raises(ValueError, match="needs a checked declaration"):
        bench.check(
            wrong, a, b, reference=workload.reference, verification=bench.Unestablished("x")
        )


def test_cupti_span_of_intervals_keeps_the_gaps_between_kernels():
    from runner.bench.watch import SPAN, span_s

    assert SPAN == "first-start-to-last-end"
    assert span_s([]) == 0.0
    assert span_s([(0, 10), (5, 20), (30, 40)]) == pytest.approx(40e-9)  # the gap 20-30 counts
    assert span_s([(30, 40), (0, 100)]) == pytest.approx(100e-9)  # nested, any order


def test_timer_option_is_checked():
    with pytest.raises(bench.DeclarationError, match="timer must be 'auto', 'events' or 'cupti'"):
        bench.TimingOptions(timer="wallclock")


# -- review fixes: the reset contract on private arguments, failures as data, output counts,
# -- exact integers, uncapturable implementations under a copies-left-out case


def _in_place_double(x):
    x *= 2
    return x


def test_a_private_argument_written_without_reset_is_refused(session):
    (case,) = bench.cases(Scale())
    private = case.inputs[0].copy()
    with pytest.raises(
        bench.DeclarationError, match=r"writes its argument\(s\) \[0\] but has no reset"
    ):
        bench.Runner(
            bench.Implementation(run=_in_place_double, args=(private,)), case, name="op"
        ).compare()


def test_a_reset_that_does_not_restore_is_refused(session):
    (case,) = bench.cases(Scale())
    private = case.inputs[0].copy()
    lazy = bench.Implementation(run=_in_place_double, args=(private,), reset=lambda: None)
    with pytest.raises(bench.DeclarationError, match="reset does not restore"):
        bench.Runner(lazy, case, name="op").compare()
    recorded = session[0].cases[-1]  # recorded before it was raised
    assert recorded["status"] == "failed" and recorded["error"]["phase"] == "check"


def test_an_implementation_that_raises_is_recorded_and_named(session):
    (case,) = bench.cases(Scale())

    def broken(x):
        raise ValueError("shapes do not broadcast")

    with pytest.raises(bench.CheckFailed, match=r"implementation 'broken' raised ValueError"):
        bench.Runner(double, case).compare({"broken": broken})
    doc = session[0].cases[-1]
    assert doc["status"] == "failed" and doc["error"]["phase"] == "check"
    assert "shapes do not broadcast" in doc["error"]["message"]
    assert doc["implementations"]["broken"]["verification"]["text"].startswith("not reached")
    validate(session[0].document(), "result")


def test_exact_needs_as_many_outputs_as_the_reference(session):
    (case,) = bench.cases(Scale())
    with pytest.raises(bench.CheckFailed, match="2 outputs returned where the reference returns 1"):
        bench.Runner(double, case).compare({"more": lambda x: (x * 2, x)})


def test_partial_cannot_check_more_outputs_than_there_are(session):
    (case,) = bench.cases(Scale(verification=bench.Partial(2, "only one output exists")))
    with pytest.raises(bench.DeclarationError, match=r"Partial\(outputs=2\) checks more outputs"):
        bench.Runner(double, case).compare()


def test_integer_outputs_compare_exactly_beyond_float64_precision():
    from runner.measurement.gate import arrays

    big = np.array([2**53], dtype=np.int64)
    off_by_one = np.array([2**53 + 1], dtype=np.int64)
    assert arrays.compare(big, big, 0.0, 0.0)["mismatches"] == 0
    result = arrays.compare(off_by_one, big, 1e-3, 1e-3)  # tolerances never apply to integers
    assert result["mismatches"] == 1 and "not equal (exact)" in result["problem"]


def test_an_uncapturable_implementation_in_a_copies_left_out_case_gets_no_ratio():
    device = FakeCallableDevice(uncapturable={"np.dot"})
    bench.reset(bench.Session(device=device, options=FAST))
    try:
        (case,) = [c for c in bench.cases(Matmul()) if c.id == "tiny-float32"]
        c = bench.Runner(np.matmul, case).compare({"np.dot": np.dot, "np.matmul2": np.matmul})
        dot = c.document_case["implementations"]["np.dot"]
        assert dot["gap"] is None and "could not be captured" in dot["gap_note"]
        assert c["np.dot"].ratio is None and c["np.dot"].median_s > 0
        assert c["np.matmul2"].ratio == pytest.approx(1.0)
    finally:
        bench.reset()


def test_without_torch_the_gpu_device_says_what_to_install(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError
    s = bench.Session()
    with pytest.raises(RuntimeError, match=r"needs torch 2.7\+ \(pip install -e '.\[ops\]'\)"):
        s.device()


def test_repeated_comparisons_get_ids_that_say_what_differs(session):
    (case,) = bench.cases(Scale())
    bench.Runner(double, case).compare({"b": double})
    bench.Runner(double, case).compare({"c": double, "a": double})
    bench.Runner(double, case).compare({"c": double, "a": double})
    ids = [c["id"] for c in session[0].cases]
    assert ids == [
        "scale/vec-float64/double",
        "scale/vec-float64/double#cold:a,c",
        "scale/vec-float64/double#cold:a,c#2",
    ]
    assert "| scale/vec-float64 (cold by events: chosen) #cold:a,c#2 |" in markdown(
        session[0].document()
    )


# -- second review: comparisons across dtype kinds, partial statuses kept, named failures,
# -- a reset that fills a zeroed buffer, the plugin's --bench-timer alone


def test_an_integer_output_for_a_float_and_complex_outputs_are_compared_in_full():
    from runner.measurement.gate import arrays

    assert arrays.compare(np.array([0]), np.array([0.9]), 1e-5, 1e-5)["mismatches"] == 1
    imag = arrays.compare(np.array([1 + 5j]), np.array([1 + 0j]), 1e-5, 1e-5)
    assert imag["mismatches"] == 1 and "first at ['imag', 0]" in imag["problem"]
    strided = np.arange(10.0)[::2]
    assert arrays.compare(strided, strided.copy(), 0.0, 0.0)["mismatches"] == 0


def test_statuses_checked_before_a_failure_are_kept(session):
    (case,) = bench.cases(Scale())

    def boom(x):
        raise KeyError("weights")

    with pytest.raises(bench.CheckFailed, match=r"implementation 'boom' raised KeyError"):
        bench.Runner(double, case).compare({"ok": double, "boom": boom})
    impls = session[0].cases[-1]["implementations"]
    assert impls["double"]["check"]["status"] == "passed"
    assert impls["ok"]["check"]["status"] == "passed"
    assert impls["boom"]["verification"]["text"].startswith("not reached")


class _BrokenReference(Scale):
    name = "broken-ref"

    def reference(self, x):
        raise KeyError("weights")


class _BrokenInputs(Scale):
    name = "broken-inputs"

    def gen_inputs(self, params, dtype, seed):
        raise TypeError("unexpected keyword 'm'")


@pytest.mark.parametrize(
    ("workload", "named"),
    [
        (_BrokenReference(), "the inputs or the reference of case vec-float64 raised KeyError"),
        (_BrokenInputs(), "the inputs or the reference of case vec-float64 raised TypeError"),
        (
            Scale(bench.Exact(controls=(bench.Control("bad", lambda inputs: inputs[5]),))),
            "negative control 'bad' of case vec-float64 raised IndexError",
        ),
    ],
)
def test_failures_of_the_workload_are_named_and_recorded(session, workload, named):
    (case,) = bench.cases(workload)
    with pytest.raises(bench.CheckFailed, match=named):
        bench.Runner(double, case).compare()
    recorded = session[0].cases[-1]
    assert recorded["status"] == "failed" and named in recorded["error"]["message"]


def test_a_reset_that_fills_a_zeroed_buffer_is_a_correct_reset(session):
    (case,) = bench.cases(Scale())
    (x,) = case.inputs
    buffer = np.zeros_like(x)  # the reset fills it: what it leaves is the starting point
    op = bench.Implementation(
        run=_in_place_double, args=(buffer,), reset=lambda: np.copyto(buffer, x)
    )
    c = bench.Runner(op, case, name="op").compare({"double": double})
    assert c["op"].verified and c["double"].ratio == pytest.approx(1.0)


def test_the_plugin_takes_bench_timer_and_budget_alone():
    import types

    from runner.bench import pytest_plugin, session

    def config(**given):
        option = dict.fromkeys(
            (
                "bench_verify",
                "bench_output",
                "bench_report",
                "bench_mode",
                "bench_timer",
                "bench_recheck",
                "bench_no_recheck",
            )
        )
        option["bench_budget"] = None
        option.update(given)
        return types.SimpleNamespace(
            option=types.SimpleNamespace(**option),
            addinivalue_line=lambda *a: None,
            rootpath=".",
        )

    try:
        pytest_plugin.pytest_configure(config(bench_timer="cupti"))
        assert session.current().options.timer == "cupti"
        assert session.current().options.recheck == "auto"
        pytest_plugin.pytest_configure(config(bench_recheck=True))
        assert session.current().options.recheck is True
        pytest_plugin.pytest_configure(config(bench_no_recheck=True))
        assert session.current().options.recheck is False
        with pytest.raises(
            bench.DeclarationError, match="budget_s must be a number of seconds > 0"
        ):
            pytest_plugin.pytest_configure(config(bench_budget=0.0))
    finally:
        bench.reset()


def test_agrees_is_compares_verdict_and_stops_at_the_first_failing_chunk():
    """The null models' and controls' pass/fail (arrays.agrees) gives compare's verdict on every
    kind of array, chunk by chunk: a mismatch in the last chunk still fails, and a null model
    that is wrong everywhere is refused after one chunk (2^27 elements took minutes before)."""
    from runner.measurement.gate import arrays

    rng = np.random.default_rng(7)
    x = rng.standard_normal(10_000).astype(np.float32)
    cases = [
        (x, x.copy(), 1e-5, 1e-5),
        (x, x * (1 + 1e-6), 1e-5, 1e-5),
        (x, x.astype(np.float16).astype(np.float32), 1e-5, 1e-5),
        (np.r_[x[:-1], np.nan].astype(np.float32), x, 1e-5, 1e-5),
        (np.r_[x[:-1], np.nan], np.r_[x[:-1], np.nan], 0.0, 0.0),
        (np.arange(9_999, dtype=np.int64), np.r_[np.arange(9_998), 0], 0.0, 0.0),
        (x.reshape(100, 100), x, 1e-5, 1e-5),
        (np.array([1 + 5j]), np.array([1 + 0j]), 1e-5, 1e-5),
    ]
    for actual, expected, rtol, atol in cases:
        verdict = arrays.compare(actual, expected, rtol, atol)["mismatches"] == 0
        assert arrays.agrees(actual, expected, rtol, atol, chunk=1000) == verdict
    calls = []
    real = arrays.compare

    def counting(*args):
        calls.append(args[0].size)
        return real(*args)

    wrong = np.zeros_like(x)
    try:
        arrays.compare = counting
        assert not arrays.agrees(wrong, x, 1e-5, 1e-5, chunk=1000)
    finally:
        arrays.compare = real
    assert calls == [1000]


def test_the_op_s_hidden_a_a_control_is_reported_and_sets_the_gaps_term(make_session):
    """runner.bench's in-run A/A control: the op timed again as a hidden side, never a row;
    on the fake (no graph instances) its samples are clustered by place in the run, and a
    noisy one sets every gap's term above the documented default (systematic_source)."""
    options = bench.TimingOptions(mode="hot", budget_s=0.05)
    _, _ = make_session(options=options, noise=0.02, per_call_s={"matmul": 1e-5, "B": 1e-5})
    comparison = bench.Runner(np.matmul, only_case(Matmul())).compare({"B": np.dot})
    doc = comparison.document_case
    assert set(doc["implementations"]) == {"matmul", "B"} and "matmul~aa" not in comparison.rows
    aa = doc["aa_control"]
    assert aa["clusters"] == "places" and aa["per_side_loads"] == 1 and aa["loads"] == 8
    assert len(aa["samples_s"]) == comparison.rows["matmul"].samples == len(aa["sample_loads"])
    assert aa["ci_low"] <= 1.0 <= aa["ci_high"]
    gap = doc["implementations"]["B"]["gap"]
    assert gap["systematic_source"] == "control" and gap["systematic"] == aa["systematic"]
    assert aa["systematic"] > stats.systematic("hot", 1e-5, stats.TORCH_GRAPH_NODE_S)


def test_a_name_reserved_for_the_a_a_control_is_refused(make_session):
    make_session()
    with pytest.raises(bench.DeclarationError, match="reserved for the op's hidden A/A control"):
        bench.Runner(np.matmul, only_case(Matmul())).compare({"matmul~aa": np.dot})
