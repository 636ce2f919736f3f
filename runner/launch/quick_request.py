"""A run request checked without numpy or jsonschema: the process-per-launch path's way in.

`runner launch --no-service` builds its request itself (runner.launch.launch_command), so the
full check (runner.launch.run_request: the schema, numpy arrays) would cost the process about
half its time on a GPU box while finding nothing. `quick()` accepts only what that full check
accepts, with the same values (packed little-endian bytes for arrays, an f32 rounded once), and
returns None for anything else: then the full check runs and says, in its own words, what is
wrong. So the command line's answers and errors stay one text whichever path made them.
"""

from __future__ import annotations

from protocol.run_limits import MAX_ARRAY_BYTES, MAX_TIMEOUT_S
from runner.launch import host_arrays
from runner.launch.launch_plan import Output, Param, Request

__all__ = ["quick"]

# The keys a command line's request has; any other (ptx_base64, counts, encodings, ids) is
# left to the full check.
_REQUEST_KEYS = frozenset(("ptx", "kernel", "grid", "block", "params", "outputs", "timeout_s"))
_DIM_MAX = 2**31 - 1  # schemas/run-request.schema.json's dim3


def _dim3(values) -> tuple[int, int, int] | None:
    if not isinstance(values, list) or not 1 <= len(values) <= 3:
        return None
    if not all(type(v) is int and 1 <= v <= _DIM_MAX for v in values):
        return None
    return (*values, *(1,) * (3 - len(values)))


def _param(spec) -> Param | None:
    if not isinstance(spec, dict) or not isinstance(spec.get("type"), str):
        return None
    kind = spec["type"].removesuffix("[]")
    if kind not in host_arrays.ITEMSIZE:
        return None
    if spec["type"].endswith("[]"):
        items = spec.get("values")
        if spec.keys() != {"type", "values"} or not isinstance(items, list):
            return None
        if len(items) * host_arrays.ITEMSIZE[kind] > MAX_ARRAY_BYTES:
            return None
        data = host_arrays.pack(kind, items)
        return None if data is None else Param(kind, array=data)
    if spec.keys() != {"type", "value"}:
        return None
    value = host_arrays.pack_scalar(kind, spec["value"])
    return None if value is None else Param(kind, value=value)


def _output(spec, params: tuple[Param, ...]) -> Output | None:
    if not isinstance(spec, dict) or not spec.keys() <= {"param", "count"}:
        return None
    number, count = spec.get("param"), spec.get("count")
    if type(number) is not int or not 0 <= number < len(params):
        return None
    param = params[number]
    if param.array is None:
        return None
    length = param.nbytes // host_arrays.ITEMSIZE[param.kind]
    if count is None:
        count = length
    if type(count) is not int or not 0 <= count <= length:
        return None
    return Output(number, count)


def quick(request: dict) -> Request | None:
    """The checked Request, or None where the full check must judge the request."""
    if not isinstance(request, dict) or not request.keys() <= _REQUEST_KEYS:
        return None
    ptx, kernel, timeout_s = request.get("ptx"), request.get("kernel"), request.get("timeout_s")
    if not (isinstance(ptx, str) and ptx and isinstance(kernel, str) and kernel):
        return None
    if type(timeout_s) is not float or not 0 < timeout_s <= MAX_TIMEOUT_S:
        return None
    grid, block = _dim3(request.get("grid")), _dim3(request.get("block"))
    specs, out_specs = request.get("params", []), request.get("outputs", [])
    if grid is None or block is None or not isinstance(specs, list):
        return None
    params = tuple(_param(spec) for spec in specs)
    if any(p is None for p in params) or not isinstance(out_specs, list):
        return None
    outputs = tuple(_output(spec, params) for spec in out_specs)
    if any(o is None for o in outputs):
        return None
    return Request(ptx, kernel, grid, block, 0, timeout_s, params, outputs)
