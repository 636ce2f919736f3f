"""The Vast.ai provider against a recording fake of its SDK adapter (no network here)."""

from __future__ import annotations

import re
from typing import ClassVar

import pytest

from harness.errors import ConnectError, VastError
from harness.running.transport.base import Completed
from harness.running.transport.vast import (
    LABEL,
    VastSdk,
    VastTransport,
    choose_offer,
    label_expiry,
    normalise_gpu_name,
    rental_label,
    ssh_endpoint,
)

NOW = 1_800_000_000.0
RUNNING = {
    "actual_status": "running",
    "ssh_host": "ssh4.vast.ai",
    "ssh_port": 20417,
    "public_ipaddr": "203.0.113.7",
}


EVENTS: list[str] = []  # destroys and SSH closes, in the order they happened


class FakeVast:
    """`VastApi` that records every call; offers, instances and failures are set per test.

    `create_error`: create_instance raises it; with `create_rents`, only after the rental was
    made (as a request that times out after Vast acted on it)."""

    def __init__(self, offers=None, instances=(), statuses=None, destroy_failures=0,
                 create_error=None, create_rents=False):  # fmt: skip
        self.offers = (
            [{"id": 11, "gpu_name": "H200", "dph_total": 3.1}] if offers is None else offers
        )
        self.instances = list(instances)
        self.statuses = list(statuses or [RUNNING])  # show_instance answers, last one repeats
        self.destroy_failures = destroy_failures
        self.create_error = create_error
        self.create_rents = create_rents
        self.calls: list[tuple] = []

    def search_offers(self, query):
        self.calls.append(("search_offers", query))
        return self.offers

    def create_instance(self, offer_id, *, image, disk_gb, label):
        self.calls.append(("create_instance", offer_id, label))
        if self.create_rents:
            self.instances.append({"id": 4242, "label": label, "start_date": NOW})
        if self.create_error is not None:
            raise self.create_error
        return 4242

    def attach_ssh_key(self, instance_id, public_key):
        self.calls.append(("attach_ssh_key", instance_id, public_key))

    def show_instances(self):
        self.calls.append(("show_instances",))
        return self.instances

    def show_instance(self, instance_id):
        self.calls.append(("show_instance", instance_id))
        return self.statuses.pop(0) if len(self.statuses) > 1 else self.statuses[0]

    def destroy_instance(self, instance_id):
        self.calls.append(("destroy_instance", instance_id))
        if self.destroy_failures:
            self.destroy_failures -= 1
            raise ConnectionError("HTTP 502 from console.vast.ai")
        EVENTS.append(f"destroyed {instance_id}")

    def called(self, name):
        return [c[1:] for c in self.calls if c[0] == name]


class FakeSsh:
    """Stands in for SshTransport: records how it was built; can refuse to connect or fail a run."""

    made: ClassVar[list[FakeSsh]] = []
    refusals: ClassVar[int] = 0
    run_error: ClassVar[Exception | None] = None

    def __init__(self, target, **settings):
        self.target = target
        self.settings = settings
        self.closed = False
        FakeSsh.made.append(self)

    def __enter__(self):
        if FakeSsh.refusals:
            FakeSsh.refusals -= 1
            raise ConnectError("ssh: connect to host port 20417: Connection refused")
        self.settings["known_hosts"].write_text("[ssh4.vast.ai]:20417 ssh-ed25519 AAAAfake\n")
        return self

    def __exit__(self, *exc):
        self.closed = True
        EVENTS.append("ssh closed")

    def run(self, command, stdin, *, timeout_s, stderr_sink):
        if FakeSsh.run_error is not None:
            raise FakeSsh.run_error
        return Completed(0, b"{}")


@pytest.fixture(autouse=True)
def fresh_fake_ssh():
    FakeSsh.made, FakeSsh.refusals, FakeSsh.run_error = [], 0, None
    EVENTS.clear()


class Clock:
    """monotonic() and sleep() that move time forward without waiting."""

    def __init__(self):
        self.t = 0.0
        self.slept: list[float] = []

    def monotonic(self):
        return self.t

    def sleep(self, seconds):
        self.slept.append(seconds)
        self.t += seconds


def provider(api, model="H200", clock=None, **settings) -> VastTransport:
    clock = clock or Clock()
    return VastTransport(
        model,
        api=api,
        ssh_factory=FakeSsh,
        monotonic=clock.monotonic,
        sleep=clock.sleep,
        now=lambda: NOW,
        say=lambda text: None,
        **settings,
    )


def test_gpu_names_match_exactly_after_folding_case_spaces_and_underscores():
    assert normalise_gpu_name("RTX_4090") == normalise_gpu_name(" rtx  4090 ")
    assert normalise_gpu_name("H100 SXM") != normalise_gpu_name("H100 PCIE")
    assert normalise_gpu_name("H200") != normalise_gpu_name("H200 NVL")


def test_the_cheapest_exact_offer_is_chosen():
    offers = [
        {"id": 1, "gpu_name": "H200 NVL", "dph_total": 1.0},
        {"id": 2, "gpu_name": "H200", "dph_total": 3.5},
        {"id": 3, "gpu_name": "H200", "dph_total": 2.9},
    ]
    assert choose_offer(offers, "h200")["id"] == 3


def test_another_model_is_refused_naming_both_and_nothing_is_rented():
    api = FakeVast(offers=[{"id": 1, "gpu_name": "H200 NVL"}, {"id": 2, "gpu_name": "H100 SXM"}])
    with pytest.raises(VastError) as failure, provider(api):
        pass
    message = str(failure.value)
    assert "'H200'" in message and "'H200 NVL'" in message and "'H100 SXM'" in message
    assert "refusing to fall back" in message
    assert api.called("create_instance") == [] and api.called("destroy_instance") == []


def test_no_offer_at_all_is_an_error():
    with pytest.raises(VastError, match="no rentable offer for GPU model 'H200'"):
        provider(FakeVast(offers=[])).__enter__()


def test_the_search_asks_for_the_model_and_one_gpu():
    api = FakeVast()
    with provider(api):
        pass
    (query,) = api.called("search_offers")[0]
    assert query == {"gpu_name": {"eq": "H200"}, "num_gpus": {"eq": 1}}


def test_the_search_names_the_model_as_vast_does_with_spaces():
    api = FakeVast(offers=[{"id": 11, "gpu_name": "RTX 4090", "dph_total": 0.4}])
    with provider(api, model="RTX_4090"):
        pass
    (query,) = api.called("search_offers")[0]
    assert query["gpu_name"] == {"eq": "RTX 4090"}
    assert api.called("create_instance")[0][0] == 11


def test_a_run_rents_once_connects_as_root_with_a_fresh_host_key_file_and_destroys(tmp_path):
    key = tmp_path / "id_ed25519"
    key.write_text("private")
    key.with_suffix(".pub").write_text("ssh-ed25519 AAAApublic me")
    api = FakeVast()
    with provider(api, identity=key, python="/opt/py/bin/python3", lifetime_s=7200) as vast:
        assert vast.run(["true"], None, timeout_s=5, stderr_sink=print) == Completed(0, b"{}")
        assert vast.run(["true"], None, timeout_s=5, stderr_sink=print).returncode == 0
        (ssh,) = FakeSsh.made  # both steps on one connection to one rental
        assert api.called("destroy_instance") == []
    ((offer, label),) = api.called("create_instance")
    assert offer == 11
    assert re.fullmatch(rf"{LABEL}-[0-9a-f]{{12}}-exp{int(NOW + 7200)}", label), label
    assert api.called("attach_ssh_key") == [(4242, "ssh-ed25519 AAAApublic me")]
    assert (ssh.target.host, ssh.target.port, ssh.target.user) == ("ssh4.vast.ai", 20417, "root")
    assert ssh.settings["accept_new_host_key"] is True
    assert ssh.settings["python"] == "/opt/py/bin/python3" and ssh.settings["identity"] == key
    assert ssh.closed
    assert api.called("destroy_instance") == [(4242,)]
    assert not ssh.settings["known_hosts"].exists()  # the rental's host key file went with it


def test_a_direct_ssh_port_is_preferred_to_the_proxy():
    direct = {**RUNNING, "ports": {"22/tcp": [{"HostIp": "0.0.0.0", "HostPort": "41022"}]}}
    assert ssh_endpoint(direct) == ("203.0.113.7", 41022)
    assert ssh_endpoint(RUNNING) == ("ssh4.vast.ai", 20417)
    assert ssh_endpoint({**RUNNING, "actual_status": "loading"}) is None


def test_the_instance_is_destroyed_when_the_run_fails():
    api = FakeVast()
    FakeSsh.run_error = RuntimeError("the job blew up")
    with pytest.raises(RuntimeError, match="blew up"), provider(api) as vast:
        vast.run(["true"], None, timeout_s=5, stderr_sink=print)
    assert api.called("destroy_instance") == [(4242,)]
    assert FakeSsh.made[0].closed


def test_the_instance_is_destroyed_when_ssh_never_appears():
    loading = {"actual_status": "loading", "status_msg": "pulling image"}
    api = FakeVast(statuses=[loading])
    clock = Clock()
    with pytest.raises(VastError, match=r"no SSH endpoint after 60 s.*'loading': pulling image"):
        provider(api, clock=clock, ssh_wait_s=60.0, poll_s=10.0).__enter__()
    assert api.called("destroy_instance") == [(4242,)]
    assert len(api.called("show_instance")) == 7  # t = 0, 10, ..., 60
    assert FakeSsh.made == []


def test_ssh_is_retried_while_it_comes_up_then_the_rental_is_destroyed_on_giving_up():
    FakeSsh.refusals = 2
    api = FakeVast()
    with provider(api, poll_s=5.0) as vast:
        assert vast.ssh is FakeSsh.made[-1]
    assert len(FakeSsh.made) == 3 and api.called("destroy_instance") == [(4242,)]

    FakeSsh.made, FakeSsh.refusals = [], 10**6
    api = FakeVast()
    with pytest.raises(VastError, match=r"SSH never came up: .*Connection refused"):
        provider(api, ssh_wait_s=30.0, poll_s=10.0).__enter__()
    assert api.called("destroy_instance") == [(4242,)]


def test_a_failing_destroy_is_retried_with_backoff():
    api = FakeVast(destroy_failures=2)
    clock = Clock()
    with provider(api, clock=clock, destroy_backoff_s=5.0):
        pass
    assert api.called("destroy_instance") == [(4242,)] * 3
    assert clock.slept[-2:] == [5.0, 10.0]


def test_a_destroy_that_keeps_failing_is_loud_and_names_the_instance():
    api = FakeVast(destroy_failures=10)
    with pytest.raises(VastError) as failure, provider(api, destroy_attempts=3):
        pass
    assert "could not destroy instance 4242 after 3 attempts" in str(failure.value)
    assert "vastai destroy instance 4242" in str(failure.value)
    assert len(api.called("destroy_instance")) == 3


def test_orphans_are_the_labelled_instances_past_their_expiry():
    hour = 3600.0
    expired = rental_label(LABEL, NOW - 60)
    api = FakeVast(
        instances=[
            {"id": 1, "label": expired, "start_date": NOW - 2 * hour},  # a dead run's machine
            # a long run still going: old, but its label says it may live on
            {"id": 2, "label": rental_label(LABEL, NOW + hour), "start_date": NOW - 30 * hour},
            {"id": 3, "label": "someone-else", "start_date": NOW - 30 * hour},
            {"id": 4, "label": None, "start_date": NOW - 30 * hour},
            {"id": 5, "label": f"{LABEL}x-0123456789ab-exp1", "start_date": NOW - 30 * hour},
        ]
    )
    with provider(api, orphan_after_s=6 * hour):
        pass
    assert api.called("destroy_instance") == [(1,), (4242,)]
    first_calls = [c[0] for c in api.calls[:3]]
    assert first_calls == ["show_instances", "destroy_instance", "search_offers"]
    assert label_expiry(expired, LABEL) == float(int(NOW - 60))


def test_labels_without_a_readable_expiry_fall_back_to_the_age_rule():
    hour = 3600.0
    api = FakeVast(
        instances=[
            {"id": 1, "label": LABEL, "start_date": NOW - 30 * hour},  # an older harness's
            {"id": 2, "label": LABEL, "start_date": NOW - 0.5 * hour},  # a run still going
            {"id": 3, "label": f"{LABEL}-0123456789ab-expsoon", "start_date": NOW - 7 * hour},
            {"id": 5, "label": LABEL},  # no start date: cannot tell, left alone
        ]
    )
    with provider(api, orphan_after_s=6 * hour):
        pass
    assert api.called("destroy_instance") == [(1,), (3,), (4242,)]


def test_every_rental_gets_a_label_of_its_own():
    labels = set()
    for _ in range(3):
        api = FakeVast()
        with provider(api):
            pass
        labels.add(api.called("create_instance")[0][1])
    assert len(labels) == 3


def test_a_create_that_fails_after_renting_still_destroys_the_rental():
    api = FakeVast(
        instances=[{"id": 7, "label": rental_label(LABEL, NOW + 3600), "start_date": NOW}],
        create_error=TimeoutError("read timed out"),
        create_rents=True,
    )
    with pytest.raises(TimeoutError, match="read timed out"):
        provider(api).__enter__()
    ((_, label),) = api.called("create_instance")
    assert [i["id"] for i in api.instances if i["label"] == label] == [4242]
    assert api.called("destroy_instance") == [(4242,)]  # and not 7, another run's rental


def test_a_failed_create_whose_check_cannot_list_instances_names_the_label():
    api = FakeVast(create_error=TimeoutError("read timed out"))
    listed = []

    def show_instances():
        listed.append(1)
        if len(listed) > 1:  # the sweep before renting works; the check after does not
            raise ConnectionError("HTTP 503")
        return []

    api.show_instances = show_instances
    with pytest.raises(VastError) as failure:
        provider(api).__enter__()
    ((_, label),) = api.called("create_instance")
    message = str(failure.value)
    assert "read timed out" in message and "HTTP 503" in message and repr(label) in message
    assert isinstance(failure.value.__cause__, TimeoutError)


def test_the_rental_is_destroyed_before_the_ssh_connection_is_closed():
    api = FakeVast()
    with provider(api):
        pass
    assert EVENTS == ["destroyed 4242", "ssh closed"]


def test_an_interrupt_inside_the_rental_still_destroys_it():
    api = FakeVast()
    with pytest.raises(KeyboardInterrupt), provider(api):
        raise KeyboardInterrupt  # what SIGTERM becomes under `harness run`
    assert api.called("destroy_instance") == [(4242,)]
    assert EVENTS == ["destroyed 4242", "ssh closed"]


def test_the_ssh_connection_is_closed_even_when_the_destroy_fails():
    api = FakeVast(destroy_failures=10)
    with (
        pytest.raises(VastError, match="could not destroy instance 4242"),
        provider(api, destroy_attempts=2),
    ):
        pass
    assert FakeSsh.made[0].closed


def test_an_empty_model_is_refused():
    with pytest.raises(VastError, match="vast:<GPU model>"):
        provider(FakeVast(), model="  ")


def test_the_real_adapter_names_the_missing_package():
    try:
        import vastai  # noqa: F401
    except ImportError:
        with pytest.raises(VastError, match=r"pip install 'kernelgap\[vast\]'"):
            VastSdk()
    else:
        pytest.skip("vastai is installed here; the missing-package message cannot be shown")


class SdkStub:
    """`vastai.VastAI` with vastai 1.9.1's signatures (read from its source); records calls."""

    calls: ClassVar[list[tuple]] = []
    destroy_reply: ClassVar[object] = {"success": True}
    left: ClassVar[object] = None  # show_instance's answer after a destroy, or an exception
    destroyed: ClassVar[bool] = False

    def __init__(self, api_key=None, server_url=None, retry=3, raw=False, explain=False,
                 quiet=False, curl=False):  # fmt: skip
        SdkStub.calls.append(("init", raw, quiet))

    def search_offers(self, query=None, type="on-demand", order="score-", limit=None,
                      storage=5.0, no_default=False):  # fmt: skip
        SdkStub.calls.append(("search_offers", query, order))
        return [{"id": 7, "gpu_name": "H200"}]

    def create_instance(self, id, image=None, disk=10, env=None, price=None, label=None,
                        extra=None, onstart_cmd=None, login=None, python_utf8=False,
                        lang_utf8=False, jupyter_lab=False, jupyter_dir=None, force=False,
                        cancel_unavail=False, template_hash=None, user=None, runtype=None,
                        args=None, volume_info=None, bid_price=None, ssh=False, jupyter=False,
                        direct=False, create_volume=None, link_volume=None, volume_size=None,
                        mount_path=None, volume_label=None):  # fmt: skip
        SdkStub.calls.append(("create_instance", id, image, disk, label, ssh, direct))
        return {"success": True, "new_contract": 99}

    def attach_ssh(self, instance_id, ssh_key):
        SdkStub.calls.append(("attach_ssh", instance_id, ssh_key))

    def show_instances(self):
        return [{"id": 99}]

    def show_instance(self, id):
        SdkStub.calls.append(("show_instance", id))
        if isinstance(SdkStub.left, Exception):
            raise SdkStub.left
        return SdkStub.left if SdkStub.destroyed else {"id": id}

    def destroy_instance(self, id):
        SdkStub.calls.append(("destroy_instance", id))
        SdkStub.destroyed = True
        return SdkStub.destroy_reply


class HttpError(Exception):
    """requests.HTTPError's shape: the reply, with its status code, on `response`."""

    def __init__(self, status_code):
        super().__init__(f"{status_code} Client Error")
        self.response = type("Response", (), {"status_code": status_code})()


@pytest.fixture
def sdk(monkeypatch):
    import sys
    import types

    monkeypatch.setitem(sys.modules, "vastai", types.SimpleNamespace(VastAI=SdkStub))
    SdkStub.calls, SdkStub.destroyed = [], False
    SdkStub.destroy_reply, SdkStub.left = {"success": True}, None
    return VastSdk()


def test_the_real_adapter_calls_the_sdk_methods_by_their_real_names(sdk):
    assert sdk.search_offers({"gpu_name": {"eq": "H200"}}) == [{"id": 7, "gpu_name": "H200"}]
    assert sdk.create_instance(7, image="img", disk_gb=32.0, label=LABEL) == 99
    sdk.attach_ssh_key(99, "ssh-ed25519 AAAA")
    assert sdk.show_instances() == [{"id": 99}] and sdk.show_instance(99) == {"id": 99}
    sdk.destroy_instance(99)
    assert SdkStub.calls == [
        ("init", True, True),
        ("search_offers", {"gpu_name": {"eq": "H200"}}, "dph_total"),
        ("create_instance", 7, "img", 32.0, LABEL, True, True),
        ("attach_ssh", 99, "ssh-ed25519 AAAA"),
        ("show_instance", 99),
        ("destroy_instance", 99),
        ("show_instance", 99),  # the destroy is confirmed
    ]


@pytest.mark.parametrize(
    "left",
    [None, HttpError(404), {"id": 99, "intended_status": "destroyed", "actual_status": "running"}],
)
def test_the_real_adapter_accepts_a_destroy_once_the_instance_is_gone(sdk, left):
    SdkStub.left = left
    sdk.destroy_instance(99)
    assert SdkStub.calls[-2:] == [("destroy_instance", 99), ("show_instance", 99)]


@pytest.mark.parametrize(
    ("reply", "left", "expected"),
    [
        ({"success": False, "msg": "no such instance"}, None, "refused: .*no such instance"),
        ("<html>502</html>", None, "refused"),
        ({"success": True}, {"id": 99, "actual_status": "running"}, "still 'running'"),
        ({"success": True}, HttpError(500), "500 Client Error"),
    ],
)
def test_the_real_adapter_refuses_a_destroy_it_cannot_confirm(sdk, reply, left, expected):
    SdkStub.destroy_reply, SdkStub.left = reply, left
    with pytest.raises(Exception, match=expected):
        sdk.destroy_instance(99)


def test_an_unconfirmed_destroy_through_the_real_adapter_is_retried(sdk, monkeypatch):
    replies = iter([{"success": False, "msg": "busy"}, {"success": True}])

    def destroy_instance(self, id):
        SdkStub.calls.append(("destroy_instance", id))
        reply = next(replies)
        SdkStub.destroyed = reply["success"]
        return reply

    monkeypatch.setattr(SdkStub, "destroy_instance", destroy_instance)
    provider(sdk).destroy(99)
    assert SdkStub.calls[-3:] == [
        ("destroy_instance", 99),
        ("destroy_instance", 99),
        ("show_instance", 99),
    ]


def test_the_wait_for_the_machine_and_its_sshd_says_what_it_waits_for_every_minute():
    loading = {"actual_status": "loading", "status_msg": "pulling image"}
    running = {"actual_status": "running", "ssh_host": "ssh4.vast.ai", "ssh_port": 20417}
    api = FakeVast(statuses=[loading] * 15 + [running])
    FakeSsh.refusals = 13
    said: list[str] = []
    clock = Clock()
    vast = VastTransport(
        "H200", api=api, ssh_factory=FakeSsh, monotonic=clock.monotonic, sleep=clock.sleep,
        now=lambda: NOW, say=said.append, poll_s=10.0,
    )  # fmt: skip
    with vast:
        pass
    waits = [line for line in said if line.startswith("vast: waiting")]
    assert waits[0] == "vast: waiting for instance 4242 to start (the image is pulled first)"
    assert waits[1:3] == [
        "vast: waiting 60 s (of up to 900 s) for instance 4242 to run with an SSH port "
        "(status 'loading': pulling image)",
        "vast: waiting 120 s (of up to 900 s) for instance 4242 to run with an SSH port "
        "(status 'loading': pulling image)",
    ]
    sshd = [line for line in waits if "sshd at" in line]
    assert [line.split(" s ")[0] for line in sshd] == ["vast: waiting 60", "vast: waiting 120"]
    assert (
        "sshd at ssh4.vast.ai:20417 (ssh: connect to host port 20417: Connection refused)"
        in (sshd[0])
    )
