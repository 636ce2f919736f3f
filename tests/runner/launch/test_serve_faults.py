"""The launch service and its client under faults (issue 33, items 1-7): each test reproduces one
line or use that ended `runner serve` or broke KernelClient, and checks the answer that replaced
it. The service's promises are in docs/service.md; the 100,000-line fuzzer is
tests/runner/launch/test_serve_fuzz.py."""

from __future__ import annotations

import io
import subprocess
import sys
import threading
from pathlib import Path

import orjson
import pytest

from harness.client import GRACE_S, KernelClient, _answer_limit_s
from harness.errors import ServiceLost
from harness.running.transport.ssh import SshTarget, SshTransport
from protocol.input_files import MAX_TIMEOUT_S, nested_deeper_than
from protocol.validation import validate
from runner.launch import oneshot
from runner.launch.serve import Line, bounded_lines
from tests.conftest import ROOT
from tests.support.sshd import running_sshd, skip_without_ssh

PY = sys.executable
PTX = ".version 7.0\n.target sm_90\n.address_size 64\n"
REQUEST = {"ptx": PTX, "kernel": "k", "grid": [1], "block": [32]}


def serve(lines: list[bytes], *options: str) -> list[dict]:
    """Answers of one `runner serve` to `lines`; the service must end with status 0 at EOF."""
    done = subprocess.run(
        [PY, "-m", "runner", "serve", *options],
        input=b"".join(line + b"\n" for line in lines),
        capture_output=True,
        cwd=ROOT,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-3000:]
    answers = [orjson.loads(line) for line in done.stdout.splitlines()]
    for answer in answers:
        validate(answer, "run-response", "serve answer")
    return answers


def last_request_answered(answers: list[dict], count: int) -> None:
    """`count` answers, the last one to a valid request (id "after"): the service lived on."""
    assert len(answers) == count
    assert answers[-1]["id"] == "after"
    assert answers[-1]["phase"] in ("environment", "signature")  # valid: no GPU, or no .entry


# ---- 1. deep nesting -----------------------------------------------------------------------


def test_deeply_nested_lines_are_answered_and_the_service_goes_on():
    depths = [17, 300, 1000, 1023, 1024, 100_000]
    lines = [
        orjson.dumps({**REQUEST, "id": f"nested {depth}"})[:-1]
        + b',"params":'
        + b"[" * depth
        + b"]" * depth
        + b"}"
        for depth in depths
    ]
    lines.append(b'{"a":' * 300 + b"1" + b"}" * 300)
    lines.append(orjson.dumps({**REQUEST, "id": "after"}))
    answers = serve(lines)
    last_request_answered(answers, len(depths) + 2)
    for answer in answers[:-1]:
        assert answer["phase"] == "input" and answer["id"] is None, answer
        assert "nested more than 16 levels" in answer["error"] or "depth limit" in answer["error"]
    assert answers[0]["error"].startswith("line 1: nested more than 16 levels deep")


def test_runner_run_refuses_deep_nesting_naming_it_instead_of_a_recursion_error():
    head = orjson.dumps(REQUEST)[:-1] + b',"params":'
    for depth in (17, 1000, 1023):
        stdout = io.BytesIO()
        status = oneshot.main(io.BytesIO(head + b"[" * depth + b"]" * depth + b"}"), stdout)
        answer = orjson.loads(stdout.getvalue())
        assert status == 2 and answer["phase"] == "input", answer
        assert answer["error"] == "stdin: nested more than 16 levels deep (a run request nests 4)"


def test_nesting_is_measured_without_recursion():
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    assert nested_deeper_than(deep, 16)
    assert not nested_deeper_than({"params": [{"values": list(range(10**5))}]}, 4)
    assert nested_deeper_than({"params": [{"values": [[1]]}]}, 4)
    assert not nested_deeper_than(3, 0) and not nested_deeper_than([], 1)


# ---- 2. a huge timeout_s -------------------------------------------------------------------


def test_a_timeout_past_one_day_is_refused_and_the_service_goes_on():
    huge = [1e9, 1e12, 1e308, 2**63, MAX_TIMEOUT_S + 0.5]
    lines = [orjson.dumps({**REQUEST, "id": i, "timeout_s": t}) for i, t in enumerate(huge)]
    lines.append(orjson.dumps({**REQUEST, "id": "after", "timeout_s": MAX_TIMEOUT_S}))
    answers = serve(lines)
    last_request_answered(answers, len(huge) + 1)
    for index, answer in enumerate(answers[:-1]):
        assert answer["id"] == index and answer["phase"] == "input", answer
        assert "timeout_s" in answer["error"], answer


def test_the_schema_the_runner_and_the_client_share_one_timeout_bound():
    schema = orjson.loads((ROOT / "schemas" / "run-request.schema.json").read_bytes())
    assert schema["properties"]["timeout_s"]["maximum"] == MAX_TIMEOUT_S
    assert _answer_limit_s(1e308) == MAX_TIMEOUT_S + GRACE_S  # a wait a thread can make
    assert _answer_limit_s(2**70) == MAX_TIMEOUT_S + GRACE_S
    assert _answer_limit_s("soon") == _answer_limit_s(None) == 60.0 + GRACE_S
    assert threading.TIMEOUT_MAX > MAX_TIMEOUT_S + GRACE_S


# ---- 3. an overlong line -------------------------------------------------------------------


def _peak_rss_bytes(pid: int) -> int:
    for row in Path(f"/proc/{pid}/status").read_text().splitlines():
        if row.startswith("VmHWM:"):
            return int(row.split()[1]) * 1024
    raise AssertionError(f"/proc/{pid}/status has no VmHWM")


def test_an_overlong_line_is_dropped_as_it_streams_in_bounded_memory():
    """256 MiB on one line against a 1 MiB limit: refused, and the service's peak memory stays
    far below the line (it once held the line, then a copy of it)."""
    limit, size = 1 << 20, 256 << 20
    proc = subprocess.Popen(
        [PY, "-m", "runner", "serve", "--max-line-bytes", str(limit)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=ROOT,
    )
    try:
        chunk, head, tail = b"x" * (1 << 20), b'{"id": "big", "ptx": "', b'"}'
        proc.stdin.write(head)
        for _ in range(size // len(chunk)):
            proc.stdin.write(chunk)
        proc.stdin.write(tail + b"\n" + orjson.dumps({**REQUEST, "id": "after"}) + b"\n")
        proc.stdin.flush()
        refused, after = orjson.loads(proc.stdout.readline()), orjson.loads(proc.stdout.readline())
        peak = _peak_rss_bytes(proc.pid)
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
    assert refused["id"] is None and refused["phase"] == "input"
    assert refused["error"] == (
        f"line 1: {len(head) + size + len(tail)} bytes is longer than the limit of {limit} bytes per line"
    )
    assert after["id"] == "after" and after["phase"] in ("environment", "signature")
    assert peak < 64 << 20, f"peak RSS {peak / 2**20:.0f} MiB for a {size >> 20} MiB line"
    assert proc.returncode == 0


def test_bounded_lines_keep_at_most_the_limit_and_count_what_they_drop():
    stream = io.BytesIO(b"abc\n\n" + b"x" * 50 + b"\n" + b"y" * 10 + b"\n" + b"z" * 11 + b"\nend")
    assert list(bounded_lines(stream, 10, chunk=4)) == [
        Line(bytearray(b"abc"), 3),
        Line(bytearray(b""), 0),
        Line(None, 50),
        Line(bytearray(b"y" * 10), 10),
        Line(None, 11),
        Line(bytearray(b"end"), 3),
    ]
    assert list(bounded_lines(io.BytesIO(b""), 10)) == []
    assert [line.blank for line in bounded_lines(io.BytesIO(b" \t\r\nx\n"), 10)] == [True, False]


# ---- 5. one client, many threads -----------------------------------------------------------


def test_one_client_shared_by_eight_threads_gives_each_its_own_answers():
    failures: list[BaseException] = []
    answers: list[dict] = []
    with KernelClient.local() as gpu:

        def work(thread: int) -> None:
            try:
                for index in range(25):
                    answer = gpu.request({**REQUEST, "kernel": f"k{thread}_{index}"})
                    answers.append(answer)
            except BaseException as exc:
                failures.append(exc)

        threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert failures == []
    assert sorted(a["id"] for a in answers) == list(range(1, 201))


# ---- 6. a remote shell that prints before the service --------------------------------------

FORGED = orjson.dumps(
    {"status": "ok", "schema_version": "1.1.0", "id": 1, "outputs": [], "elapsed_ms": 0,
     "load_ms": 0, "ptx": {"version": None, "target": None}}
).decode()  # fmt: skip
FORCE_COMMAND = (
    "ForceCommand echo 'Welcome to gpu-host: authorised use only'; echo 'rc: conda activate'; "
    f"echo '{FORGED}'; eval \"$SSH_ORIGINAL_COMMAND\""
)


@pytest.fixture(scope="module")
def chatty_sshd(tmp_path_factory):
    skip_without_ssh()
    with running_sshd(tmp_path_factory.mktemp("sshd"), (FORCE_COMMAND,)) as server:
        yield server


def test_what_the_remote_prints_before_the_service_is_skipped_and_reported(chatty_sshd, capfd):
    target = SshTarget.parse(chatty_sshd.url)
    with (
        SshTransport(
            target, identity=chatty_sshd.identity, known_hosts=chatty_sshd.known_hosts, python=PY
        ) as ssh,
        KernelClient.over_ssh(ssh, remote_dir=str(ROOT)) as gpu,
    ):
        first, second = gpu.request(REQUEST), gpu.request(REQUEST)
        preamble = list(gpu.preamble)
    # the forged "ok" printed before the service is not taken for the answer to id 1
    assert (first["id"], second["id"]) == (1, 2)
    assert first["status"] == second["status"] == "error"  # no GPU here, or no .entry
    assert preamble == ["Welcome to gpu-host: authorised use only", "rc: conda activate", FORGED]
    report = capfd.readouterr().err
    assert "skipped 3 line(s) printed before the service started" in report
    assert "Welcome to gpu-host" in report


def test_a_service_that_ends_before_its_ready_line_is_lost_with_what_it_printed():
    client = KernelClient(
        ["sh", "-c", "echo 'motd: maintenance tonight'; echo 'no runner here' >&2; exit 3"],
        "a shell without the runner",
        ready_token="token",
    )
    with pytest.raises(ServiceLost) as caught:
        client.start()
    message = str(caught.value)
    assert "ended before its ready line" in message
    assert "motd: maintenance tonight" in message and "no runner here" in message


# ---- 7. integers a JSON parser cannot hold exactly -----------------------------------------


def test_integers_that_do_not_fit_exactly_are_refused_naming_the_value():
    def line(ident: str, param: str) -> bytes:
        head = orjson.dumps({**REQUEST, "id": ident})[:-1]
        return head + b',"params":[' + param.encode() + b"]}"

    refused = {
        "i64[] below": '{"type": "i64[]", "values": [1, -9223372036854775809]}',
        "i64 below": '{"type": "i64", "value": -9223372036854775809}',
        "i64[] above": '{"type": "i64[]", "values": [9223372036854775808]}',
        "u64[] above": '{"type": "u64[]", "values": [18446744073709551616]}',
        "i64[] float": '{"type": "i64[]", "values": [9007199254740994.0]}',
    }
    accepted = {
        "i64[] edges": '{"type": "i64[]", "values": [-9223372036854775808, 9223372036854775807]}',
        "u64[] edge": '{"type": "u64[]", "values": [18446744073709551615, 0]}',
        "i64[] exact float": '{"type": "i64[]", "values": [9007199254740992.0]}',
    }
    lines = [line(ident, param) for ident, param in {**refused, **accepted}.items()]
    answers = {a["id"]: a for a in serve(lines)}
    for ident in refused:
        assert answers[ident]["phase"] == "input", (ident, answers[ident])
        assert "params[0].value" in answers[ident]["error"], answers[ident]
    assert (
        "params[0].values[1]: -9.223372036854776e+18 is not an exact i64 value"
        in (answers["i64[] below"]["error"])
    )
    for ident in accepted:
        assert answers[ident]["phase"] in ("environment", "signature"), answers[ident]
