"""GPU: the third pass's cheats (issue 50), in both front ends, hot and cold, each caught with a
message naming what was found, and its honest controls at their true gap. Rows join
test_cheats_gpu.py's verdict table. docs/integrity/third-pass.md says what each class is.

PTX: tests/cheats/third_pass.toml (kernels/third_pass.cu, built by nvcc at test time) through
`runner bench`, once hot and once cold. Callables: torch through runner.bench on the runner's
CUDA device. Run on the GPU box: `pytest -m gpu tests/integrity/test_cheats_third_gpu.py`.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import orjson
import pytest

from protocol.validation import validate
from tests.conftest import ROOT
from tests.integrity.test_cheats_gpu import (
    artifacts,
    assert_honest_untouched,
    needs_nvcc,
    ptx_verdict,
    record,
)

pytestmark = pytest.mark.gpu

SUITE = ROOT / "tests" / "cheats" / "third_pass.toml"
MODES = ("hot", "cold")


@pytest.fixture(scope="module", params=MODES)
def third_run(request, tmp_path_factory):
    """`runner bench tests/cheats/third_pass.toml --mode MODE`: its cases by id."""
    needs_nvcc()
    mode = request.param
    out = tmp_path_factory.mktemp(f"third-{mode}") / "result.json"
    command = [sys.executable, "-m", "runner", "bench", str(SUITE), "--mode", mode, "-o", str(out)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=400)
    assert out.exists(), done.stderr[-3000:]
    if artifacts():
        (artifacts() / f"cheats-third-{mode}.json").write_bytes(out.read_bytes())
    doc = orjson.loads(out.read_bytes())
    validate(doc, "result", "third-pass cheats run")
    assert done.returncode == 1, "the cheats must make the run exit 1"
    return mode, doc, {c["id"]: c for c in doc["cases"]}


def refused_at_check(case: dict, impl: str) -> str:
    assert case["status"] == "failed" and case["error"]["phase"] == "check", case.get("error")
    assert case["implementations"][impl]["check"]["status"] == "failed"
    return case["error"]["message"]


def test_class_5_an_error_between_1x_and_2x_the_tolerance_at_the_timed_size(third_run):
    mode, _, cases = third_run
    case = cases["timed_size_drift"]
    message = refused_at_check(case, "drift")
    record("timed-size error 1.5 x rtol (class 5)", f"ptx {mode}", ptx_verdict(case), message)
    assert "drift disagrees with the reference" in message, message
    check = case["implementations"]["drift"]["check"]
    against = [a for a in check["against"] if a["against"] == "reference" and a.get("size")]
    assert against and against[0]["mismatches"] > 0, check
    assert_honest_untouched(case)


def test_class_6_ptx_the_largest_finite_value_for_an_infinity(third_run):
    mode, _, cases = third_run
    case = cases["inf_as_max"]
    message = refused_at_check(case, "inf_as_max")
    record("FLT_MAX where the answer is inf (class 6)", f"ptx {mode}", ptx_verdict(case), message)
    check = case["implementations"]["inf_as_max"]["check"]
    assert check["inputs_passed"] == ["declared"], check
    assert any("inf" in p for p in check["problems"]), check["problems"]
    assert_honest_untouched(case)


def test_honest_a_kernel_reading_the_globaltimer_is_at_parity(third_run):
    mode, _, cases = third_run
    case = cases["globaltimer_honest"]
    assert case["status"] == "ok", case.get("error")
    assert_honest_untouched(case, ("cuda", "timer"))
    gap = case["implementations"]["timer"]["gap"]
    record("honest: reads %globaltimer", f"ptx {mode}", "ok", f"gap x{gap['ratio_of_medians']:.3f}")
    assert gap["ratio_of_medians"] == pytest.approx(1.0, abs=0.05), gap


def test_class_4_right_only_for_the_main_distribution_when_launched_back_to_back(third_run):
    """Hot: the audits rotate the edges set in, where the clamped answer is wrong. An audit
    reads one launch of a batch: with 8 audits over 3 sets, a run audits no edges-set launch
    after the first of its batch about once in 25 (then skipped, saying so). Cold launches are
    apart (and their `.global` state restored), so the cheat is exact there: no advantage."""
    mode, _, cases = third_run
    case = cases["cadence"]
    if mode == "cold":
        assert case["implementations"]["cadence"]["check"]["status"] == "passed"
        return
    audit = case["implementations"]["cadence"].get("timing", {}).get("audit", {})
    sets = audit.get("input_sets", 1)
    hit = [k for k, position in audit.get("audited", []) if position % sets == 1 and position]
    if case["status"] == "ok" and not hit:
        pytest.skip(f"no edges-set launch was audited this run ({audit.get('audited')})")
    message = case.get("error", {}).get("message", "")
    record("exact only when launched alone (class 4)", f"ptx {mode}", ptx_verdict(case), message)
    assert case["status"] == "failed" and "cadence" in message, case.get("error")
    assert "did not do the work" in message, message
    assert_honest_untouched(case)


def test_class_7_a_read_of_shared_memory_before_it_is_written(third_run):
    """The gate poisons every SM's shared memory before each launch: the leftover is NaN."""
    mode, _, cases = third_run
    case = cases["shared_uninit"]
    message = refused_at_check(case, "shared_uninit")
    record(
        "reads shared scratch before writing it (class 7)",
        f"ptx {mode}",
        ptx_verdict(case),
        message,
    )
    assert "nan" in message.lower(), message
    assert_honest_untouched(case)


def test_class_7_a_read_of_the_device_heap_before_it_is_written(third_run):
    """The gate poisons the device heap before each launch: a block's `malloc`ed scratch read
    before it is written holds NaN; the honest kernel that writes it first passes."""
    mode, _, cases = third_run
    case = cases["heap_uninit"]
    message = refused_at_check(case, "heap_uninit")
    record("reads malloc'ed scratch before writing it (class 7)", f"ptx {mode}", ptx_verdict(case), message)  # fmt: skip
    assert "nan" in message.lower(), message
    assert_honest_untouched(case, ("cuda", "cuda_again", "heap"))


def test_a_nan_answer_left_unwritten_at_the_timed_size(third_run):
    """Issue 49 item 9: every launch of the timed-size check has a finite poison of its own, so
    an element left unwritten where the answer is NaN no longer matches it (one all-ones poison
    for every launch read as that NaN)."""
    mode, _, cases = third_run
    case = cases["nan_left_unwritten"]
    message = refused_at_check(case, "skip_nan")
    record("leaves NaN answers unwritten at the timed size", f"ptx {mode}", ptx_verdict(case), message)  # fmt: skip
    assert "at the timed size" in message and "skip_nan" in message, message
    check = case["implementations"]["skip_nan"]["check"]
    timed = [a for a in check["against"] if a.get("size") == "timed" and a["mismatches"]]
    assert timed and all(a["first_mismatch"]["expected"] == "nan" for a in timed), check
    assert any("poisoned with 0x" in p for p in check["problems"]), check["problems"]
    assert_honest_untouched(case)


def test_class_2_each_run_draws_and_records_its_input_seed(third_run):
    mode, doc, _ = third_run
    seed = doc["options"]["input_seed"]
    assert isinstance(seed, int) and 0 <= seed < 2**53
    SEEDS[mode] = seed
    if len(SEEDS) == len(MODES):  # the second run drew another
        assert SEEDS["hot"] != SEEDS["cold"], SEEDS
        record("inputs fixed by the suite (class 2)", "ptx", "drawn per run", f"seeds {SEEDS}")


SEEDS: dict[str, int] = {}


# -- the Python front end ---------------------------------------------------------------------------


try:
    import torch
except ImportError:  # the PTX cheats above still run
    torch = None


@pytest.fixture(scope="module", params=MODES)
def session(request):
    if torch is None:
        pytest.skip("the Python front end's cheats drive torch callables (torch is missing)")
    from runner import bench
    from runner.bench.cuda_device import CudaDevice

    s = bench.reset(bench.Session(name="third-pass", device=CudaDevice()))
    s.configure(budget_s=0.3, mode=request.param)
    yield request.param, s
    bench.reset()


class InfScale:
    """y = 3x over values that include infinities: the answer there is an infinity."""

    @staticmethod
    def workload():
        from runner import bench

        class Workload(bench.Workload):
            name = "inf_scale"
            rows = (bench.Row("1M", n=1 << 20),)
            dtypes = ("float32",)

            def gen_inputs(self, params, dtype, seed):
                g = torch.Generator(device="cuda").manual_seed(seed)
                x = torch.rand(params["n"], generator=g, device="cuda") * 4
                x[::97] = float("inf")
                x[1::97] = -float("inf")
                return (x,)

            def reference(self, x):
                return x * 3.0

        return Workload()


def _scale(y):
    return y * 3.0


def _case():
    from runner import bench

    return bench.cases(InfScale.workload())[0]


def test_class_8a_an_answer_kept_in_a_private_argument(session):
    from runner import bench

    mode, _ = session
    case = _case()
    kept = case.inputs[0] * 3.0
    cheat = bench.Implementation(run=lambda answer: answer, args=(kept,))
    with pytest.raises(bench.DeclarationError) as failure:
        bench.Runner(_scale, case, name="scale").compare({"kept": cheat})
    message = str(failure.value)
    record("output aliases a kept answer (class 8a)", f"python {mode}", "refused", message)
    assert "a private argument that the call did not write" in message


@pytest.mark.parametrize("how", ["module function", "function code"])
def test_class_8c_a_callable_that_patches_the_comparison(session, monkeypatch, how):
    from runner import bench
    from runner.measurement.gate import arrays

    mode, _ = session

    def patching(y):
        if how == "module function":
            monkeypatch.setattr(arrays, "compare", lambda *a, **k: {"mismatches": 0})
        else:
            monkeypatch.setattr(arrays.agrees, "__code__", (lambda *a, **k: True).__code__)
        return torch.zeros_like(y)

    with pytest.raises(bench.DeclarationError) as failure:
        bench.Runner(_scale, _case(), name="scale").compare({"patching": patching})
    message = str(failure.value)
    record(f"patches the comparison: {how} (class 8c)", f"python {mode}", "refused", message)
    assert "changed the comparison that checks it" in message


def test_class_6_python_the_largest_finite_value_for_an_infinity(session):
    from runner import bench

    mode, _ = session
    big = torch.finfo(torch.float32).max

    def clamped(y):
        return torch.nan_to_num(y * 3.0, posinf=big, neginf=-big)

    with pytest.raises(bench.CheckFailed) as failure:
        bench.Runner(_scale, _case(), name="scale").compare({"clamped": clamped})
    message = str(failure.value)
    record("FLT_MAX where the answer is inf (class 6)", f"python {mode}", "refused", message)
    assert "clamped" in message and "'inf'" in message, message


def test_class_8b_recheck_off_is_said_in_every_row(session):
    from runner import bench

    mode, s = session
    s.configure(recheck=False)
    try:
        c = bench.Runner(_scale, _case(), name="scale").compare({"same": _scale})
    finally:
        s.configure(recheck="auto")
    for entry in c.document_case["implementations"].values():
        block = entry["integrity"]["recheck"]
        assert block["mode"] == "off" and not block["verified"], block
        assert "recheck off" in entry["verification"]["text"]
    record("recheck turned off (class 8b)", f"python {mode}", "said", block["reason"])


def test_class_3_a_tolerance_that_admits_half_the_work(session):
    """A reduction that sums every second element and doubles: a loose declaration is refused
    before timing, naming the partial-work model."""
    from runner import bench

    mode, _ = session

    class RowSums(bench.Workload):
        name = "row_sums"
        rows = (bench.Row("rows", n=256),)
        dtypes = ("float32",)
        verification = bench.Exact(rtol=0.2, atol=0.0)

        def gen_inputs(self, params, dtype, seed):
            g = torch.Generator(device="cuda").manual_seed(seed)
            scale = torch.linspace(1, 100, params["n"], device="cuda")[:, None]
            return (scale * (0.5 + torch.rand(params["n"], 4096, generator=g, device="cuda")),)

        def reference(self, x):
            return x.sum(dim=1)

    def half(x):
        return x[:, ::2].sum(dim=1) * 2

    with pytest.raises(bench.DeclarationError) as failure:
        bench.Runner(lambda x: x.sum(dim=1), bench.cases(RowSums())[0]).compare({"half": half})
    message = str(failure.value)
    record("half the work, doubled (class 3)", f"python {mode}", "refused", message)
    assert "partial work" in message


def test_item_9_a_cold_sample_is_device_paced_and_says_what_it_held(session):
    """Twice the work in one call: its cold samples replay the call's graph and record two
    kernels (the ratio's figure on two runs: tools/integrity_figures.py)."""
    from runner import bench

    mode, _ = session
    if mode != "cold":
        pytest.skip("cold samples only")

    def twice(y):
        torch.mul(y, 3.0)
        return torch.mul(y, 3.0)

    c = bench.Runner(_scale, _case(), name="scale").compare({"twice": twice})
    rows = c.document_case["implementations"]
    assert "CUDA graph (device-paced)" in rows["twice"]["timing"]["method"]
    held = rows["twice"]["integrity"].get("cold_sample")
    if held is not None:  # the cupti timer (auto's choice in cold mode where it works)
        assert held["kernels"] == 2 and held["gap_s"] < 5e-6, held
        assert rows["scale"]["integrity"]["cold_sample"]["kernels"] == 1
    record("twice the work, cold (item 9)", "python cold", "ok", f"x{c['twice'].ratio:.3f} {held}")


def test_class_1_the_timed_sizes_snapshots_are_sealed():
    """The baseline's outputs at the timed size are kept on the host; a device comparison
    uploads them into a scratch buffer that holds the poison again once it is done."""
    from runner.definition import manifest
    from runner.gpu import driver
    from runner.measurement.gate import correctness as gate
    from runner.measurement.gate.output_dependence import POISON_BYTE
    from runner.measurement.gate.timed_size import TimedOutputs
    from runner.measurement.timing.cuda import InternalKernels

    suite = manifest.load(ROOT / "tests" / "cheats" / "third_pass.toml")
    case = suite.case("globaltimer_honest")
    geometry = case.geometry(case.check_dims)
    with driver.Context(0) as ctx:
        stream = driver.Stream()
        internal = InternalKernels(ctx)
        buffers = gate.DeviceBuffers(case, geometry, internal, stream)
        buffers.fill_inputs()
        buffers.buffers["out"].fill_bytes(0, stream)
        outputs = TimedOutputs(case, geometry, internal, stream)
        snapshot = outputs.snapshot(buffers)
        assert isinstance(snapshot["out"], np.ndarray)  # nothing of it left on the device
        found = outputs.compare("out", buffers.buffers["out"], snapshot["out"])
        assert found["mismatches"] == 0
        scratch = [b.download(np.uint8) for b in outputs._scratch.values()]
        assert scratch and all((s == POISON_BYTE).all() for s in scratch)
        outputs.close()
        buffers.free()
    record("answer readable on the device (class 1)", "ptx", "sealed", "snapshots on the host")
