"""The example workflow in a compiler's repository: its install, compiler and check steps, run as
shell the way GitHub runs them (no GitHub), install kernelgap from the pinned source and check the
team's own suite with the team's compiler, whatever that repository's own layout.

The repository is a throwaway one: its own pyproject with two top-level packages (`pip install
-e .` there fails: "Multiple top-level packages discovered"), one named harness/ that breaks on
import (a `python -m harness` would pick it up), a one-case suite under bench/ and a fake
compiler script. kernelgap's wheel is built by the release workflow's own step, and the
workflow installs it by its URL (KERNELGAP_SOURCE=file://...). As in tests/distribution/
test_wheel.py, the venv sees the test interpreter's site-packages through a .pth line, so pip
runs with no index and no dependencies to fetch; what it installs is kernelgap alone.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest

from runner.explain import static
from tests.conftest import ROOT
from tests.harness.test_ci_workflow import evaluate

WORKFLOWS = ROOT / ".github" / "workflows"
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "runner", "protocol", "harness", "schemas")
COMPILER_BUILD = 'chmod +x tools/mycc && echo "$PWD/tools" >> "$GITHUB_PATH"'
STEPS = (
    "Install kernelgap (host side) with nvcc",
    "Build the compiler under test",
    "Validate, compile and assemble the suite; build the PTX bundle (no GPU needed)",
)
SUITE = """[suite]
name = "mycompiler-kernels"
version = 1
gpu = "NVIDIA H200"
primary = "mycc"

[[case]]
id = "scale_f64"
version = 1
description = "out = a * x"
dims = { n = 1048576 }
check_dims = { n = 4099 }
grid = "min(ceil_div(n, 256), 4224)"
block = 256
reference = "reference.py:scale"
tolerance = { rtol = 0.0, atol = 0.0 }
bytes = "16 * n"
buffers = [
  { name = "x", dtype = "f64", length = "n", role = "input", init = { dist = "uniform", low = -4.0, high = 4.0 } },
  { name = "out", dtype = "f64", length = "n", role = "output" },
]
params = [{ name = "x", buffer = "x" }, { name = "out", buffer = "out" }, { name = "a", type = "f64", value = 1.5 }, { name = "n", type = "i64", value = "n" }]

[[case.impl]]
name = "cuda"
role = "baseline"
toolchain = "nvcc"
source = "kernels/scale.cu"
entry = "scale_f64"

[[case.impl]]
name = "mycc"
role = "candidate"
toolchain = "command"
command = "mycc {source}"
source = "kernels/scale.mc"
entry = "scale_f64"
"""
KERNEL = """extern "C" __global__ void scale_f64(const double* __restrict__ x, double* __restrict__ out, double a, long long n)
{
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        out[i] = a * x[i];
}
"""
# The compiler under test: its "language" is CUDA C++ with another suffix, its back end nvcc.
COMPILER = """#!/usr/bin/env python3
import subprocess, sys
if sys.argv[1:] == ["--version"]:
    sys.exit(print("mycc 0.0.1 (a fake compiler for kernelgap's tests)"))
sys.exit(subprocess.call([{nvcc!r}, "-ptx", "-arch=sm_90", "-x", "cu", sys.argv[1], "-o", "-"]))
"""


def load(name: str) -> dict:
    from tests.harness.test_ci_workflow import load_workflow

    return load_workflow() if name == "benchmark.yml" else _yaml(WORKFLOWS / name)


def _yaml(path: Path) -> dict:
    from ruamel.yaml import YAML

    return YAML(typ="safe").load(path.read_text())


def compiler_repository(root: Path, nvcc: str) -> Path:
    """A compiler's checkout as a team would have it: its own packages, suite and compiler."""
    root.mkdir(parents=True)
    (root / "pyproject.toml").write_text('[project]\nname = "mycompiler"\nversion = "0.1.0"\n')
    for package in ("mycompiler", "harness"):
        (root / package).mkdir(parents=True)
    (root / "mycompiler" / "__init__.py").write_text("")
    (root / "harness" / "__init__.py").write_text(
        "raise ImportError(\"the compiler's own test harness, not kernelgap's\")\n"
    )
    bench = root / "bench"
    (bench / "kernels").mkdir(parents=True)
    (bench / "cases.toml").write_text(SUITE)
    (bench / "reference.py").write_text(
        "import numpy as np\n\n\ndef scale(x, a):\n    return {'out': np.float64(a) * x}\n"
    )
    (bench / "kernels" / "scale.cu").write_text(KERNEL)
    (bench / "kernels" / "scale.mc").write_text(KERNEL)
    (root / "tools").mkdir()
    (root / "tools" / "mycc").write_text(COMPILER.format(nvcc=nvcc))
    return root


def release_wheel(base: Path) -> Path:
    """kernelgap's wheel, built by the release workflow's own build step from a copy of this
    checkout, for the tag of pyproject's version."""
    source = base / "kernelgap"
    source.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
        else:
            shutil.copy(ROOT / name, source / name)
    (step,) = [s for s in load("release.yml")["jobs"]["wheel"]["steps"] if "pip wheel" in s.get("run", "")]  # fmt: skip
    env = {**os.environ, "GITHUB_REF_NAME": f"v{VERSION}"}
    done = subprocess.run(["bash", "-eo", "pipefail", "-c", step["run"]], cwd=source, env=env,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return source / "dist" / f"kernelgap-{VERSION}-py3-none-any.whl"


def fresh_venv(base: Path) -> Path:
    """A venv with pip whose imports fall back on this interpreter's site-packages (the
    dependencies), but none of its .pth files (this checkout's editable install)."""
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    here = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (Path(purelib) / "kernelgap-test-deps.pth").write_text("\n".join(sorted(here)) + "\n")
    return venv


def run_steps(workflow: dict, repo: Path, venv: Path, variables: dict) -> list:
    """The benchmark job's STEPS, each as GitHub runs a `run:` (bash -eo pipefail, the workflow's
    env resolved from `variables`, GITHUB_PATH's lines put first on PATH for later steps)."""
    context = {"vars": variables, "github": {"event_name": "push"}}
    env_block = {k: evaluate(str(v).strip()[3:-2], context) if str(v).startswith("${{") else v
                 for k, v in workflow["env"].items()}  # fmt: skip
    github_path = repo.parent / "github_path"
    github_path.write_text("")
    steps = {s.get("name"): s for s in workflow["jobs"]["benchmark"]["steps"]}
    done = []
    for name in STEPS:
        added = [line for line in github_path.read_text().splitlines() if line]
        path = os.pathsep.join([*reversed(added), str(venv / "bin"), os.environ["PATH"]])
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        env.update({k: "" if v is None else str(v) for k, v in env_block.items()})
        # pip finds nothing to fetch: the dependencies are visible, kernelgap comes from its URL
        env.update(PATH=path, GITHUB_PATH=str(github_path), PIP_NO_INDEX="1", PIP_NO_DEPS="1",
                   PIP_IGNORE_INSTALLED="1", PIP_DISABLE_PIP_VERSION_CHECK="1")  # fmt: skip
        result = subprocess.run(["bash", "-eo", "pipefail", "-c", steps[name]["run"]], cwd=repo,
                                env=env, capture_output=True, text=True, timeout=600)  # fmt: skip
        assert result.returncode == 0, (name, result.stdout, result.stderr)
        done.append(result)
    return done


def test_the_workflow_installs_kernelgap_and_checks_the_teams_suite(tmp_path):
    nvcc = static.find_program("nvcc")
    if nvcc is None:
        pytest.skip("no nvcc (pip install '.[nvcc]'): the fake compiler's back end")
    repo = compiler_repository(tmp_path / "mycompiler", nvcc)
    wheel = release_wheel(tmp_path)
    venv = fresh_venv(tmp_path)
    workflow = load("benchmark.yml")
    variables = {"KERNELGAP_SOURCE": wheel.as_uri(), "KERNELGAP_COMPILER_BUILD": COMPILER_BUILD}
    install, _, check = run_steps(workflow, repo, venv, variables)

    assert f"kernelgap runner {VERSION}" in install.stdout  # the step's own --version
    listed = subprocess.run([venv / "bin" / "python", "-m", "pip", "list", "--format=json", "--path",
                             next((venv / "lib").glob("python*/site-packages"))],
                            capture_output=True, text=True, check=True)  # fmt: skip
    installed = {p["name"] for p in json.loads(listed.stdout)}
    assert "kernelgap" in installed and "mycompiler" not in installed, installed
    where = subprocess.run([venv / "bin" / "python", "-c", "import runner, harness; print(runner.__file__, harness.__file__)"],
                           cwd=tmp_path, capture_output=True, text=True, check=True)  # fmt: skip
    assert all(Path(f).is_relative_to(venv) for f in where.stdout.split()), where.stdout
    # the suite in the team's tree, built by the team's compiler, both implementations, no skip
    assert "1 case(s), 0 failure(s), 0 skipped" in check.stderr, check.stderr
    bundle = json.loads((repo / "bundle" / "bundle.json").read_text())
    built = {i["impl"]: i["build"] for i in bundle["implementations"]}
    assert set(built) == {"cuda", "mycc"} and not bundle["skipped"], bundle["skipped"]
    assert built["mycc"]["version"].startswith("mycc 0.0.1"), built["mycc"]


def test_without_a_pinned_source_the_install_step_says_what_to_set(tmp_path):
    workflow = load("benchmark.yml")
    (step,) = [s for s in workflow["jobs"]["benchmark"]["steps"] if s.get("name") == STEPS[0]]
    done = subprocess.run(["bash", "-eo", "pipefail", "-c", step["run"]], cwd=tmp_path,
                          env={**os.environ, "KERNELGAP_SOURCE": ""}, capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 2 and "set the variable KERNELGAP_SOURCE" in done.stdout
    assert "git+https://github.com/OWNER/kernelgap@vX.Y.Z" in done.stdout


def test_the_ci_guide_quotes_the_workflow_and_states_no_number_of_its_own():
    """docs/ci-guide.md's yaml blocks are the workflow's own lines, and every number in its
    prose is one the workflow holds: one source of truth for the budget, the price and flags."""
    import re

    guide = (ROOT / "docs" / "ci-guide.md").read_text()
    workflow = (WORKFLOWS / "benchmark.yml").read_text()
    quoted = re.findall(r"^```yaml\n(.*?)^```", guide, re.M | re.S)
    assert len(quoted) >= 4, "the guide quotes the env block and the steps it describes"
    for block in quoted:
        assert block in workflow, f"docs/ci-guide.md quotes lines the workflow does not have:\n{block}"  # fmt: skip
    for name in re.findall(r"\b(KERNELGAP_[A-Z_]+)\b", guide):
        assert name in workflow, f"docs/ci-guide.md names {name}, which the workflow does not read"
    prose = re.sub(r"^```.*?^```", "", guide, flags=re.M | re.S)
    prose = re.sub(r"\]\([^)]*\)", "]", prose)  # link targets
    numbers = set(re.findall(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])", prose))
    held = set(re.findall(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])", workflow))
    assert numbers <= held, f"docs/ci-guide.md states numbers the workflow does not: {numbers - held}"  # fmt: skip


def test_the_release_workflow_is_a_valid_github_workflow():
    tool = shutil.which("check-jsonschema", path=str(Path(sys.executable).parent))
    if tool is None:
        pytest.skip("check-jsonschema is not installed (it is in the test extra)")
    done = subprocess.run([tool, "--builtin-schema", "vendor.github-workflows", str(WORKFLOWS / "release.yml")],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
