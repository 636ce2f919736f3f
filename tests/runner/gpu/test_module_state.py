"""Module state on the CPU: which `.global` variables a PTX module defines, their snapshot as
loaded and its restore (on a mocked driver with a byte-addressed memory), and which load's state
CudaBackend restores before a cold launch."""

from __future__ import annotations

import numpy as np
import pytest

from runner.errors import CudaError
from runner.gpu import driver, ptx
from runner.measurement.timing import cuda
from runner.measurement.timing.base import copy_turn

PTX = """
.version 8.7
.target sm_90
.address_size 64
// .global .u32 commented_out;
.extern .global .align 4 .u32 elsewhere;
.global .align 4 .b8 counts[256];
.global .align 8 .f64 key = 0d4008000000000000;
.visible .global .align 4 .u32 hidden;
.const .align 4 .b8 lut[16] = {0, 0, 128, 63, 0, 0, 0, 64, 0, 0, 64, 64, 0, 0, 128, 64};
.global .f64 grid[4][8];
.global .u8 open_ended[];
.visible .entry k(.param .u64 .ptr .global .align 8 out)
{
  ld.global.u32 %r1, [hidden];
  ret;
}
"""


def test_module_globals_lists_what_the_module_defines_in_the_global_space():
    assert ptx.module_globals(PTX) == {
        "counts": 256,
        "key": 8,
        "hidden": 4,
        "grid": 256,
        "open_ended": None,
    }  # not .extern, not .const, not comments, not ld.global or .ptr .global parameters
    assert ptx.module_globals(PTX.encode()) == ptx.module_globals(PTX)
    assert ptx.describe(ptx.parse(PTX), PTX)["globals"]["counts"] == 256
    honest = PTX.split("// .global")[0] + ".visible .entry k()\n{\n ret;\n}\n"
    assert "globals" not in ptx.describe(ptx.parse(honest), honest)
    assert "globals" not in ptx.describe(ptx.parse(PTX))  # without the text: as before


class FakeCu:
    """A driver with one byte-addressed memory: allocations, module globals and copies."""

    def __init__(self, globals_: dict[str, bytes]):
        self.memory = bytearray(1 << 16)
        self.next = 1024
        self.globals = {}
        for name, value in globals_.items():
            self.globals[name] = (self._alloc(len(value)), len(value))
            self._write(self.globals[name][0], value)
        self.copies = []

    def _alloc(self, n):
        ptr, self.next = self.next, self.next + ((n + 255) // 256) * 256
        return ptr

    def _write(self, ptr, data):
        self.memory[ptr : ptr + len(data)] = data

    def read(self, name):
        ptr, n = self.globals[name]
        return bytes(self.memory[ptr : ptr + n])

    def cuModuleGetGlobal(self, handle, name):
        if name.decode() not in self.globals:
            return (1, 0, 0)
        return (0, *self.globals[name.decode()])

    def cuMemAlloc(self, n):
        return (0, self._alloc(n))

    def cuMemcpyDtoDAsync(self, dst, src, n, stream):
        self.copies.append((dst, src, n))
        self._write(dst, bytes(self.memory[src : src + n]))
        return (0,)

    def cuStreamSynchronize(self, handle):
        return (0,)

    def cuMemFree(self, handle):
        return (0,)

    def cuGetErrorName(self, err):
        return (0, b"CUDA_ERROR_NOT_FOUND")

    def cuGetErrorString(self, err):
        return (0, b"named symbol not found")


class FakeModule:
    handle, label = object(), "case/cand"

    global_variable = driver.Module.global_variable


class FakeStream:
    handle = None

    def synchronize(self):
        pass


@pytest.fixture
def fake_cu(monkeypatch):
    fake = FakeCu({"counts": bytes(16), "key": b"\x01\x02\x03\x04\x05\x06\x07\x08"})
    monkeypatch.setattr(driver, "_cu", fake)
    return fake


def test_the_state_as_loaded_is_put_back_by_restore(fake_cu):
    state = driver.ModuleState(FakeModule(), ["counts", "key"], FakeStream())
    assert state.nbytes == 24 and list(state.variables) == ["counts", "key"]
    counts_ptr = fake_cu.globals["counts"][0]
    fake_cu._write(counts_ptr, b"\x07" * 16)  # launches counted, a cache filled
    fake_cu._write(fake_cu.globals["key"][0], b"\xff" * 8)
    state.restore(FakeStream())
    assert fake_cu.read("counts") == bytes(16)
    assert fake_cu.read("key") == b"\x01\x02\x03\x04\x05\x06\x07\x08"


def test_a_module_without_globals_has_no_state_and_a_name_not_found_is_listed(fake_cu):
    text = ".version 8.7\n.target sm_90\n.visible .entry k()\n{\n ret;\n}\n"
    assert driver.ModuleState.of(FakeModule(), text, FakeStream()) is None
    state = driver.ModuleState(FakeModule(), ["key", "missing"], FakeStream())
    assert list(state.variables) == ["key"] and state.missing == ["missing"]
    with pytest.raises(CudaError, match=r"cuModuleGetGlobal\(case/cand: missing\)"):
        FakeModule().global_variable("missing")


class Restores:
    def __init__(self, index, log):
        self.index, self.log = index, log
        self.variables = {"launches": driver.Buffer.at(4096, 4)}
        self.missing = []

    def restore(self, stream):
        self.log.append(self.index)


def test_reset_restores_the_state_of_the_load_the_next_cold_launch_takes(monkeypatch):
    """Cold launches take the loads of a PTX by copy_turn; reset before each one restores the
    `.global` state of exactly that load, and with one load (hot) of that one."""
    monkeypatch.setattr(driver, "Event", lambda: None)
    log = []
    loads = 4
    hooks = cuda.LaunchAuditHooks(
        reseed=None,
        read=None,
        differ=None,
        states={"cand": [Restores(i, log) for i in range(loads)], "base": [None] * loads},
    )
    items = [object() for _ in range(loads)]
    backend = cuda.CudaBackend(
        FakeStream(),
        None,
        {"cand": items[0], "base": items[0]},
        [],
        1000,
        cold_items={"cand": items, "base": items},
        audit=hooks,
    )
    taken = []
    for _ in range(12):
        backend.reset("cand")
        backend.reset("base")  # a module without state: nothing to restore
        taken.append(backend.turns.next("cand", loads))
    assert log == taken == [copy_turn(t, loads) for t in range(12)]
    assert backend.module_state("cand")["globals"] == {"launches": 4}
    assert backend.module_state("base") == {"globals": {}, "restored": False}


# --- the hot audit replay of CudaBackend, on a simulated stream ------------------------------


class SimGraph:
    """A captured graph that replays its enqueue function (the fake device runs at launch)."""

    def __init__(self, stream, enqueue):
        self.enqueue = enqueue

    def launch(self, stream):
        self.enqueue(stream)

    def destroy(self):
        pass


class Device:
    """One output value; launches of an implementation on input set s write 10 * s + 1,
    except where `skips(launch_index)` (the launch index counts from the last reset)."""

    def __init__(self):
        self.out, self.launched = None, 0


class SetLaunch:
    def __init__(self, device, input_set, skips):
        self.device, self.input_set, self.skips = device, input_set, skips

    def enqueue(self, stream):
        if not self.skips(self.device.launched):
            self.device.out = 10.0 * self.input_set + 1
        self.device.launched += 1


class Scratch:
    def __init__(self, device):
        self.device, self.value = device, None

    def copy_from(self, buffer, stream):
        self.value = self.device.out

    def fill_bytes(self, byte, stream=None):
        """The seal after an audit's comparison (issue 50 class 1): the copy holds no answer."""
        self.value = None


def replaying_backend(monkeypatch, skips):
    monkeypatch.setattr(driver, "Event", lambda: None)
    monkeypatch.setattr(cuda, "Graph", SimGraph)
    device = Device()
    sets = [SetLaunch(device, s, skips) for s in range(3)]
    hooks = cuda.LaunchAuditHooks(
        reseed=None,
        read=None,
        differ=lambda got, want: (
            None
            if got["out"][0] == want["out"][0]
            else f"out differs at element 0: expected {want['out'][0]}, got {got['out'][0]}"
        ),
        sets={"cand": sets},
        expected=[{"out": np.array([10.0 * s + 1])} for s in range(3)],
        written={"out": object()},
        as_array=lambda name, scratch: np.array([scratch.value]),
    )
    backend = cuda.CudaBackend(FakeStream(), None, {"cand": sets[0]}, [], 4, audit=hooks)
    backend._scratch = {"out": Scratch(device)}
    return backend, device


def test_a_hot_audit_reads_the_chosen_launch_of_the_same_rotation(monkeypatch):
    """Batch 12 in graphs of 4 launches over 3 input sets: launch 6 is launch 2 of the second
    replay, on set 2; an honest kernel's copy matches set 2's answer there."""
    backend, device = replaying_backend(monkeypatch, lambda launch: False)
    assert backend.input_sets("cand") == 3 and hasattr(backend, "audit_batch")
    for position in range(12):
        device.launched = 0
        assert backend.audit_batch("cand", 12, position) is None, position
    assert device.launched == 12  # the whole batch replayed, as in a timed sample


def test_a_hot_audit_finds_a_launch_that_left_another_sets_answer(monkeypatch):
    backend, device = replaying_backend(monkeypatch, lambda launch: launch % 4 != 3)
    found = {}
    for position in range(12):
        device.launched, device.out = 0, None
        found[position] = backend.audit_batch("cand", 12, position)
    assert found[3] is None and found[7] is None  # the launches that work
    # launch 5 (launch 1 of the second replay: set 1) skipped and left launch 3's answer (set 0)
    assert found[5] == "out differs at element 0: expected 11.0, got 1.0 (input set 1)"
    assert sum(f is not None for f in found.values()) >= 6


# --- hot input sets of a PTX case (runner.execution.case), on fake buffers -------------------


def test_hot_input_sets_rotate_inputs_share_outputs_and_keep_the_baselines_answers(monkeypatch):
    """Three sets: the case's own and two generated from other seeds, each implementation's
    launchable per set reading that set's `x` and writing the one shared `out`; the baseline
    launched once on each extra set (outputs poisoned first) for the audits' expected answers."""
    from runner.definition import manifest
    from runner.execution import case as case_module
    from tests.conftest import ROOT

    suite = manifest.load(ROOT / "tests" / "cheats" / "cases.toml")
    spec = suite.case("state_every_kth")
    geometry = spec.geometry(spec.dims)
    events = []

    class Buffers:
        made = 0

        def __init__(self, case, geometry, internal, stream, guard_bytes=0):
            self.geometry, self.index = geometry, Buffers.made
            Buffers.made += 1
            self.buffers = {
                b.name: driver.Buffer.at(1 << 20 * (self.index + 1) | i * 4096, 8)
                for i, b in enumerate(case.buffers)
            }

        def fill_inputs(self, reseed=None, input_set="declared"):
            events.append(("fill", self.index, reseed is not None, input_set))

        def poison_outputs(self, byte):
            events.append(("poison", self.index, byte))

        def download(self, name):
            return np.array([float(len(events))])

    class Kernel:
        def launch(self, stream, args):
            x, out = args.values[0].value, args.values[1].value
            events.append(("launch", x, out))

    class Cu:
        def cuMemGetInfo(self):
            return (0, 1 << 40, 1 << 40)

    monkeypatch.setattr(case_module.gate, "DeviceBuffers", Buffers)
    monkeypatch.setattr(driver, "_cu", Cu())
    run = case_module.CaseRun.__new__(case_module.CaseRun)
    run.case, run.names, run.internal, run.stream = (
        spec,
        ["cuda", "cuda_again", "kth"],
        None,
        FakeStream(),
    )
    base = Buffers(spec, geometry, None, None)
    launchables = {n: cuda.Launchable(Kernel(), base_args(spec, base)) for n in run.names}
    hooks = cuda.LaunchAuditHooks(reseed=None, read=None, differ=None)
    extra = []
    run.hot_input_sets(hooks, base, geometry, launchables, {"out": np.zeros(1)}, extra)
    assert len(extra) == case_module.HOT_INPUT_SETS - 1 == 2
    # other seeds than the case's, the first from the edges set the gate checks (issue 50 class 4)
    assert events[:2] == [("fill", 1, True, "edges"), ("fill", 2, True, "declared")]
    for name in run.names:
        sets = hooks.sets[name]
        assert len(sets) == 3 and sets[0] is launchables[name]
        for s, item in enumerate(sets):
            x, out = item.args.values[0].value, item.args.values[1].value
            assert x == [base, *extra][s].buffers["x"].ptr and out == base.buffers["out"].ptr
            assert (
                item.args.values[2].value == 1.5 and item.args.values[3].value == geometry.dims["n"]
            )
    launches = [e for e in events if e[0] == "launch"]
    assert [x for _, x, _ in launches] == [
        e.buffers["x"].ptr for e in extra
    ]  # the baseline, once a set
    assert [e[0] for e in events[2:]] == ["poison", "launch", "poison", "launch"]
    assert len(hooks.expected) == 3 and set(hooks.written) == {"out"}


def base_args(spec, buffers):
    values = [
        ("ptr", buffers.buffers[p.buffer].ptr)
        if p.kind == "ptr"
        else (p.kind, buffers.geometry.scalars[p.name])
        for p in spec.params
    ]
    return driver.KernelArgs(values)
