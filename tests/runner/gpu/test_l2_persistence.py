"""The persisting-L2 limit: set to 0 once per timing context and recorded; no host-side reset of
persisting lines in the timing path (it would run outside stream order)."""

from __future__ import annotations

import ast
import types

import pytest

from runner.errors import TimingError
from runner.gpu import driver
from runner.measurement.timing import cuda
from tests.conftest import ROOT
from tests.runner.bench import test_api as test_bench_api

make_session = test_bench_api.make_session  # the fixture: a fresh session on the fake device


class FakeDriver:
    """The two cuCtx*Limit calls of cuda.bindings.driver, with a limit a context keeps."""

    def __init__(self, kept: int | None = None, refuse: bool = False):
        self.calls: list[tuple] = []
        self.limit = 4 << 20  # as a default from CUDA_DEVICE_DEFAULT_PERSISTING_L2_... would be
        self.kept, self.refuse = kept, refuse
        self.CUlimit = types.SimpleNamespace(CU_LIMIT_PERSISTING_L2_CACHE_SIZE="persisting")

    def cuCtxSetLimit(self, limit, value):
        self.calls.append(("set", limit, value))
        if self.refuse:
            return (801,)  # CUDA_ERROR_NOT_SUPPORTED
        self.limit = value if self.kept is None else self.kept
        return (0,)

    def cuCtxGetLimit(self, limit):
        self.calls.append(("get", limit))
        return (0, self.limit)

    def cuGetErrorName(self, err):
        return (0, b"CUDA_ERROR_NOT_SUPPORTED")

    def cuGetErrorString(self, err):
        return (0, b"operation not supported")


def fake_context(max_bytes: int):
    return types.SimpleNamespace(
        attribute=lambda name: {"MAX_PERSISTING_L2_CACHE_SIZE": max_bytes}[name]
    )


@pytest.fixture
def fake_driver(monkeypatch):
    def install(**kwargs) -> FakeDriver:
        fake = FakeDriver(**kwargs)
        monkeypatch.setattr(driver, "_cu", fake)
        return fake

    return install


def test_the_limit_is_set_to_zero_and_the_read_back_is_recorded(fake_driver):
    fake = fake_driver()
    record = driver.set_no_persisting_l2(fake_context(78 << 20))
    assert fake.calls == [("set", "persisting", 0), ("get", "persisting")]
    assert record["limit_bytes"] == 0 and record["max_bytes"] == 78 << 20
    assert "cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, 0)" in record["how"]
    assert "error" not in record


def test_a_refused_set_is_recorded_with_what_the_limit_reads(fake_driver):
    fake = fake_driver(refuse=True)  # MPS fixes the limit at the server's start
    record = driver.set_no_persisting_l2(fake_context(78 << 20))
    assert record["limit_bytes"] == 4 << 20
    assert record["error"].startswith("cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, 0): ")
    assert fake.calls[-1] == ("get", "persisting")


def test_a_device_without_a_persisting_l2_is_not_asked(fake_driver):
    fake = fake_driver()
    record = driver.set_no_persisting_l2(fake_context(0))
    assert fake.calls == [] and record["limit_bytes"] == 0 and record["max_bytes"] == 0


def test_the_timing_refuses_a_context_whose_limit_is_not_zero(fake_driver):
    fake_driver(kept=1 << 20)
    with pytest.raises(TimingError, match="persisting-L2 limit reads 1048576 bytes"):
        cuda.InternalKernels(fake_context(78 << 20))


def test_the_l2_flush_is_one_kernel_in_stream_order_and_no_driver_call(monkeypatch):
    """The cold flush queues its read kernel and calls nothing on the host (no reset of
    persisting lines, which would run when the host gets there, not in stream order)."""
    touched: list[str] = []

    class Recorder:
        def __getattr__(self, name):
            touched.append(name)
            raise AssertionError(f"the flush called the driver: {name}")

    monkeypatch.setattr(driver, "_cu", Recorder())
    launched = []
    kernels = types.SimpleNamespace(
        _flush_buffer=object(),
        _flush_args="args",
        _flush_kernel=types.SimpleNamespace(launch=lambda s, a: launched.append((s, a))),
    )
    cuda.InternalKernels.flush_l2(kernels, "stream")
    assert launched == [("stream", "args")] and touched == []


def test_no_module_of_the_runner_resets_persisting_lines_from_the_host():
    calls = []
    for path in (ROOT / "runner").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and "ResetPersistingL2" in node.attr:
                calls.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert calls == []


# ---- on the GPU -----------------------------------------------------------------------------


@pytest.mark.gpu
def test_a_timing_context_reads_its_persisting_limit_back_as_zero():
    context = driver.Context(0)
    try:
        kernels = cuda.InternalKernels(context)
        try:
            d = driver.cu()
            limit = d.CUlimit.CU_LIMIT_PERSISTING_L2_CACHE_SIZE
            assert int(driver.check(d.cuCtxGetLimit(limit), "cuCtxGetLimit")) == 0
            assert kernels.persisting_l2["limit_bytes"] == 0
            assert kernels.persisting_l2["max_bytes"] > 0  # sm_80 on: the H200 has one
        finally:
            kernels.close()
    finally:
        context.close()


def test_a_call_that_raises_the_limit_fails_a_cold_comparison(make_session):
    """runner.bench: the limit is read again after the cold samples; a callable that raised it
    (so its lines could outlive the flush) fails the comparison, every row refused."""
    from runner import bench
    from tests.runner.bench.test_api import Scale

    _, device = make_session()
    device.persisting_l2_bytes = lambda: 1 << 20
    (case,) = bench.cases(Scale())
    with pytest.raises(bench.IntegrityFailed, match="persisting-L2 limit read 1048576 bytes"):
        bench.Runner(lambda y: 2 * y, case, name="op").compare({"same": lambda y: 2 * y})


@pytest.mark.gpu
def test_runner_benchs_device_reads_the_limit_back_as_zero_and_records_it():
    pytest.importorskip("torch")
    from runner.bench.cuda_device import CudaDevice

    device = CudaDevice()
    try:
        assert device.persisting_l2_bytes() == 0
        assert device.internal.persisting_l2["limit_bytes"] == 0
    finally:
        device.close()
