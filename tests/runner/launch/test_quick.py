"""`runner launch --no-service` without numpy or jsonschema: the process imports only what the
launch needs, its quick check (runner.launch.launch_plan.quick) takes exactly what the full check
takes with the same values, and whatever it leaves gets the full check's words."""

from __future__ import annotations

import math
import os
import random
import struct
import subprocess
import sys
from array import array

import numpy as np
import pytest

from protocol.input_files import MAX_TIMEOUT_S
from runner.errors import RequestError
from runner.gpu import driver
from runner.launch import launch_command, run_request
from runner.launch import launch_command as cli_compat
from runner.launch import launch_plan as host_arrays
from runner.launch import launch_plan as quick_request
from tests.conftest import ROOT
from tests.runner.launch.test_local_service import PTX, launch

HEAVY = ("numpy", "jsonschema", "jsonschema_rs", "orjson", "torch", "click")
RECORD = (
    "import atexit, os, runpy, sys\n"
    "atexit.register(lambda: open(os.environ['KG_MODULES'], 'w').write('\\n'.join(sys.modules)))\n"
    "sys.argv = ['runner', *sys.argv[1:]]\n"
)
# `python -m runner`, and the installed `kernelgap-runner` (its entry point, as pip writes it)
ENTRIES = {
    "module": "runpy.run_module('runner', run_name='__main__', alter_sys=True)\n",
    "script": "from runner.__main__ import main\nsys.exit(main())\n",
}


def modules_of_launch(tmp_path, *argv, entry="module") -> tuple[subprocess.CompletedProcess, list]:
    """Run `python -m runner launch ARGV` (or the installed script) and return it with the
    modules it had imported, in the order it imported them."""
    record = tmp_path / "modules.txt"
    env = {**os.environ, "KG_MODULES": str(record), "XDG_RUNTIME_DIR": str(tmp_path)}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))
    done = subprocess.run(
        [sys.executable, "-c", RECORD + ENTRIES[entry], "launch", *map(str, argv)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    return done, record.read_text().split()


@pytest.mark.parametrize("entry", list(ENTRIES))
def test_the_process_path_imports_no_numpy_jsonschema_orjson_or_click(tmp_path, entry):
    ptx = tmp_path / "k.ptx"
    ptx.write_text(PTX)
    argv = (ptx, "--kernel", "k", "--param", "f32[]:1.5,nan,-0", "--no-service")
    done, modules = modules_of_launch(tmp_path, *argv, entry=entry)
    assert "runner.launch.fresh_context" in modules, done.stderr  # it got as far as the launch
    heavy = sorted(m for m in modules if m.split(".")[0] in HEAVY)
    assert heavy == [], heavy
    # with a GPU the kernel ran (the output line), without one the environment error
    assert done.stdout == "1.5,nan,-0\n" or done.stderr.startswith("Error: environment: "), (
        done.stderr
    )


def test_a_value_the_quick_check_leaves_is_refused_in_the_full_checks_words(tmp_path):
    ptx = tmp_path / "k.ptx"
    ptx.write_text(PTX)
    argv = (ptx, "--kernel", "k", "--param", "i32[]:1,4294967296", "--no-service")
    done, modules = modules_of_launch(tmp_path, *argv)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        "Error: input: params[0].values[1]: 4294967296 is out of range for i32 "
        "(expected -2147483648 to 2147483647)\n"
    )
    assert "numpy" in modules  # the full check ran
    assert launch(tmp_path, *argv).stderr == done.stderr


# ---- the quick check against the full one ----------------------------------------------------

F32_EDGE = 3.4028235677973366e38  # halfway between f32's largest finite value and the next
# Per kind: values the full check takes, then values it refuses.
VALUES = {
    "i32": ([0, -1, 2**31 - 1, -(2**31)], [2**31, -(2**31) - 1]),
    "u32": ([0, 1, 2**32 - 1], [2**32, -1]),
    "i64": ([0, -1, 2**63 - 1, -(2**63)], [2**63, -(2**63) - 1, 2**64]),
    "u64": ([0, 2**64 - 1, 2**63], [2**64, -1]),
    "f32": ([0.1, -0.0, 1e-46, 1e-45, 3.4028235e38, math.nextafter(F32_EDGE, 0), "nan", "inf",
             "-inf", 16777217.0, 5e-324, 7], [3.5e38, F32_EDGE, 1e308]),
    "f64": ([0.1, 1 / 3, -0.0, 5e-324, 1.7976931348623157e308, "nan", "-inf", 2**64], [10**400]),
}  # fmt: skip


def _pick(rng: random.Random, good: list, bad: list):
    return rng.choice(bad if rng.random() < 0.03 else good)


def _random_request(rng: random.Random) -> dict:
    params = []
    for _ in range(rng.randint(1, 4)):
        kind = rng.choice(list(VALUES))
        picks = [_pick(rng, *VALUES[kind]) for _ in range(rng.randint(1, 4))]
        if rng.random() < 0.3:
            params.append({"type": kind, "value": picks[0]})
        else:
            params.append({"type": f"{kind}[]", "values": picks})
    output = {"param": _pick(rng, [0], [1, 4])}
    if rng.random() < 0.5:
        output["count"] = _pick(rng, [0, 1], [5])
    dims = ([1, 32, 2**31 - 1], [0, 2**31])
    return {
        "ptx": _pick(rng, [PTX], [""]),
        "kernel": _pick(rng, ["k"], [""]),
        "grid": [_pick(rng, *dims) for _ in range(rng.randint(1, 3))],
        "block": [_pick(rng, *dims) for _ in range(3)],
        "params": params,
        "outputs": [output],
        "timeout_s": _pick(rng, [60.0, MAX_TIMEOUT_S, 0.5], [MAX_TIMEOUT_S + 1]),
    }


def _same(quick: run_request.Request, full: run_request.Request) -> None:
    assert (quick.ptx, quick.kernel, quick.grid, quick.block) == (
        full.ptx, full.kernel, full.grid, full.block,
    )  # fmt: skip
    assert (quick.shared_bytes, quick.timeout_s, quick.outputs) == (
        full.shared_bytes, full.timeout_s, full.outputs,
    )  # fmt: skip
    for q, f in zip(quick.params, full.params, strict=True):
        assert (q.kind, q.type_name) == (f.kind, f.type_name)
        if f.array is None:
            assert type(q.value) is type(f.value)
            if isinstance(f.value, float):
                assert struct.pack("<d", q.value) == struct.pack("<d", f.value)  # -0.0, nan
            else:
                assert q.value == f.value
        else:
            assert bytes(q.array) == f.array.astype(f.array.dtype.newbyteorder("<")).tobytes()


def test_the_quick_check_takes_what_the_full_check_takes_with_the_same_values():
    rng = random.Random(32)
    taken = refused = 0
    for _ in range(3000):
        request = _random_request(rng)
        quick = quick_request.quick(request)
        try:
            full = run_request.prepare(request)
        except (RequestError, OverflowError):
            assert quick is None, request
            refused += 1
            continue
        if quick is not None:
            _same(quick, full)
            taken += 1
    assert taken > 500 and refused > 500  # both sides were reached


def test_every_command_line_request_the_full_check_takes_is_taken_quickly():
    argv = ["k.ptx", "--kernel", "k", "--param", "f32[]:0.1,nan,-inf,3.4028235e38",
            "--param", "u64:18446744073709551615", "--param", "i32[]:-2147483648,0x7fffffff",
            "--param", "f32:0.1", "--output-param", "2", "--grid", "2,1,1", "--timeout-s", "5"]  # fmt: skip
    document = launch_command.request(launch_command.parse(argv), PTX)
    quick = quick_request.quick(document)
    assert quick is not None
    _same(quick, run_request.prepare(document))
    assert quick.params[3].value == float(np.float32(0.1))


def test_requests_the_command_line_never_makes_are_left_to_the_full_check():
    base = {"ptx": PTX, "kernel": "k", "grid": [1], "block": [1], "timeout_s": 60.0,
            "params": [{"type": "i64[]", "values": [1]}]}  # fmt: skip
    assert quick_request.quick(base) is not None
    for extra in (
        {"ptx_base64": "eA=="},
        {"shared_bytes": 0},
        {"id": 3},
        {"params": [{"type": "i64[]", "count": 4}]},
        {"params": [{"type": "i64[]", "data_base64": "AAAAAAAAAAA="}]},
        {"outputs": [{"param": 0, "encoding": "base64"}]},
        {"timeout_s": 60},
        {"params": [{"type": "i64[]", "values": [True]}]},
        {"params": [{"type": "i64[]", "values": [3.0]}]},
        {"params": [{"type": "f64[]", "values": ["NaN"]}]},
        {"params": [{"type": "i8[]", "values": [1]}]},
    ):
        assert quick_request.quick({**base, **extra}) is None, extra


# ---- host arrays -----------------------------------------------------------------------------


def test_array_typecodes_have_the_sizes_of_their_kinds():
    for kind, code in host_arrays.CODES.items():
        assert array(code).itemsize == host_arrays.ITEMSIZE[kind] == np.dtype(kind[0] + str(
            host_arrays.ITEMSIZE[kind])).itemsize  # fmt: skip


@pytest.mark.parametrize(
    ("kind", "numbers"),
    [
        ("f64", [0.1, -0.0, 5e-324, math.inf, -math.inf, math.nan, 1e308, 1e308]),
        ("f32", [0.1, 3.4028235e38, 3.4028235e38, -0.0, 1e-45, math.nan]),
        ("u64", [0, 2**64 - 1, 2**63]),
        ("i32", [-(2**31), 2**31 - 1]),
    ],
)
def test_values_read_back_exactly_as_numpy_reads_them(kind, numbers):
    dtype = np.dtype(f"<{kind[0]}{host_arrays.ITEMSIZE[kind]}")
    raw = np.array(numbers, dtype=dtype).tobytes()
    expected = [host_arrays.encode_float(v) if kind[0] == "f" else v
                for v in np.frombuffer(raw, dtype).tolist()]  # fmt: skip
    got = host_arrays.values(kind, raw)
    assert [repr(v) for v in got] == [repr(v) for v in expected]


def test_finite_values_whose_sum_overflows_stay_numbers():
    assert host_arrays.json_values([1e308, 1e308, -0.5], floating=True) == [1e308, 1e308, -0.5]
    assert host_arrays.json_values([1.0, math.nan], floating=True) == [1.0, "nan"]


def test_pack_zero_fills_past_the_values_and_refuses_what_is_not_exact():
    assert bytes(host_arrays.pack("i32", [1, -1], count=3)) == struct.pack("<3i", 1, -1, 0)
    assert host_arrays.pack("f32", [3.5e38]) is None
    assert host_arrays.pack("f64", [10**400]) is None
    assert host_arrays.pack("u32", [-1]) is None
    assert host_arrays.pack("i64", [1], count=0) is None
    assert host_arrays.pack_scalar("f32", 0.1) == float(np.float32(0.1))


def test_host_data_of_every_form_is_seen_as_its_c_order_bytes():
    strided = np.arange(12, dtype=np.int32).reshape(3, 4)[:, ::2]
    for data, expected in [
        (strided, np.ascontiguousarray(strided).tobytes()),
        (b"abc", b"abc"),
        (bytearray(b"xyz"), b"xyz"),
        (array("d", [0.5, -1.0]), struct.pack("d" * 2, 0.5, -1.0)),
        (bytearray(), b""),
    ]:
        address, nbytes, alive = driver._host_span(data)
        assert nbytes == len(expected)
        if nbytes:
            import ctypes

            assert ctypes.string_at(address, nbytes) == expected
        del alive


def test_the_output_line_is_the_cpp_runners_for_read_back_values():
    raw = struct.pack("<4f", 0.1, -0.0, math.inf, 16777216.0)
    assert cli_compat.format_values(host_arrays.values("f32", raw)) == (
        "0.10000000149011612,-0,inf,16777216"
    )
