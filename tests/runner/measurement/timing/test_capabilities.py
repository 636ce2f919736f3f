"""The device interface's optional capabilities are declared, and found once per backend."""

from __future__ import annotations

from runner.measurement.timing import TimingSettings, measure
from runner.measurement.timing.base import Capabilities, Pinned, ReadBack, declares
from tests.support.fake_device import FakeBackend


class ReadsBack(FakeBackend):
    def read_outputs(self, name):
        return {}

    def outputs_differ(self, got, expected):
        return None


def test_a_plain_backend_has_none_of_the_optional_capabilities():
    can = Capabilities.of(FakeBackend({"A": 1e-6}))
    assert can.graph_batches is not None  # graph_launches is a plain attribute of the fake
    others = {k: v for k, v in vars(can).items() if k != "graph_batches"}
    assert others == dict.fromkeys(others)


def test_a_capability_needs_every_member_it_declares():
    half = FakeBackend({"A": 1e-6})
    half.read_outputs = lambda name: {}
    assert not declares(half, ReadBack)
    assert declares(ReadsBack({"A": 1e-6}), ReadBack)
    assert Capabilities.of(ReadsBack({"A": 1e-6})).read_back is not None


def test_a_member_set_to_none_is_absent_on_the_object_not_cached_per_class():
    backend = ReadsBack({"A": 1e-6})
    assert declares(backend, ReadBack)
    backend.outputs_differ = None
    assert not declares(backend, ReadBack)
    assert declares(ReadsBack({"A": 1e-6}), ReadBack)


def test_a_pinned_backend_labels_the_samples_it_pinned():
    class Pins(FakeBackend):
        def pin_copy(self, name, sample):
            return sample % 3 if name == "B" else None

    backend = Pins({"A": 1e-6, "B": 1e-6})
    assert declares(backend, Pinned)
    m = measure(backend, ["A", "B"], TimingSettings(samples=4, warmup=0, target_sample_s=1e-4))
    assert m.impls["B"].loads == [0, 1, 2, 0] and m.impls["A"].loads is None


class FakeEvent:
    """An event on a fake clock: recorded at the stream's time, elapsed in seconds."""

    def __init__(self, stream_clock):
        self.clock, self.at = stream_clock, None

    def record(self, stream):
        self.at = self.clock[0]

    def synchronize(self):
        pass

    def elapsed_s(self, start):
        return self.at - start.at

    def destroy(self):
        pass


class FakeInternal:
    """The runner's kernels, recording what the base queues around the work."""

    def __init__(self, log):
        self.log = log

    def block(self, stream, timeout_ns=None):
        self.log.append("block")

    def release(self):
        self.log.append("release")

    def check_blocker(self):
        self.log.append("checked")

    def flush_l2(self, stream):
        self.log.append("flush")


def fake_base(monkeypatch, copies: int):
    from runner.gpu import driver
    from runner.measurement.timing import cuda

    clock, log = [0.0], []
    monkeypatch.setattr(driver, "Event", lambda: FakeEvent(clock))

    class Adapter(cuda.CudaBase):
        def pin_copies(self, name):
            return copies if name == "B" else 0

    return Adapter(stream=None, internal=FakeInternal(log)), clock, log


def test_the_cuda_base_times_work_behind_the_blocker_until_told_otherwise(monkeypatch):
    base, clock, log = fake_base(monkeypatch, copies=4)

    def work():
        log.append("work")
        clock[0] += 2e-6

    assert base._timed(work) == 2e-6
    assert log == ["block", "work", "release", "checked"]
    base.time_unblocked()  # CUPTI records: plain events, no blocker
    log.clear()
    assert base._timed(work) == 2e-6 and log == ["work"]


def test_the_cuda_base_pins_a_sample_to_one_copy_in_copy_turn_order(monkeypatch):
    from runner.measurement.timing.base import copy_turn

    base, _, _ = fake_base(monkeypatch, copies=4)
    assert declares(base, Pinned)
    assert [base.pin_copy("B", k) for k in range(8)] == [copy_turn(k, 4) for k in range(8)]
    assert base.pin_copy("A", 0) is None  # not pinned
