"""The built wheel, installed into a fresh venv, works from an empty folder with no checkout near.

One wheel and one venv for the module (building takes a few seconds). The venv has no packages
of its own but kernelgap from the wheel: the test interpreter's site-packages is appended to its
path by a .pth line, so the dependencies are the ones already installed, while the .pth files
there (an editable install of this checkout) are not run. Every command runs with the empty
folder as its working directory and no PYTHONPATH, so nothing can come from the source tree.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import orjson
import pytest

from tests.conftest import gpu_unavailable_reason

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "result-1.2.0-h200-warpforth.json"
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "runner", "protocol", "harness", "schemas")


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(venv bin folder, empty working folder) with kernelgap installed from a wheel."""
    base = tmp_path_factory.mktemp("wheel")
    source = base / "source"  # a copy, so the build leaves no build/ or egg-info in the checkout
    source.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(
                ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__")
            )
        else:
            shutil.copy(ROOT / name, source / name)
    dist = base / "dist"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(source)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (wheel,) = dist.glob("kernelgap-*.whl")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    here = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (Path(purelib) / "kernelgap-test-deps.pth").write_text("\n".join(sorted(here)) + "\n")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
         "--no-index", "--ignore-installed", str(wheel)],  # even where the test's own
        # interpreter has kernelgap (an editable install): pip would take that as installed
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    empty = base / "empty"
    empty.mkdir()
    return venv / "bin", empty


def run(installed, *argv, stdin: bytes | None = None, timeout: float = 300):
    bin_dir, empty = installed
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = os.pathsep.join([str(bin_dir), env.get("PATH", "")])
    program = argv[0] if argv[0] != "python" else str(bin_dir / "python")
    return subprocess.run(
        [program, *argv[1:]], input=stdin, capture_output=True, cwd=empty, env=env, timeout=timeout
    )


def test_the_packages_come_from_the_wheel_with_their_data(installed):
    bin_dir, _ = installed
    venv = bin_dir.parent
    code = (
        "import runner, protocol, harness; from protocol.validation import SCHEMA_DIR;"
        "print(runner.__file__); print(protocol.__file__); print(harness.__file__);"
        "print(SCHEMA_DIR); print(sorted(p.name for p in SCHEMA_DIR.iterdir()))"
    )
    done = run(installed, "python", "-c", code)
    assert done.returncode == 0, done.stderr.decode()
    *files, schema_dir, names = done.stdout.decode().splitlines()
    assert all(Path(f).is_relative_to(venv) for f in files), files
    assert Path(schema_dir) == Path(files[1]).parent / "schemas"  # package data, not schemas/
    assert "result.schema.json" in names and "run-request.schema.json" in names


@pytest.mark.parametrize("script", ["kernelgap-runner", "kernelgap-harness"])
def test_console_scripts_say_their_version(installed, script):
    done = run(installed, script, "--version")
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().startswith(f"kernelgap {script.split('-')[1]} 0.")
    assert "result schema 1." in done.stdout.decode()


def test_runner_check_and_bench_on_a_copy_of_the_suite(installed, tmp_path):
    suite = tmp_path / "suite"
    shutil.copytree(ROOT / "benchmarks", suite, ignore=shutil.ignore_patterns("__pycache__"))
    done = run(installed, "kernelgap-runner", "check", str(suite / "cases.toml"))
    report = done.stderr.decode()
    assert done.returncode == 0, report
    assert "8 case(s), 0 failure(s)" in report and "Traceback" not in report
    assert done.stdout == b""
    if gpu_unavailable_reason() is not None:  # the worker starts from the installed runner too
        done = run(installed, "python", "-m", "runner", "bench", str(suite / "cases.toml"))
        assert done.returncode == 2 and done.stdout == b""
        assert "NVIDIA driver" in done.stderr.decode() and b"Traceback" not in done.stderr


def test_runner_run_answers_json(installed):
    request = {
        "ptx_base64": base64.b64encode(b".version 7.0\n.target sm_75\n").decode(),
        "kernel": "main",
        "grid": [1, 1, 1],
        "block": [32, 1, 1],
        "shared_bytes": 0,
        "params": [{"type": "f64[]", "values": [1.0, 2.0]}],
        "outputs": [{"param": 0}],
    }
    done = run(installed, "kernelgap-runner", "run", "--no-service", stdin=orjson.dumps(request))
    answer = orjson.loads(done.stdout)
    # exit 0 whenever an answer was written, as a JSON runner does (issue 54)
    assert answer["status"] == "error" and done.returncode == 0, done.stderr.decode()
    if gpu_unavailable_reason() is not None:
        assert answer["phase"] == "environment"
    bad = run(installed, "python", "-m", "runner", "run", "--no-service", stdin=b"{")
    assert bad.returncode == 0 and orjson.loads(bad.stdout)["phase"] == "input"


def test_harness_commands_read_a_real_result(installed, tmp_path):
    result = str(FIXTURE)
    db = str(tmp_path / "history.sqlite")
    # a trusted ingest takes the GPU pin from the suite's manifest: the very bytes the fixture
    # ran (benchmarks/cases.toml as it was then; its sha256 is in the fixture's suite block)
    cases = str(ROOT / "tests" / "fixtures" / "cases-f92b730d6bf3.toml")
    done = run(
        installed, "kernelgap-harness", "ingest", result, "--db", db, "--trusted", "--cases", cases
    )
    assert done.returncode == 0, done.stderr.decode()
    history = run(installed, "kernelgap-harness", "history", "--db", db)
    assert history.returncode == 0 and b"warpforth" in history.stdout, history.stderr.decode()
    compare = run(installed, "python", "-m", "harness", "compare", result, result)
    assert compare.returncode == 0, compare.stderr.decode()
    assert b"same" in compare.stdout
    summary = run(installed, "kernelgap-harness", "summary", result)
    assert summary.returncode == 0 and b"geomean" in summary.stdout.lower()
    for fmt in ("github-action-benchmark", "markdown", "nvbench-markdown", "csv"):
        export = run(installed, "kernelgap-harness", "export", result, "--format", fmt)
        assert export.returncode == 0 and export.stdout, (fmt, export.stderr.decode())
    gab = orjson.loads(
        run(
            installed, "kernelgap-harness", "export", result, "--format", "github-action-benchmark"
        ).stdout
    )
    assert any(e["name"].startswith("suite/geomean_gap/") for e in gab)
    site = tmp_path / "site"
    dashboard = run(installed, "kernelgap-harness", "dashboard", "--db", db, "--out", str(site))
    assert dashboard.returncode == 0, dashboard.stderr.decode()
    assert dashboard.stdout == b""  # progress goes to stderr
    assert {"index.html", "app.js", "data.js", "plotly.min.js"} <= {p.name for p in site.iterdir()}


def test_harness_run_ships_the_installed_runner(installed, tmp_path):
    """`harness run --check-only` from the wheel: the tree it ships is the installed runner and
    protocol (with the schemas as package data) and the suite, checked in a fresh folder."""
    suite = tmp_path / "suite"
    shutil.copytree(ROOT / "tests" / "gpu_suite", suite)
    bin_dir, _ = installed
    done = run(
        installed, "kernelgap-harness", "run", str(suite / "cases.toml"), "--target", "local",
        "--python", str(bin_dir / "python"), "--check-only", "--out", str(tmp_path / "results"),
    )  # fmt: skip
    err = done.stderr.decode()
    assert done.returncode == 0, err
    assert "suite/cases.toml:" in err and "0 failure(s)" in err and done.stdout == b""
