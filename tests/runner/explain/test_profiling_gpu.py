"""runner bench --profile on the GPU box: the program ncu profiles launches one implementation
once at the timed size, and ncu (where it is on PATH) yields a profile block whose counters are
plausible for the case: polynomial_f64 reads and writes its 2 x 512 MiB once. Without a GPU these
skip (conftest); without ncu the ncu test skips with the reason."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from runner.definition import manifest, toolchains
from runner.errors import ToolchainMissing
from runner.execution import profile_launch
from runner.explain import profiling, static

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[3]
SUITE = ROOT / "benchmarks" / "cases.toml"


def cuda_ptx(case_id: str) -> str:
    from runner.gpu import driver

    impl = manifest.load(SUITE).case(case_id).impl("cuda")
    with driver.Context(0) as ctx:
        arch = f"sm_{ctx.attribute('COMPUTE_CAPABILITY_MAJOR')}{ctx.attribute('COMPUTE_CAPABILITY_MINOR')}"
    for toolchain in ("nvcc", "nvrtc"):
        try:
            return toolchains.build(toolchain, impl.source, arch, impl.flags, None).ptx
        except ToolchainMissing:
            continue
    pytest.skip("neither nvcc nor NVRTC is available to build the baseline")


def test_profile_case_launches_the_implementation_once(tmp_path):
    job = {"manifest": str(SUITE), "case": "polynomial_f64", "impl": "cuda", "ptx": cuda_ptx(
        "polynomial_f64"), "device": 0}  # fmt: skip
    launched = profile_launch.launch_once(job)
    assert launched["launches"] == 1 and launched["dims"]["n"] == 2**26
    path = tmp_path / "job.json"
    path.write_bytes(__import__("orjson").dumps(job))
    done = subprocess.run(
        [sys.executable, "-m", "runner", "profile-case", str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr


def test_the_tools_program_launches_once_as_a_module_below_the_command_line(tmp_path):
    """What ncu and compute-sanitizer start (profiling.DRIVER_MODULE), run as they run it."""
    job = {"manifest": str(SUITE), "case": "polynomial_f64", "impl": "cuda", "ptx": cuda_ptx(
        "polynomial_f64"), "device": 0, "size": "check"}  # fmt: skip
    path = tmp_path / "job.json"
    path.write_bytes(__import__("orjson").dumps(job))
    done = subprocess.run(
        profiling._driver_command(str(path)), cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    launched = __import__("orjson").loads(done.stderr.strip().splitlines()[-1])
    assert launched["launches"] == 1 and launched["size"] == "check"


def test_ncu_profiles_one_launch_with_plausible_counters():
    if static.find("ncu") is None:
        pytest.skip(f"ncu is not installed: {static.INSTALL_HINT['ncu']}")
    block = profiling.profile_impl(
        SUITE, "polynomial_f64", "cuda", "polynomial_f64", cuda_ptx("polynomial_f64")
    )
    assert block["status"] == "ok", block.get("reason")
    m = block["metrics"]
    nbytes = 2**26 * 8
    assert 0.9 * nbytes < m["dram__bytes_read.sum"]["value"] < 1.5 * nbytes
    assert 0.9 * nbytes < m["dram__bytes_write.sum"]["value"] < 1.5 * nbytes
    assert m["smsp__inst_executed.sum"]["value"] > 2**26 // 32 * 128  # 128 DFMA per element
    assert 0 < m["sm__warps_active.avg.pct_of_peak_sustained_active"]["value"] <= 100
    assert block["stalls"] and block["version"].startswith("Version")
