"""GPU: cheats of the Python front end (issue 30 item 7, issue 37), each caught with a message
naming what was found, and honest controls that keep their ratio. Rows go into the verdict table
of tests/integrity/test_cheats_gpu.py (printed at the end, cheats.md under $KERNELGAP_TEST_ARTIFACTS).

Run on the GPU box: `pytest -m gpu tests/integrity/test_cheats_bench_gpu.py -p no:cacheprovider -q -s`.
Every test runs with the front end's defaults (recheck auto) unless it says otherwise.
"""

from __future__ import annotations

import pytest

from tests.integrity import test_cheats_gpu as cheats
from tests.integrity.test_cheats_gpu import (
    ALPHA,
    cupti_reason,
    honest,
    record,
    scale_case,
    torch_module,
)

pytestmark = pytest.mark.gpu
# the cheats suite's fixtures: its CUDA session, per-test options, the verdict table at the end
session, options = cheats.session, cheats.options


@pytest.fixture
def defaults(options):
    """The front end's defaults for timing integrity (recheck auto), hot unless changed."""
    options(recheck="auto", mode="hot", budget_s=0.5)
    return options


def flags_of(failure, name: str) -> str:
    return " ".join(failure.value.comparison.rows[name].flags)


# -- (a) a result kept and copied out ---------------------------------------------------------


def test_a_result_kept_and_returned_as_a_copy_is_refused(session, defaults):
    torch = torch_module()
    from runner import bench

    kept = {}

    def copy_only(y):
        if "out" not in kept:
            kept["out"] = torch.mul(y, ALPHA)
        return kept["out"].clone()  # the copy is all a later call does

    with pytest.raises(bench.IntegrityFailed) as failure:
        bench.Runner(honest, scale_case(), name="mul").compare({"copy": copy_only})
    flags = flags_of(failure, "copy")
    assert "holds only copies" in flags, flags
    assert failure.value.comparison.rows["copy"].ratio is None
    record("a result kept, returned as a copy (copies left out)", "callable", "flagged", flags)

    kept.clear()

    def copy_into_output(y):
        if "out" not in kept:
            kept["out"] = torch.mul(y, ALPHA)
        out = torch.empty_like(y)
        out.copy_(kept["out"])
        torch.mul(y[:32], ALPHA)  # a token kernel, so the graph is not copies alone
        return out

    with pytest.raises(bench.IntegrityFailed) as failure:
        bench.Runner(honest, scale_case(), name="mul").compare({"copy": copy_into_output})
    flags = flags_of(failure, "copy")
    assert "write output(s) [0]" in flags, flags
    record(
        "a kept result copied into the output, plus a token kernel", "callable", "flagged", flags
    )


# -- (b) work on the legacy default stream ----------------------------------------------------


def on_the_legacy_stream(y):
    torch = torch_module()
    with torch.cuda.stream(torch.cuda.default_stream()):
        return torch.mul(y, ALPHA)


@pytest.mark.parametrize("mode", ["hot", "cold"])
def test_work_on_the_legacy_default_stream_is_refused(session, defaults, mode):
    from runner import bench

    defaults(mode=mode, timer="events")  # no CUPTI: what the front end sees on its own
    with pytest.raises(bench.IntegrityFailed) as failure:
        bench.Runner(honest, scale_case(), name="mul").compare(
            {"same": honest, "legacy": on_the_legacy_stream}
        )
    rows = failure.value.comparison.rows
    flags = flags_of(failure, "legacy")
    # captured while its work went to the legacy stream: an empty graph; not capturable (torch
    # refused the allocation): calls whose work outlives the windows on the legacy stream, or
    # (cold, a call shorter than the blocker's hold) windows too short for the bytes moved
    found = (
        "captured CUDA graph is empty",
        "work on the legacy default stream",
        "physically impossible timing",
    )
    assert any(text in flags for text in found), flags
    assert rows["legacy"].ratio is None and rows["same"].flags == []
    record(f"work on the legacy default stream ({mode}, events)", "callable", "flagged", flags)


# -- (c) work done in reset -------------------------------------------------------------------


def test_a_reset_that_computes_the_output_is_refused(session, defaults):
    torch = torch_module()
    from runner import bench

    case = scale_case()
    (x,) = case.inputs
    out = torch.empty_like(x)

    def compute():
        torch.mul(x, ALPHA, out=out)

    def returns_it(y):
        torch.mul(y[:32], ALPHA)  # a token kernel
        return out

    cheat = bench.Implementation(run=returns_it, reset=compute)
    with pytest.raises(bench.ResetRefused) as failure:
        bench.Runner(honest, case, name="mul").compare({"reset": cheat})
    message = str(failure.value)
    assert "its reset makes outputs the call does not" in message
    assert session.cases[-1]["error"]["phase"] == "check"
    record("the work done in reset", "callable", "refused (reset probe)", message)


# -- (d) a call that behaves differently while captured ---------------------------------------


def test_a_call_that_does_less_while_captured_is_caught(session, defaults):
    torch = torch_module()
    from runner import bench

    kept = {}

    def capture_aware(y):
        if torch.cuda.is_current_stream_capturing():
            torch.mul(y[:32], ALPHA)  # a token kernel in the graph; the result is an old one
            return kept["out"]
        kept["out"] = torch.mul(y, ALPHA)
        return kept["out"]

    # its graph, replayed once before timing onto poisoned outputs, leaves them poisoned
    with pytest.raises(bench.IntegrityFailed) as failure:
        bench.Runner(honest, scale_case(), name="mul").compare({"aware": capture_aware})
    flags = flags_of(failure, "aware")
    assert "a replay of its captured CUDA graph does not make its outputs" in flags, flags
    record("does less while a CUDA graph is captured (hot)", "callable", "flagged", flags)

    def from_a_snapshot(y):
        if torch.cuda.is_current_stream_capturing():  # computes from the inputs of the check
            return torch.mul(kept["snapshot"], ALPHA)
        kept["snapshot"] = y.clone()
        return torch.mul(y, ALPHA)

    # right on the case's own inputs, so the replay check passes; fresh inputs expose it
    with pytest.raises(bench.RecheckFailed) as failure:
        bench.Runner(honest, scale_case(), name="mul").compare({"snapshot": from_a_snapshot})
    message = str(failure.value)
    assert "implementation 'snapshot' after a timed sample on fresh inputs" in message
    record("computes from a snapshot while captured (hot)", "callable", "recheck failed", message)


# -- issue 37.4: rows timed by different methods ----------------------------------------------


def test_a_synchronizing_call_against_a_graph_replay_gets_no_ratio(session, defaults):
    torch = torch_module()
    from runner import bench

    def synchronizes(y):
        out = torch.mul(y, ALPHA)
        torch.cuda.current_stream().synchronize()
        return out

    c = bench.Runner(honest, scale_case(count_copies=True), name="mul").compare(
        {"same": honest, "sync": synchronizes}
    )
    sync = c.document_case["implementations"]["sync"]
    assert sync["gap"] is None and "timed by another method than the op" in sync["gap_note"]
    assert sync["timing"]["method_class"] == "host-loop" and c["same"].ratio is not None
    record("a host loop against a graph replay", "callable", "no ratio", sync["gap_note"])


# -- honest controls --------------------------------------------------------------------------


def test_honest_a_a_of_torch_add_is_at_parity(session, defaults):
    torch = torch_module()
    from runner import bench

    def add(y):
        return torch.add(y, y)

    def add_again(y):
        return torch.add(y, y)

    class Twice(type(scale_case().workload)):
        name = "cheats-add"

        def reference(self, x):
            return x + x

    (case,) = bench.cases(Twice())
    for mode in ("hot", "cold"):
        defaults(mode=mode, budget_s=1.0)
        c = bench.Runner(add, case, name="add").compare({"add again": add_again})
        row = c["add again"]
        assert row.flags == [] and row.ratio == pytest.approx(1.0, abs=0.005), (mode, row)
        block = c.document_case["implementations"]["add again"]["integrity"]["recheck"]
        assert block["verified"] and block["verified_samples"] >= 1, block
        record(f"none (honest A/A torch.add, {mode})", "callable", "ok", f"x{row.ratio:.4f}")


def test_the_in_run_a_a_control_of_a_callable_sets_the_term(session, defaults):
    """runner.bench's hidden A/A control (the op timed again, issue 37): hot, its samples take
    the graph instances in turn and its gap is near 1.0; every gap's term is the control's."""
    torch = torch_module()
    from runner import bench

    def mul(y):
        return torch.mul(y, ALPHA)

    defaults(mode="hot", budget_s=1.0)
    c = bench.Runner(mul, scale_case(), name="mul").compare({"mul again": mul})
    aa = c.document_case["aa_control"]
    gap = c.document_case["implementations"]["mul again"]["gap"]
    text = (
        f"control x{aa['ratio_of_medians']:.4f} [{aa['ci_low']:.4f}, {aa['ci_high']:.4f}], "
        f"term {aa['systematic']:.3%} over {aa['loads']} {aa['clusters']}; "
        f"gap x{gap['ratio_of_medians']:.4f}"
    )
    record("none (runner.bench A/A control, hot)", "callable", "ok", text)
    assert aa["clusters"] == "graph_instances" and aa["per_side_loads"] == 16, text
    assert abs(aa["ratio_of_medians"] - 1.0) < 0.01, text
    assert gap["systematic_source"] == "control" and gap["systematic"] == aa["systematic"]
    assert "mul~aa" not in c.document_case["implementations"]


def test_honest_composite_and_slow_rows_keep_their_true_gap(session, defaults):
    torch = torch_module()
    from runner import bench

    def composite(y):  # three kernels, exactly 3 y in float32 (a doubling commutes with rounding)
        return torch.add(torch.mul(torch.mul(y, ALPHA / 2), 2.0), 0.0)

    def twice(y):  # the work twice: about twice the time
        torch.mul(y, ALPHA)
        return torch.mul(y, ALPHA)

    timers = ["events"] + (["cupti"] if cupti_reason() is None else [])
    for timer in timers:
        defaults(timer=timer, budget_s=1.0)
        c = bench.Runner(honest, scale_case(), name="mul").compare(
            {"composite": composite, "twice": twice}
        )
        for name in ("composite", "twice"):
            assert c[name].flags == [] and c[name].verified, c[name]
        assert c["twice"].ratio == pytest.approx(2.0, rel=0.08)
        assert 2.0 < c["composite"].ratio < 5  # three kernels' traffic, gaps included
        graph = c.document_case["implementations"]["composite"]["copies"]
        assert graph["known"], graph
        record(
            f"none (honest composite and 2x work, hot, {timer})",
            "callable",
            "ok",
            f"composite x{c['composite'].ratio:.3f}, twice x{c['twice'].ratio:.3f}",
        )


def bmm_case():
    """torch.bmm's case, f16 8 x 1024^3 (compute-bound: about 30 us on an H100)."""
    torch = torch_module()
    from runner import bench

    class Bmm(bench.Workload):
        name = "cheats-bmm"
        rows = (bench.Row("8x1024", b=8, n=1024),)
        dtypes = ("float16",)
        # as examples/ops/workloads.BatchedMatmul: one rounding either side of float64
        verification = bench.Exact(rtol=2e-3, atol=1e-3)

        def gen_inputs(self, params, dtype, seed):
            g = torch.Generator(device="cuda").manual_seed(seed)
            shape = (params["b"], params["n"], params["n"])
            a = torch.rand(shape, generator=g, device="cuda") * 2 - 1
            b = torch.rand(shape, generator=g, device="cuda") * 2 - 1
            return a.half(), b.half()

        def reference(self, a, b):
            return torch.bmm(a.double(), b.double()).half()

        def flops(self, params, dtype):
            return 2.0 * params["b"] * params["n"] ** 3

    (case,) = bench.cases(Bmm())
    return case


def test_honest_a_a_of_a_power_hungry_bmm_is_at_parity_hot(session, defaults):
    """Issue 37.1: two identical torch.bmm (f16, 8 x 1024^3) read x0.980 hot when timed in two
    passes; in paired rounds with every graph instance uploaded they read at parity."""
    torch = torch_module()
    from runner import bench

    case = bmm_case()
    defaults(budget_s=2.0)
    c = bench.Runner(torch.bmm, case).compare({"bmm again": torch.bmm})
    row = c["bmm again"]
    gap = c.document_case["implementations"]["bmm again"]["gap"]
    assert row.flags == [] and row.ratio == pytest.approx(1.0, abs=0.01), gap
    record("none (honest A/A torch.bmm f16 8x1024^3, hot)", "callable", "ok", f"{gap}")
