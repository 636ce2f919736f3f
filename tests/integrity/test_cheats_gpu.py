"""GPU: the cheats suite (issue 13). Deliberately cheating or broken implementations, in both
front ends, each caught with a message that says what was found; honest copies of the same
cases still pass (A/A within 0.2 %).

PTX: tests/cheats/ (cases.toml, kernels/*.cu built by nvcc at test time) through `runner bench`
and `runner check`. Callables: torch (and, for one cheat, Triton) through runner.bench on the
runner's CUDA device. At the end the table cheat | front end | verdict | message goes to stderr
and, when $KERNELGAP_TEST_ARTIFACTS is set, to cheats.md there (tests/integrity/conftest.py),
with both result documents.
Run on the GPU box: `pytest -m gpu tests/integrity/test_cheats_gpu.py`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import orjson
import pytest

from protocol.validation import validate
from tests.conftest import ROOT
from tests.integrity.test_cheats import runner_check

pytestmark = pytest.mark.gpu

SUITE = ROOT / "tests" / "cheats" / "cases.toml"
ALPHA = 3.0
TABLE: list[tuple[str, str, str, str]] = []


def record(cheat: str, front_end: str, verdict: str, message: str) -> None:
    text = " ".join(str(message).split())
    TABLE.append((cheat, front_end, verdict, text[:300] + ("..." if len(text) > 300 else "")))


def artifacts() -> Path | None:
    keep = os.environ.get("KERNELGAP_TEST_ARTIFACTS")
    return Path(keep) if keep else None


def table_text(rows: list[tuple[str, str, str, str]]) -> str:
    """The rows as a markdown table."""
    cell = lambda s: s.replace("|", "\\|")  # noqa: E731
    lines = ["| cheat | front end | verdict | message |", "| --- | --- | --- | --- |"]
    lines += [f"| {' | '.join(cell(c) for c in row)} |" for row in rows]
    return "\n".join(lines) + "\n"


def write_table(rows: list[tuple[str, str, str, str]], name: str) -> None:
    """The rows as a markdown table on stderr and, with $KERNELGAP_TEST_ARTIFACTS, in `name`
    (tests/integrity/conftest.py calls it at the end of every module that recorded rows)."""
    if not rows:
        return
    text = table_text(rows)
    sys.__stderr__.write("\n" + text)
    if artifacts():
        (artifacts() / name).write_text(text)


# -- PTX: runner bench and runner check on tests/cheats ------------------------------------------


def needs_nvcc():
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH (the cheats suite's kernels are CUDA C++)")


@pytest.fixture(scope="module")
def ptx_run(tmp_path_factory):
    doc, done = bench_cheats(tmp_path_factory.mktemp("cheats"), "cheats-ptx")
    assert done.returncode == 1, "the cheats must make the run exit 1"
    return {c["id"]: c for c in doc["cases"]}


def bench_cheats(folder: Path, name: str, *args: str) -> tuple[dict, subprocess.CompletedProcess]:
    """`runner bench tests/cheats/cases.toml ARGS`: its validated document (kept as `name`.json
    among the artifacts) and the finished process."""
    needs_nvcc()
    out = folder / "result.json"
    done = subprocess.run(
        [sys.executable, "-m", "runner", "bench", str(SUITE), *args, "-o", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert out.exists(), done.stderr[-3000:]
    if artifacts():
        shutil.copy(out, artifacts() / f"{name}.json")
    doc = orjson.loads(out.read_bytes())
    validate(doc, "result", f"cheats suite run ({name})")
    return doc, done


def ptx_verdict(case: dict) -> str:
    return case["status"] if case["status"] == "ok" else f"failed ({case['error']['phase']})"


def caught_at_the_timed_size(case: dict, name: str) -> str | None:
    """Where the timed size's check caught `name` (each launch there has a finite poison byte of
    its own, drawn per run, so a kernel that skips what looks written or poisoned leaves it
    unwritten there): assert the case failed in the check naming `name`, the problem naming
    the first element's expected and got and the poison, and return the message. None where
    the check passed (the cheat got past the gate; the caller asserts the later defence)."""
    check = case["implementations"][name]["check"]
    if check["status"] == "passed":
        return None
    assert case["status"] == "failed" and case["error"]["phase"] == "check", case.get("error")
    message = case["error"]["message"]
    assert f"at the timed size, {name} disagrees" in message, message
    timed = [p for p in check["problems"] if "at the timed size" in p]
    assert timed and "expected" in timed[0] and "got" in timed[0], check["problems"]
    assert "outputs poisoned with 0x" in timed[0], timed[0]
    assert_honest_untouched(case)
    return f"{message}: {timed[0]}"


def assert_honest_untouched(case: dict, honest=("cuda", "cuda_again")) -> None:
    message = case.get("error", {}).get("message", "")
    for name in honest:
        impl = case["implementations"][name]
        assert impl["check"]["status"] == "passed", impl["check"]
        assert f"{name}:" not in message, message
        if "integrity" in impl:
            assert impl["integrity"]["output_dependent"] is False, impl["integrity"]


def test_ptx_honest_copies_are_at_parity_within_0_2_percent(ptx_run):
    case = ptx_run["honest_aa"]
    assert case["status"] == "ok", case.get("error")
    assert_honest_untouched(case)
    gap = case["implementations"]["cuda_again"]["gap"]
    assert abs(gap["ratio_of_medians"] - 1.0) < 0.002, gap
    record("none (honest A/A)", "PTX", "ok", f"gap x{gap['ratio_of_medians']:.4f}")


def test_ptx_skip_if_output_already_right_is_output_dependent(ptx_run):
    case = ptx_run["skip_settled"]
    if message := caught_at_the_timed_size(case, "skip"):
        record("skip if the output is already right", "PTX", ptx_verdict(case), message)
        return
    assert case["status"] == "failed" and case["error"]["phase"] == "timing", case.get("error")
    assert "output-dependent timing" in case["error"]["message"]
    assert "skip: " in case["error"]["message"]
    assert case["implementations"]["skip"]["integrity"]["output_dependent"] is True
    assert_honest_untouched(case)
    # the flagged row loses its gap; the honest copy of the baseline keeps its own, at parity
    assert case["implementations"]["skip"]["gap"] is None
    honest = case["implementations"]["cuda_again"]["gap"]
    assert abs(honest["ratio_of_medians"] - 1) <= 0.002, honest
    record(
        "skip if the output is already right", "PTX", ptx_verdict(case), case["error"]["message"]
    )


def test_ptx_result_cached_by_output_pointer_is_caught_after_the_poisoned_replay(ptx_run):
    """Once cached, a launch leaves the output as it is: the gate's third run (on the edges
    inputs) finds its poison still there; were the gate to run it only twice, plain hot replays
    would look fast, and after the replay that poisons the outputs first they still hold the
    poison."""
    case = ptx_run["pointer_cache"]
    assert case["status"] == "failed", case
    message = case["error"]["message"]
    assert case["error"]["phase"] in ("timing", "check"), case["error"]
    assert "cached" in message
    if case["error"]["phase"] == "check":  # the gate's third run (issue 30: the edges inputs)
        check = case["implementations"]["cached"]["check"]
        assert "on the edges inputs" in " ".join(check["problems"]), check
    else:  # flagged output-dependent, or its outputs after the poisoned hot replay failed
        assert "replay" in message or case["implementations"]["cached"]["integrity"].get(
            "output_dependent"
        ), message
    assert_honest_untouched(case)
    record("result cached by output pointer", "PTX", ptx_verdict(case), message)


@pytest.fixture(scope="module")
def ptx_check():
    return runner_check()


def test_ptx_zeros_under_a_loose_tolerance_are_refused_by_runner_check(ptx_check, ptx_run):
    assert ptx_check.returncode == 1, ptx_check.stderr
    failures = [line for line in ptx_check.stderr.splitlines() if line.startswith("FAIL")]
    # the two deliberately loose cases: zeros here, the f16 case of the gate's cheats
    assert [line.split(":")[0] for line in failures] == ["FAIL  loose_zeros", "FAIL  half_in_f32"]
    line = failures[0]
    assert line.startswith("FAIL  loose_zeros: tolerance: outputs that did not do the work pass")
    assert "all zeros" in line
    # at run time the gate refuses them too: the zeros resemble a null model (what a rounding
    # shortcut would give) as closely as the reference, whatever the tolerance admits
    check = ptx_run["loose_zeros"]["implementations"]["zeros"]["check"]
    assert check["status"] == "failed" and "null model" in "; ".join(check["problems"]), check
    record("zeros under a loose tolerance", "PTX", "refused by runner check and the gate", line)


def test_ptx_an_f32_computation_in_an_f64_case_fails_the_gate(ptx_run):
    case = ptx_run["f32_in_f64"]
    assert case["status"] == "failed" and case["error"]["phase"] == "check", case.get("error")
    check = case["implementations"]["f32"]["check"]
    assert check["status"] == "failed" and check["against"][0]["mismatches"] > 0, check
    assert "correctness gate failed for f32" in case["error"]["message"]
    assert_honest_untouched(case)
    assert "timing" not in case["implementations"]["cuda"]
    record("f32 computation in an f64 case", "PTX", ptx_verdict(case), case["error"]["message"])


def test_ptx_a_kernel_that_mutates_its_input_fails_the_gate(ptx_run):
    case = ptx_run["mutates_input"]
    assert case["status"] == "failed" and case["error"]["phase"] == "check", case.get("error")
    check = case["implementations"]["scribble"]["check"]
    assert check["inputs_modified"] == ["x"], check
    assert any('role = "inout"' in p for p in check["problems"])
    assert_honest_untouched(case)
    record(
        "mutates its input (no reset declared)", "PTX", ptx_verdict(case), case["error"]["message"]
    )


def test_ptx_a_timing_above_the_device_peak_is_impossible(ptx_run):
    case = ptx_run["claims_too_many_bytes"]
    assert case["status"] == "failed" and case["error"]["phase"] == "timing", case.get("error")
    message = case["error"]["message"]
    assert "physically impossible timing" in message
    assert "cuda: " in message and "cuda_again: " in message and "GB/s is above" in message
    assert case["implementations"]["cuda_again"]["gap"] is None
    record("timing above peak (1000x the bytes declared)", "PTX", ptx_verdict(case), message)


# -- callables: runner.bench on the CUDA device ---------------------------------------------------


def torch_module():
    return pytest.importorskip("torch", reason="the callable cheats drive torch")


@pytest.fixture(scope="module")
def session():
    torch_module()
    from runner import bench
    from runner.bench.cuda_device import CudaDevice

    s = bench.reset(bench.Session(name="cheats", device=CudaDevice()))
    # these cheats test the other defences, each on its own: recheck (auto by default) is set
    # where a test wants it (tests/integrity/test_cheats_bench_gpu.py runs with the defaults)
    s.configure(budget_s=0.3, recheck=False)
    yield s
    if artifacts() and s.cases:
        s.write(artifacts() / "cheats-callable.json", artifacts() / "cheats-callable.md")
    bench.reset()


@pytest.fixture
def options(session):
    """session.configure(...) for one test; the defaults come back after it."""
    before = session.options
    yield session.configure
    session.options = before


def cupti_reason():
    from runner.bench import watch as cupti_timer

    return cupti_timer.unavailable_reason()


def scale_case(count_copies: bool = False):
    torch = torch_module()
    from runner import bench

    class Scale(bench.Workload):
        """y = 3 x in float32, 16 M elements: 128 MiB a call, past the L2."""

        name = "cheats-scale"
        rows = (bench.Row("16M", n=1 << 24),)
        dtypes = ("float32",)

        def gen_inputs(self, params, dtype, seed):
            g = torch.Generator(device="cuda").manual_seed(seed)
            return (torch.rand(params["n"], generator=g, device="cuda") * 2 - 1,)

        def reference(self, x):
            return x * ALPHA

        def flops(self, params, dtype):
            return float(params["n"])

        def bytes(self, params, dtype):
            return 8.0 * params["n"]

    (case,) = bench.cases(Scale(), count_copies=count_copies)
    return case


def honest(y):
    return torch_module().mul(y, ALPHA)


def test_callable_honest_copies_are_at_parity_within_0_2_percent(session, options):
    from runner import bench

    options(mode="hot", budget_s=1.0)
    c = bench.Runner(honest, scale_case(), name="mul").compare({"same": honest})
    assert c["mul"].flags == [] and c["same"].flags == []
    assert abs(c["same"].ratio - 1.0) < 0.002, c["same"]
    window = c.document_case["implementations"]["same"]["integrity"]["window"]
    if cupti_reason() is None:  # hot samples by events wait behind the blocker: not watched
        from runner.bench import integrity

        assert window == {"checked": False, "reason": integrity.HOT_EVENTS}, window
    else:
        assert window == {"checked": False, "reason": cupti_reason()}
    record("none (honest A/A, hot)", "callable", "ok", f"ratio x{c['same'].ratio:.4f}")
    if cupti_reason() is None:  # cold, the default timer (CUPTI) watches every window
        options(mode="cold", budget_s=1.0)
        c = bench.Runner(honest, scale_case(), name="mul").compare({"same": honest})
        assert c["mul"].flags == [] and c["same"].flags == []
        window = c.document_case["implementations"]["same"]["integrity"]["window"]
        assert window["checked"] and window["findings"] == [], window
        assert window["windows"] >= c["same"].samples
        record("none (honest A/A, cold)", "callable", "ok", f"ratio x{c['same'].ratio:.4f}")


class SkipSettled:
    """Keeps one output buffer and writes only the elements that still hold NaN (never written):
    checked once it is right; every later call only reads its output."""

    def __init__(self):
        import triton
        import triton.language as tl

        @triton.jit
        def scale_unless_settled(x_ptr, out_ptr, alpha, n, BLOCK: tl.constexpr):
            offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            inside = offsets < n
            seen = tl.load(out_ptr + offsets, mask=inside, other=0.0)
            todo = inside & (seen != seen)
            x = tl.load(x_ptr + offsets, mask=todo, other=0.0)
            tl.store(out_ptr + offsets, x * alpha, mask=todo)

        self.kernel, self.out = scale_unless_settled, None

    def __call__(self, y):
        torch = torch_module()
        if self.out is None:
            self.out = torch.full_like(y, float("nan"))
        n = y.numel()
        self.kernel[(triton_cdiv(n, 1024),)](y, self.out, ALPHA, n, BLOCK=1024)
        return self.out


def triton_cdiv(a: int, b: int) -> int:
    return -(-a // b)


def test_callable_skip_if_output_already_right_fails_recheck(session, options):
    pytest.importorskip("triton", reason="the skipping kernel is written in Triton")
    from runner import bench

    options(mode="hot", recheck=True)
    with pytest.raises(bench.RecheckFailed) as failure:
        bench.Runner(honest, scale_case(), name="mul").compare({"skip": SkipSettled()})
    message = str(failure.value)
    assert "recheck: implementation 'skip' after a timed sample on fresh inputs" in message
    assert "does not match the reference" in message
    assert (
        session.cases[-1]["status"] == "failed" and session.cases[-1]["error"]["phase"] == "timing"
    )
    record("skip if the output is already right (Triton)", "callable", "recheck failed", message)


def cached_by_pointer():
    cache = {}

    def cached(y):
        if y.data_ptr() not in cache:
            cache[y.data_ptr()] = torch_module().mul(y, ALPHA)
        return cache[y.data_ptr()]

    return cached


def test_callable_result_cached_by_input_pointer_is_flagged_and_fails_recheck(session):
    """Cold, copies counted: every sample is one real call, which finds its result cached."""
    from runner import bench

    case = scale_case(count_copies=True)
    impls = {"same": honest, "cached": cached_by_pointer()}
    if cupti_reason() is None:  # the cupti timer (auto's, cold) finds nothing to time: 0 s
        with pytest.raises(bench.IntegrityFailed) as failure:
            bench.Runner(honest, case, name="mul").compare(impls)
        rows = failure.value.comparison.rows
        flags = " ".join(rows["cached"].flags)
        assert "no kernel or copy ran on the device during" in flags
    else:  # events around a call that launches nothing: terabytes a second, the row flagged
        rows = bench.Runner(honest, case, name="mul").compare(impls).rows
        flags = " ".join(rows["cached"].flags)
        assert "physically impossible timing" in flags
    assert rows["same"].flags == [] and rows["same"].ratio is not None
    assert rows["cached"].ratio is None
    record("result cached by input pointer", "callable", "flagged", flags)

    session.configure(recheck=True)
    try:  # the recheck, or before it the empty graph its capture left, refuses it
        with pytest.raises((bench.RecheckFailed, bench.IntegrityFailed)) as failure:
            bench.Runner(honest, case, name="mul").compare({"cached": cached_by_pointer()})
    finally:
        session.configure(recheck=False)
    text = str(failure.value)
    assert (
        "implementation 'cached' after a timed" in text or "captured CUDA graph is empty" in text
    ), text
    record(
        "result cached by input pointer",
        "callable (recheck)",
        "recheck failed" if failure.type is bench.RecheckFailed else "refused (empty graph)",
        session.cases[-1]["error"]["message"],
    )


def needs_cupti():
    why = cupti_reason()
    if why:
        pytest.skip(f"the window check needs CUPTI: {why}")


def test_callable_work_on_a_side_stream_is_flagged_naming_the_stream(session, options):
    needs_cupti()
    torch = torch_module()
    from runner import bench

    side = torch.cuda.Stream()

    def on_a_side_stream(y):
        with torch.cuda.stream(side):
            out = torch.mul(y, ALPHA)
        side.synchronize()  # done before it returns: the timing stream never sees it
        return out

    case = scale_case(count_copies=True)  # cold, uncaptured: every launch is one real call
    with pytest.raises(bench.IntegrityFailed) as failure:
        bench.Runner(honest, case, name="mul").compare({"same": honest, "side": on_a_side_stream})
    rows = failure.value.comparison.rows
    flags = " ".join(rows["side"].flags)
    assert "not the timing stream" in flags and "during a timed window" in flags
    assert rows["same"].flags == [] and rows["same"].ratio == pytest.approx(1.0, abs=0.05)
    record("work on a side stream", "callable", "flagged", flags)


def test_callable_work_finished_by_a_host_thread_after_return_is_caught(session, options):
    needs_cupti()
    torch = torch_module()
    from runner import bench

    threads = []

    def finished_by_a_thread(y):
        out = torch.empty_like(y)
        stream = torch.cuda.current_stream()

        def finish():
            with torch.cuda.stream(stream):
                torch.mul(y, ALPHA, out=out)

        threads.append(threading.Thread(target=finish))
        threads[-1].start()
        return out

    case = scale_case(count_copies=True)
    try:
        with pytest.raises((bench.IntegrityFailed, bench.CheckFailed)) as failure:
            bench.Runner(honest, case, name="mul").compare(
                {"same": honest, "thread": finished_by_a_thread}
            )
    finally:
        for t in threads:
            t.join()
    if isinstance(failure.value, bench.IntegrityFailed):  # it passed the check, as it can
        rows = failure.value.comparison.rows
        flags = " ".join(rows["thread"].flags)
        assert any(
            text in flags
            for text in (
                "after the end event",
                "still running",
                "ran outside every window",
                "no kernel or copy ran",
            )
        ), flags
        assert rows["same"].flags == []
        record("a host thread finishing the work after return", "callable", "flagged", flags)
    else:  # the check read the output before the thread had written it
        assert "thread:" in str(failure.value)
        record(
            "a host thread finishing the work after return",
            "callable",
            "check failed",
            str(failure.value),
        )


def test_callable_returning_a_lazy_tensor_subclass_is_refused(session):
    torch = torch_module()
    from torch.utils._pytree import tree_map

    from runner import bench

    class LazyScale(torch.Tensor):
        """Computes 3 x only when something reads it: the timed call returns at once."""

        @staticmethod
        def __new__(cls, x):
            made = torch.Tensor._make_wrapper_subclass(
                cls, x.size(), strides=x.stride(), dtype=x.dtype, device=x.device
            )
            made.source = x
            return made

        @classmethod
        def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
            def force(t):
                return torch.mul(t.source, ALPHA) if isinstance(t, LazyScale) else t

            return func(*tree_map(force, args), **tree_map(force, kwargs or {}))

    with pytest.raises(bench.DeclarationError) as failure:
        bench.Runner(honest, scale_case(), name="mul").compare({"lazy": LazyScale})
    message = str(failure.value)
    assert "implementation 'lazy' returned output 0 is a" in message and "LazyScale" in message
    assert "a subclass of torch.Tensor" in message and "must be plain torch.Tensor" in message
    assert session.cases[-1]["error"]["phase"] == "check"
    record("a lazy tensor subclass", "callable", "refused (declaration error)", message)
