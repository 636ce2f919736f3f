"""`harness run` end to end: local and SSH targets, what is shipped, what is saved, exit statuses.

Where a GPU result is needed, `--python` points at a stand-in interpreter that answers
`-m runner bench` with a prepared document and exit status (and runs everything else, such as the
guard and the unpacker, with the real Python).
"""

from __future__ import annotations

import getpass
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from harness.commands.run import local_commit, signals_interrupt
from harness.errors import ShippingError, Terminated
from harness.running import shipping
from harness.running.session import result_name
from tests.conftest import ROOT, gpu_unavailable_reason
from tests.support.sshd import running_sshd, wait_gone

FIXTURE = ROOT / "tests" / "fixtures" / "result-1.0.0-h200-axpy.json"
needs_no_gpu = pytest.mark.skipif(
    gpu_unavailable_reason() is None, reason="checks the no-GPU path; this machine has a GPU"
)

FAKE_PYTHON = '''#!{real}
"""Stands in for python: `-m runner bench` prints {doc} and exits with the status in {rc}."""
import json, os, sys, time
args = sys.argv[1:]
if args[:3] != ["-m", "runner", "bench"]:
    os.execv({real!r}, [{real!r}, *args])
bundle = sorted(os.listdir("bundle")) if os.path.isdir("bundle") else None
with open({argv!r}, "w") as f:
    json.dump({{"args": args[3:], "bundle": bundle, "cwd": os.getcwd()}}, f)
print("fake runner: measuring", file=sys.stderr, flush=True)
data = open({doc!r}, "rb").read()
if os.path.exists({hang!r}):
    sys.stdout.buffer.write(data[:100]); sys.stdout.flush(); time.sleep(60)
sys.stdout.buffer.write(data)
sys.exit(int(open({rc!r}).read()))
'''


class FakeRunner:
    def __init__(self, folder: Path):
        folder.mkdir(parents=True, exist_ok=True)
        self.doc, self.rc, self.argv = folder / "doc.json", folder / "rc", folder / "argv.json"
        self.hang = folder / "hang"
        self.python = folder / "python"
        self.python.write_text(
            FAKE_PYTHON.format(
                real=sys.executable,
                doc=str(self.doc),
                rc=str(self.rc),
                argv=str(self.argv),
                hang=str(self.hang),
            )
        )
        self.python.chmod(0o755)
        self.answer(FIXTURE.read_bytes(), 0)

    def answer(self, document: bytes | dict, status: int) -> None:
        data = document if isinstance(document, bytes) else orjson.dumps(document)
        self.doc.write_bytes(data)
        self.rc.write_text(str(status))

    @property
    def seen(self) -> dict:
        return json.loads(self.argv.read_text())


@pytest.fixture
def fake(tmp_path) -> FakeRunner:
    return FakeRunner(tmp_path / "fake")


def harness(*args, cwd=ROOT, timeout_s=600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "harness", "run", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


def fixture_document() -> dict:
    return json.loads(FIXTURE.read_text())


# -- local target, stand-in runner ---------------------------------------------------------------


def test_a_document_is_validated_and_saved_under_a_time_sorted_name(fake, tmp_path):
    out = tmp_path / "results"
    done = harness("--target", "local", "--python", fake.python, "--out", out)
    assert done.returncode == 0, done.stderr
    saved = Path(done.stdout.strip())
    assert saved.parent == out and saved.read_bytes() == FIXTURE.read_bytes()
    assert re.fullmatch(r"20261129T120104Z-nvidia-h200-nocommit\.json", saved.name)
    assert "fake runner: measuring" in done.stderr  # the remote's progress reached our stderr
    args = fake.seen["args"]
    assert args[0] == "benchmarks/cases.toml" and "-q" not in args and "--quiet" not in args
    commit = local_commit(ROOT / "benchmarks")
    assert commit and args[args.index("--commit") + 1] == commit
    assert Path(fake.seen["cwd"]) != ROOT  # it ran in a temporary copy of the tree
    assert not Path(fake.seen["cwd"]).exists()  # which is gone afterwards


def test_a_run_with_failed_cases_still_saves_and_exits_1(fake, tmp_path):
    fake.answer(FIXTURE.read_bytes(), 1)
    done = harness("--target", "local", "--python", fake.python, "--out", tmp_path)
    assert done.returncode == 1
    assert Path(done.stdout.strip()).read_bytes() == FIXTURE.read_bytes()
    assert "some case failed" in done.stderr


def test_two_runs_never_overwrite_each_other(fake, tmp_path):
    first = harness("--target", "local", "--python", fake.python, "--out", tmp_path)
    second = harness("--target", "local", "--python", fake.python, "--out", tmp_path)
    paths = {first.stdout.strip(), second.stdout.strip()}
    assert len(paths) == 2 and all(Path(p).is_file() for p in paths)


def test_runner_exit_2_is_exit_2_with_the_remote_stderr_tail(fake, tmp_path):
    fake.answer(b"", 2)
    done = harness("--target", "local", "--python", fake.python, "--out", tmp_path / "r")
    assert done.returncode == 2 and done.stdout == ""
    assert "exited 2 (bad input or no GPU)" in done.stderr
    assert "  | fake runner: measuring" in done.stderr
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda d: d.pop("cases"), "does not match schemas/result.schema.json"),
        (lambda d: d.update(schema_version="2.0.0"), "newer than this tool understands"),
    ],
)
def test_an_invalid_document_is_refused_and_kept_as_partial(fake, tmp_path, change, expected):
    document = fixture_document()
    change(document)
    fake.answer(document, 0)
    done = harness("--target", "local", "--python", fake.python, "--out", tmp_path)
    assert done.returncode == 2 and expected in done.stderr
    (partial,) = tmp_path.glob("*.partial")
    assert partial.read_bytes() == orjson.dumps(document)
    assert str(partial) in done.stderr and not list(tmp_path.glob("*.json"))


def test_a_truncated_document_is_kept_as_partial(fake, tmp_path):
    fake.answer(FIXTURE.read_bytes()[:5000], 0)
    done = harness("--target", "local", "--python", fake.python, "--out", tmp_path)
    assert done.returncode == 2 and "malformed JSON" in done.stderr
    (partial,) = tmp_path.glob("*.partial")
    assert partial.read_bytes() == FIXTURE.read_bytes()[:5000]


def test_a_job_timeout_stops_the_runner_and_keeps_what_arrived(fake, tmp_path):
    fake.hang.touch()
    done = harness(
        "--target", "local", "--python", fake.python, "--out", tmp_path, "--job-timeout", "3"
    )
    assert done.returncode == 2 and "job limit of 3 s" in done.stderr
    (partial,) = tmp_path.glob("*.partial")
    assert partial.read_bytes() == FIXTURE.read_bytes()[:100]


def test_runner_arguments_and_the_bundle_are_passed_on(fake, tmp_path):
    bundle = tmp_path / "ptx bundle"
    (bundle / "axpy_f64").mkdir(parents=True)
    (bundle / "bundle.json").write_text("{}")
    (bundle / "axpy_f64" / "cuda.ptx").write_text("// ptx")
    done = harness(
        "--target", "local", "--python", fake.python, "--out", tmp_path, "--bundle", bundle,
        "--", "--case", "axpy_f64", "--samples", "40",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    args = fake.seen["args"]
    assert args[-4:] == ["--case", "axpy_f64", "--samples", "40"]
    assert args[args.index("--bundle") + 1] == "bundle"
    assert fake.seen["bundle"] == ["axpy_f64", "bundle.json"]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--target", "ftp://host"], "expected local, ssh://user@host[:port] or vast:<GPU model>"),
        (["--target", "ssh://"], "expected ssh://user@host"),
        (["--target", "vast:H200", "--known-hosts", FIXTURE], "--known-hosts does not apply"),
        (["--target", "vast: "], "give the model"),
    ],
)
def test_bad_targets_exit_2_with_a_message(args, expected):
    done = harness(*args)
    assert done.returncode == 2 and expected in done.stderr


@needs_no_gpu
def test_local_bench_without_a_gpu_exits_2_with_the_runners_message(tmp_path):
    done = harness("--target", "local", "--python", sys.executable, "--out", tmp_path)
    assert done.returncode == 2
    assert "no NVIDIA driver found" in done.stderr or "no CUDA device" in done.stderr
    assert not list(tmp_path.iterdir())


# -- what is shipped -----------------------------------------------------------------------------


def test_the_runner_tree_and_the_suite_folder_are_shipped():
    plan = shipping.plan(ROOT / "benchmarks" / "cases.toml")
    names = {name for _, name in plan.files}
    assert plan.cases == "benchmarks/cases.toml" and plan.bundle is None
    assert {"runner/cli.py", "protocol/validation.py", "schemas/result.schema.json"} <= names
    assert {"pyproject.toml", "benchmarks/reference.py", "benchmarks/kernels/axpy_f64.cu"} <= names
    assert not any("__pycache__" in n or n.startswith(("harness/", "tests/")) for n in names)
    with_tests = {
        name for _, name in shipping.plan(ROOT / "benchmarks" / "cases.toml", tests=True).files
    }
    assert "tests/conftest.py" in with_tests


def test_a_reference_outside_the_suite_folder_is_shipped_or_refused(tmp_path):
    root = tmp_path / "repo"
    for name in shipping.RUNNER_TREE:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).symlink_to(ROOT / name)
    suite = root / "suites" / "mine"
    suite.mkdir(parents=True)
    (root / "shared").mkdir()
    (root / "shared" / "kernel.cu").write_text("// kernel")
    text = '[suite]\nname = "x"\n[[case]]\nid = "a"\nreference = "ref.py:f"\n'
    (suite / "cases.toml").write_text(text + '[[case.impl]]\nsource = "../../shared/kernel.cu"\n')
    plan = shipping.plan(suite / "cases.toml", root=root)
    assert plan.cases == "suites/mine/cases.toml"
    assert "shared/kernel.cu" in {name for _, name in plan.files}

    (suite / "cases.toml").write_text(text + f'[[case.impl]]\nsource = "{FIXTURE}"\n')
    with pytest.raises(ShippingError, match="outside the suite's folder"):
        shipping.plan(suite / "cases.toml", root=root)


def test_a_suite_kept_outside_the_repository_ships_under_suite(tmp_path):
    shutil.copytree(ROOT / "tests" / "gpu_suite", tmp_path / "elsewhere")
    plan = shipping.plan(tmp_path / "elsewhere" / "cases.toml")
    assert plan.cases == "suite/cases.toml"
    assert "suite/kernels/scale.cu" in {name for _, name in plan.files}


def test_result_names_sort_by_start_time_and_name_gpu_and_commit():
    document = fixture_document()
    assert result_name(document) == "20261129T120104Z-nvidia-h200-nocommit.json"
    document["suite"]["commit"] = "0123456789abcdef0123456789abcdef01234567-dirty"
    assert result_name(document) == "20261129T120104Z-nvidia-h200-0123456789ab-dirty.json"


@pytest.mark.parametrize("started", ["2026-11-29T12:01:04Z", "2026-11-29T12:01:04.123456789Z"])
def test_result_names_read_every_start_time_the_schema_allows(started):
    document = fixture_document()
    document["started_utc"] = started
    assert result_name(document) == "20261129T120104Z-nvidia-h200-nocommit.json"


def test_a_start_time_without_a_fraction_names_the_saved_document(fake, tmp_path):
    document = fixture_document()
    document["started_utc"] = "2026-11-29T12:01:04Z"
    fake.answer(document, 0)
    done = harness("--target", "local", "--python", fake.python, "--out", tmp_path)
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()).name == "20261129T120104Z-nvidia-h200-nocommit.json"


# -- stop signals ----------------------------------------------------------------------------------


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_stop_signal_unwinds_every_with_and_later_ones_wait_for_the_cleanup(signum):
    before = signal.getsignal(signum)
    unwound = []
    with pytest.raises(Terminated) as failure, signals_interrupt():
        try:
            os.kill(os.getpid(), signum)
            time.sleep(5)  # the handler runs before this returns
        finally:
            os.kill(os.getpid(), signal.SIGTERM)  # a second one during cleanup: ignored
            os.kill(os.getpid(), signal.SIGHUP)
            unwound.append(True)
    assert failure.value.signum == signum and unwound == [True]
    assert f"stopped by {signal.Signals(signum).name}" in str(failure.value)
    assert signal.getsignal(signum) is before  # restored on leaving


FAKE_VASTAI = """
\"\"\"Stands in for the vastai SDK: one H200 offer whose machine is this host's test sshd.\"\"\"
import json, os

LOG = os.environ["FAKE_VAST_LOG"]
PORT = int(os.environ["FAKE_VAST_SSH_PORT"])


def note(*call):
    with open(LOG, "a") as f:
        f.write(json.dumps(call) + "\\n")


class VastAI:
    def __init__(self, api_key=None, raw=False, quiet=False):
        pass

    def search_offers(self, query=None, order=None, limit=None):
        note("search_offers", query)
        return [{"id": 11, "gpu_name": "H200", "dph_total": 3.0}]

    def create_instance(self, id, image=None, disk=10, label=None, ssh=False, direct=False):
        note("create_instance", id, label)
        return {"success": True, "new_contract": 4242}

    def attach_ssh(self, instance_id, ssh_key):
        note("attach_ssh", instance_id)

    def show_instances(self):
        return []

    def show_instance(self, id):
        destroyed = any(json.loads(line)[0] == "destroy_instance" for line in open(LOG))
        if destroyed:
            return None
        return {"actual_status": "running", "ssh_host": "127.0.0.1", "ssh_port": PORT}

    def destroy_instance(self, id):
        note("destroy_instance", id)
        return {"success": True}
"""


# -- SSH target, real sshd -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    with running_sshd(tmp_path_factory.mktemp("sshd")) as server:
        yield server


def ssh_args(server) -> list:
    return [
        "--target", server.url, "--identity", server.identity,
        "--known-hosts", server.known_hosts, "--python", sys.executable,
    ]  # fmt: skip


def connections(server) -> int:
    return server.log.read_text().count("Accepted publickey")


def test_check_only_over_ssh_matches_a_local_check(sshd, tmp_path):
    done = harness(*ssh_args(sshd), "--check-only", "--out", tmp_path)
    here = subprocess.run(
        [sys.executable, "-m", "runner", "check", "benchmarks/cases.toml"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert "benchmarks/cases.toml:" in done.stderr, done.stderr
    # the remote report streams to stderr (after the harness's own lines), stdout stays empty
    assert done.stderr.endswith(here.stderr) and done.stdout == here.stdout == ""
    assert done.returncode == here.returncode


@needs_no_gpu
def test_bench_over_ssh_without_a_gpu_exits_2_with_the_remote_message(sshd, tmp_path):
    done = harness(*ssh_args(sshd), "--out", tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert "no NVIDIA driver found" in done.stderr or "no CUDA device" in done.stderr
    assert f"the runner on {sshd.url} exited 2" in done.stderr
    assert not list(tmp_path.iterdir())


def test_gpu_tests_and_bench_share_one_connection(sshd, fake, tmp_path):
    before = connections(sshd)
    done = harness(
        "--target", sshd.url, "--identity", sshd.identity, "--known-hosts", sshd.known_hosts,
        "--python", fake.python, "--out", tmp_path, "--pytest-gpu",
    )  # fmt: skip
    assert "GPU tests (pytest -m gpu)" in done.stderr and "runner bench" in done.stderr
    assert re.search(r"\d+ (passed|skipped|deselected)", done.stderr), done.stderr
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()).read_bytes() == FIXTURE.read_bytes()
    assert connections(sshd) - before == 1


def test_case_ids_with_shell_syntax_reach_the_runner_verbatim_over_ssh(sshd, tmp_path):
    canaries = [tmp_path / "canary-a", tmp_path / "canary-b", tmp_path / "canary-c"]
    case = f"x; touch {canaries[0]} $(touch {canaries[1]}) `touch {canaries[2]}` 'it''s\""
    done = harness(*ssh_args(sshd), "--out", tmp_path / "r", "--", "--case", case)
    assert done.returncode == 2
    assert f"no case with id {case!r}" in done.stderr
    assert not [c for c in canaries if c.exists()]


def test_a_wrong_host_key_stops_harness_run_before_anything_runs(sshd, fake, tmp_path):
    wrong = tmp_path / "known_hosts"
    wrong.write_text(f"[127.0.0.1]:{sshd.port} {FIXTURE_KEY}\n")
    done = harness(
        "--target", sshd.url, "--identity", sshd.identity, "--known-hosts", wrong,
        "--python", fake.python, "--out", tmp_path / "r",
    )  # fmt: skip
    assert done.returncode == 2
    assert "Host key verification failed" in done.stderr
    assert not fake.argv.exists()


FIXTURE_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIIXmSRTE7SpQh0hMHniI513TJ35siBmsgshPbXCRI37s"


def test_stderr_tail_keeps_the_partial_document_out_of_sight(tmp_path):
    import io

    from harness.running.session import _save_partial
    from harness.running.transport.base import PARTIAL_PREFIX, StderrTail

    shown = io.BytesIO()
    tail = StderrTail(shown)
    doc = b'{"complete": false, "cases": [1]}'
    stream = (
        b"[a] build\n"
        + PARTIAL_PREFIX
        + doc
        + b"\n50% ..."
        + b" done\n"
        + PARTIAL_PREFIX
        + b'{"cases": [1, 2]}\n'
    )
    for i in range(0, len(stream), 7):  # chunks split lines, the prefix and the document anywhere
        tail(stream[i : i + 7])
    assert shown.getvalue() == b"[a] build\n50% ... done\n"
    assert tail.partial == b'{"cases": [1, 2]}'
    message = _save_partial(tmp_path, "ssh://h", b"", tail.partial)
    kept = next(tmp_path.glob("*.partial.json"))
    assert str(kept) in message and kept.read_bytes() == b'{"cases": [1, 2]}'


@pytest.mark.skipif(getpass.getuser() != "root", reason="a vast machine is reached as root")
def test_sigterm_during_a_vast_run_destroys_the_rental_and_stops_the_job(sshd, fake, tmp_path):
    sdk = tmp_path / "sdk"
    sdk.mkdir()
    (sdk / "vastai.py").write_text(FAKE_VASTAI)
    log = tmp_path / "vast.log"
    log.write_text("")
    fake.hang.touch()  # the runner sends a little, then hangs
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(sdk), os.environ.get("PYTHONPATH")])),
        "FAKE_VAST_LOG": str(log),
        "FAKE_VAST_SSH_PORT": str(sshd.port),
    }
    argv = [
        sys.executable, "-m", "harness", "run", "--target", "vast:H200",
        "--identity", sshd.identity, "--python", fake.python, "--no-install", "--out", tmp_path,
    ]  # fmt: skip
    harness_run = subprocess.Popen(
        list(map(str, argv)), cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 120
        while not fake.argv.exists() and harness_run.poll() is None:
            assert time.monotonic() < deadline, "the runner never started"
            time.sleep(0.1)
        assert harness_run.poll() is None, harness_run.stderr.read().decode()
        harness_run.send_signal(signal.SIGTERM)
        stdout, stderr = harness_run.communicate(timeout=120)
    finally:
        if harness_run.poll() is None:
            harness_run.kill()
            harness_run.wait()
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert ["destroy_instance", 4242] in calls, stderr.decode()
    assert harness_run.returncode == 128 + signal.SIGTERM, stderr.decode()
    assert "stopped by SIGTERM" in stderr.decode() and stdout == b""
    assert "vast: destroyed instance 4242" in stderr.decode()
    assert wait_gone(str(fake.python)) == []  # the hanging runner went with the session


# -- first day: the interpreter and the environment on the target -------------------------------


@needs_no_gpu
def test_a_local_target_runs_the_harness_own_interpreter_not_paths_python3(tmp_path):
    """From an unactivated virtual environment, `--target local` must not fall back to PATH's
    python3 (which lacks the runner's packages): the runner is started by this interpreter."""
    decoy = tmp_path / "bin"
    decoy.mkdir()
    (decoy / "python3").write_text("#!/bin/sh\necho 'PATH python3 was used' >&2\nexit 3\n")
    (decoy / "python3").chmod(0o755)
    env = {**os.environ, "PATH": f"{decoy}:/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-m", "harness", "run", "--target", "local", "--out", str(tmp_path / "r")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "PATH python3 was used" not in done.stderr
    assert done.returncode == 2  # no GPU here: the real runner says so, not a missing package
    assert "no NVIDIA driver found" in done.stderr or "no CUDA device" in done.stderr
    assert "No module named" not in done.stderr


def test_install_goes_into_a_virtual_environment_of_its_own_and_reuses_it(
    tmp_path, monkeypatch, capsys
):
    """--install never pip-installs into the target's global Python: it makes kernelgap's own
    environment (once), installs there, and the later steps run with its interpreter."""
    from harness.running.session import Session
    from harness.running.transport.local import LocalTransport

    monkeypatch.setattr(shipping, "runner_requirements", lambda tests=False: ["pip"])  # no network
    plan = shipping.plan(ROOT / "benchmarks" / "cases.toml")
    venv = tmp_path / "kg-venv"
    for attempt in ("made", "reused"):
        options = {"python": sys.executable, "venv": str(venv), "pytest_gpu": False,
                   "job_timeout_s": 300.0, "out": tmp_path, "target": "local", "install": True}  # fmt: skip
        with LocalTransport(sys.executable) as transport:
            session = Session(transport, plan, options)
            session.install()
        assert options["python"] == str(venv / "bin" / "python")
        assert (venv / "bin" / "python").exists() and (venv / "pyvenv.cfg").exists()
        assert "include-system-site-packages = true" in (venv / "pyvenv.cfg").read_text()
        assert f"kernelgap's environment there: {venv} ({attempt})" in capsys.readouterr().err


def test_install_over_ssh_brings_cupti_python_and_pyelftools_into_kernelgaps_venv(sshd, tmp_path):
    """--install on the box (a real sshd) pip-installs the runner's requirements, cupti-python
    and pyelftools among them (cold mode's timer), into kernelgap's own environment. That
    environment's interpreter stands in for pip here (no network): it records its arguments."""
    from harness.running.session import Session
    from harness.running.transport.ssh import SshTarget, SshTransport

    venv = tmp_path / "kg-venv"
    (venv / "bin").mkdir(parents=True)
    log = tmp_path / "pip-args"
    (venv / "bin" / "python").write_text(f'#!/bin/sh\necho "$@" >> {log}\n')
    (venv / "bin" / "python").chmod(0o755)
    (venv / "bin" / "pip").write_text("#!/bin/sh\n")  # it has a pip: `python -m pip` is used
    plan = shipping.plan(ROOT / "benchmarks" / "cases.toml")
    options = {"python": sys.executable, "venv": str(venv), "pytest_gpu": False,
               "job_timeout_s": 300.0, "out": tmp_path, "target": sshd.url, "install": True}  # fmt: skip
    transport = SshTransport(
        SshTarget.parse(sshd.url),
        identity=sshd.identity,
        known_hosts=sshd.known_hosts,
        python=sys.executable,
    )
    with transport:
        Session(transport, plan, options).install()
    args = log.read_text().split()
    assert args[:3] == ["-m", "pip", "install"]
    assert {"cupti-python>=13", "pyelftools>=0.29", "numpy>=1.26.0"} <= set(args)
    assert options["python"] == str(venv / "bin" / "python")


def test_a_missing_package_on_the_target_names_install(fake, tmp_path):
    """Without --install, a target Python that lacks the runner's packages is told about
    --install instead of leaving the user with a traceback's last line."""
    missing = tmp_path / "python"
    missing.write_text(
        f"#!{sys.executable}\nimport os, sys\nargs = sys.argv[1:]\n"
        "if args[:3] == ['-m', 'runner', 'bench']:\n"
        "    sys.stderr.write(\"ModuleNotFoundError: No module named 'orjson'\\n\"); sys.exit(1)\n"
        f"os.execv({sys.executable!r}, [{sys.executable!r}, *args])\n"
    )
    missing.chmod(0o755)
    done = harness("--target", "local", "--python", missing, "--out", tmp_path / "r")
    assert done.returncode == 2
    assert "No module named 'orjson'" in done.stderr and "--install" in done.stderr
