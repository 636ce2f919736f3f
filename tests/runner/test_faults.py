"""Fault injection: bad input that must end in a clear error naming the file, field or case.

Each test reproduces one defect found under bad input (issue 12) and checks the error that
replaced it. New bad inputs go here, next to the class of fault they belong to; docs/faults.md's
"What kernelgap promises under faults" table points at these tests.
"""

from __future__ import annotations

import base64
import io
import re
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from runner.definition import manifest, toolchains
from runner.errors import BuildError, ManifestError, PtxError
from runner.launch import oneshot, run_request

ROOT = Path(__file__).resolve().parents[2]
REQUEST = {
    "ptx_base64": base64.b64encode(b".version 7.0\n.target sm_75\n").decode(),
    "kernel": "main",
    "grid": [1],
    "block": [32],
    "params": [{"type": "i64[]", "values": [1, 2, 3]}, {"type": "f64[]", "values": [0.5]}],
    "outputs": [{"param": 0}],
}


def runner_check(*args: str, timeout_s: float = 120) -> subprocess.CompletedProcess:
    """`python -m runner check ARGS` from the repository root, its report on stderr."""
    return subprocess.run(
        [sys.executable, "-m", "runner", "check", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=timeout_s,
    )


def answer(request: dict | bytes) -> tuple[dict, int]:
    raw = request if isinstance(request, bytes) else orjson.dumps(request)
    stdout = io.BytesIO()
    status = oneshot.main(io.BytesIO(raw), stdout)
    return orjson.loads(stdout.getvalue()), status


# ---- bad run requests (runner run) -------------------------------------------------------------


def test_a_huge_count_names_the_field_instead_of_a_memory_error():
    request = {**REQUEST, "params": [{"type": "f64[]", "count": 10**15}, REQUEST["params"][1]]}
    response, status = answer(request)
    assert status == 2 and response["phase"] == "input"
    assert response["error"].startswith(
        "params[0].count: 1000000000000000 f64 values (8e+15 bytes)"
    )
    assert "past the limit" in response["error"]


def test_a_request_past_the_size_limit_is_refused_before_parsing(monkeypatch):
    monkeypatch.setattr(oneshot, "MAX_REQUEST_BYTES", 1000)
    request = {**REQUEST, "params": [{"type": "i64[]", "values": list(range(500))}]}
    response, status = answer(request)
    assert status == 2 and "stdin: the request is larger than 1000 bytes" in response["error"]


def test_a_million_values_are_checked_without_the_schema_walking_each_one(monkeypatch):
    """The schema sees the structure; numpy and one pass over the types see the values (the
    cost is not asserted here)."""
    seen: list[int] = []
    real = run_request.validate

    def counting(document, schema, what):
        seen.extend(len(p.get("values", [])) for p in document.get("params", []))
        return real(document, schema, what)

    monkeypatch.setattr(run_request, "validate", counting)
    values = [float(i) for i in range(10**6)]
    request = {**REQUEST, "params": [{"type": "f64[]", "values": values}]}
    oneshot.parse_request(orjson.dumps(request))
    assert seen == [0]


@pytest.mark.parametrize(
    ("param", "message"),
    [
        ({"type": "i64[]", "values": [1, True]}, "params[0].values[1]: True is not an i64 value"),
        ({"type": "i64[]", "values": [1, "2"]}, "params[0].values[1]: '2' is not an i64 value"),
        ({"type": "u32[]", "values": [0, 1.5]}, "params[0].values[1]: 1.5 is not an u32 value"),
        ({"type": "f64[]", "values": [0.5, "NaN"]}, "params[0].values[1]: 'NaN' is not an f64"),
        ({"type": "f32[]", "values": [0.5, None]}, "params[0].values[1]: None is not an f32"),
        ({"type": "f64[]", "values": [0.5, [1.0]]}, "params[0].values[1]: [1.0] is not an f64"),
    ],
)
def test_each_value_of_the_wrong_type_is_named(param, message):
    response, status = answer({**REQUEST, "params": [param]})
    assert status == 2 and response["phase"] == "input"
    assert response["error"].startswith(message), response["error"]


def test_values_of_the_right_types_still_decode_exactly():
    request = {
        **REQUEST,
        "params": [
            {"type": "i64[]", "values": [1, 2.0, -(2**63)]},
            {"type": "f64[]", "values": [0.1, 3, "nan", "-inf"]},
        ],
    }
    prepared = oneshot._prepare(request)
    assert prepared.params[0].array.tolist() == [1, 2, -(2**63)]
    f = prepared.params[1].array
    assert f[0] == 0.1 and f[1] == 3.0 and f[2] != f[2] and f[3] == float("-inf")


# ---- bad manifests (runner check, runner bench) ------------------------------------------------


def suite_copy(tmp_path: Path) -> Path:
    shutil.copytree(
        ROOT / "benchmarks", tmp_path / "suite", ignore=shutil.ignore_patterns("perf", "ops")
    )
    return tmp_path / "suite" / "cases.toml"


def edit(cases: Path, old: str, new: str) -> None:
    text = cases.read_text()
    assert old in text
    cases.write_text(text.replace(old, new, 1))


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            'source = "kernels/scale_i64.cu"',
            'source = "/etc/passwd"',
            "case 'scale_i64': impl 'cuda': source: '/etc/passwd' is an absolute path",
        ),
        (
            'source = "kernels/scale_i64.cu"',
            'source = "../../../../etc/passwd"',
            "case 'scale_i64': impl 'cuda': source: '../../../../etc/passwd' leads outside the suite's folder",
        ),
        (
            'reference = "reference.py:scale_i64"',
            'reference = "/tmp/evil.py:scale_i64"',
            "case 'scale_i64': reference: '/tmp/evil.py' is an absolute path",
        ),
        (
            'reference = "reference.py:scale_i64"',
            'reference = "kernels/../../outside.py:scale_i64"',
            "case 'scale_i64': reference: 'kernels/../../outside.py' leads outside the suite's folder",
        ),
    ],
    ids=["source-absolute", "source-dotdot", "reference-absolute", "reference-dotdot"],
)
def test_paths_outside_the_suite_are_refused(tmp_path, old, new, message):
    cases = suite_copy(tmp_path)
    edit(cases, old, new)
    with pytest.raises(ManifestError) as caught:
        manifest.load(cases)
    assert message in str(caught.value)


def test_a_symbolic_link_out_of_the_suite_is_refused(tmp_path):
    cases = suite_copy(tmp_path)
    (tmp_path / "outside.cu").write_text("// not the suite's")
    (cases.parent / "kernels" / "link.cu").symlink_to(tmp_path / "outside.cu")
    edit(cases, 'source = "kernels/scale_i64.cu"', 'source = "kernels/link.cu"')
    with pytest.raises(ManifestError, match=r"'kernels/link\.cu' leads outside the suite's folder"):
        manifest.load(cases)


def test_deeply_nested_toml_is_malformed_input_with_the_file_named(tmp_path):
    cases = tmp_path / "deep.toml"
    cases.write_text("x = " + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(ManifestError, match=r"deep\.toml: malformed TOML: .*nested too deeply"):
        manifest.load(cases)
    done = runner_check(str(cases), timeout_s=120)
    assert done.returncode == 2 and "deep.toml: malformed TOML" in done.stderr
    assert "Traceback" not in done.stderr


def test_an_absurd_size_is_refused_at_load_naming_the_buffer_and_its_expression(tmp_path):
    cases = suite_copy(tmp_path)
    edit(
        cases,
        "dims = { n = 134217728, blocks = 4224 }",
        "dims = { n = 1000000000000000000, blocks = 4224 }",
    )
    with pytest.raises(ManifestError) as caught:
        manifest.load(cases)
    text = str(caught.value)
    assert "case 'scale_i64': buffers.x.length: 'n' = 1000000000000000000 i64 values" in text
    assert "past the limit" in text


def test_a_format_spec_in_a_command_template_is_refused_before_it_runs(tmp_path):
    source = tmp_path / "k.forth"
    source.write_text("\\! kernel k\n")
    with pytest.raises(BuildError, match=r"\{arch\} has a format spec"):
        toolchains.build("command", source, "sm_90", (), "true {arch:>999999999999} {source}")


# ---- a reference that raises, hangs or returns the wrong shape (issue 33 item 15) ---------------

BAD_REFERENCES = """\
import time

import numpy as np


def raises(x, a):
    raise ZeroDivisionError("the reference's own bug")


def sleeps(x, a):
    time.sleep(600)


def wrong_shape(x, a):
    return {"out": np.zeros(3)}


def exits(x, a):
    raise SystemExit(0)


def swallows(x, a):  # catches the time limit's interruption and goes on (issue 52)
    while True:
        try:
            time.sleep(600)
        except BaseException:
            pass


def ignores(x, a):  # the time limit's signal ignored, then a wait that never ends
    import signal
    import threading

    signal.signal(signal.SIGALRM, signal.SIG_IGN)
    threading.Event().wait()


def dies(x, a):
    import os

    os._exit(7)
"""


@pytest.mark.parametrize(
    ("function", "message"),
    [
        (
            "raises",
            "reference reference.py:raises: raised ZeroDivisionError: the reference's own bug",
        ),
        ("sleeps", "reference reference.py:sleeps did not return within 2 s"),
        (
            "wrong_shape",
            "reference reference.py:wrong_shape: output 'out' has 3 elements, expected 17",
        ),
        ("exits", "reference reference.py:exits: raised SystemExit: 0"),
        (
            "swallows",
            "reference reference.py:swallows did not return within 9 s (twice the case's "
            "timeout_s); ended",
        ),
        ("ignores", "reference reference.py:ignores did not return within 9 s"),
        ("dies", "reference reference.py:dies ended its process with status 7 before it returned"),
    ],
)
def test_runner_check_names_a_failing_reference_and_bounds_its_time(tmp_path, function, message):
    from tests.runner.definition.test_manifest import write_suite

    cases = write_suite(
        tmp_path, 'reference = "reference.py:scale"', f'reference = "reference.py:{function}"'
    )
    cases.write_text(
        cases.read_text().replace("[[case]]", "[defaults]\ntimeout_s = 2.0\n\n[[case]]", 1)
    )
    (tmp_path / "reference.py").write_text(BAD_REFERENCES)
    done = runner_check(str(cases), timeout_s=120)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"FAIL  scale: reference: {cases}: case 'scale': {message}" in done.stderr, done.stderr


def test_a_reference_module_that_hangs_at_import_is_bounded(tmp_path):
    from runner.definition.reference import load_reference
    from runner.errors import ReferenceTimeout
    from tests.runner.definition.test_manifest import write_suite

    cases = write_suite(tmp_path)
    cases.write_text(
        cases.read_text().replace("[[case]]", "[defaults]\ntimeout_s = 1.0\n\n[[case]]", 1)
    )
    (tmp_path / "reference.py").write_text("import time\ntime.sleep(600)\n")
    suite = manifest.load(cases)
    with pytest.raises(
        ReferenceTimeout, match=r"reference: importing reference\.py did not return"
    ):
        load_reference(suite, suite.cases[0])


# ---- PTX that costs quadratic time to parse (issue 33 item 16) ---------------------------------


@pytest.mark.parametrize(
    "filler",
    ["/* never closed ", '"', "// line\n", ".entry k()\n", "/*/", "\n", " \n", ".visible "],
    ids=[
        "open-comments",
        "quotes",
        "line-comments",
        "entries",
        "slash-star-slash",
        "blank-lines",
        "space-lines",
        "qualifiers",
    ],
)
def test_ptx_parsing_is_linear_in_hostile_text(filler):
    import time

    from runner.gpu import ptx

    text = ".version 8.7\n.target sm_90\n.address_size 64\n" + filler * (800_000 // len(filler))
    started = time.perf_counter()
    module = ptx.parse(text)
    elapsed_s = time.perf_counter() - started
    assert module.version == "8.7"
    # 800 KB: about 1 s at most when linear; a quadratic parser took 4.7 s on 48 KB of openers
    assert elapsed_s < 10.0, elapsed_s


def test_the_linear_comment_stripper_blanks_what_the_regex_did():
    """The earlier (quadratic) regex is the oracle, on every short mix of quotes, slashes,
    stars, backslashes and newlines a seeded generator makes."""
    import random

    from runner.gpu import ptx

    oracle = re.compile(r'"(?:[^"\\\n]|\\.)*"|//[^\n]*|/\*.*?\*/', re.DOTALL)

    def regex_blank(text: str) -> str:
        def blank(match):
            found = match.group(0)
            return found if found.startswith('"') else " " + "\n" * found.count("\n")

        return oracle.sub(blank, text)

    pieces = ['"', "/", "*", "\n", "\\", "a", " ", "//", "/*", "*/"]
    rng = random.Random(33)
    for _ in range(20_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 30)))
        assert ptx._strip_comments(text) == regex_blank(text), repr(text)
    module = ptx.parse(
        '.file 1 "a//b/*c*/"\n/* x\ny */.version 8.7\n.entry k(.param .u64 p /* c */)'
    )
    assert module.version == "8.7" and [p.name for p in module.entries["k"].params] == ["p"]


def test_ptx_over_the_size_limit_is_refused(monkeypatch):
    from runner.gpu import ptx

    monkeypatch.setattr(ptx, "MAX_PTX_CHARS", 1000)
    with pytest.raises(PtxError, match="over the 1000"):
        ptx.parse(".version 8.7\n" + " " * 1000)


# ---- a full disk -------------------------------------------------------------------------------


def test_a_failed_write_leaves_no_temporary_file_and_keeps_the_earlier_document(
    tmp_path, monkeypatch
):
    from runner import document as writing

    target = tmp_path / "result.json"
    writing.write_atomic(target, b'{"earlier": true}')

    def full_disk(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(writing.os, "fsync", full_disk)
    with pytest.raises(OSError, match="No space left"):
        writing.write_atomic(target, b'{"later": true}')
    assert target.read_bytes() == b'{"earlier": true}'
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]


# ---- terminal escapes from a compiler's output (issue 33 item 20) ------------------------------


def test_runner_check_shows_a_compilers_escape_sequences_visibly(tmp_path):
    from tests.runner.definition.test_manifest import SECOND_IMPL, write_suite

    compiler = tmp_path / "evilcc"
    compiler.write_text(
        "#!/bin/sh\nprintf 'bad kernel \\033]0;owned\\007\\033[2J\\n' >&2\nexit 1\n"
    )
    compiler.chmod(0o755)
    cases = write_suite(tmp_path)
    impl = SECOND_IMPL.format(name="evil", role="candidate").replace(
        'toolchain = "ptx"',
        f'toolchain = "command"\ncommand = "{compiler} {{source}} -o {{output}}"',
    )
    cases.write_text(cases.read_text() + impl)
    done = runner_check(str(cases), timeout_s=120)
    assert "bad kernel" in done.stderr, done.stderr  # the compiler's message is reported...
    assert "\x1b" not in done.stderr and "\x07" not in done.stderr  # ...with no live escape
    assert "\\x1b]0;owned\\x07" in done.stderr


def test_one_function_makes_control_characters_visible_for_both_clis():
    from harness.escaping import terminal
    from protocol.progress import visible

    text = "a\x1b]0;owned\x07\u202eb\nc"
    assert visible(text) == terminal(text) == "a\\x1b]0;owned\\x07\\u202eb\\nc"
    assert (
        visible(text, lines=True) == terminal(text, lines=True) == "a\\x1b]0;owned\\x07\\u202eb\nc"
    )


# ---- launch geometry past the device's limits (issue 33 item 14) -------------------------------


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("block = 128", "block = 2048", "block.x = 2048 is past the limit of 1024"),
        ("block = 128", "block = [32, 32, 2]", "block [32, 32, 2] has 2048 threads"),
        ("block = 128", "block = [1, 1, 65]", "block.z = 65 is past the limit of 64"),
        (
            'grid = "ceil_div(n, 128)"',
            "grid = [1, 70000]",
            "grid.y = 70000 is past the limit of 65535",
        ),
        ('grid = "ceil_div(n, 128)"', 'grid = "3 * n * n * n"', "grid.x = 3000000000 is past"),
        (
            "block = 128",
            "block = 128\nshared_bytes = 1048576",
            "shared_bytes = 1048576 is past 232448",
        ),
    ],
    ids=["block-x", "threads", "block-z", "grid-y", "grid-x", "shared-any-gpu"],
)
def test_a_launch_no_gpu_allows_is_refused_at_load(tmp_path, old, new, message):
    from tests.runner.definition.test_manifest import write_suite

    cases = write_suite(tmp_path, old, new)
    with pytest.raises(ManifestError) as caught:
        manifest.load(cases)
    assert f"case 'scale': {message}" in str(caught.value)


def test_runner_check_holds_shared_memory_to_the_architecture(tmp_path):
    from tests.runner.definition.test_manifest import write_suite

    cases = write_suite(tmp_path, "block = 128", "block = 128\nshared_bytes = 150000")
    manifest.load(cases)  # some GPU (sm_90: 227 KiB per block) can launch it

    def check(arch: str) -> subprocess.CompletedProcess:
        return runner_check(str(cases), "--arch", arch, timeout_s=300)

    on_turing = check("sm_75")
    assert on_turing.returncode == 1, on_turing.stderr
    assert "FAIL  scale: launch:" in on_turing.stderr
    assert (
        "shared_bytes = 150000 is past 65536 bytes, the most a block may use on sm_75"
        in on_turing.stderr
    )
    assert "launch:" not in check("sm_90").stderr  # within sm_90's limit: the check goes on


def test_the_reference_time_limit_keeps_an_enclosing_timer():
    import signal
    import time

    from runner.definition.reference import time_limit
    from runner.errors import ReferenceTimeout

    fired: list[float] = []
    previous = signal.signal(signal.SIGALRM, lambda *_: fired.append(time.monotonic()))
    try:
        started = time.monotonic()
        signal.setitimer(signal.ITIMER_REAL, 0.5)
        with (
            pytest.raises(ReferenceTimeout, match=r"did not return within 0\.1 s"),
            time_limit(0.1, "case 'x': reference r.py:f"),
        ):
            time.sleep(5)
        time.sleep(0.8)
        assert len(fired) == 1 and 0.4 < fired[0] - started < 1.0  # at its own deadline
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_a_fifo_as_the_lock_file_is_refused_not_waited_on(tmp_path):
    import os

    from tests.runner.definition.test_manifest import write_suite

    cases = write_suite(tmp_path)
    os.mkfifo(tmp_path / "cases.lock")
    done = runner_check(str(cases), timeout_s=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "the lock file must be a regular file, not a FIFO" in done.stderr


def test_worker_output_and_progress_reach_the_terminal_with_escapes_visible(capsys):
    import io
    from collections import deque

    from runner.execution.isolation import _pump_log
    from runner.execution.suite import Progress

    printed = b"kernel printf \x1b]0;owned\x07\x1b[2J\n"
    tail: deque = deque(maxlen=10)
    _pump_log(io.BytesIO(printed), tail, echo=True)
    Progress(quiet=False)("case x\x1b[2J: ok\nnext line")
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err, err
    assert (
        "kernel printf \\x1b]0;owned\\x07\\x1b[2J" in err and "case x\\x1b[2J: ok\nnext line" in err
    )
    assert tail[-1] == printed.decode().rstrip("\n")  # kept as it came, for the error message
