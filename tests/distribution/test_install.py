"""What an install needs and what `harness run` ships: requirements by machine, an installed
tree's shipment, the suite as `harness run`'s argument, and the CLIs' --version."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib

import pytest

from harness.errors import ShippingError
from harness.running import shipping
from tests.conftest import ROOT
from tests.harness.running.test_run import FakeRunner, fixture_document, harness

PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def names(requirements: list[str]) -> set[str]:
    return {r.split(";")[0].split("[")[0].split("<")[0].split(">")[0].split("~")[0].split("=")[0]
            for r in requirements}  # fmt: skip


def test_the_runner_needs_neither_plotly_nor_scipy_and_the_harness_extra_brings_them():
    runner = names(shipping.runner_requirements())
    assert {
        "cuda-python",
        "numpy",
        "orjson",
        "jsonschema",
        "jsonschema-rs",
        "click",
        "nvidia-ml-py",
        "tqdm",
        "cupti-python",  # cold mode's timer: --install brings it (and what it imports)
        "pyelftools",
    } == runner
    assert {"scipy", "plotly", "ruptures"} == names(PROJECT["optional-dependencies"]["harness"])
    with_tests = shipping.runner_requirements(tests=True)
    assert {"scipy", "plotly", "pytest", "nvidia-cuda-nvcc"} <= names(with_tests)
    assert not any(r.startswith("kernelgap") for r in with_tests)  # self-references expanded


def test_requirements_of_an_installed_package_come_from_its_metadata(monkeypatch, tmp_path):
    requires = [
        "numpy>=1.26",
        'scipy>=1.11; extra == "harness"',
        'kernelgap[harness]; extra == "test"',
        "pytest>=8; extra == 'test'",
        'cupti-python>=13; extra == "cupti"',
    ]
    monkeypatch.setattr("importlib.metadata.requires", lambda name: requires)
    assert shipping.runner_requirements(root=tmp_path) == ["numpy>=1.26", "cupti-python>=13"]
    assert shipping.runner_requirements(tests=True, root=tmp_path) == [
        "numpy>=1.26",
        "cupti-python>=13",
        "scipy>=1.11",
        "pytest>=8",
    ]


def test_an_installed_tree_ships_its_runner_and_protocol_and_the_suite_under_suite(tmp_path):
    site = tmp_path / "site-packages"  # no schemas/ or pyproject.toml beside the packages
    (site / "protocol" / "schemas").mkdir(parents=True)
    (site / "protocol" / "__init__.py").write_text("")
    (site / "protocol" / "schemas" / "result.schema.json").write_text("{}")
    (site / "runner").mkdir()
    (site / "runner" / "cli.py").write_text("")
    suite = tmp_path / "work" / "suite"
    suite.mkdir(parents=True)
    (suite / "cases.toml").write_text('[suite]\nname = "x"\n')
    plan = shipping.plan(suite / "cases.toml", root=site)
    shipped = {name for _, name in plan.files}
    assert shipped == {
        "protocol/__init__.py",
        "protocol/schemas/result.schema.json",
        "runner/cli.py",
        "suite/cases.toml",
    }
    assert plan.cases == "suite/cases.toml"
    with pytest.raises(ShippingError, match="--pytest-gpu ships the tests"):
        shipping.plan(suite / "cases.toml", root=site, tests=True)


@pytest.fixture
def fake(tmp_path) -> FakeRunner:
    runner = FakeRunner(tmp_path / "fake")
    runner.answer(fixture_document(), 0)
    return runner


def test_the_suite_is_harness_runs_argument_and_words_after_the_separator_are_the_runners(
    fake, tmp_path
):
    suite = ROOT / "tests" / "gpu_suite" / "cases.toml"
    done = harness(
        "--target", "local", "--python", fake.python, "--out", tmp_path, suite,
        "--", "--case", "scale", "benchmarks/cases.toml",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    seen = json.loads(fake.argv.read_text())
    assert seen["args"][0] == "tests/gpu_suite/cases.toml"
    assert seen["args"][-3:] == ["--case", "scale", "benchmarks/cases.toml"]


def test_cases_stays_an_alias_of_the_argument(fake, tmp_path):
    suite = ROOT / "tests" / "gpu_suite" / "cases.toml"
    done = harness(
        "--target", "local", "--python", fake.python, "--out", tmp_path, "--cases", suite
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(fake.argv.read_text())["args"][0] == "tests/gpu_suite/cases.toml"
    other = ROOT / "benchmarks" / "cases.toml"
    clash = harness("--target", "local", "--python", fake.python, suite, "--cases", other)
    assert clash.returncode == 2 and "give the suite once" in clash.stderr


@pytest.mark.parametrize("module", ["runner", "harness"])
def test_version(module):
    done = subprocess.run(
        [sys.executable, "-m", module, "--version"], capture_output=True, text=True, cwd=ROOT
    )
    assert done.returncode == 0
    assert done.stdout.startswith(f"kernelgap {module} {PROJECT['version']} (result schema 1.")


def test_no_command_imports_scipy_not_even_for_a_significance():
    """The rank tests are computed without scipy (protocol.statistics.u_test; the tests hold
    them to scipy's), so neither the harness's modules nor a significance, a change search or
    a drift test import it: its import was most of `harness compare`'s start."""
    code = (
        "import sys, numpy as np, harness.cli, harness.analysis.compare, harness.dashboard.build\n"
        "from harness.analysis import drift\n"
        "harness.analysis.compare.significance([1.0, 2.0, 3.0], [4.0, 5.0, 6.0])\n"
        "harness.analysis.compare.significance(list(range(40)), list(range(5, 45)))\n"
        "drift.kendall_p(np.arange(40.0)); drift.theil_sen(np.arange(40.0))\n"
        "assert not [m for m in sys.modules if m.split('.')[0] == 'scipy'], 'scipy imported'"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr


def test_nvcc_and_ptxas_are_found_on_path_first_then_in_nvidias_wheels(monkeypatch, tmp_path):
    from runner.explain import static

    wheel_bin = tmp_path / "site" / "nvidia" / "cu13" / "bin"
    wheel_bin.mkdir(parents=True)
    for name in ("nvcc", "ptxas"):
        (wheel_bin / name).write_text("#!/bin/sh\n")
        (wheel_bin / name).chmod(0o755)
    (wheel_bin / "kg-not-executable").write_text("data")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert wheel_bin in static.wheel_bin_dirs()
    assert static.find_program("ptxas") == str(wheel_bin / "ptxas")
    assert static.find_program("kg-not-executable") is None and static.find_program("kg-no") is None
    on_path = tmp_path / "toolkit"
    on_path.mkdir()
    (on_path / "nvcc").write_text("#!/bin/sh\n")
    (on_path / "nvcc").chmod(0o755)
    monkeypatch.setenv("PATH", str(on_path))
    assert static.find_program("nvcc") == str(on_path / "nvcc")


def test_the_readmes_first_command_writes_under_an_ignored_folder():
    first, second = (ROOT / "README.md").read_text().splitlines()[:2]
    # a virtual environment first: Debian's python3 refuses a pip install (PEP 668), and
    # elsewhere it would go into the global site-packages
    venv = "python3 -m venv .venv && . .venv/bin/activate && python -m pip install -e "
    assert first.strip().startswith(venv + ". && mkdir -p results && python -m runner bench ")
    # -o, not a shell redirect: a failed run must not leave an empty results/result.json
    assert first.strip().endswith(" -o results/result.json") and ">" not in first
    assert second.strip() == venv + "'.[test]' && python -m pytest"
    ignored = subprocess.run(
        ["git", "check-ignore", "-q", "results/result.json"], cwd=ROOT, capture_output=True
    )
    assert ignored.returncode == 0, "results/ must be git-ignored: a run leaves the checkout clean"
    ignored = subprocess.run(["git", "check-ignore", "-q", ".venv/"], cwd=ROOT, capture_output=True)
    assert ignored.returncode == 0, ".venv/ must be git-ignored: the README's lines make it"


def test_a_cuda_python_without_bindings_is_told_to_upgrade_not_to_install(monkeypatch):
    from importlib import metadata

    from runner.cuda_bindings import missing

    error = ImportError("No module named 'cuda.bindings'")
    monkeypatch.setattr(metadata, "version", lambda name: "12.6.0")
    message = missing("driver", error)
    assert "cuda-python 12.6.0 is installed" in message and "pip install -U" in message

    def absent(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", absent)
    assert "is not installed" in missing("nvrtc", error)


def test_pyproject_lists_every_package_folder_and_no_other():
    """A package missing from [tool.setuptools] packages is missing from the wheel (and a listed
    folder that no longer exists stops every install, the README's first line included)."""
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for top in ("runner", "protocol", "harness")
        for init in (ROOT / top).rglob("__init__.py")
    }
    assert set(tool["packages"]) - set(tool["package-dir"]) == found
