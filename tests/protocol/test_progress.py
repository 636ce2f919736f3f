"""Progress on stderr: plain lines where stderr is not a terminal, the same lines with a status
line under them on a terminal (a real pseudo-terminal here), nothing with -q."""

from __future__ import annotations

import os
import pty
import subprocess
import sys

from tests.conftest import ROOT
from tests.distribution.test_ci_in_a_compiler_repository import KERNEL, SUITE

FIXTURE = str(ROOT / "tests" / "fixtures" / "result-1.2.0-h200-warpforth.json")
CASES = str(ROOT / "tests" / "fixtures" / "cases-f92b730d6bf3.toml")
LINES = """
import sys, time
from protocol.progress import Live
with Live("runner bench", quiet=QUIET):
    print("kernelgap: kernelgap-core v1, 3 case(s); probing the GPU", file=sys.stderr, flush=True)
    for i, case in enumerate(["axpy", "matmul", "attn"]):
        print(f"kernelgap: [{i + 1}/3] 1s so far, about 2s left: {case}", file=sys.stderr)
        sys.stderr.buffer.write(b"    | a line from a GPU box, as bytes\\n")
        time.sleep(0.3)
print("after", file=sys.stderr)
"""
CASE_IDS = ["axpy", "matmul", "attn"]
SHOWN = [
    "kernelgap: kernelgap-core v1, 3 case(s); probing the GPU",
    *(f"kernelgap: [{i + 1}/3] 1s so far, about 2s left: {c}" for i, c in enumerate(CASE_IDS)),
    "    | a line from a GPU box, as bytes",
    "after",
]


def on_a_terminal(argv: list[str], cwd=ROOT) -> str:
    """What `argv` wrote to a 100-column pseudo-terminal (stdout and stderr)."""
    master, slave = pty.openpty()
    os.set_blocking(master, True)
    subprocess.run(["stty", "cols", "100", "rows", "30"], stdin=slave, check=True)
    done = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, cwd=cwd)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the terminal's last writer is gone
            break
        if not chunk:
            break
        out += chunk
    done.wait(timeout=120)
    os.close(master)
    return out.decode(errors="replace")


def test_plain_lines_where_stderr_is_not_a_terminal():
    done = subprocess.run([sys.executable, "-c", LINES.replace("QUIET", "False")], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0 and "\r" not in done.stderr and "\x1b" not in done.stderr
    assert [line for line in done.stderr.splitlines() if "a line from" not in line] == [
        line for line in SHOWN if "a line from" not in line
    ]
    assert done.stderr.count("a line from a GPU box") == 3


def test_a_status_line_under_the_lines_on_a_terminal():
    text = on_a_terminal([sys.executable, "-c", LINES.replace("QUIET", "False")])
    lines = [line.rsplit("\r", 1)[-1] for line in text.split("\r\n")]  # what stays on screen
    for line in SHOWN:  # every line whole, in order, above the status line
        assert line in lines, (line, text)
    assert "runner bench: 2/3 cases |" in text and ", attn" in text, text  # moved by [3/3]
    assert text.endswith("\rafter\r\n") and lines[-2] == "after"  # the status line cleared


def test_quiet_shows_no_status_line():
    text = on_a_terminal([sys.executable, "-c", LINES.replace("QUIET", "True")])
    assert "runner bench:" not in text and "cases |" not in text


def test_harness_ingest_on_a_terminal_and_with_q(tmp_path):
    db = str(tmp_path / "h.sqlite")
    argv = [sys.executable, "-m", "harness", "ingest", FIXTURE, "--db", db, "--trusted", "--cases", CASES]  # fmt: skip
    text = on_a_terminal(argv)
    assert "harness ingest: 1/1 files" in text and "new series" in text, text
    quiet = subprocess.run([*argv[:5], "--db", str(tmp_path / "q.sqlite"), "--trusted", "--cases", CASES, "-q"],
                           cwd=ROOT, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert quiet.returncode == 0 and quiet.stderr == "1 of 1 runs stored\n", quiet.stderr


def test_every_long_command_takes_q_and_keeps_only_what_matters(tmp_path):
    from harness.cli import main as harness_main
    from runner.cli import main as runner_main
    from tests.harness.running.test_run import FakeRunner, fixture_document, harness

    long = [runner_main.commands[n] for n in ("bench", "build", "check")]
    long += [harness_main.commands[n] for n in ("run", "ingest", "dashboard")]
    assert all("-q" in {o for p in c.params for o in p.opts} for c in long)
    # harness run -q: the runner's bench runs with -q too
    fake = FakeRunner(tmp_path / "fake")
    fake.answer(fixture_document(), 0)
    suite = ROOT / "tests" / "gpu_suite" / "cases.toml"
    done = harness("--target", "local", "--python", fake.python, "--out", tmp_path / "r", suite, "-q")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert fake.seen["args"][-1] == "-q"
    # harness dashboard -q: nothing on stderr; runner build -q: only the summary
    db = str(tmp_path / "h.sqlite")
    run = [sys.executable, "-m"]
    subprocess.run([*run, "harness", "ingest", FIXTURE, "--db", db, "--trusted", "--cases", CASES, "-q"], cwd=ROOT, check=True, capture_output=True)  # fmt: skip
    site = subprocess.run([*run, "harness", "dashboard", "--db", db, "--out", str(tmp_path / "site"), "-q"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert (
        site.returncode == 0 and site.stderr == "" and (tmp_path / "site" / "index.html").exists()
    )
    suite = two_builds(tmp_path / "suite")
    out = tmp_path / "bundle"
    built = subprocess.run([*run, "runner", "build", str(suite), "--out", str(out), "--no-static", "-q"],
                           cwd=ROOT, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert built.returncode == 0 and built.stderr == f"{out}/bundle.json: 2 built, 0 skipped or failed\n", built.stderr  # fmt: skip


# the compiler repository's suite, its candidate built by nvcc too (no fake compiler here)
TWO_BUILDS = SUITE.replace(
    'toolchain = "command"\ncommand = "mycc {source}"\nsource = "kernels/scale.mc"',
    'toolchain = "nvcc"\nsource = "kernels/scale.cu"',
)


def two_builds(folder, kernel: str = KERNEL):
    """TWO_BUILDS in `folder` with its kernel and reference; the suite file's path."""
    (folder / "kernels").mkdir(parents=True)
    (folder / "kernels" / "scale.cu").write_text(kernel)
    (folder / "cases.toml").write_text(TWO_BUILDS)
    (folder / "reference.py").write_text("def scale(x, a):\n    return {'out': a * x}\n")
    return folder / "cases.toml"


def test_runner_check_q_keeps_only_the_failures_and_the_summary(tmp_path):
    from tests.harness.running.test_run import harness

    check = [sys.executable, "-m", "runner", "check"]
    for name, kernel in (("good", KERNEL), ("bad", KERNEL + "\nthis is not CUDA;\n")):
        suite = str(two_builds(tmp_path / name, kernel))
        full = subprocess.run([*check, suite], cwd=ROOT, capture_output=True, text=True, timeout=300)  # fmt: skip
        quiet = subprocess.run([*check, suite, "-q"], cwd=ROOT, capture_output=True, text=True, timeout=300)  # fmt: skip
        assert quiet.returncode == full.returncode == (0 if name == "good" else 1), full.stderr
        lines = full.stderr.splitlines()
        assert any(line.startswith("ok    ") for line in lines) == (name == "good"), full.stderr
        kept = quiet.stderr.splitlines()
        assert kept and all(line in lines for line in kept), quiet.stderr
        assert not any(line.startswith(("ok    ", "skip  ", "note  ")) for line in kept)
        assert any(line.startswith("FAIL") for line in kept) == (name == "bad"), quiet.stderr
        assert kept[-1] == lines[-1] and kept[-1].startswith(f"{suite}: 1 case(s)")
    # harness run -q --check-only: the runner's check there runs with -q too
    done = harness("--target", "local", "--python", sys.executable, "--out", tmp_path / "r",
                   "--check-only", tmp_path / "good" / "cases.toml", "-q")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "0 failure(s)" in done.stderr and "ok    " not in done.stderr, done.stderr
