"""`runner run` as the two JSON runners a compiler's test suite calls (issue 54): a request on
stdin answered on stdout with exit 0 either way, and `runner run PTX_FILE REQUEST.json
RESULT.json` (the PTX from a file, NUL-terminated as warpforthc writes it; defaults for grid,
block, params and outputs; the answer in the result file; exit 1 on error). Both go through the
per-user launch service unless --no-service. Without a GPU every launch is answered with the
environment error, so what is checked here is the way there and the answers' shape against
schemas/run-response.schema.json; tests/runner/launch/test_warpforth_harness_gpu.py runs
WarpForth's kernels through them on a GPU.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from protocol.validation import validate
from runner.launch import launch_command
from tests.conftest import ROOT, gpu_unavailable_reason, services
from tests.runner.launch.test_local_service import PTX

needs_no_gpu = pytest.mark.skipif(
    gpu_unavailable_reason() is None, reason="checks the no-GPU answers; this machine has a GPU"
)
REQUEST = {
    "kernel": "k",
    "params": [{"type": "i64[]", "values": [1, 2]}],
    "outputs": [{"param": 0}],
}


def run(runtime: Path, *args, stdin: bytes = b"") -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "runner", "run", *map(str, args)],
        cwd=ROOT,
        env={**os.environ, "XDG_RUNTIME_DIR": str(runtime)},
        input=stdin,
        capture_output=True,
        timeout=180,
    )


def read_answer(text: bytes) -> dict:
    """The answer as a client of the JSON runners reads it, checked against the schema: one JSON
    object with `status`, then `outputs` [{param, type, values}] or `error` (kernelgap's other
    fields, `schema_version`, `phase`, `elapsed_ms`, are there to be ignored)."""
    answer = json.loads(text)
    validate(answer, "run-response", "answer")
    assert answer["status"] in ("ok", "error")
    if answer["status"] == "ok":
        assert all({"param", "type", "values"} <= set(out) for out in answer["outputs"])
    else:
        assert isinstance(answer["error"], str) and answer["error"]
    return answer


def stdin_request(**changes) -> bytes:
    request = {"ptx_base64": base64.b64encode(PTX.encode()).decode(), "grid": [1], "block": [1]}
    return json.dumps({**request, **REQUEST, **changes}).encode()


@needs_no_gpu
@pytest.mark.parametrize("mode", [(), ("--no-service",)])
def test_the_stdin_runner_answers_one_json_document_and_exits_0_either_way(runtime, mode):
    done = run(runtime, *mode, stdin=stdin_request())
    answer = read_answer(done.stdout)
    assert done.returncode == 0, done.stderr
    assert answer["status"] == "error" and answer["phase"] == "environment"
    assert "launch service unavailable" not in done.stderr.decode()
    assert len(services(str(runtime))) == (0 if mode else 1)  # the service answered, or none


@pytest.mark.parametrize("mode", [(), ("--no-service",)])
@pytest.mark.parametrize(
    ("stdin", "words"),
    [
        (b"{bad", "stdin: malformed JSON"),
        (b"[1, 2]", "expected a JSON object"),
        (stdin_request(params=[{"type": "i65[]", "values": [1]}]), "'i65[]' is not one of"),
        (stdin_request(ptx="x"), "give exactly one of `ptx`"),
        (stdin_request(timeout_s="soon"), "timeout_s"),
    ],
)
def test_the_stdin_runner_refuses_a_bad_request_in_its_answer_with_exit_0(
    runtime, mode, stdin, words
):
    done = run(runtime, *mode, stdin=stdin)
    answer = read_answer(done.stdout)
    assert done.returncode == 0, done.stderr
    assert answer["status"] == "error" and answer["phase"] == "input", answer
    assert words in answer["error"], answer
    assert "id" not in answer  # a one-shot's answer, whichever path made it


def write_files(tmp_path: Path, request: dict, ptx: bytes = PTX.encode() + b"\0"):
    (tmp_path / "k.ptx").write_bytes(ptx)
    (tmp_path / "request.json").write_text(json.dumps(request))
    return tmp_path / "k.ptx", tmp_path / "request.json", tmp_path / "result.json"


def test_the_request_file_form_fills_the_defaults_and_strips_the_nul(tmp_path):
    ptx, request, _ = write_files(tmp_path, {"kernel": "k"})
    document = launch_command.file_request(str(ptx), str(request))
    assert document == {"grid": [1, 1, 1], "block": [1, 1, 1], "params": [], "outputs": [],
                        "kernel": "k", "ptx": PTX}  # fmt: skip
    validate(document, "run-request", "the request file's request")
    given = {"kernel": "k", "grid": [4, 1, 1], "block": [32], **REQUEST}
    ptx, request, _ = write_files(tmp_path, given, PTX.encode() + b"\0\0")
    document = launch_command.file_request(str(ptx), str(request))
    assert document["grid"] == [4, 1, 1] and document["block"] == [32]
    assert document["params"] == REQUEST["params"] and document["ptx"] == PTX


@needs_no_gpu
@pytest.mark.parametrize("mode", [(), ("--no-service",)])
def test_the_request_file_form_writes_its_answer_and_exits_1_on_error(runtime, tmp_path, mode):
    files = write_files(tmp_path, {"kernel": "k"})  # grid, block, params, outputs by default
    done = run(runtime, *mode, *files)
    answer = read_answer(files[2].read_bytes())
    assert (done.returncode, done.stdout) == (1, b""), done.stderr
    # past the full check of the request (defaults and NUL-free PTX taken) to the GPU's absence
    assert answer["phase"] == "environment", answer
    assert done.stderr.decode().startswith("Error: environment: ")


@pytest.mark.parametrize("mode", [(), ("--no-service",)])
@pytest.mark.parametrize(
    ("request_text", "ptx", "words"),
    [
        ('{"kernel": "k", "ptx": "x"}', PTX.encode(), "request.json: ptx: the PTX comes from"),
        ('{"kernel": "k", "ptx_base64": "eA=="}', PTX.encode(), "leave `ptx` and `ptx_base64` out"),
        ("{bad", PTX.encode(), "request.json: not a JSON run request"),
        ("[1]", PTX.encode(), "request.json: expected a JSON object (a run request), got list"),
        ('{"kernel": "k"}', b"\0\0", "k.ptx: empty (expected PTX text)"),
        ('{"kernel": "k"}', b"\xff\xfe", "k.ptx: not UTF-8 text"),
        ('{"kernel": "k", "grid": [0]}', PTX.encode(), "grid"),
        ('{"kernel": "k", "params": [{"type": "f64", "value": "x"}]}', PTX.encode(), "params[0]"),
    ],
)
def test_the_request_file_form_refuses_a_bad_request_naming_it_with_exit_1(
    runtime, tmp_path, mode, request_text, ptx, words
):
    (tmp_path / "k.ptx").write_bytes(ptx)
    (tmp_path / "request.json").write_text(request_text)
    result = tmp_path / "result.json"
    done = run(runtime, *mode, tmp_path / "k.ptx", tmp_path / "request.json", result)
    answer = read_answer(result.read_bytes())
    assert (done.returncode, done.stdout) == (1, b""), done.stderr
    assert answer["phase"] == "input" and words in answer["error"], answer
    if words.startswith(("request.json", "k.ptx")):  # the files' own problems: no service needed
        assert not services(str(runtime))


def test_the_request_file_form_names_a_missing_file_and_an_unwritable_result(runtime, tmp_path):
    ptx, request, result = write_files(tmp_path, {"kernel": "k"})
    done = run(runtime, tmp_path / "none.ptx", request, result)
    assert done.returncode == 1
    assert (
        "none.ptx: cannot read the PTX: No such file or directory"
        in read_answer(result.read_bytes())["error"]
    )
    done = run(runtime, ptx, tmp_path / "none.json", result)
    assert done.returncode == 1 and "none.json: cannot read the request" in done.stderr.decode()
    done = run(runtime, ptx, request, tmp_path / "no" / "such" / "result.json")
    assert done.returncode == 1 and "Error: cannot write" in done.stderr.decode()


@pytest.mark.parametrize("argv", [["a"], ["a", "b"], ["a", "b", "c", "d"], ["--bogus"]])
def test_a_wrong_run_command_line_is_exit_2_with_the_usage(runtime, argv):
    done = run(runtime, *argv)
    assert (done.returncode, done.stdout) == (2, b"")
    assert done.stderr.decode().startswith(launch_command.RUN_USAGE)


@pytest.mark.parametrize("form", ["stdin", "files"])
def test_an_in_process_json_launch_imports_no_numpy_or_jsonschema(tmp_path, form):
    """--no-service takes the command line's quick way in (runner.launch.launch_plan.quick)
    where it can: the driver and nothing else, as `runner launch --no-service`."""
    from tests.runner.launch.test_quick import ENTRIES, RECORD

    record = tmp_path / "modules.txt"
    env = {**os.environ, "KG_MODULES": str(record), "XDG_RUNTIME_DIR": str(tmp_path)}
    files = write_files(tmp_path, {"kernel": "k", **REQUEST}) if form == "files" else ()
    done = subprocess.run(
        [sys.executable, "-c", RECORD + ENTRIES["module"], "run", "--no-service", *map(str, files)],
        cwd=ROOT, env=env, input=stdin_request(), capture_output=True, timeout=120,
    )  # fmt: skip
    modules = record.read_text().split()
    assert "runner.launch.fresh_context" in modules, done.stderr  # it got as far as the launch
    assert sorted(m for m in modules if m.split(".")[0] in ("numpy", "jsonschema", "click")) == []
    answer = read_answer(files[2].read_bytes() if files else done.stdout)
    assert answer["status"] == "ok" or answer["phase"] == "environment", answer
