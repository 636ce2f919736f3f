"""Environment capture: NVML fallbacks, software versions, git state, nominal peaks, timestamps."""

from __future__ import annotations

import ctypes
import importlib.util
import re
import shutil
import subprocess
import sys
import types
from datetime import UTC, datetime
from pathlib import Path

import pytest

from protocol.input_files import checkout_commit
from runner.definition import bundle
from runner.measurement import environment
from runner.measurement import environment as peak_figures

ROOT = Path(__file__).resolve().parents[3]


def nvml_library_loadable() -> bool:
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return False
    return True


# ---- nvml_sensors ---------------------------------------------------------------------------


def test_nvml_sensors_reports_unavailable_without_the_nvml_library():
    if nvml_library_loadable():
        pytest.skip("libnvidia-ml.so.1 is present here; the GPU tests cover the NVML path")
    sensors = environment.nvml_sensors()
    assert sensors["source"] == "unavailable"
    assert "nvmlInit" in sensors["reason"] or "pynvml" in sensors["reason"]


def test_nvml_sensors_reports_unavailable_without_pynvml(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` raise ImportError
    sensors = environment.nvml_sensors()
    assert sensors["source"] == "unavailable"
    assert "nvidia-ml-py" in sensors["reason"]


class NotSupported(Exception):
    pass


def fake_nvml(*, init_error: Exception | None = None, by_uuid: bool = True):
    """A stand-in pynvml: some readings work, some raise NotSupported, shutdown is recorded."""
    calls = []

    def unsupported(*_args):
        raise NotSupported("Not Supported")

    def init():
        if init_error:
            raise init_error
        calls.append("init")

    def handle_by_uuid(uuid):
        if not by_uuid:
            raise NotSupported("Not Found")
        return f"handle:{uuid}"

    return types.SimpleNamespace(
        calls=calls,
        NVML_CLOCK_SM=1,
        NVML_CLOCK_MEM=2,
        NVML_TEMPERATURE_GPU=0,
        NVML_PSTATE_UNKNOWN=32,
        nvmlClocksEventReasonGpuIdle=0x1,
        nvmlClocksEventReasonSwPowerCap=0x4,
        nvmlClocksEventReasonAll=0x1FF,
        nvmlClocksThrottleReasonSwPowerCap=0x4,
        nvmlClocksThrottleReasonBoardLimit=0x200,
        nvmlInit=init,
        nvmlShutdown=lambda: calls.append("shutdown"),
        nvmlSystemGetDriverVersion=lambda: b"580.65.06",
        nvmlDeviceGetHandleByIndex=lambda i: f"handle:{i}",
        nvmlDeviceGetHandleByUUID=handle_by_uuid,
        nvmlDeviceGetUUID=lambda h: "GPU-0000",
        nvmlDeviceGetClockInfo=lambda h, kind: {1: 1755, 2: 2619}[kind],
        nvmlDeviceGetMaxClockInfo=lambda h, kind: {1: 1980, 2: 2619}[kind],
        nvmlDeviceGetTemperature=unsupported,
        nvmlDeviceGetPowerUsage=lambda h: 123456,
        nvmlDeviceGetEnforcedPowerLimit=unsupported,
        nvmlDeviceGetPersistenceMode=lambda h: 1,
        nvmlDeviceGetPerformanceState=lambda h: 0,
        nvmlDeviceGetCurrentClocksEventReasons=lambda h: 0x1 | 0x4 | 0x200 | 0x10000,
    )


def test_nvml_sensors_reads_each_field_independently(monkeypatch):
    nvml = fake_nvml()
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    sensors = environment.nvml_sensors(uuid="GPU-abc")
    assert sensors["source"] == "nvml"
    assert sensors["matched_by"] == "uuid"
    assert sensors["driver_version"] == "580.65.06"
    assert sensors["sm_clock_mhz"] == 1755
    assert sensors["max_sm_clock_mhz"] == 1980
    assert sensors["max_memory_clock_mhz"] == 2619
    assert sensors["temperature_c"] is None  # NotSupported there leaves the rest intact
    assert sensors["power_limit_w"] is None
    assert sensors["power_w"] == pytest.approx(123.456)
    assert sensors["persistence_mode"] is True
    assert sensors["pstate"] == "P0"
    assert sensors["throttle_reasons"] == ["GpuIdle", "SwPowerCap", "BoardLimit", "0x10000"]
    assert nvml.calls == ["init", "shutdown"]


@pytest.mark.parametrize(
    ("applications", "default", "reasons", "locked"),
    [
        (1500, 1980, 0x1, True),  # application clocks moved from their default
        (1980, 1980, 0x1 | 0x2, True),  # ApplicationsClocksSetting: locked (nvidia-smi -lgc too)
        (1980, 1980, 0x1, False),
        (None, None, None, None),  # NVML answers neither: unknown, not "unlocked"
    ],
)
def test_whether_clocks_were_locked_is_recorded_with_the_sensors(
    monkeypatch, applications, default, reasons, locked
):
    nvml = fake_nvml()

    def answer(value):
        def read(*_args):
            if value is None:
                raise NotSupported("Not Supported")
            return value

        return read

    nvml.nvmlDeviceGetApplicationsClock = answer(applications)
    nvml.nvmlDeviceGetDefaultApplicationsClock = answer(default)
    nvml.nvmlDeviceGetCurrentClocksEventReasons = answer(reasons)
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    sensors = environment.nvml_sensors(uuid="GPU-abc")
    assert sensors["clocks_locked"] is locked
    assert sensors["applications_sm_clock_mhz"] == applications
    assert sensors["default_applications_sm_clock_mhz"] == default


def test_nvml_sensors_falls_back_to_the_index_when_the_uuid_is_unknown(monkeypatch):
    nvml = fake_nvml(by_uuid=False)
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    sensors = environment.nvml_sensors(0, uuid="MIG-xyz")
    assert sensors["source"] == "nvml"
    assert (sensors["matched_by"], sensors["device_index"]) == ("index", 0)


def test_nvml_sensors_turns_an_init_failure_into_a_reason(monkeypatch):
    monkeypatch.setitem(
        sys.modules, "pynvml", fake_nvml(init_error=NotSupported("Driver Not Loaded"))
    )
    assert environment.nvml_sensors() == {
        "source": "unavailable",
        "reason": "nvmlInit failed: Driver Not Loaded",
    }


def test_nvml_sensors_does_not_load_cuda():
    code = (
        "import sys; from runner.measurement import environment; environment.nvml_sensors(); "
        "print(sorted(m for m in sys.modules if m.startswith('cuda')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


# ---- software -------------------------------------------------------------------------------


def test_software_lists_versions_and_host():
    info = environment.software()
    assert info["python"] == ".".join(map(str, sys.version_info[:3]))
    for key, module in [
        ("numpy", "numpy"),
        ("cuda_bindings", "cuda.bindings"),
        ("orjson", "orjson"),
        ("jsonschema", "jsonschema"),
        ("nvidia_ml_py", "pynvml"),
    ]:
        if importlib.util.find_spec(module) is None:  # e.g. the GPU image lacks orjson
            assert info[key] is None, key
        else:
            assert isinstance(info[key], str) and re.match(r"\d+\.\d+", info[key]), key
    assert isinstance(info["kernelgap"], str) and info["kernelgap"].startswith("0.")
    assert isinstance(info["platform"], str) and info["platform"]
    assert isinstance(info["hostname"], str) and info["hostname"]


# ---- checkout_commit ---------------------------------------------------------------------------


def git(cwd, *args) -> str:
    command = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=True).stdout


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_checkout_commit_reports_head_and_dirtiness(tmp_path):
    git(tmp_path, "init", "-q")
    suite = tmp_path / "cases.toml"
    suite.write_text("version = 1\n")
    git(tmp_path, "add", "cases.toml")
    git(tmp_path, "commit", "-q", "-m", "suite")
    sha = git(tmp_path, "rev-parse", "HEAD").strip()
    assert re.fullmatch(r"[0-9a-f]{40}", sha)
    assert checkout_commit(suite) == {"commit": sha, "dirty": False}
    suite.write_text("version = 2\n")
    assert checkout_commit(suite) == {"commit": sha, "dirty": True}
    assert checkout_commit(tmp_path) == {"commit": sha, "dirty": True}


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_checkout_commit_outside_a_checkout_is_unknown(tmp_path, monkeypatch):
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    suite = tmp_path / "cases.toml"
    suite.write_text("version = 1\n")
    assert checkout_commit(suite) == {"commit": None, "dirty": None}
    assert checkout_commit(tmp_path / "missing" / "cases.toml") == {
        "commit": None,
        "dirty": None,
    }


# ---- nominal_peaks --------------------------------------------------------------------------

H100_INFO = {
    "compute_capability": "9.0",
    "sm_count": 132,
    "memory_bus_width_bits": 5120,
    "clock_rate_khz": 1_755_000,
    "memory_clock_rate_khz": 2_619_000,
}


def test_nominal_peaks_sm90_from_nvml_clocks():
    sensors = {"source": "nvml", "max_sm_clock_mhz": 1980, "max_memory_clock_mhz": 2619}
    peaks = peak_figures.nominal_peaks(H100_INFO, sensors)
    assert peaks["f64_flops_per_s"] == 132 * 1980e6 * 2 * 64
    assert peaks["f32_flops_per_s"] == 132 * 1980e6 * 2 * 128
    assert peaks["memory_bytes_per_s"] == pytest.approx(2 * 2619e6 * 5120 / 8)


def test_nominal_peaks_falls_back_to_driver_clocks_without_nvml():
    peaks = peak_figures.nominal_peaks(H100_INFO, {"source": "unavailable", "reason": "x"})
    assert peaks["f64_flops_per_s"] == 132 * 1755e6 * 2 * 64
    assert any("driver attribute clock_rate_khz" in note for note in peaks["notes"])


def test_nominal_peaks_unknown_compute_capability_gives_no_flops():
    info = {**H100_INFO, "compute_capability": "6.1"}
    peaks = peak_figures.nominal_peaks(info, {"max_sm_clock_mhz": 1980})
    assert peaks["f64_flops_per_s"] is None and peaks["f32_flops_per_s"] is None
    assert any("'6.1'" in note for note in peaks["notes"])


def test_nominal_peaks_drops_an_implausible_memory_bandwidth():
    info = {**H100_INFO, "memory_bus_width_bits": 64, "memory_clock_rate_khz": 100_000}
    peaks = peak_figures.nominal_peaks(info, {})
    assert peaks["memory_bytes_per_s"] is None  # 2 * 100 MHz * 8 bytes = 1.6e9 B/s
    assert any("implausible" in note for note in peaks["notes"])


# ---- utc_now, format_uuid -------------------------------------------------------------------


def test_utc_now_is_iso8601_utc_with_microseconds():
    stamp = bundle.utc_now()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", stamp)
    parsed = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    assert abs((datetime.now(UTC) - parsed).total_seconds()) < 60


def test_format_uuid_matches_nvidia_smi():
    raw = bytes(range(16))
    assert environment.format_uuid(raw) == "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f"
    with pytest.raises(ValueError, match="16 bytes"):
        environment.format_uuid(b"\0" * 15)


# ---- on the GPU -----------------------------------------------------------------------------


@pytest.fixture
def ctx():
    from runner.gpu import driver

    context = driver.Context(0)
    yield context
    context.close()


def free_bytes() -> int:
    from runner.gpu import driver

    free, _total = driver.check(driver.cu().cuMemGetInfo(), "cuMemGetInfo")
    return int(free)


@pytest.mark.gpu
def test_capture_on_the_device(ctx):
    before = free_bytes()
    env = environment.capture(ctx)
    after = free_bytes()
    device = env["device"]
    assert device["name"]
    assert re.fullmatch(r"\d+\.\d+", device["compute_capability"])
    assert device["arch"] == "sm_" + device["compute_capability"].replace(".", "")
    assert device["sm_count"] > 0 and device["l2_bytes"] > 0 and device["memory_bytes"] > 0
    assert re.fullmatch(r"GPU-[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", device["uuid"])
    assert device["driver_version"] >= 12000
    assert env["peaks"]["measured_memory_bytes_per_s"] > 1e11
    assert env["peaks"]["measured_memory_method"].startswith("cuMemcpyDtoD")
    assert env["sensors"]["source"] in ("nvml", "unavailable")
    if env["sensors"]["source"] == "nvml":
        assert "clocks_locked" in env["sensors"]
    assert env["persisting_l2"]["limit_bytes"] == 0 and "error" not in env["persisting_l2"]
    assert abs(after - before) <= 1 << 20


@pytest.mark.gpu
def test_nvml_matches_the_cuda_device(ctx):
    device = environment.device_info(ctx)
    sensors = environment.nvml_sensors(uuid=device["uuid"])
    if sensors["source"] != "nvml":
        pytest.skip(f"NVML unavailable on this GPU machine: {sensors['reason']}")
    assert sensors["uuid"] == device["uuid"]
    assert sensors["max_sm_clock_mhz"] > 0
    assert isinstance(sensors["throttle_reasons"], list)
