"""GPU: the third pass's honest controls (issue 50, "Must show"): honest work that no defence
may flag, refuse or strip of its gap, each at its true gap. Rows join test_cheats_gpu.py's
verdict table; docs/integrity/third-pass.md says what each control proves.

PTX: tests/cheats/honest_third.toml (kernels/honest_third.cu, built by nvcc at test time, the
in-place case sized from the device's L2) through `runner bench`, hot: fast math within the
tolerance, tiled against naive, cooperative groups with dynamic shared memory, a candidate
10-35% faster at an L2-resident size, an in-place kernel at 0.85 of the L2. Callables: a
multi-kernel callable through runner.bench, cold. Elsewhere: a read-only `.global` lookup table
(state_honest in test_cheats_state_gpu.py), a kernel reading %globaltimer (globaltimer_honest in
test_cheats_third_gpu.py). Run on the GPU box: `pytest -m gpu tests/integrity/test_honest_third_gpu.py`.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from protocol.validation import validate
from tests.conftest import ROOT
from tests.integrity import test_cheats_gpu as cheats
from tests.integrity.test_cheats_bench_gpu import (
    bmm_case,
    defaults,  # noqa: F401 (a fixture)
)
from tests.integrity.test_cheats_gpu import (
    ALPHA,
    artifacts,
    assert_honest_untouched,
    needs_nvcc,
    record,
    scale_case,
    torch_module,
)

pytestmark = pytest.mark.gpu
# the cheats suite's fixtures: its CUDA session, per-test options, the verdict table at the end
session, options = cheats.session, cheats.options

CHEATS = ROOT / "tests" / "cheats"
IN_PLACE_SHARE = 0.85  # of the L2: issue 50 item 11's 0.8-0.9
IN_PLACE_DIMS = "dims = { n = 5570560 }"  # 0.85 of a 50 MiB L2, replaced by the device's own
TWICE_TOLERANCE = 0.03  # issue 50 item 9: cold "twice the work" within 3% of 2.0x
HOST_GAP_S = 2e-6  # between the kernels of a device-paced call: well under one host dispatch


def device_l2_bytes() -> int:
    """The L2's size as the runner reads it for its environment block."""
    from runner.gpu import driver
    from runner.measurement import environment

    with driver.Context(0) as ctx:
        return int(environment.device_info(ctx)["l2_bytes"])


def sized_suite(folder: Path, l2_bytes: int) -> Path:
    """tests/cheats/honest_third.toml and its files copied into `folder`, the in-place case's n
    set so its buffer is IN_PLACE_SHARE of the L2 (a whole number of 256-element blocks)."""
    (folder / "kernels").mkdir()
    shutil.copy(CHEATS / "reference.py", folder)
    shutil.copy(CHEATS / "kernels" / "honest_third.cu", folder / "kernels")
    text = (CHEATS / "honest_third.toml").read_text()
    assert text.count(IN_PLACE_DIMS) == 1, "the in-place case's dims line moved"
    n = int(IN_PLACE_SHARE * l2_bytes / 8) // 256 * 256
    suite = folder / "honest_third.toml"
    suite.write_text(text.replace(IN_PLACE_DIMS, f"dims = {{ n = {n} }}"))
    return suite


@pytest.fixture(scope="module")
def honest_run(tmp_path_factory):
    """`runner bench` of the honest controls, hot: (the L2's bytes, the exit status, the
    validated document, its cases by id)."""
    needs_nvcc()
    folder = tmp_path_factory.mktemp("honest-third")
    l2 = device_l2_bytes()
    out = folder / "result.json"
    command = [
        sys.executable,
        "-m",
        "runner",
        "bench",
        str(sized_suite(folder, l2)),
        "-o",
        str(out),
    ]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=400)
    assert out.exists(), done.stderr[-3000:]
    if artifacts():
        (artifacts() / "honest-third.json").write_bytes(out.read_bytes())
    doc = orjson.loads(out.read_bytes())
    validate(doc, "result", "third-pass honest controls run")
    assert doc["environment"]["device"]["l2_bytes"] == l2
    return l2, done, doc, {c["id"]: c for c in doc["cases"]}


def honest_gap(case: dict, candidate: str) -> dict:
    """Assert the case passed the gate and every check of its timing untouched (no integrity
    flag, no refusal by the rate ceiling, no gap withheld or noted); the candidate's gap."""
    assert case["status"] == "ok", case.get("error")
    assert_honest_untouched(case, (case["baseline"], candidate))
    for name, impl in case["implementations"].items():
        assert impl["timing"].get("problems", []) == [], (name, impl["timing"]["problems"])
        integrity = impl.get("integrity", {})
        assert "flag" not in integrity, (name, integrity)
        bound = impl.get("throughput", {}).get("bound")
        assert bound is None or not bound["exceeded"], (name, bound)
    row = case["implementations"][candidate]
    assert "gap_note" not in row and row["gap"] is not None, row.get("gap_note")
    return row["gap"]


def said(gap: dict) -> str:
    return f"gap x{gap['ratio_of_medians']:.3f} [{gap['ci_low']:.3f}, {gap['ci_high']:.3f}]"


def test_every_honest_control_passes_the_run(honest_run):
    _, done, _, cases = honest_run
    assert [c for c in cases.values() if c["status"] != "ok"] == []
    assert done.returncode == 0, done.stderr[-3000:]


def test_fast_math_within_the_tolerance_is_accepted_and_faster(honest_run):
    """--use_fast_math turns sinf into one SFU op: errors of a few 1e-6 inside the case's 1e-4,
    nowhere near the null models of f16 or bf16 rounding, so the gate accepts it; compute-bound,
    it is several times faster (its true gap)."""
    *_, cases = honest_run
    case = cases["fast_math"]
    gap = honest_gap(case, "fast_math")
    impl = case["implementations"]["fast_math"]
    assert "--use_fast_math" in str(impl["build"]), impl["build"]
    assert impl["check"]["inputs_passed"] == ["declared", "edges"], impl["check"]
    record("honest: fast math within the tolerance", "ptx hot", "ok", said(gap))
    assert gap["ratio_of_medians"] < 0.9 and gap["ci_high"] < 1.0, gap


def test_a_faster_algorithm_tiled_against_naive_keeps_its_gap(honest_run):
    """16 x 16 shared-memory tiles against one thread per element from global memory, f64 at
    n = 1024 (the suite's matmul kernels; about x0.56 on the H200 in benchmarks/perf/RESULTS.md)."""
    *_, cases = honest_run
    gap = honest_gap(cases["tiled_vs_naive"], "tiled")
    record("honest: a faster algorithm (tiled against naive)", "ptx hot", "ok", said(gap))
    assert gap["ratio_of_medians"] < 0.9 and gap["ci_high"] < 1.0, gap


def test_cooperative_groups_with_dynamic_shared_memory_pass_at_their_gap(honest_run):
    """Warp tiles reduced by cg::reduce, their partials in dynamic shared memory (the case's
    shared_bytes, poisoned before the gate's launches like all shared memory): exact within the
    tolerance and no slower than the tree of barriers it replaces."""
    *_, cases = honest_run
    case = cases["cg_dynamic_shared"]
    gap = honest_gap(case, "cg")
    assert case["launch"]["shared_bytes"] == 64
    record("honest: cooperative groups, dynamic shared memory", "ptx hot", "ok", said(gap))
    assert gap["ratio_of_medians"] < 1.05, gap


def test_a_candidate_faster_at_an_l2_resident_size_keeps_its_gap(honest_run):
    """Issue 50 item 10: 16 MiB in all, resident in the L2; the candidate runs 3/4 of the
    baseline's arithmetic, so it is faster in plain hot replay and at par once the L2 is
    disturbed and both read DRAM. Compared as slowdowns (disturbed / plain against the
    baseline's) that reads about 1 / gap, past the 1.10 that withheld such gaps; the disturbed
    times compared directly do not flag it. Its gap keeps an interval below 1."""
    l2, _, _, cases = honest_run
    case = cases["l2_resident_faster"]
    assert 16 * case["dims"]["n"] <= l2 / 2, (case["dims"], l2)  # resident, with room
    gap = honest_gap(case, "shorter")
    integrity = case["implementations"]["shorter"]["integrity"]
    relative = integrity.get("disturbed_vs_baseline")  # measured where its replay was slow
    extra = f", disturbed x{relative:.3f} the baseline's" if relative is not None else ""
    record("honest: 10-35% faster, L2-resident (item 10)", "ptx hot", "ok", said(gap) + extra)
    assert gap["ratio_of_medians"] > 0.65 and gap["ci_high"] < 1.0, gap


def test_an_in_place_kernel_near_the_l2_size_is_not_refused_by_the_ceiling(honest_run):
    """Issue 50 item 11: y = -y over 0.85 of the device's L2, read and written once a call, at
    parity with a copy of itself and refused by no rate ceiling (a suite case's working set is
    its buffers, which fit the L2 here: the callable twin below is the one the ceiling judges)."""
    l2, _, _, cases = honest_run
    case = cases["in_place_near_l2"]
    share = 8 * case["dims"]["n"] / l2
    assert 0.8 <= share <= 0.9, share
    gap = honest_gap(case, "cuda_again")
    assert "physically impossible" not in case.get("error", {}).get("message", "")
    record(f"honest: in place at {share:.2f} of the L2 (item 11)", "ptx hot", "ok", said(gap))
    assert abs(gap["ratio_of_medians"] - 1.0) < 0.05, gap


def test_a_multi_kernel_callable_cold_is_accepted_at_twice_the_work(session, defaults):  # noqa: F811
    """Issue 50 item 9: callables of two and three kernels against one, cold: device-paced
    samples (the call's graph replayed), no flag, and no host dispatch between the kernels (it
    once put 25-70 us there: x2.06-x2.46 for twice the work). Memory-bound, twice the work is
    not 2.0x cold: the first kernel's writes stay in the L2 past its end and the second pays
    for them (a 64 MiB multiply: about 40 us after a flush, 46 us after another); compute-bound
    (torch.bmm, 30 us, inputs from the L2 or DRAM alike) it is, within 3%."""
    torch = torch_module()
    from runner import bench

    def once(y):
        return torch.mul(y, ALPHA)

    def twice(y):
        torch.mul(y, ALPHA)
        return torch.mul(y, ALPHA)

    def composite(y):  # three kernels, exactly 3 y in float32 (a doubling commutes with rounding)
        return torch.add(torch.mul(torch.mul(y, ALPHA / 2), 2.0), 0.0)

    def bmm_twice(a, b):
        torch.bmm(a, b)
        return torch.bmm(a, b)

    defaults(mode="cold", budget_s=1.0)
    c = bench.Runner(once, scale_case(), name="once").compare(
        {"twice": twice, "composite": composite}
    )
    defaults(mode="cold", budget_s=2.0)
    m = bench.Runner(torch.bmm, bmm_case(), name="bmm").compare({"bmm twice": bmm_twice})
    for result, name in ((c, "twice"), (c, "composite"), (m, "bmm twice")):
        row, doc = result[name], result.document_case["implementations"][name]
        assert row.flags == [] and row.verified and row.ratio is not None, row
        assert "CUDA graph (device-paced)" in doc["timing"]["method"], doc["timing"]
        held = doc["integrity"]["cold_sample"]
        assert held["kernels"] >= 2 and held["gap_s"] < HOST_GAP_S, held  # no host dispatch
    record(
        "honest: multi-kernel callable (item 9)",
        "python cold",
        "ok",
        f"bmm twice x{m['bmm twice'].ratio:.3f}; y*a twice x{c['twice'].ratio:.3f}, composite "
        f"x{c['composite'].ratio:.3f}; kernels "
        + str(c.document_case["implementations"]["twice"]["integrity"]["cold_sample"]),
    )
    assert m["bmm twice"].ratio == pytest.approx(2.0, rel=TWICE_TOLERANCE), m["bmm twice"]


def test_an_in_place_callable_near_the_l2_size_is_not_refused_by_the_ceiling(session, defaults):  # noqa: F811
    """Item 11 in the Python front end: y = -y in place on a private buffer of 0.85 of the L2,
    hot, against a copy of itself. Its declared bytes (a read and a write) are past the L2, so
    the ceiling judges it; resident in the L2, it must not be refused."""
    torch = torch_module()
    from runner import bench

    l2 = session.device().l2_bytes
    n = int(IN_PLACE_SHARE * l2 / 4) // 256 * 256

    class Negate(bench.Workload):
        name = "honest-in-place"
        rows = (bench.Row("l2-share-0.85", n=n),)
        dtypes = ("float32",)

        def gen_inputs(self, params, dtype, seed):
            g = torch.Generator(device="cuda").manual_seed(seed)
            return (torch.rand(params["n"], generator=g, device="cuda") * 2 - 1,)

        def reference(self, x):
            return -x

        def bytes(self, params, dtype):
            return 8.0 * params["n"]

    (case,) = bench.cases(Negate())

    def in_place():
        private = case.inputs[0].clone()
        return bench.Implementation(
            run=lambda y: y.neg_(), args=(private,), reset=lambda: private.copy_(case.inputs[0])
        )

    defaults(mode="hot", budget_s=1.0)
    c = bench.Runner(in_place(), case, name="neg_").compare({"neg_ again": in_place()})
    rows = c.document_case["implementations"]
    bounds = {name: rows[name]["throughput"].get("bound") for name in rows}
    for name in rows:
        assert c[name].flags == [] and c[name].verified, c[name]
        assert bounds[name] is not None and not bounds[name]["exceeded"], bounds[name]
    achieved = (
        bounds["neg_ again"]["achieved_bytes_per_s"] / bounds["neg_ again"]["ceiling_bytes_per_s"]
    )
    record(
        "honest: in place at 0.85 of the L2 (item 11)",
        "python hot",
        "ok",
        f"x{c['neg_ again'].ratio:.3f}; beyond the L2 at {achieved:.2f} of the ceiling",
    )
    assert c["neg_ again"].ratio == pytest.approx(1.0, abs=0.05), c["neg_ again"]
