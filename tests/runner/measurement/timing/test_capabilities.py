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
