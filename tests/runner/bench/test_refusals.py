"""runner.bench's refusals on the CPU (issue 30 item 7, issue 37): what a captured graph holds,
work outside the timing stream, recheck by default, reset inspection, methods that differ.

Whole comparisons run on tests/support/fake_callable_device (numpy callables, programmed times and graph
contents); the GPU cheats are in tests/integrity/test_cheats_bench_gpu.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from protocol.validation import validate
from runner import bench
from runner.bench import recheck as recheck_module
from runner.bench.graph_capture import graph_problems
from tests.runner.bench import test_api as test_bench_api
from tests.runner.bench.test_integrity import Scale, double

make_session = test_bench_api.make_session  # the fixture: a fresh session on the fake device
FAST = test_bench_api.FAST
OUT = (0x1000, 512)  # an output's (address, bytes)


# -- what a captured graph holds ----------------------------------------------------------------


def test_an_empty_graph_is_refused_whatever_the_copy_policy():
    for counted in (False, True):
        (problem,) = graph_problems([], [], [OUT], counted, recheck=True)
        assert "captured CUDA graph is empty" in problem and "legacy default stream" in problem


def test_a_copy_only_graph_is_refused_with_copies_left_out_and_needs_recheck_when_counted():
    (left_out,) = graph_problems(["MEMCPY"], [(0x9000, 512)], [OUT], False, recheck=True)
    assert "only copies (1)" in left_out and "count_copies=True" in left_out
    (unchecked,) = graph_problems(["MEMCPY"], [(0x9000, 512)], [OUT], True, recheck=False)
    assert "timed only with recheck on" in unchecked
    assert graph_problems(["MEMCPY"], [(0x9000, 512)], [OUT], True, recheck=True) == []
    (host,) = graph_problems(["HOST", "EMPTY"], [], [OUT], False, recheck=True)
    assert "no device work (nodes: EMPTY, HOST)" in host


def test_a_copy_into_an_output_left_out_of_the_time_is_refused_and_other_copies_are_not():
    into = graph_problems(["KERNEL", "MEMCPY"], [(0x1100, 256)], [(0x10, 8), OUT], False, True)
    assert len(into) == 1 and "write output(s) [1] (256 bytes)" in into[0]
    # a copy into a temporary the kernel then reads (a .contiguous() of an input): not an output
    assert graph_problems(["MEMCPY", "KERNEL"], [(0x9000, 512)], [OUT], False, True) == []
    # counted copies are timed work
    assert graph_problems(["KERNEL", "MEMCPY"], [(0x1000, 512)], [OUT], True, True) == []
    # a memset is work: torch.zeros is an honest op
    assert graph_problems(["MEMSET"], [], [OUT], False, False) == []


def test_a_refused_graph_flags_its_row_and_honest_rows_keep_their_ratio(make_session):
    session, _ = make_session(
        graphs={
            "empty": {"nodes": []},
            "kernel": {"nodes": ["KERNEL"]},
            "copied out": {
                "nodes": ["KERNEL", "MEMCPY"],
                "copy_targets": [OUT],
                "output_ranges": [OUT],
            },
        }
    )
    (case,) = bench.cases(Scale())
    with pytest.raises(bench.IntegrityFailed) as failure:
        bench.Runner(double, case).compare(
            {"empty": double, "kernel": double, "copied out": double}
        )
    message = str(failure.value)
    assert "empty: its captured CUDA graph is empty" in message
    assert "copied out: copies in its captured CUDA graph write output(s) [0]" in message
    rows = failure.value.comparison.rows
    assert rows["kernel"].ratio is not None and not rows["kernel"].flags
    assert rows["empty"].ratio is None and rows["copied out"].ratio is None
    doc = session.cases[-1]
    assert doc["implementations"]["empty"]["gap_note"].startswith("no ratio: its timing is flagged")
    validate(session.document(), "result", "refused graphs")


def test_work_seen_outside_the_timing_stream_flags_the_row(make_session):
    legacy = "work on the legacy default stream was still running after 30 of its timed windows"
    make_session(side_work={"legacy": [legacy]})
    (case,) = bench.cases(Scale())
    with pytest.raises(bench.IntegrityFailed, match="legacy: work on the legacy default stream"):
        bench.Runner(double, case).compare({"legacy": double})


# -- recheck by default -------------------------------------------------------------------------


class SlowReference(Scale):
    """Scale whose reference costs `reference_s` of host time."""

    name = "slow-reference"

    def __init__(self, reference_s: float):
        self.reference_s = reference_s

    def reference(self, x):
        import time

        time.sleep(self.reference_s)
        return x * 2


def recheck_block(comparison, name):
    return comparison.document_case["implementations"][name]["integrity"]["recheck"]


def test_recheck_is_on_by_default_and_checks_every_sample_where_that_is_cheap(make_session):
    # 0.03 s over 2 samples x 2 rows: 7.5 ms a sample, far above what fresh inputs cost here
    make_session(options=bench.TimingOptions(budget_s=0.03, min_samples=2, timer="events"))
    (case,) = bench.cases(Scale())
    c = bench.Runner(double, case).compare({"same": double})
    block = recheck_block(c, "same")
    assert block["mode"] == "auto" and block["schedule"] == "every"
    assert block["verified"] and block["verified_samples"] >= c["same"].samples


def test_recheck_auto_takes_spot_samples_where_fresh_inputs_are_dear(make_session):
    # 0.03 s over 30 samples x 2 rows: 0.5 ms a sample; a 2 ms reference is above 25% of it
    make_session()
    (case,) = bench.cases(SlowReference(0.002))
    c = bench.Runner(double, case).compare({"same": double})
    block = recheck_block(c, "same")
    assert block["schedule"] == "spot" and "fresh inputs and a verification cost" in block["reason"]
    # fresh inputs before the 1st, 2nd, 4th, ... reset only
    resets = block["fresh_inputs"]
    assert 3 <= resets <= 12 and block["verified"] and 1 <= block["verified_samples"] <= resets
    assert c["same"].ratio is not None


def test_recheck_auto_catches_a_result_cached_by_pointer_in_spot_samples_too(make_session):
    from tests.runner.bench.test_integrity import cached_by_pointer

    make_session()
    (case,) = bench.cases(SlowReference(0.002))
    with pytest.raises(bench.RecheckFailed, match="'cached' after a timed sample on fresh inputs"):
        bench.Runner(double, case).compare({"cached": cached_by_pointer()})


def test_recheck_auto_is_off_with_the_reason_when_gen_inputs_cannot_make_other_data(make_session):
    class Fixed(Scale):
        name = "fixed"

        def gen_inputs(self, params, dtype, seed):
            rng = np.random.default_rng(seed)
            return (rng.standard_normal(params["n"] + seed % 2).astype(dtype),)

    make_session()
    (case,) = bench.cases(Fixed())
    c = bench.Runner(double, case).compare({"same": double})
    block = recheck_block(c, "same")
    assert block["schedule"] == "off" and not block["verified"]
    assert block["reason"].startswith("recheck auto turned off: recheck: gen_inputs made input 0")


def test_a_reset_that_restores_private_arguments_from_its_own_snapshot_is_refused(make_session):
    make_session()
    (case,) = bench.cases(Scale())
    (x,) = case.inputs
    private, snapshot = x.copy(), x.copy()

    def in_place(y):
        y *= 2
        return y

    stale = bench.Implementation(
        run=in_place, args=(private,), reset=lambda: np.copyto(private, snapshot)
    )
    with pytest.raises(
        bench.ResetRefused, match=r"does not refill its private arguments from case"
    ):
        bench.Runner(double, case).compare({"stale": stale})


def test_spot_samples_are_the_powers_of_two():
    r = recheck_module.Recheck.__new__(recheck_module.Recheck)
    r.mode, r.resets, made = "spot", 0, []
    r._fresh = lambda: made.append(r.resets)
    r.auto_budget_s, r.fresh_s = 1.0, 0.5
    for _ in range(40):
        r.fresh()
    assert made == [1, 2, 4, 8, 16, 32]


# -- rows timed by different methods ------------------------------------------------------------


def test_a_host_loop_against_a_graph_replay_gets_no_ratio_and_stays_out_of_the_geomean(
    make_session,
):
    session, _ = make_session(
        options=bench.TimingOptions(mode="hot", budget_s=0.03), uncapturable={"loop"}
    )
    # copies counted: the loop's copies are in its time as in the graph's, so only the method differs
    (case,) = bench.cases(Scale(), count_copies=True)
    c = bench.Runner(double, case).compare({"loop": double, "graph": double})
    entry = c.document_case["implementations"]["loop"]
    assert entry["timing"]["method_class"] == "host-loop" and entry["gap"] is None
    assert entry["gap_note"] == (
        "no ratio: timed by another method than the op (loop: a Python loop of calls, host "
        "launch overhead included; double: CUDA graph replay), so the two times do not stand "
        "for the same thing"
    )
    assert c["loop"].ratio is None and c["graph"].ratio is not None
    geomean = session.document()["summary"]["geomean_gap"]
    assert "loop" not in geomean and "graph" in geomean
    validate(session.document(), "result", "rows timed by different methods")


def test_a_synchronizing_call_timed_with_the_hosts_latency_gets_no_ratio_in_cold_mode(
    make_session,
):
    make_session(synchronizing={"sync"})
    (case,) = bench.cases(Scale())
    c = bench.Runner(double, case).compare({"sync": double, "plain": double})
    assert c["sync"].ratio is None and c["plain"].ratio is not None
    note = c.document_case["implementations"]["sync"]["gap_note"]
    assert "a call that synchronizes, the host's latency included" in note


def test_rows_timed_alike_by_a_fallback_keep_their_ratio(make_session):
    # both rows Python loops (copies counted, so an uncaptured row's copies are comparable)
    make_session(
        options=bench.TimingOptions(mode="hot", budget_s=0.03), uncapturable={"double", "loop"}
    )
    (case,) = bench.cases(Scale(), count_copies=True)
    c = bench.Runner(double, case).compare({"loop": double})
    assert c["loop"].ratio is not None


# -- reset is inspected -------------------------------------------------------------------------


def test_a_reset_that_computes_the_output_the_call_returns_is_refused(make_session):
    session, _ = make_session()
    (case,) = bench.cases(Scale())
    (x,) = case.inputs
    out = np.empty_like(x)

    def compute():
        np.multiply(x, 2, out=out)

    cheat = bench.Implementation(run=lambda x: out, reset=compute)
    with pytest.raises(bench.ResetRefused) as failure:
        bench.Runner(double, case).compare({"cheat": cheat})
    message = str(failure.value)
    assert "implementation 'cheat': its reset makes outputs the call does not" in message
    assert "after its reset, then fresh inputs" in message and "must be done in the call" in message
    assert session.cases[-1]["status"] == "failed"
    assert session.cases[-1]["error"]["phase"] == "check"


def test_a_reset_that_computes_into_a_hidden_buffer_the_call_copies_out_is_refused(make_session):
    make_session()
    (case,) = bench.cases(Scale())
    (x,) = case.inputs
    hidden = np.empty_like(x)
    cheat = bench.Implementation(
        run=lambda x: hidden.copy(), reset=lambda: np.multiply(x, 2, out=hidden)
    )
    with pytest.raises(bench.ResetRefused, match="'cheat': its reset makes outputs"):
        bench.Runner(double, case).compare({"cheat": cheat})


def test_honest_resets_pass_the_probe_and_the_cases_inputs_are_restored(make_session):
    make_session()
    (case,) = bench.cases(Scale())
    (x,) = case.inputs
    original = x.copy()
    private = x.copy()

    def in_place(y):
        y *= 2
        return y

    accumulator = np.zeros_like(x)

    def accumulate(x):
        out = accumulator.copy()
        out += 2 * x  # correct only from a zeroed accumulator
        return out

    refilled = bench.Implementation(
        run=in_place, args=(private,), reset=lambda: np.copyto(private, x)
    )
    zeroed = bench.Implementation(run=accumulate, reset=lambda: accumulator.fill(0))
    c = bench.Runner(double, case).compare({"in place": refilled, "accumulate": zeroed})
    assert c["in place"].ratio is not None and c["accumulate"].ratio is not None
    assert np.array_equal(case.inputs[0], original)


# -- what the graph replay itself makes --------------------------------------------------------


def test_a_graph_replay_that_leaves_the_poison_is_refused_and_an_honest_one_is_not(make_session):
    make_session(
        replays={
            "aware": lambda x: np.full_like(x, np.nan),  # the captured call did nothing
            "honest": double,
        }
    )
    (case,) = bench.cases(Scale())
    with pytest.raises(bench.IntegrityFailed) as failure:
        bench.Runner(double, case).compare({"aware": double, "honest": double})
    flags = " ".join(failure.value.comparison.rows["aware"].flags)
    assert "a replay of its captured CUDA graph does not make its outputs" in flags
    assert "does less while a CUDA graph is captured" in flags
    assert failure.value.comparison.rows["honest"].flags == []
    assert failure.value.comparison.rows["honest"].ratio is not None


def test_a_row_refused_before_timing_is_not_rechecked_so_its_refusal_is_what_is_reported(
    make_session,
):
    from tests.runner.bench.test_integrity import cached_by_pointer

    make_session(graphs={"cached": {"nodes": []}})
    (case,) = bench.cases(Scale())
    with pytest.raises(bench.IntegrityFailed, match="cached: its captured CUDA graph is empty"):
        bench.Runner(double, case).compare({"cached": cached_by_pointer()})


def test_a_memcpy_nodes_destination_is_its_base_address_plus_its_offsets():
    import types

    from runner.bench.graph_capture import _destination

    plain = types.SimpleNamespace(
        dstDevice=0x7000, dstXInBytes=0, dstY=0, dstZ=0, dstPitch=0, dstHeight=0, WidthInBytes=64
    )
    assert _destination(plain) == 0x7000
    pitched = types.SimpleNamespace(
        dstDevice=0x7000, dstXInBytes=16, dstY=2, dstZ=1, dstPitch=256, dstHeight=4, WidthInBytes=64
    )
    assert _destination(pitched) == 0x7000 + 16 + (2 + 1 * 4) * 256
