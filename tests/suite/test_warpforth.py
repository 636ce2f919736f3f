"""The suite's WarpForth candidates through the real compiler (warpforthc) and ptxas.

CI installs warpforthc (`.ci/run` runs ../shared/tools/warpforth/install) and runs `runner check
--require-all`, so a missing compiler fails CI there; here each test that needs a tool skips with
the reason when the tool is not installed.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from runner.definition import manifest, toolchains
from runner.errors import BuildError
from runner.execution.checking import assemble
from runner.execution.suite import obtain_ptx
from runner.explain import static
from runner.gpu import ptx

ROOT = Path(__file__).resolve().parents[2]
SUITE = manifest.load(ROOT / "benchmarks" / "cases.toml")
ARCH = "sm_90"


def need(program: str) -> str:
    path = shutil.which(program)
    if path is None:
        pytest.skip(f"{program} is not on PATH (.ci/run installs it)")
    return path


def test_every_case_has_a_warpforth_candidate_compiled_by_warpforthc():
    for case in SUITE.cases:
        impl = case.impl("warpforth")
        assert (impl.role, impl.toolchain) == ("candidate", "command"), case.id
        assert toolchains.command.words(impl.command)[0] == "warpforthc", case.id
        assert impl.source.suffix == ".forth" and impl.entry == case.baseline.entry, case.id


@pytest.mark.parametrize("case_id", [c.id for c in SUITE.cases])
def test_forth_kernel_compiles_assembles_and_matches_the_manifest_signature(case_id, tmp_path):
    need("warpforthc")
    case = SUITE.case(case_id)
    impl = case.impl("warpforth")
    text, build = obtain_ptx(case, impl, ARCH, None)
    module = ptx.parse(text)
    # warpforthc's target is fixed: PTX 6.0 for sm_70, JIT-compiled for newer GPUs
    assert (module.version, module.target) == ("6.0", "sm_70")
    ptx.check_signature(module, impl.entry, case.signature(), where=case_id)
    assert build["command"] == [shutil.which("warpforthc"), str(impl.source)]  # PTX on stdout
    if static.find_program("ptxas") is None:
        pytest.skip("ptxas is not on PATH: compiled and signature-checked, not assembled")
    assert assemble(text, ARCH) is None


def test_build_record_names_the_compiler_by_its_file_and_version(tmp_path):
    path = need("warpforthc")
    case = SUITE.case("axpy_f64")
    built = toolchains.build(
        "command", case.impl("warpforth").source, ARCH, (), case.impl("warpforth").command
    )
    # warpforthc --version names only its LLVM: the binary's hash is what tells two builds apart
    assert "LLVM version" in built.version
    real = Path(path).resolve()
    assert built.compiler_sha256 == hashlib.sha256(real.read_bytes()).hexdigest()
    # the same compiler under another name (a copy) has the same identity
    copy = tmp_path / "warpforthc-copy"
    shutil.copy2(real, copy)
    again = toolchains.build(
        "command", case.impl("warpforth").source, ARCH, (), f"{copy} {{source}}"
    )
    assert again.compiler_sha256 == built.compiler_sha256 and again.ptx == built.ptx


def test_a_changed_forth_kernel_changes_the_ptx(tmp_path):
    need("warpforthc")
    source = SUITE.case("axpy_f64").impl("warpforth").source
    edited = tmp_path / "axpy_f64.forth"
    edited.write_text(source.read_text().replace("F+\n", "F+ 1.0 F+\n", 1))  # y = a*x + y + 1
    a = toolchains.build("command", source, ARCH, (), "warpforthc {source}")
    b = toolchains.build("command", edited, ARCH, (), "warpforthc {source}")
    assert a.ptx_sha256 != b.ptx_sha256 and a.source_sha256 != b.source_sha256
    assert b.ptx.count("add.rn.f64") == a.ptx.count("add.rn.f64") + 1


def test_a_forth_error_is_a_build_error_with_the_compilers_message(tmp_path):
    need("warpforthc")
    bad = tmp_path / "bad.forth"
    bad.write_text("\\! kernel k\n\\! param X i64[]\n0 CELLS X + @ DROP\n")
    with pytest.raises(BuildError, match=r"bad\.forth: warpforthc exited with 1:\n.*size"):
        toolchains.build("command", bad, ARCH, (), "warpforthc {source}")


SMALL_SUITE = """\
[suite]
name = "wf-skip"
version = 1

[[case]]
id = "axpy_f64"
version = 1
description = "axpy with a prebuilt PTX baseline and the WarpForth candidate"
dims = { n = 4096, blocks = 16 }
check_dims = { n = 1003, blocks = 2 }
grid = "min(ceil_div(n, 256), blocks)"
block = 256
reference = "reference.py:axpy"
tolerance = { rtol = 1e-15, atol = 1e-15 }
buffers = [
  { name = "x", dtype = "f64", length = "n", role = "input", init = { dist = "uniform", low = -1.0, high = 1.0 } },
  { name = "y", dtype = "f64", length = "n", role = "inout", init = { dist = "uniform", low = -1.0, high = 1.0 } },
]
params = [
  { name = "x", buffer = "x" },
  { name = "y", buffer = "y" },
  { name = "a", type = "f64", value = 2.5 },
  { name = "n", type = "i64", value = "n" },
]

[[case.impl]]
name = "handptx"
role = "baseline"
toolchain = "ptx"
source = "kernels/axpy_f64.handwritten.ptx"
entry = "axpy_f64"

[[case.impl]]
name = "warpforth"
role = "candidate"
toolchain = "command"
command = "warpforthc {source}"
source = "kernels/axpy_f64.forth"
entry = "axpy_f64"
"""


def small_suite(tmp_path: Path) -> Path:
    (tmp_path / "kernels").mkdir(parents=True)
    for name in ("axpy_f64.handwritten.ptx", "axpy_f64.forth"):
        shutil.copy(ROOT / "benchmarks" / "kernels" / name, tmp_path / "kernels" / name)
    shutil.copy(ROOT / "benchmarks" / "reference.py", tmp_path / "reference.py")
    (tmp_path / "cases.toml").write_text(SMALL_SUITE)
    return tmp_path / "cases.toml"


def check(cases: Path, path: str, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "runner", "check", str(cases), *flags],
        capture_output=True,
        text=True,
        env={"PATH": path, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )


def test_check_without_warpforthc_says_so_in_its_summary_and_fails_under_require_all(tmp_path):
    cases = small_suite(tmp_path / "suite")
    empty = tmp_path / "bin"
    empty.mkdir()
    done = check(cases, str(empty))
    assert done.returncode == 0, done.stderr
    # the skip says where WarpForth comes from (its source and build), not only "not on PATH"
    assert (
        "skip  axpy_f64/warpforth: warpforthc is not on PATH (WarpForth's compiler" in done.stderr
    )
    assert "cmake --build build" in done.stderr and "implementation skipped" in done.stderr
    assert "1 case(s), 0 failure(s), 1 skipped" in done.stderr
    assert "skipped 1: warpforthc is not on PATH (WarpForth's compiler" in done.stderr
    strict = check(cases, str(empty), "--require-all")
    assert strict.returncode == 1
    assert "--require-all: skips fail the check" in strict.stderr


def test_check_with_warpforthc_skips_nothing(tmp_path):
    warpforthc = need("warpforthc")
    cases = small_suite(tmp_path / "suite")
    done = check(cases, str(Path(warpforthc).parent), "--require-all")
    assert done.returncode == 0, done.stderr
    assert "ok    axpy_f64/warpforth: command, PTX 6.0 sm_70" in done.stderr
    assert "1 case(s), 0 failure(s), 0 skipped" in done.stderr


def test_check_takes_a_bundles_warpforth_ptx_on_a_machine_without_warpforthc(tmp_path):
    """A GPU box has no warpforthc: `check --bundle` (what `check --sanitize` runs over) takes the
    PTX built elsewhere instead of skipping the candidate."""
    warpforthc = need("warpforthc")
    cases = small_suite(tmp_path / "suite")
    bundle = tmp_path / "bundle"
    built = subprocess.run(
        [sys.executable, "-m", "runner", "build", str(cases), "--out", str(bundle)],
        capture_output=True,
        text=True,
        env={"PATH": f"{Path(warpforthc).parent}:/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    assert built.returncode == 0, built.stderr
    empty = tmp_path / "bin"
    empty.mkdir()
    done = check(cases, str(empty), "--bundle", str(bundle), "--require-all")
    assert done.returncode == 0, done.stderr
    assert "axpy_f64/warpforth" in done.stderr and "skip  axpy_f64/warpforth" not in done.stderr
    assert "1 case(s), 0 failure(s), 0 skipped" in done.stderr
    missing = check(cases, str(empty), "--bundle", str(tmp_path / "nowhere"))
    assert missing.returncode == 2 and "bundle.json" in missing.stderr
