"""`runner launch`: the command line of the C++ runner that compiler test suites already call.

    python -m runner launch KERNEL.ptx --kernel NAME --param 'i64[]:1,2,3' --param 'f64:2.5' \\
        --grid X,Y,Z --block X,Y,Z --output-param N [--output-count K]

prints the output array as comma-separated values on one line of stdout (integers as they are,
floats with 17 significant digits, as C++'s `setprecision(17)` prints them), so a suite
switches runners by changing the program it runs. Errors go to stderr as `Error: ...` with exit
status 1, as that runner does. Parameter types: i32 u32 i64 u64 f32 f64, scalars `T:V` and
arrays `T[]:V,V,...`. This module turns the arguments into a run request and an answer into the
output line; it imports only the standard library, so a launch through the per-user service
(runner.launch.local_service) starts in a few tens of milliseconds. `run` is the process-per-
launch path (`--no-service`): `runner run`'s launch (runner.launch.oneshot) in this process.
"""

from __future__ import annotations

import math
import os
import sys

from protocol.terminal_text import visible
from runner.launch.host_arrays import encode_float

TYPES = ("i32", "u32", "i64", "u64", "f32", "f64")  # runner.launch.run_values.DTYPES' keys


class LaunchArgumentError(ValueError):
    pass


def parse_dims(text: str, option: str) -> list[int]:
    """X,Y,Z; the C++ runner's message otherwise (it does not name the option)."""
    parts = text.split(",")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        raise LaunchArgumentError(f"expected 3 comma-separated values, got: {text}")
    return [int(p) for p in parts]


def _number(token: str, kind: str, text: str):
    token = token.strip()
    try:
        if kind[0] in "iu":
            return int(token, 0)
        value = float(token)
    except ValueError:
        what = "integer" if kind[0] in "iu" else "float"
        raise LaunchArgumentError(f"invalid {what} value '{token}' in --param {text}") from None
    return value if math.isfinite(value) else encode_float(value)


def parse_param(text: str) -> dict:
    """`T:V` or `T[]:V,V,...` as a run-request parameter."""
    kind, sep, values = text.partition(":")
    if not sep:
        raise LaunchArgumentError(
            f"--param requires type prefix (e.g. i64:42 or f64[]:1.0,2.0), got: {text}"
        )
    if not values:
        raise LaunchArgumentError(f"--param requires at least one value, got: {text}")
    base = kind.removesuffix("[]")
    if base not in TYPES:
        raise LaunchArgumentError(
            f"unsupported param type '{kind}' (expected one of {', '.join(TYPES)}, or T[])"
        )
    tokens = values.split(",")
    if kind.endswith("[]"):
        return {"type": kind, "values": [_number(t, base, text) for t in tokens]}
    if len(tokens) != 1:
        raise LaunchArgumentError(f"scalar param expects exactly one value, got: {text}")
    return {"type": kind, "value": _number(tokens[0], base, text)}


def format_values(values: list) -> str:
    """One line as the C++ runner prints it: %.17g for floats, integers unchanged."""
    out = []
    for v in values:
        if isinstance(v, str):  # "nan", "inf", "-inf" as JSON carries them
            out.append(v)
        elif isinstance(v, float):
            out.append(format(v, ".17g"))
        else:
            out.append(str(v))
    return ",".join(out)


def request(
    ptx_text: str,
    kernel: str,
    params: list[str],
    grid: str,
    block: str,
    output_param: int,
    output_count: int | None,
    timeout_s: float,
) -> dict:
    parsed = [parse_param(p) for p in params]
    if not parsed:
        raise LaunchArgumentError("at least one --param is required")
    if not 0 <= output_param < len(parsed):
        raise LaunchArgumentError(
            f"output-param {output_param} out of range (have {len(parsed)} params)"
        )
    if not parsed[output_param]["type"].endswith("[]"):
        raise LaunchArgumentError(f"output-param {output_param} is a scalar (cannot read back)")
    output = {"param": output_param}
    if output_count is not None and output_count >= 0:
        output["count"] = output_count
    return {
        "ptx": ptx_text,
        "kernel": kernel,
        "grid": parse_dims(grid, "--grid"),
        "block": parse_dims(block, "--block"),
        "params": parsed,
        "outputs": [output],
        "timeout_s": timeout_s,
    }


def _say_error(answer: dict) -> None:
    error = visible(f"{answer['phase']}: {answer['error']}", lines=True)
    print(f"Error: {error}", file=sys.stderr, flush=True)


def _timed_out(answer: dict) -> None:
    _say_error(answer)
    os._exit(1)  # a hung kernel cannot be cancelled: ending the process frees the GPU


def report(answer: dict, stdout) -> int:
    """Print an answer as the C++ runner prints its outcome: the output line (status 0), or
    `Error: ...` on stderr (status 1)."""
    if answer.get("status") != "ok":
        _say_error(answer)
        return 1
    outputs = answer.get("outputs") or [{}]
    if "values" not in outputs[0]:  # the one output a command line asks for, as values
        _say_error({"phase": "launch", "error": "the answer holds no output values"})
        return 1
    stdout.write(format_values(outputs[0]["values"]) + "\n")
    stdout.flush()
    return 0


def run(document: dict, stdout) -> int:
    """Launch in this process (a context of its own) and report it. A request that
    runner.launch.quick_request takes goes straight to the launch, without numpy or the schema
    check; any other gets the full check (runner.launch.oneshot), which words the error."""
    from runner.launch import fresh_context, quick_request

    request = quick_request.quick(document)
    if request is None:
        from runner.launch import oneshot

        return report(oneshot.handle(document, on_timeout=_timed_out), stdout)
    return report(fresh_context.execute(request, _timed_out), stdout)
