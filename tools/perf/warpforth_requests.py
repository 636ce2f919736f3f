"""A pytest plugin that records WarpForth's GPU tests (gpu_test/test_kernels.py, unchanged) as
kernelgap run requests with what each test expects, without a GPU.

Each `KernelRunner.run` call compiles its kernel with warpforthc as WarpForth's conftest does,
turns its arguments into the run request its C++ command line stands for (arrays zero-padded to
their declared size, scalars, one output of `count` elements) and returns a probe: the values
the test then compares it with (`==`, `pytest.approx`, the f32 attention test's unpacking) are
recorded as its expectation. `warpforth_dropin.py requests` runs it and writes the file that
tests/runner/launch/warpforth/ replays through each of kernelgap's runner switches.
"""

from __future__ import annotations

import json
import os
import sys

RECORDS: list[dict] = []


def _plain(value):
    """An expectation as JSON: numbers, lists, or {"approx", "rel", "abs"} for pytest.approx."""
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if hasattr(value, "expected") and hasattr(value, "rel"):  # pytest.approx of one number
        return {"approx": float(value.expected), "rel": value.rel, "abs": value.abs}
    if hasattr(value, "item"):
        return value.item()
    return value


class Probe(list):
    """What a recorded run returns: every comparison made with it is its test's expectation."""

    def __init__(self, record: dict, unpack: int | None = None):
        super().__init__()
        self.record, self.unpack = record, unpack

    def _expect(self, index, value) -> bool:
        expect = {"index": index, "value": _plain(value)}
        if self.unpack is not None:
            expect["unpack_f32"] = self.unpack  # the i64 output holds this many f32 values
        self.record["expect"].append(expect)
        return True

    def __eq__(self, other):
        return self._expect(None, other)

    __hash__ = None

    def __getitem__(self, index):
        probe = self

        class Item:
            def __eq__(self, other):
                return probe._expect(index, other)

        return Item()


def _recording_run(self, forth_source, params=None, grid=(1, 1, 1), block=(1, 1, 1),
                   output_param=0, output_count=None):  # fmt: skip
    harness = sys.modules[type(self).__module__]
    decls = harness._parse_param_declarations(forth_source)
    params = params or {}
    request_params = []
    for decl in decls:
        zero = 0.0 if decl.base_type == "f64" else 0
        if decl.is_array:
            values = [zero] * decl.size
            for i, v in enumerate(params.get(decl.name, [])):
                values[i] = v
            request_params.append({"type": f"{decl.base_type}[]", "values": values})
        else:
            request_params.append({"type": decl.base_type, "value": params.get(decl.name, zero)})
    output = {"param": output_param}
    if output_count is not None:
        output["count"] = output_count
    record = {
        "test": os.environ["PYTEST_CURRENT_TEST"].split("::")[-1].split(" ")[0],
        "request": {
            "ptx": self.compiler.compile_source(forth_source).rstrip("\0"),
            "kernel": harness._parse_kernel_name(forth_source),
            "grid": list(grid),
            "block": list(block),
            "params": request_params,
            "outputs": [output],
        },
        "expect": [],
    }
    RECORDS.append(record)
    return Probe(record)


class _NoSession:
    def __init__(self, *args, **kwargs):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *_):
        return None


def pytest_plugin_registered(plugin, manager) -> None:
    if hasattr(plugin, "VastSession") and hasattr(plugin, "KernelRunner"):
        plugin.VastSession = _NoSession
        plugin.KernelRunner.run = _recording_run


def pytest_runtest_setup(item) -> None:
    module = getattr(item, "module", None)
    if module is not None and hasattr(module, "_unpack_i64_to_f32"):
        module._unpack_i64_to_f32 = lambda probe, count: Probe(probe.record, unpack=count)


def pytest_sessionfinish(session, exitstatus) -> None:
    out = os.environ.get("KG_REQUESTS_OUT")
    if out:
        about = ("WarpForth's gpu_test/test_kernels.py: each KernelRunner.run call as a run request "
                 f"(PTX from warpforthc, {os.environ.get('KG_REQUESTS_FROM', 'unknown')}) and what "
                 "its test expects; written by tools/perf/warpforth_dropin.py requests")  # fmt: skip
        with open(out, "w") as file:
            json.dump({"about": about, "requests": RECORDS}, file, separators=(",", ":"))
