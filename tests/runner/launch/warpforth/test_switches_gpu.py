"""WarpForth's 37 GPU test kernels through each runner switch (issue 54), parsed as WarpForth's
harness parses them and checked against what each of its tests expects; and the failures its
harness must see as failures (a missing entry, a bad parameter type, a fault, a hang) through
each switch, with and without the launch service."""

from __future__ import annotations

import json
import struct

import pytest

from tests.runner.launch.test_oneshot import OOB_PTX, SPIN_PTX
from tests.runner.launch.warpforth.conftest import REQUESTS, KernelRunner, RunnerError

pytestmark = pytest.mark.gpu

TESTS = [r["test"] for r in json.loads(REQUESTS.read_text())["requests"]]


def _expected(value):
    if isinstance(value, dict):  # pytest.approx as recorded; None is approx's default
        return pytest.approx(value["approx"], rel=value["rel"], abs=value["abs"])
    if isinstance(value, list):
        return [_expected(v) for v in value]
    return value


def check(values: list, expect: list[dict]) -> None:
    """Each comparison the WarpForth test made with its result, made again."""
    assert expect, "a recorded test with no expectation"
    for e in expect:
        got = values
        if "unpack_f32" in e:  # the test read f32 pairs out of i64 values
            raw = b"".join(struct.pack("<q", v) for v in values)
            got = list(struct.unpack(f"<{e['unpack_f32']}f", raw[: 4 * e["unpack_f32"]]))
        if e["index"] is None:
            assert got == _expected(e["value"])
        else:
            assert got[e["index"]] == _expected(e["value"])


@pytest.mark.parametrize("test", TESTS)
def test_warpforths_kernels_through_each_switch(kernel_runner, warpforth_requests, test):
    (record,) = [r for r in warpforth_requests if r["test"] == test]
    check(kernel_runner.run(record["request"]), record["expect"])


@pytest.mark.parametrize("test", ["test_addition", "test_float_scalar_param",
                                  "test_naive_attention_f32"])  # fmt: skip
def test_warpforths_kernels_without_the_service(
    switch, tmp_path, runtime, warpforth_requests, test
):
    (record,) = [r for r in warpforth_requests if r["test"] == test]
    runner = KernelRunner(switch, tmp_path, False, runtime)
    check(runner.run(record["request"]), record["expect"])


def _request(ptx: str, kernel: str, params: list, count: int = 1) -> dict:
    return {"ptx": ptx, "kernel": kernel, "grid": [1], "block": [1], "params": params,
            "outputs": [{"param": 0, "count": count}]}  # fmt: skip


def test_a_missing_entry_fails_through_each_switch(
    switch, service, tmp_path, runtime, warpforth_requests
):
    ptx = warpforth_requests[0]["request"]["ptx"]
    request = _request(ptx, "nosuch", [{"type": "i64[]", "values": [0] * 256}])
    with pytest.raises(RunnerError, match="nosuch"):
        KernelRunner(switch, tmp_path, service, runtime).run(request)


def test_a_fault_fails_through_each_switch(switch, service, tmp_path, runtime):
    request = _request(OOB_PTX, "oob", [{"type": "u32[]", "values": [0] * 4}])
    with pytest.raises(RunnerError, match="CUDA_ERROR_ILLEGAL_ADDRESS"):
        KernelRunner(switch, tmp_path, service, runtime).run(request)


def test_a_hang_is_ended_through_each_switch(switch, service, tmp_path, runtime):
    request = _request(SPIN_PTX, "spin", [{"type": "u32[]", "values": [0]}])
    with pytest.raises(RunnerError, match="did not finish within timeout_s=2"):
        KernelRunner(switch, tmp_path, service, runtime).run(request, timeout_s=2)
