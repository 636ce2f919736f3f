"""runner bench --profile without a GPU: ncu's CSV (recorded samples in ncu's documented format,
tests/fixtures/ncu/) parsed into the `profile` block, and the profiling step driven end to end
with a stand-in `ncu` program on PATH that writes such a sample where ncu writes its log."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from protocol.validation import validator
from runner.errors import NcuOutputError
from runner.explain import profiling, static

ROOT = Path(__file__).resolve().parents[3]
SAMPLES = ROOT / "tests" / "fixtures" / "ncu"


def sample(name: str) -> str:
    return (SAMPLES / name).read_text()


def profile_errors(block: dict) -> list[str]:
    """Schema errors of a profile block, checked against result.schema.json's $defs/profile."""
    schema = validator("result").schema
    sub = {"$defs": schema["$defs"], "$ref": "#/$defs/profile"}
    return [e.message for e in Draft202012Validator(sub).iter_errors(block)]


def test_metrics_are_read_in_base_units_with_thousands_separators_and_na():
    parsed = profiling.parse(sample("polynomial_f64-warpforth.csv"), "polynomial_f64")
    m = parsed["metrics"]
    assert m["dram__bytes_read.sum"] == {"value": 536904192.0, "unit": "byte"}
    assert m["dram__bytes_write.sum"]["value"] == 536870912.0
    assert m["smsp__inst_executed.sum"]["value"] == 1075838976.0
    assert m["lts__t_sector_hit_rate.pct"] == {"value": 49.98, "unit": "%"}
    assert m["sm__warps_active.avg.pct_of_peak_sustained_active"]["value"] == 93.71
    assert m[profiling.STALL_METRIC.format("tex_throttle")]["value"] is None  # "n/a"
    assert parsed["kernel"] == "polynomial_f64" and parsed["launch_id"] == "0"
    assert set(profiling.metrics()) <= set(m)


def test_the_top_stall_reasons_leave_out_the_issuing_warp_and_sum_to_their_shares():
    stalls = profiling.parse(sample("polynomial_f64-warpforth.csv"), "polynomial_f64")["stalls"]
    assert [s["reason"] for s in stalls] == ["wait", "math_pipe_throttle", "long_scoreboard"]
    assert stalls[0]["value"] == 10.92 and 0.6 < stalls[0]["share"] < 0.62
    assert all(s["reason"] != "selected" for s in stalls)


def test_rows_are_read_by_header_name_so_older_column_sets_work():
    old = (
        '"ID","Process ID","Process Name","Host Name","Kernel Name","Kernel Time","Context",'
        '"Stream","Section Name","Metric Name","Metric Unit","Metric Value"\n'
        '"3","77","python3","h","axpy_f64","2026-Dec-01 10:00:00","1","7","Command line profiler '
        'metrics","dram__bytes_read.sum","byte","2147483648"\n'
        '"4","77","python3","h","axpy_f64","2026-Dec-01 10:00:01","1","7","Command line profiler '
        'metrics","dram__bytes_read.sum","byte","1"\n'
    )
    parsed = profiling.parse("==PROF== Profiling ...\n" + old, "axpy_f64")
    assert parsed["launch_id"] == "3"  # the first launch only
    assert parsed["metrics"] == {"dram__bytes_read.sum": {"value": 2147483648.0, "unit": "byte"}}


def test_another_kernel_in_the_table_is_not_taken_for_ours():
    text = sample("polynomial_f64-cuda.csv").replace('"polynomial_f64"', '"kernelgap_fill_f64"')
    with pytest.raises(NcuOutputError, match="kernels it profiled: kernelgap_fill_f64"):
        profiling.parse(text, "polynomial_f64")


def test_output_without_a_metric_table_quotes_what_ncu_said():
    with pytest.raises(NcuOutputError, match="ERR_NVGPUCTRPERM"):
        profiling.parse(sample("no-permission.txt"), "polynomial_f64")


def test_the_command_profiles_one_launch_of_the_entry_in_csv_base_units():
    argv = profiling.command("/opt/ncu", "axpy_f64", ["python3", "-m", "runner"], "/tmp/log.csv")
    assert argv[0] == "/opt/ncu" and argv[-3:] == ["python3", "-m", "runner"]
    joined = " ".join(argv)
    assert "--csv --print-units base" in joined and "-k regex:^axpy_f64$" in joined
    assert "--launch-count 1" in joined and "--log-file /tmp/log.csv" in joined
    metrics = argv[argv.index("--metrics") + 1].split(",")
    assert "dram__bytes_read.sum" in metrics and "lts__t_sector_hit_rate.pct" in metrics
    assert "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio" in metrics


@pytest.fixture
def fake_ncu(tmp_path, monkeypatch):
    """An `ncu` on PATH that records its arguments, writes the sample named by $FAKE_NCU_SAMPLE
    to its --log-file and exits with $FAKE_NCU_STATUS, as ncu does after profiling."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    program = bin_dir / "ncu"
    program.write_text(
        f"#!{sys.executable}\n"
        "import os, sys\n"
        "if sys.argv[1:] == ['--version']:\n"
        "    print('NVIDIA (R) Nsight Compute Command Line Profiler')\n"
        "    print('Version 2025.3.1.0 (build 36398880) (public-release)')\n"
        "    sys.exit(0)\n"
        "args = sys.argv[1:]\n"
        "open(os.environ['FAKE_NCU_ARGS'], 'w').write('\\n'.join(args))\n"
        "log = args[args.index('--log-file') + 1]\n"
        "reject = os.environ.get('FAKE_NCU_REJECT')\n"
        "if reject and reject in args[args.index('--metrics') + 1]:\n"
        "    print(f'==ERROR== Failed to find metric {reject}')\n"
        "    sys.exit(1)\n"
        "open(log, 'w').write(open(os.environ['FAKE_NCU_SAMPLE']).read())\n"
        "sys.exit(int(os.environ.get('FAKE_NCU_STATUS', '0')))\n"
    )
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_NCU_ARGS", str(tmp_path / "args.txt"))
    monkeypatch.setattr(static, "_pathfinder", lambda name: None)
    static.find.cache_clear()
    yield tmp_path
    static.find.cache_clear()


def profile(monkeypatch, sample_name: str, status: int = 0) -> dict:
    monkeypatch.setenv("FAKE_NCU_SAMPLE", str(SAMPLES / sample_name))
    monkeypatch.setenv("FAKE_NCU_STATUS", str(status))
    return profiling.profile_impl(
        ROOT / "benchmarks/cases.toml", "polynomial_f64", "warpforth", "polynomial_f64", ".ptx"
    )


def test_a_profiled_implementation_gets_a_flagged_profile_block(fake_ncu, monkeypatch):
    block = profile(monkeypatch, "polynomial_f64-warpforth.csv")
    assert block["status"] == "ok" and block["profiled"] is True and block["tool"] == "ncu"
    assert block["version"] == "Version 2025.3.1.0 (build 36398880) (public-release)"
    assert block["size"] == "timed" and block["launches"] == 1
    assert block["metrics"]["dram__bytes_read.sum"]["value"] == 536904192.0
    assert profile_errors(block) == []
    args = (fake_ncu / "args.txt").read_text().splitlines()
    driver = args[args.index("--log-file") + 2 :]
    assert driver[1:3] == ["-m", "runner.execution.profile_launch"] and driver[3].endswith(
        "job.json"
    )
    assert block["command"][0] == "ncu" and "--log-file" not in block["command"]


def test_ncu_that_fails_leaves_a_failed_block_with_its_words(fake_ncu, monkeypatch):
    block = profile(monkeypatch, "no-permission.txt", status=1)
    assert block["status"] == "failed" and block["profiled"] is True
    assert "ncu exited with status 1" in block["reason"] and "ERR_NVGPUCTRPERM" in block["reason"]
    assert profile_errors(block) == []


def test_without_ncu_the_block_says_how_to_get_it(monkeypatch):
    monkeypatch.setattr(static, "find", lambda name: None)
    block = profiling.profile_impl(ROOT / "x.toml", "c", "i", "e", ".ptx")
    assert block == {
        "status": "unavailable",
        "profiled": True,
        "reason": static.INSTALL_HINT["ncu"],
    }


def test_profile_case_profiles_every_built_implementation_until_the_budget(monkeypatch):
    calls = []

    def fake(manifest_path, case_id, name, entry, ptx_text, device, timeout_s):
        calls.append((name, entry, timeout_s))
        return {"status": "ok", "profiled": True}

    monkeypatch.setattr(profiling, "profile_impl", fake)
    doc = {"id": "axpy_f64", "implementations": {"cuda": {}, "llvm": {}}}
    built = {"cuda": "a", "llvm": "b"}
    entries = {"cuda": "axpy_f64", "llvm": "axpy_f64"}
    profiling.profile_case(Path("s.toml"), doc, entries, built, lambda text: None)
    assert [c[0] for c in calls] == ["cuda", "llvm"] and calls[0][2] == profiling.TIMEOUT_S
    calls.clear()
    profiling.profile_case(Path("s.toml"), doc, entries, built, lambda t: None, deadline=0.0)
    assert calls == [] and doc["implementations"]["llvm"]["profile"]["status"] == "unavailable"
    assert "--budget-s" in doc["implementations"]["llvm"]["profile"]["reason"]


def test_a_metric_this_ncu_lacks_is_dropped_and_the_rest_profiled(fake_ncu, monkeypatch):
    missing = profiling.STALL_METRIC.format("misc")
    monkeypatch.setenv("FAKE_NCU_REJECT", missing)
    block = profile(monkeypatch, "polynomial_f64-warpforth.csv")
    assert block["status"] == "ok" and block["dropped_metrics"] == [missing]
    metrics = block["command"][block["command"].index("--metrics") + 1].split(",")
    assert missing not in metrics and "dram__bytes_read.sum" in metrics
    assert profile_errors(block) == []


def test_the_profiled_program_is_a_module_below_the_command_line(tmp_path):
    """ncu and compute-sanitizer start runner.execution.profile_launch itself, never the CLI:
    a job it cannot run exits 2 with the file and what the job lacks."""
    job = tmp_path / "job.json"
    job.write_text('{"case": "c1"}')
    done = subprocess.run(
        [sys.executable, "-m", profiling.DRIVER_MODULE, str(job)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert f"error: {job}: the job lacks 'manifest'" in done.stderr
