"""runner serve, runner launch and KernelClient without a GPU: framing, ids and order, malformed
lines, schema validation, the bytes form, the launch CLI's parsing, and the client end to end
over a real sshd on 127.0.0.1 (without a GPU every launch answers an environment error: what is
tested here is the framing, the one connection and the error path; tests/runner/launch/test_serve_gpu.py
launches for real)."""

from __future__ import annotations

import base64
import subprocess
import sys

import numpy as np
import orjson
import pytest

from harness.client import KernelClient, _array, _param
from harness.errors import KernelError, ServiceLost
from harness.running.transport.ssh import SshTarget, SshTransport
from protocol.validation import validate
from runner.errors import LaunchArgumentError, Refused, RequestError
from runner.launch import launch_command as launch
from runner.launch import oneshot
from tests.conftest import ROOT, gpu_unavailable_reason
from tests.support.sshd import running_sshd, running_with, skip_without_ssh

PY = sys.executable
PTX = ".version 7.0\n.target sm_90\n.address_size 64\n"
REQUEST = {
    "ptx": PTX,
    "kernel": "k",
    "grid": [1],
    "block": [32],
    "params": [{"type": "i64", "value": 1}],
}


def serve(
    lines: list[bytes], timeout_s: float = 120
) -> tuple[list[dict], subprocess.CompletedProcess]:
    done = subprocess.run(
        [PY, "-m", "runner", "serve"],
        input=b"".join(lines),
        capture_output=True,
        cwd=ROOT,
        timeout=timeout_s,
    )
    return [orjson.loads(line) for line in done.stdout.splitlines()], done


def test_answers_come_in_order_with_their_ids_and_line_numbers_for_malformed_lines():
    lines = [
        orjson.dumps({**REQUEST, "id": "first"}) + b"\n",
        b"{not json\n",
        b"\n",  # a blank line is skipped, not answered
        b"[1, 2]\n",
        orjson.dumps({**REQUEST, "id": 7, "grid": [0]}) + b"\n",
        orjson.dumps({**REQUEST, "id": True}) + b"\n",
        orjson.dumps({**REQUEST, "id": None, "unknown": 1}) + b"\n",
        orjson.dumps({**REQUEST, "id": "last"}),  # no newline before EOF
    ]
    answers, done = serve(lines)
    assert done.returncode == 0, done.stderr
    assert [a["id"] for a in answers] == ["first", None, None, 7, None, None, "last"]
    assert answers[1]["phase"] == "input" and answers[1]["error"].startswith(
        "line 2: malformed JSON"
    )
    assert answers[2]["error"] == "line 4: expected a JSON object (a run request), got list"
    assert (
        answers[3]["error"].startswith("line 5: request: does not match")
        and "grid" in answers[3]["error"]
    )
    assert answers[4]["error"] == "line 6: id: expected a string, an integer or null"
    assert "line 7:" in answers[5]["error"] and "unknown" in answers[5]["error"]
    for answer in answers:
        validate(answer, "run-response", "serve answer")
    if gpu_unavailable_reason():
        assert answers[0]["phase"] == answers[6]["phase"] == "environment"
    assert b"ready in" in done.stderr  # progress on stderr, never on stdout


def test_eof_at_once_ends_the_service_with_status_zero():
    answers, done = serve([])
    assert (answers, done.returncode) == ([], 0)


def test_the_bytes_form_round_trips_exactly_both_ways():
    values = np.array([0.1, -0.0, np.nan, np.inf, 5e-324, -1.7976931348623157e308])
    nan_payload = np.frombuffer(np.array([0x7FF8DEADBEEF0001], dtype="<u8").tobytes(), "<f8")
    sent = np.concatenate([values, nan_payload])
    request = {**REQUEST, "params": [_param(sent), _param(np.arange(5, dtype=np.uint32))]}
    prepared = oneshot._prepare(request)
    got = prepared.params[0].array
    assert got.tobytes() == sent.astype("<f8").tobytes()  # every bit, NaN payload and -0.0 too
    assert prepared.params[1].array.tolist() == [0, 1, 2, 3, 4]
    out = oneshot.Output(0, 7, base64=True)
    document = oneshot.output_document(out, prepared.params[0], got)
    assert base64.b64decode(document["data_base64"]) == sent.astype("<f8").tobytes()
    assert _array(document).tobytes() == sent.tobytes()


@pytest.mark.parametrize(
    ("param", "message"),
    [
        ({"type": "f64[]", "data_base64": "AAAA"}, "3 bytes is not a whole number of f64 elements"),
        ({"type": "i32[]", "data_base64": "***"}, "params[0].data_base64: not base64"),
        ({"type": "i64[]", "data_base64": "", "values": [1]}, "params[0]"),
    ],
)
def test_a_bad_bytes_form_is_refused_naming_the_field(param, message):
    with pytest.raises(RequestError) as caught:
        oneshot._prepare({**REQUEST, "params": [param]})
    assert message in str(caught.value)


def test_launch_command_line_parses_as_the_cpp_runner_does():
    assert launch.parse_param("i64[]:1,2,-3") == {"type": "i64[]", "values": [1, 2, -3]}
    assert launch.parse_param("f64:2.5") == {"type": "f64", "value": 2.5}
    assert launch.parse_param("f32[]:1,inf,nan") == {"type": "f32[]", "values": [1.0, "inf", "nan"]}
    assert launch.parse_dims("4,1,1", "--grid") == [4, 1, 1]
    assert launch.format_values([1, -2]) == "1,-2"
    assert (
        launch.format_values([0.1, 2.0, 1e-20, "nan"])
        == "0.10000000000000001,2,9.9999999999999995e-21,nan"
    )  # as %.17g prints it
    for bad, message in [
        ("i64", "requires type prefix"),
        ("i64:", "requires at least one value"),
        ("i64:1,2", "scalar param expects exactly one value"),
        ("i8:1", "unsupported param type 'i8'"),
        ("f64[]:1,x", "invalid float value 'x' in --param f64[]:1,x"),
        ("i64[]:1.5", "invalid integer value '1.5'"),
    ]:
        with pytest.raises(LaunchArgumentError) as caught:
            launch.parse_param(bad)
        assert message in str(caught.value)
    with pytest.raises(LaunchArgumentError, match="expected 3 comma-separated values"):
        launch.parse_dims("4,1", "--grid")
    # the one reading of a command line (the second, cli_compat.request, went with the merge)
    with pytest.raises(Refused, match="is a scalar"):
        launch.parse(["k.ptx", "--kernel", "k", "--param", "i64:1"])
    with pytest.raises(Refused, match="out of range"):
        launch.parse(["k.ptx", "--kernel", "k", "--param", "i64[]:1", "--output-param", "3"])


def test_launch_cli_errors_go_to_stderr_with_status_one(tmp_path):
    ptx = tmp_path / "k.ptx"
    ptx.write_text(PTX)
    base = [PY, "-m", "runner", "launch", str(ptx), "--kernel", "k"]
    bad = subprocess.run([*base, "--param", "f64:abc"], capture_output=True, text=True, cwd=ROOT)
    assert (bad.returncode, bad.stdout) == (1, "")
    assert bad.stderr.strip() == "Error: invalid float value 'abc' in --param f64:abc"
    missing = subprocess.run(
        [
            PY,
            "-m",
            "runner",
            "launch",
            str(tmp_path / "none.ptx"),
            "--kernel",
            "k",
            "--param",
            "i64[]:1",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert missing.returncode == 1 and missing.stderr.startswith("Error: cannot open")


def test_client_parameters_take_arrays_typed_scalars_and_refuse_ambiguity():
    assert _param(("u32", 7)) == {"type": "u32", "value": 7}
    assert _param(3) == {"type": "i64", "value": 3}
    assert _param(float("-inf")) == {"type": "f64", "value": "-inf"}
    for bad in (True, "x", np.zeros(2, dtype=np.int8)):
        with pytest.raises(TypeError):
            _param(bad)


def test_local_client_answers_errors_as_exceptions_and_ends_with_the_session():
    with KernelClient.local() as gpu:
        for _ in range(3):
            with pytest.raises(KernelError) as caught:
                gpu.launch(PTX, "k", 1, 32, [np.arange(4, dtype=np.int64)], [0])
            assert caught.value.phase in ("environment", "load", "signature")
        proc = gpu.proc
    assert proc.returncode == 0


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    skip_without_ssh()
    with running_sshd(tmp_path_factory.mktemp("sshd")) as server:
        yield server


def test_client_over_ssh_uses_one_connection_for_a_whole_session(sshd):
    target = SshTarget.parse(sshd.url)
    with SshTransport(
        target, identity=sshd.identity, known_hosts=sshd.known_hosts, python=PY
    ) as ssh:
        with KernelClient.over_ssh(ssh, remote_dir=str(ROOT)) as gpu:
            pid = gpu.proc.pid
            answers = [
                gpu.request({**REQUEST, "params": [_param(np.arange(3))]}) for _ in range(20)
            ]
            assert gpu.proc.pid == pid  # one ssh session for all twenty requests
            assert len(running_with("runner.launch.serve_worker")) >= 1  # one service, kept warm
        assert [a["id"] for a in answers] == list(range(1, 21))
        for answer in answers:
            validate(answer, "run-response", "answer over ssh")
    if gpu_unavailable_reason():
        assert {a["phase"] for a in answers} == {"environment"}


def test_a_dropped_service_raises_service_lost(sshd):
    target = SshTarget.parse(sshd.url)
    with SshTransport(
        target, identity=sshd.identity, known_hosts=sshd.known_hosts, python=PY
    ) as ssh:
        gpu = KernelClient.over_ssh(ssh, remote_dir=str(ROOT))
        with gpu:
            gpu.proc.kill()  # the connection drops mid-session
            gpu.proc.wait()
            with pytest.raises(ServiceLost):
                gpu.request(REQUEST)


def test_client_over_a_vast_rental_uses_its_ssh_connection(sshd):
    """The cloud API is a small fake (it cannot exist here); the SSH session is real."""
    from harness.running.transport.local import LocalTransport
    from harness.running.transport.vast import VastTransport
    from tests.harness.running.transport.test_vast import FakeVast

    api = FakeVast(
        statuses=[{"actual_status": "running", "ssh_host": "127.0.0.1", "ssh_port": sshd.port}]
    )
    rental = VastTransport(
        "H200", api=api, identity=sshd.identity, python=PY, say=lambda text: None
    )
    with rental, KernelClient.over(rental, remote_dir=str(ROOT)) as gpu:
        assert gpu.description == f"runner serve on ssh://root@127.0.0.1:{sshd.port}"
        answer = gpu.request(REQUEST)
        assert answer["id"] == 1 and answer["status"] in ("ok", "error")
    assert api.called("destroy_instance") == [(4242,)]
    local = KernelClient.over(LocalTransport(python=PY))
    assert local.argv == [PY, "-m", "runner", "serve", "--ready-token", local.ready_token]


def test_serve_help_is_click_styled_like_every_command():
    # issue 53 item 7: it was argparse's, from the fast path that skips click
    done = subprocess.run(
        [sys.executable, "-m", "runner", "serve", "--help"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0 and done.stdout.startswith(
        "Usage: python -m runner serve [OPTIONS]"
    )
    assert "--idle-timeout-s FLOAT RANGE" in done.stdout and "-h, --help" in done.stdout
