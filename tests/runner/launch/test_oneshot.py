"""runner.launch.oneshot: one JSON run request in, one JSON response out, whatever happens."""

from __future__ import annotations

import base64
import io
import math
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from protocol import decode, encode, validate
from protocol.validation import errors
from runner.errors import RequestError
from runner.explain import static
from runner.launch import oneshot
from tests.conftest import gpu_unavailable_reason

ROOT = Path(__file__).parents[3]

# Handwritten PTX; mul.rn/add.rn (no fma contraction) so numpy computes the same bits.
AXPY_PTX = """.version 7.0
.target sm_75
.address_size 64

// out[i] = a * x[i] + y[i] (f64, no fma), iout[i] = ix[i] + k (i64), fout[i] = s * fx[i] (f32)
.visible .entry axpy(
	.param .u64 out, .param .u64 x, .param .u64 y, .param .f64 a,
	.param .u64 iout, .param .u64 ix, .param .u64 k,
	.param .u64 fout, .param .u64 fx, .param .f32 s,
	.param .u32 n
)
{
	.reg .pred %p;
	.reg .b32 %r<5>;
	.reg .b64 %rd<16>;
	.reg .f64 %fd<5>;
	.reg .f32 %f<3>;

	mov.u32 %r1, %ctaid.x;
	mov.u32 %r2, %ntid.x;
	mov.u32 %r3, %tid.x;
	mad.lo.u32 %r4, %r1, %r2, %r3;
	ld.param.u32 %r1, [n];
	setp.ge.u32 %p, %r4, %r1;
	@%p bra DONE;
	mul.wide.u32 %rd1, %r4, 8;
	mul.wide.u32 %rd2, %r4, 4;

	ld.param.u64 %rd3, [x];
	cvta.to.global.u64 %rd3, %rd3;
	add.s64 %rd3, %rd3, %rd1;
	ld.global.f64 %fd1, [%rd3];
	ld.param.u64 %rd4, [y];
	cvta.to.global.u64 %rd4, %rd4;
	add.s64 %rd4, %rd4, %rd1;
	ld.global.f64 %fd2, [%rd4];
	ld.param.f64 %fd3, [a];
	mul.rn.f64 %fd4, %fd3, %fd1;
	add.rn.f64 %fd4, %fd4, %fd2;
	ld.param.u64 %rd5, [out];
	cvta.to.global.u64 %rd5, %rd5;
	add.s64 %rd5, %rd5, %rd1;
	st.global.f64 [%rd5], %fd4;

	ld.param.u64 %rd6, [ix];
	cvta.to.global.u64 %rd6, %rd6;
	add.s64 %rd6, %rd6, %rd1;
	ld.global.u64 %rd7, [%rd6];
	ld.param.u64 %rd8, [k];
	add.s64 %rd7, %rd7, %rd8;
	ld.param.u64 %rd9, [iout];
	cvta.to.global.u64 %rd9, %rd9;
	add.s64 %rd9, %rd9, %rd1;
	st.global.u64 [%rd9], %rd7;

	ld.param.u64 %rd10, [fx];
	cvta.to.global.u64 %rd10, %rd10;
	add.s64 %rd10, %rd10, %rd2;
	ld.global.f32 %f1, [%rd10];
	ld.param.f32 %f2, [s];
	mul.rn.f32 %f1, %f2, %f1;
	ld.param.u64 %rd11, [fout];
	cvta.to.global.u64 %rd11, %rd11;
	add.s64 %rd11, %rd11, %rd2;
	st.global.f32 [%rd11], %f1;
DONE:
	ret;
}
"""

OOB_PTX = """.version 7.0
.target sm_75
.address_size 64

// Writes 1 TiB past the start of its buffer: an illegal address.
.visible .entry oob(.param .u64 buf)
{
	.reg .b32 %r1;
	.reg .b64 %rd<3>;
	ld.param.u64 %rd1, [buf];
	cvta.to.global.u64 %rd1, %rd1;
	add.s64 %rd2, %rd1, 1099511627776;
	mov.u32 %r1, 1;
	st.global.u32 [%rd2], %r1;
	ret;
}
"""

SPIN_PTX = """.version 7.0
.target sm_75
.address_size 64

// Spins until flag[0] == 1, which nobody writes: a hang.
.visible .entry spin(.param .u64 flag)
{
	.reg .pred %p;
	.reg .b32 %r1;
	.reg .b64 %rd1;
	ld.param.u64 %rd1, [flag];
	cvta.to.global.u64 %rd1, %rd1;
LOOP:
	ld.volatile.global.u32 %r1, [%rd1];
	setp.ne.u32 %p, %r1, 1;
	@%p bra LOOP;
	ret;
}
"""

EXAMPLE_REQUEST = {
    "ptx_base64": base64.b64encode(b".version 7.0\n.target sm_75\n").decode(),
    "kernel": "main",
    "grid": [1, 1, 1],
    "block": [32, 1, 1],
    "shared_bytes": 0,
    "params": [
        {"type": "i64[]", "values": [1, 2, 3]},
        {"type": "f64[]", "values": [0.5, "nan", "-inf"]},
        {"type": "f32[]", "values": [1.5], "count": 4},
        {"type": "i64", "value": 3},
        {"type": "f64", "value": 2.5},
    ],
    "outputs": [{"param": 0, "count": 3}, {"param": 2}],
}
OK_RESPONSE = {
    "status": "ok",
    "schema_version": "1.0.0",
    "outputs": [
        {"param": 0, "type": "i64[]", "values": [1, -(2**63), 2**63 - 1]},
        {"param": 2, "type": "f32[]", "values": [1.5, "nan", "inf", "-inf"]},
    ],
    "elapsed_ms": 0.0123,
    "load_ms": 4.5,
    "ptx": {"version": "7.0", "target": "sm_75"},
}
ERROR_RESPONSE = {
    "status": "error",
    "schema_version": "1.0.0",
    "phase": "launch",
    "error": "cuEventSynchronize: CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered",
    "cuda_error": "CUDA_ERROR_ILLEGAL_ADDRESS",
}


def with_ptx_text(request: dict, ptx: str) -> dict:
    request = {k: v for k, v in request.items() if k != "ptx_base64"}
    return {"ptx": ptx, **request}


def run_main(raw: bytes) -> tuple[int, dict]:
    """main() on in-memory pipes: the status and the one document it wrote (checked valid)."""
    stdout = io.BytesIO()
    status = oneshot.main(io.BytesIO(raw), stdout)
    lines = stdout.getvalue().splitlines()
    assert len(lines) == 1, stdout.getvalue()
    document = decode(lines[0])
    validate(document, "run-response", "response")
    return status, document


# ---- schemas -------------------------------------------------------------------------------


@pytest.mark.parametrize("form", ["ptx_base64", "ptx"])
def test_example_request_is_accepted(form):
    request = EXAMPLE_REQUEST if form == "ptx_base64" else with_ptx_text(EXAMPLE_REQUEST, "x")
    assert errors(request, "run-request") == []
    assert oneshot.parse_request(encode(request)) == request


@pytest.mark.parametrize("response", [OK_RESPONSE, ERROR_RESPONSE])
def test_response_forms_are_accepted(response):
    assert errors(response, "run-response") == []


def test_response_schema_rejects_mixed_forms():
    assert errors({**OK_RESPONSE, "phase": "launch"}, "run-response")
    assert errors({**ERROR_RESPONSE, "phase": "compile"}, "run-response")
    bad_int = {**OK_RESPONSE, "outputs": [{"param": 0, "type": "i64[]", "values": [1.5]}]}
    assert errors(bad_int, "run-response") == ["outputs[0].values[0]: 1.5 is not of type 'integer'"]


def changed(**fields) -> dict:
    return {**EXAMPLE_REQUEST, **fields}


def with_param(index: int, param: dict) -> dict:
    params = list(EXAMPLE_REQUEST["params"])
    params[index] = param
    return changed(params=params)


# (request, field named in the message, whether the schema alone rejects it)
REJECTED = {
    "both ptx fields": ({**EXAMPLE_REQUEST, "ptx": "x"}, "ptx_base64", True),
    "neither ptx field": (
        {k: v for k, v in EXAMPLE_REQUEST.items() if k != "ptx_base64"},
        "ptx_base64",
        True,
    ),
    "unknown field": (changed(grids=[1]), "'grids' was unexpected", True),
    "f16 array": (with_param(1, {"type": "f16[]", "values": [1.0]}), "params[1].type", True),
    "scalar with values": (
        with_param(3, {"type": "i64", "values": [3]}),
        "params[3]: Additional properties are not allowed ('values' was unexpected)",
        True,
    ),
    "grid of 0 dims": (changed(grid=[]), "at grid:", True),
    "grid of 4 dims": (changed(grid=[1, 1, 1, 1]), "at grid:", True),
    "zero block size": (changed(block=[0]), "at block[0]:", True),
    "output out of range": (changed(outputs=[{"param": 5}]), "outputs[0].param: 5", False),
    "output of a scalar": (
        changed(outputs=[{"param": 0}, {"param": 4}]),
        "outputs[1].param: params[4] is a scalar",
        False,
    ),
    "output count too big": (
        changed(outputs=[{"param": 0, "count": 4}]),
        "outputs[0].count",
        False,
    ),
    "i32 out of range": (
        with_param(0, {"type": "i32[]", "values": [1, 2**31]}),
        "params[0].values[1]: 2147483648 is out of range for i32",
        False,
    ),
    "u64 below zero": (with_param(3, {"type": "u64", "value": -1}), "params[3].value: -1", False),
    "non-integer for i64": (
        with_param(0, {"type": "i64[]", "values": [1, 2.5]}),
        "params[0].values[1]: 2.5 is not an i64 value (expected an integer)",
        True,
    ),
    "float string": (with_param(4, {"type": "f64", "value": "NaN"}), "params[4].value", True),
    "f32 overflow": (
        with_param(2, {"type": "f32[]", "values": [1.0, 1e39]}),
        "params[2].values[1]: 1e+39 overflows f32",
        False,
    ),
    "count below values": (
        with_param(2, {"type": "f32[]", "values": [1.0, 2.0], "count": 1}),
        "params[2].count",
        False,
    ),
    "array without values or count": (with_param(1, {"type": "f64[]"}), "params[1]", True),
    "bad base64": (changed(ptx_base64="not base64!"), "ptx_base64", False),
    "newer schema_version": (changed(schema_version="2.0.0"), "schema_version 2.0.0", False),
}


@pytest.mark.parametrize("case", list(REJECTED))
def test_bad_request_is_rejected_naming_the_field(case):
    request, needle, schema_rejects = REJECTED[case]
    assert bool(errors(request, "run-request")) == schema_rejects
    with pytest.raises(RequestError) as caught:
        oneshot.parse_request(encode(request))
    assert caught.value.phase == "input"
    assert needle in str(caught.value)
    response = oneshot.handle(request)
    assert response["phase"] == "input" and needle in response["error"]
    assert oneshot.exit_status(response) == 2


# ---- main() --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "needle"),
    [
        (b"", "empty input"),
        (b"  \n", "empty input"),
        (b'{"kernel": ', "malformed JSON"),
        (b"[1, 2]", "expected a JSON object"),
    ],
)
def test_main_answers_bad_input_with_one_error_document(raw, needle):
    status, document = run_main(raw)
    assert status == 2
    assert document["status"] == "error" and document["phase"] == "input"
    assert needle in document["error"]


def test_main_without_gpu_reports_environment():
    reason = gpu_unavailable_reason()
    if reason is None:
        pytest.skip("a GPU is usable here; the no-GPU answer cannot be observed")
    status, document = run_main(encode(with_ptx_text(EXAMPLE_REQUEST, AXPY_PTX)))
    assert status == 2
    assert document["phase"] == "environment"
    assert "NVIDIA" in document["error"] and "driver" in document["error"]


def test_only_the_first_answer_is_written():
    stdout = io.BytesIO()
    answer = oneshot._SingleAnswer(stdout)
    assert answer.write(ERROR_RESPONSE)
    assert not answer.write(OK_RESPONSE)
    assert [decode(line) for line in stdout.getvalue().splitlines()] == [ERROR_RESPONSE]


# ---- exact values ----------------------------------------------------------------------------

F64_VALUES = [0.1, 1 / 3, 5e-324, -5e-324, 1.7976931348623157e308, -0.0, 2.0**-1074, 1e-310]


def test_f64_round_trip_is_exact():
    sent = [*F64_VALUES, "nan", "inf", "-inf"]
    array = oneshot.decode_values("f64", decode(encode(sent)))
    back = decode(encode(oneshot.encode_values(array)))
    assert back[-3:] == ["nan", "inf", "-inf"]
    assert [v.hex() for v in back[:-3]] == [v.hex() for v in F64_VALUES]  # hex keeps -0.0


def test_f32_round_trip_is_exact():
    f32 = np.array([3.4028235e38, 0.1, 1 / 3, 1e-45, -0.0, 16777217.0], dtype=np.float32)
    sent = [float(v) for v in f32]  # what a client holding f32 values writes
    array = oneshot.decode_values("f32", decode(encode(sent)))
    assert array.dtype == np.float32
    assert array.tobytes() == f32.tobytes()
    back = decode(encode(oneshot.encode_values(array)))
    assert back == sent and back[0] == 3.4028234663852886e38
    assert math.copysign(1.0, back[4]) == -1.0


def test_f32_rounds_once_to_nearest():
    array = oneshot.decode_values("f32", [0.1, 16777217])
    assert array.tolist() == [float(np.float32(0.1)), 16777216.0]


def test_float_codec_of_non_finite_values():
    assert [oneshot.encode_float(v) for v in (math.nan, math.inf, -math.inf, 1.5)] == [
        "nan",
        "inf",
        "-inf",
        1.5,
    ]
    assert math.isnan(oneshot.decode_float("nan"))
    assert oneshot.decode_float("-inf") == -math.inf
    assert oneshot.decode_float(3) == 3.0 and isinstance(oneshot.decode_float(3), float)


def test_integer_extremes_are_exact():
    u64 = oneshot.decode_values("u64", [0, 2**64 - 1, 2**63])
    i64 = oneshot.decode_values("i64", [-(2**63), 2**63 - 1])
    back = decode(encode(oneshot.encode_values(u64) + oneshot.encode_values(i64)))
    assert back == [0, 2**64 - 1, 2**63, -(2**63), 2**63 - 1]


@pytest.mark.parametrize("name", ["axpy", "oob", "spin"])
def test_embedded_ptx_assembles(name, tmp_path):
    ptxas = static.find_program("ptxas")
    if ptxas is None:
        pytest.skip("ptxas not found on PATH (install the CUDA toolkit to run this test)")
    source = tmp_path / f"{name}.ptx"
    source.write_text({"axpy": AXPY_PTX, "oob": OOB_PTX, "spin": SPIN_PTX}[name])
    subprocess.run(
        [ptxas, "-arch=sm_75", str(source), "-o", str(tmp_path / f"{name}.cubin")],
        check=True,
        capture_output=True,
    )


# ---- on a GPU --------------------------------------------------------------------------------


def axpy_request(n: int = 5) -> tuple[dict, dict]:
    """An axpy request and the exact outputs numpy computes for it."""
    x = np.array([0.1, 1 / 3, -2.5, 1e308, math.nan][:n])
    y = np.array([0.2, 2 / 3, 5e-324, 1e308, 1.0][:n])
    a = 3.0
    ix = [-(2**63) + 5, -1, 0, 2**62, 7][:n]
    k = -5
    fx = np.array([0.1, 3.4028235e38, -1.5, 1e-45, 7.0][:n], dtype=np.float32)
    s = np.float32(1 / 3)
    params = [
        {"type": "f64[]", "count": n},
        {"type": "f64[]", "values": [oneshot.encode_float(v) for v in x.tolist()]},
        {"type": "f64[]", "values": [oneshot.encode_float(v) for v in y.tolist()]},
        {"type": "f64", "value": a},
        {"type": "i64[]", "count": n + 2},
        {"type": "i64[]", "values": ix},
        {"type": "i64", "value": k},
        {"type": "f32[]", "values": [9.0], "count": n},
        {"type": "f32[]", "values": [float(v) for v in fx]},
        {"type": "f32", "value": float(s)},
        {"type": "u32", "value": n},
    ]
    request = {
        "ptx": AXPY_PTX,
        "kernel": "axpy",
        "grid": [1],
        "block": [64],
        "params": params,
        "outputs": [{"param": 0}, {"param": 4}, {"param": 7}, {"param": 1, "count": 2}],
    }
    with np.errstate(over="ignore"):
        expected = [
            oneshot.encode_values(a * x + y),
            [v + k for v in ix] + [0, 0],
            oneshot.encode_values(s * fx),
            oneshot.encode_values(x[:2]),
        ]
    return request, expected


@pytest.mark.gpu
def test_axpy_outputs_are_exact():
    request, expected = axpy_request()
    response = oneshot.handle(request)
    assert response["status"] == "ok", response
    assert [o["values"] for o in response["outputs"]] == expected
    assert [o["type"] for o in response["outputs"]] == ["f64[]", "i64[]", "f32[]", "f64[]"]
    assert (
        response["outputs"][0]["values"][3] == "inf"
        and response["outputs"][0]["values"][4] == "nan"
    )
    assert response["ptx"] == {"version": "7.0", "target": "sm_75"}
    assert response["elapsed_ms"] > 0 and response["load_ms"] > 0
    assert oneshot.exit_status(response) == 0


@pytest.mark.gpu
def test_axpy_through_main_with_base64():
    request, expected = axpy_request(3)
    request = {k: v for k, v in request.items() if k != "ptx"}
    request["ptx_base64"] = base64.b64encode(AXPY_PTX.encode()).decode()
    status, document = run_main(encode(request))
    assert status == 0, document
    assert [o["values"] for o in document["outputs"]] == expected


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"kernel": "axpy2"}, "PTX has no .entry 'axpy2'; its entries are: axpy"),
        ({"drop": 10}, "lists 10 parameters"),
        (
            {"param": (10, {"type": "u64", "value": 5})},
            "parameter 10 'params[10]' is u64 (8 bytes)",
        ),
    ],
)
def test_signature_mismatch(change, needle):
    request, _ = axpy_request()
    if "kernel" in change:
        request["kernel"] = change["kernel"]
    elif "drop" in change:
        del request["params"][change["drop"]]
    else:
        index, param = change["param"]
        request["params"][index] = param
    response = oneshot.handle(request)
    assert response["phase"] == "signature", response
    assert response["error"].startswith("request: ") and needle in response["error"]
    assert oneshot.exit_status(response) == 1


@pytest.mark.gpu
def test_ptx_that_does_not_load():
    bad = ".version 7.0\n.target sm_75\n.address_size 64\n.visible .entry k() { frobnicate.u32; ret; }\n"
    response = oneshot.handle({"ptx": bad, "kernel": "k", "grid": [1], "block": [1]})
    assert response["phase"] == "load", response
    assert response["cuda_error"] == "CUDA_ERROR_INVALID_PTX"
    assert response["error"].startswith("cuModuleLoadDataEx(request): CUDA_ERROR_INVALID_PTX")
    assert "frobnicate" in response["error"]  # the JIT log comes along
    assert oneshot.exit_status(response) == 1


def run_process(request: dict, timeout_s: float = 60) -> tuple[int, dict, float]:
    """Run the one-shot runner as its own process (a fault poisons the context for good)."""
    code = "import sys; from runner.launch import oneshot; sys.exit(oneshot.main(sys.stdin.buffer, sys.stdout.buffer))"
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", code],
        input=encode(request),
        capture_output=True,
        cwd=ROOT,
        timeout=timeout_s,
    )
    wall_s = time.perf_counter() - t0
    lines = done.stdout.splitlines()
    assert len(lines) == 1, (done.stdout, done.stderr)
    document = decode(lines[0])
    validate(document, "run-response", "response")
    return done.returncode, document, wall_s


@pytest.mark.gpu
def test_out_of_bounds_write_is_a_launch_error():
    request = {
        "ptx": OOB_PTX,
        "kernel": "oob",
        "grid": [1],
        "block": [1],
        "params": [{"type": "u32[]", "count": 4}],
        "outputs": [{"param": 0}],
    }
    status, document, _ = run_process(request)
    assert status == 1
    assert document["phase"] == "launch", document
    assert document["cuda_error"] == "CUDA_ERROR_ILLEGAL_ADDRESS"
    assert "CUDA_ERROR_ILLEGAL_ADDRESS" in document["error"]


@pytest.mark.gpu
def test_hanging_kernel_times_out():
    request = {
        "ptx": SPIN_PTX,
        "kernel": "spin",
        "grid": [1],
        "block": [1],
        "timeout_s": 2,
        "params": [{"type": "u32[]", "count": 1}],
    }
    status, document, wall_s = run_process(request, timeout_s=30)
    assert status == 1
    assert document["phase"] == "timeout", document
    assert "timeout_s=2" in document["error"]
    assert wall_s < 10


@pytest.mark.gpu
@pytest.mark.skipif(static.find_program("nvcc") is None, reason="nvcc is not installed")
def test_kernel_printf_never_reaches_the_json_answer(tmp_path):
    source = tmp_path / "hello.cu"
    source.write_text(
        '#include <cstdio>\nextern "C" __global__ void hello(long long* out) {\n'
        '    printf("{\\"status\\": \\"forged\\"}\\n");\n    out[0] = 42;\n}\n'
    )
    subprocess.run(
        ["nvcc", "-ptx", "-arch=sm_75", str(source), "-o", str(tmp_path / "hello.ptx")], check=True
    )
    request = {
        "ptx": (tmp_path / "hello.ptx").read_text(),
        "kernel": "hello",
        "grid": [1],
        "block": [1],
        "params": [{"type": "i64[]", "count": 1}],
        "outputs": [{"param": 0}],
    }
    done = subprocess.run(
        [sys.executable, "-m", "runner", "run", "--no-service"],  # printf: this process's
        input=encode(request),
        capture_output=True,
        cwd=ROOT,
        timeout=120,
    )
    answer = decode(done.stdout)  # exactly one JSON document, nothing else
    assert (
        done.returncode == 0 and answer["status"] == "ok" and answer["outputs"][0]["values"] == [42]
    )
    assert b"forged" in done.stderr
