"""The driver started early (runner.gpu.driver_start): the calls it makes into libcuda, that a
failure there changes nothing, the switch that turns it off, and that `runner launch
--no-service` begins it before its heavy imports."""

from __future__ import annotations

import ctypes
import time

import pytest

from runner.errors import NoGpuError
from runner.gpu import driver, driver_start
from tests.runner.launch.test_local_service import PTX, launch
from tests.runner.launch.test_quick import modules_of_launch


class FakeLibcuda:
    """libcuda's three entry points as the early start calls them; `fail` names one that fails."""

    def __init__(self, fail: str = ""):
        self.calls: list[tuple] = []
        self.fail = fail

    def _result(self, name: str) -> int:
        return 100 if name == self.fail else 0  # CUDA_ERROR_NO_DEVICE

    def cuInit(self, flags):
        self.calls.append(("cuInit", flags))
        return self._result("cuInit")

    def cuDeviceGet(self, device, ordinal):
        self.calls.append(("cuDeviceGet", ordinal))
        device._obj.value = ordinal
        return self._result("cuDeviceGet")

    def cuDevicePrimaryCtxRetain(self, context, device):
        self.calls.append(("cuDevicePrimaryCtxRetain", device.value))
        return self._result("cuDevicePrimaryCtxRetain")


@pytest.fixture
def fresh(monkeypatch):
    """driver_start as if no start had been begun in this process, switch unset."""
    monkeypatch.setattr(driver_start, "_thread", None)
    monkeypatch.delenv(driver_start.SWITCH, raising=False)
    return monkeypatch


def _started_with(fresh, library, ordinal: int = 0) -> list[tuple]:
    opened = []

    def cdll(name):
        opened.append(name)
        return library

    fresh.setattr(ctypes, "CDLL", cdll)
    thread = driver_start.start(ordinal)
    assert thread is not None and driver_start.start(ordinal) is thread  # once a process
    driver_start.wait()
    assert not thread.is_alive() and opened == ["libcuda.so.1"]
    return library.calls


def test_it_initialises_the_driver_and_retains_the_devices_primary_context(fresh):
    calls = _started_with(fresh, FakeLibcuda(), ordinal=2)
    assert calls == [("cuInit", 0), ("cuDeviceGet", 2), ("cuDevicePrimaryCtxRetain", 2)]


@pytest.mark.parametrize(
    ("fail", "made"), [("cuInit", 1), ("cuDeviceGet", 2), ("cuDevicePrimaryCtxRetain", 3)]
)
def test_it_stops_at_the_first_failing_call_and_raises_nothing(fresh, fail, made):
    calls = _started_with(fresh, FakeLibcuda(fail))
    assert [name for name, _ in calls] == [
        "cuInit", "cuDeviceGet", "cuDevicePrimaryCtxRetain"
    ][:made]  # fmt: skip


def test_no_driver_library_is_left_for_the_usual_path(fresh):
    def missing(name):
        raise OSError(f"{name}: cannot open shared object file")

    fresh.setattr(ctypes, "CDLL", missing)
    thread = driver_start.start()
    driver_start.wait()
    assert thread is not None and not thread.is_alive()


def test_the_switch_turns_it_off(fresh):
    fresh.setenv(driver_start.SWITCH, "0")
    assert driver_start.start() is None
    driver_start.wait()  # nothing to wait for


def test_the_driver_waits_for_it_before_its_own_cuinit(fresh):
    order = []
    library = FakeLibcuda()
    real_init = library.cuInit

    def slow_init(flags):
        time.sleep(0.2)  # the driver's start outlasts the caller's way to its first call
        order.append("early cuInit")
        return real_init(flags)

    class Bindings:  # cuda.bindings.driver where there is no driver
        def cuInit(self, flags):
            order.append("driver cuInit")
            raise OSError("no libcuda")

    library.cuInit = slow_init
    fresh.setattr(ctypes, "CDLL", lambda name: library)
    fresh.setattr(driver, "cu", Bindings)
    driver_start.start()
    with pytest.raises(NoGpuError, match="no NVIDIA driver found"):
        driver.init()
    assert order == ["early cuInit", "driver cuInit"]


def test_a_no_service_launch_begins_it_before_its_heavy_imports(tmp_path):
    ptx = tmp_path / "k.ptx"
    ptx.write_text(PTX)
    done, modules = modules_of_launch(tmp_path, ptx, "--kernel", "k", "--param", "i64[]:1",
                                      "--no-service")  # fmt: skip
    early = modules.index("runner.gpu.driver_start")
    assert early < modules.index("runner.launch.launch_command"), done.stderr
    assert all(early < i for i, m in enumerate(modules) if m.startswith("cuda.")), done.stderr


def test_a_launch_answers_alike_with_and_without_it(tmp_path):
    """Here (no GPU) the environment error, on a GPU box the output line: the same either way."""
    ptx = tmp_path / "k.ptx"
    ptx.write_text(PTX)
    argv = (ptx, "--kernel", "k", "--param", "i64[]:1,2", "--no-service")
    on = launch(tmp_path, *argv)
    off = launch(tmp_path, *argv, env={driver_start.SWITCH: "0"})
    assert (on.returncode, on.stdout, on.stderr) == (off.returncode, off.stdout, off.stderr)
    assert on.stdout or on.stderr.startswith("Error: environment: ")
