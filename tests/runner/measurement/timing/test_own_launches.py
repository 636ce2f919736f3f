"""The runner's own kernels are told apart from measured ones by the function launched, never by
name (issue 30, items 7e and 8): a user's kernel named kg_* counts, the runner's flush does not.
CPU, with a stand-in for cupti-python (tests/support/fake_cupti.py)."""

from __future__ import annotations

import sys

import pytest

from runner.errors import OwnLaunchError
from runner.measurement.timing import cupti
from tests.support.fake_cupti import FakeCupti

TS = 7
OWN, USER = 0xF00D, 0xBEEF  # CUfunction handles


@pytest.fixture
def fake(monkeypatch):
    fake = FakeCupti(TS)
    monkeypatch.setitem(sys.modules, "cupti", type(sys)("cupti"))
    sys.modules["cupti"].cupti = fake
    monkeypatch.setattr(cupti._Collector, "registered", False)
    monkeypatch.setattr(cupti._Collector, "records", [])
    monkeypatch.setattr(cupti._State, "functions", set())
    monkeypatch.setattr(cupti._State, "correlation_ids", set())
    monkeypatch.setattr(cupti._State, "users", 0)
    monkeypatch.setattr(cupti._State, "subscriber", None)
    monkeypatch.setattr(cupti._State, "errors", [])
    cupti.register([OWN])
    return fake


def test_a_kernel_named_like_the_runners_counts_and_the_runners_own_does_not(fake):
    window = cupti.ActivityWindow(1, 2)
    window.begin()
    with cupti.launching():
        fake.launch(OWN, "kg_flush_l2", start=1_100)
    fake.launch(USER, "kg_flush_l2", start=1_200)  # a user's kernel with the runner's name
    fake.launch(USER, "kg_spin", start=1_300)
    assert window.end() == [(1_200, 1_300), (1_300, 1_400)]
    window.close()
    assert fake.subscriber is None  # the last window gave the subscription back


def test_the_callback_is_on_only_around_the_runners_own_launches(fake):
    window = cupti.ActivityWindow(1, 2)
    seen = []
    callback = fake.subscriber[0]
    fake.subscriber = (lambda *a: (seen.append(a[2]), callback(*a)), None)
    fake.launch(USER, "user_kernel")  # measured launches pay no callback
    assert seen == []
    with cupti.launching():
        fake.launch(OWN, "kg_spin")
    assert seen == [fake.DriverApiTraceCbid.cuLaunchKernel]
    assert fake.enabled == set()
    window.close()


def test_another_threads_launch_during_an_own_launch_is_told_apart_by_its_function(fake):
    window = cupti.ActivityWindow(1, 2)
    window.begin()
    with cupti.launching():
        fake.launch(USER, "kg_fill_random", start=1_500)  # another thread, meanwhile
        fake.launch(OWN, "kg_fill_random", start=1_600)
    assert window.end() == [(1_500, 1_600)]
    window.close()


def test_an_own_launch_cupti_did_not_report_is_an_error_not_a_silent_count(fake):
    window = cupti.ActivityWindow(1, 2)
    fake.enable_callback = lambda *a: None  # a cupti-python whose callbacks never fire
    with (
        pytest.raises(OwnLaunchError, match="did not report the runner's own"),
        cupti.launching(),
    ):
        fake.launch(OWN, "kg_flush_l2")
    window.close()


def test_without_a_window_an_own_launch_notes_nothing(fake):
    with cupti.launching():
        fake.launch(OWN, "kg_spin")
    assert cupti._State.correlation_ids == set()


def test_windows_share_one_subscription_and_each_id_answers_once(fake):
    first, second = cupti.ActivityWindow(1, 2), cupti.ActivityWindow(1, 2)
    with cupti.launching():
        cid = fake.launch(OWN, "kg_spin")
    assert cid in cupti._State.correlation_ids
    first.close()  # its flush delivers the record: the id is used up
    assert fake.subscriber is not None and cupti._State.correlation_ids == set()
    with cupti.launching():
        cid = fake.launch(OWN, "kg_spin")
    assert cupti.is_own(cid) and not cupti.is_own(cid)
    assert not cupti.is_own(None)
    second.close()
    assert fake.subscriber is None


def test_a_cupti_python_without_the_callback_api_makes_cupti_unavailable(fake):
    assert cupti.unavailable_reason() is None
    del fake.CuLaunchKernelParams
    fake.DriverApiTraceCbid = type("Cbids", (), {"cuLaunchKernel": 13})
    reason = cupti.unavailable_reason()
    assert reason == (
        "cupti-python lacks the callback API the runner needs (CuLaunchKernelParams, "
        "DriverApiTraceCbid.cuLaunchKernel_ptsz)"
    )
