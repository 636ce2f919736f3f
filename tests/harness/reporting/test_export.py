"""Exports (github-action-benchmark, markdown, nvbench-markdown, csv), the summary, the workflow."""

from __future__ import annotations

import csv
import io
import re
import shutil
import subprocess
import sys

import numpy as np
import orjson
import pytest
from click.testing import CliRunner

from harness.cli import COMMANDS
from harness.commands.compare import EXPORT_FORMATS, export, summary
from harness.reporting.export import csv as csv_export
from harness.reporting.export import github_action_benchmark, markdown, nvbench_markdown
from harness.reporting.summary import geomean_gaps
from harness.reporting.summary import markdown as summary_markdown
from harness.reporting.table import format_time
from tests.conftest import ROOT
from tests.support.harness_docs import fixture, make_document, samples

WORKFLOW = ROOT / ".github" / "workflows" / "benchmark.yml"


@pytest.fixture(scope="module")
def doc() -> dict:
    """Three candidates' worth of cases: stable, unstable, failed, unchecked, several candidates."""
    return make_document(
        {
            "axpy": {"cuda": samples(1e-3, seed=1), "ptx": samples(1.1e-3, seed=2)},
            "scale": {"cuda": samples(2e-6, seed=3), "ptx": samples(2.5e-6, seed=4)},
            "gemm": {
                "cuda": samples(4e-3, seed=5),
                "ptx": samples(5e-3, seed=6),
                "forth": samples(6e-3, seed=7),
            },
            "noisy": {"cuda": samples(1e-3, seed=8), "ptx": samples(3e-3, seed=9)},
            "broken": {"cuda": samples(1e-3), "ptx": samples(1e-3)},
            "unchecked": {"cuda": samples(1e-3, seed=10), "ptx": samples(1e-3, seed=11)},
        },
        unstable=[("noisy", "ptx")],
        failed={"broken": "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access\nTraceback ..."},
        not_checked=[("unchecked", "ptx")],
    )


def impl(document: dict, case_id: str, name: str) -> dict:
    case = next(c for c in document["cases"] if c["id"] == case_id)
    return case["implementations"][name]


# --- github-action-benchmark ---------------------------------------------------------------


def test_github_action_benchmark_entries_shape(doc):
    entries = orjson.loads(github_action_benchmark.render(doc))
    assert entries == github_action_benchmark.entries(doc)
    for entry in entries:
        assert set(entry) == {"name", "unit", "value", "range", "extra"}
        assert isinstance(entry["value"], float) and entry["value"] > 0
        assert isinstance(entry["range"], str) and isinstance(entry["extra"], str)
    names = [e["name"] for e in entries]
    assert len(names) == len(set(names))
    # unstable results (noisy/ptx and its gap), failed cases and missing gaps have no entry
    assert names == [
        "axpy/v1/cuda",
        "axpy/v1/ptx",
        "axpy/v1/gap/ptx",
        "scale/v1/cuda",
        "scale/v1/ptx",
        "scale/v1/gap/ptx",
        "gemm/v1/cuda",
        "gemm/v1/ptx",
        "gemm/v1/gap/ptx",
        "gemm/v1/forth",
        "gemm/v1/gap/forth",
        "noisy/v1/cuda",
        "unchecked/v1/cuda",
        "unchecked/v1/ptx",
        "suite/geomean_gap/forth",
        "suite/geomean_gap/ptx",
    ]


def test_github_action_benchmark_times_are_medians_in_us_with_mad_range(doc):
    entries = {e["name"]: e for e in github_action_benchmark.entries(doc)}
    stats = impl(doc, "scale", "ptx")["timing"]["stats"]
    entry = entries["scale/v1/ptx"]
    assert entry["unit"] == "us"
    assert entry["value"] == pytest.approx(stats["median_s"] * 1e6)
    assert entry["value"] == pytest.approx(2.5, rel=0.01)
    assert re.fullmatch(r"± [0-9.e-]+", entry["range"])
    assert float(entry["range"][2:]) == pytest.approx(stats["mad_s"] * 1e6, rel=1e-3)
    source = impl(doc, "scale", "ptx")["build"]["source_sha256"]
    baseline_source = impl(doc, "scale", "cuda")["build"]["source_sha256"]
    assert f"source_sha256: {source}" in entry["extra"]
    assert f"baseline_source_sha256: {baseline_source}" in entry["extra"]
    assert "gpu: NVIDIA H200" in entry["extra"] and "mode: hot" in entry["extra"]
    assert "driver: 580.159.04" in entry["extra"]


def test_github_action_benchmark_gaps_and_geomean(doc):
    entries = {e["name"]: e for e in github_action_benchmark.entries(doc)}
    gap = impl(doc, "axpy", "ptx")["gap"]
    entry = entries["axpy/v1/gap/ptx"]
    assert entry["unit"] == "x cuda" and entry["value"] == gap["ratio_of_medians"]
    assert entry["range"] == f"{gap['ci_low']:.4f} to {gap['ci_high']:.4f} (95% CI)"
    # geomean over the fixed set: axpy, scale, gemm and noisy (unstable, in it) for ptx; broken
    # (failed) and unchecked (no gap) are the missing ones: over 4 of 6 cases
    cases = ("axpy", "scale", "gemm", "noisy")
    ptx_gaps = [impl(doc, c, "ptx")["gap"]["ratio_of_medians"] for c in cases]
    expected = float(np.exp(np.mean(np.log(ptx_gaps))))
    geomean = entries["suite/geomean_gap/ptx"]
    assert geomean["value"] == pytest.approx(expected, rel=1e-12)
    assert geomean["unit"] == "x cuda"
    found = geomean_gaps(doc)["ptx"]
    assert found["missing"] == ["broken", "unchecked"] and found["unstable"] == ["noisy"]
    assert found["ci_low"] < expected < found["ci_high"]
    assert geomean["range"] == f"{found['ci_low']:.4f} to {found['ci_high']:.4f} over 4 of 6 cases"
    assert entries["suite/geomean_gap/forth"]["value"] == pytest.approx(1.5, rel=0.01)
    # the runner's own summary agrees with the harness's recomputation
    assert geomean_gaps(doc) == {
        name: {**g, "value": pytest.approx(g["value"])}
        for name, g in doc["summary"]["geomean_gap"].items()
    }


def test_github_action_benchmark_names_a_single_candidate_as_any_other():
    single = make_document(
        {"axpy": {"cuda": samples(1e-3, seed=1), "ptx": samples(1.2e-3, seed=2)}}
    )
    names = [e["name"] for e in github_action_benchmark.entries(single)]
    assert names == ["axpy/v1/cuda", "axpy/v1/ptx", "axpy/v1/gap/ptx", "suite/geomean_gap/ptx"]


def test_github_action_benchmark_names_stay_when_another_candidate_becomes_unstable():
    """A name is a function of (case, version, implementation) alone: a second candidate that
    is unstable (left out) or absent renames none of the first one's entries."""
    rows = {"cuda": samples(1e-3, seed=1), "ptx": samples(1.2e-3, seed=2)}
    both = make_document({"axpy": {**rows, "forth": samples(1.5e-3, seed=3)}})
    shaky = make_document({"axpy": {**rows, "forth": samples(1.5e-3, seed=3, noise=0.2)}})
    alone = make_document({"axpy": rows})
    named = [{e["name"] for e in github_action_benchmark.entries(d)} for d in (both, shaky, alone)]
    ptx = {"axpy/v1/ptx", "axpy/v1/gap/ptx", "suite/geomean_gap/ptx"}
    assert ptx <= named[0] and ptx <= named[1] and ptx <= named[2]
    # an unstable case stays in its candidate's suite geomean (the fixed set), marked
    assert "suite/geomean_gap/forth" in named[0] and "suite/geomean_gap/forth" in named[1]
    assert not any("forth" in n for n in named[2])


def test_github_action_benchmark_of_the_real_fixture():
    entries = {e["name"]: e for e in github_action_benchmark.entries(fixture())}
    assert set(entries) == {
        "axpy_f64/v1/cuda",
        "axpy_f64/v1/handptx",
        "axpy_f64/v1/gap/handptx",
        "suite/geomean_gap/handptx",
    }
    assert entries["axpy_f64/v1/cuda"]["value"] == pytest.approx(780.4360091686249)
    assert entries["axpy_f64/v1/gap/handptx"]["unit"] == "x cuda"
    assert entries["suite/geomean_gap/handptx"]["value"] == pytest.approx(1.0013851101498994)


# --- table formats -------------------------------------------------------------------------


def test_markdown_table_has_one_row_per_case_and_implementation(doc):
    text = markdown.render(doc).decode()
    lines = text.splitlines()
    assert [c.strip() for c in lines[0].strip("|").split("|")] == [
        c.title for c in markdown.COLUMNS
    ]
    assert [c.title for c in markdown.COLUMNS][:6] == [
        "Case",
        "Implementation",
        "Role",
        "Status",
        "Samples",
        "Median",
    ]
    assert re.fullmatch(r"\|[-:|]+\|", lines[1])
    assert len(lines) == 2 + sum(len(c["implementations"]) for c in doc["cases"])
    axpy_ptx = next(line for line in lines if line.startswith("| axpy v1 ") and "| ptx " in line)
    gap = impl(doc, "axpy", "ptx")["gap"]
    assert f"{gap['ratio_of_medians']:.4f}x" in axpy_ptx
    assert format_time(impl(doc, "axpy", "ptx")["timing"]["stats"]["median_s"]) in axpy_ptx
    broken = [line for line in lines if line.startswith("| broken v1 ")]
    assert len(broken) == 2
    assert all(
        "timing: CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access |" in b for b in broken
    )
    assert "Traceback" not in text
    assert "unstable" in next(
        line for line in lines if line.startswith("| noisy v1 ") and "| ptx " in line
    )


def test_markdown_escapes_pipes_in_case_ids():
    odd = make_document({"a|b; c": {"cuda": samples(1e-3), "ptx": samples(1e-3, seed=1)}})
    row = markdown.render(odd).decode().splitlines()[2]
    assert row.startswith("| a\\|b; c v1 ")
    assert len(re.split(r"(?<!\\)\|", row)) == len(markdown.COLUMNS) + 2


def test_csv_rows_and_numbers(doc):
    rows = list(csv.DictReader(io.StringIO(csv_export.render(doc).decode())))
    assert list(rows[0]) == list(csv_export.COLUMNS)
    assert len(rows) == sum(len(c["implementations"]) for c in doc["cases"])
    row = next(r for r in rows if r["case"] == "gemm" and r["implementation"] == "forth")
    stats = impl(doc, "gemm", "forth")["timing"]["stats"]
    assert float(row["median_s"]) == stats["median_s"]  # full precision
    assert float(row["mad_s"]) == stats["mad_s"] and int(row["samples"]) == 30
    assert float(row["gap"]) == impl(doc, "gemm", "forth")["gap"]["ratio_of_medians"]
    assert (row["role"], row["status"], row["stable"], row["gap_stable"]) == (
        "candidate",
        "ok",
        "true",
        "true",
    )
    baseline = next(r for r in rows if r["case"] == "gemm" and r["implementation"] == "cuda")
    assert baseline["gap"] == "" and baseline["role"] == "baseline"
    broken = next(r for r in rows if r["case"] == "broken")
    assert broken["status"] == "failed" and broken["median_s"] == ""
    assert broken["error"] == "timing: CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access"


def test_csv_quotes_awkward_case_ids():
    odd = make_document({'a,b "c"': {"cuda": samples(1e-3), "ptx": samples(1e-3, seed=1)}})
    rows = list(csv.DictReader(io.StringIO(csv_export.render(odd).decode())))
    assert [r["case"] for r in rows] == ['a,b "c"', 'a,b "c"']


def test_nvbench_markdown_sections_and_columns(doc):
    text = nvbench_markdown.render(doc).decode()
    assert text.startswith("# Benchmark Results\n\n## axpy v1\n\n### [0] NVIDIA H200\n\n")
    header = next(line for line in text.splitlines() if line.startswith("| Impl "))
    assert [c.strip() for c in header.strip("|").split("|")] == [
        "Impl",
        "Role",
        "Samples",
        "Median / launch",
        "MAD / median",
        "Bytes/s at median",
        "Of copy BW",
        "Gap",
    ]
    # nvbench's names stand for other statistics (a mean, a relative stdev, a theoretical peak)
    assert not re.search(r"GPU Time|Noise|GlobalMem BW|BWUtil", text)
    legend = text.split("Columns (not nvbench's statistics, hence not its names):\n")[1]
    for column in header.strip("|").split("|")[2:]:
        assert f"- {column.strip()}: " in legend
    median_s = impl(doc, "scale", "ptx")["timing"]["stats"]["median_s"]
    scale_ptx = re.search(r"^\| ptx .*$", text.split("## scale v1")[1], re.M).group(0)
    assert "30x" in scale_ptx and f"{median_s * 1e6:.3f} us" in scale_ptx
    assert "- cuda: failed: timing: CUDA_ERROR_ILLEGAL_ADDRESS" in text.split("## broken v1")[1]


def test_nvbench_markdown_shows_bandwidth_where_the_case_has_it():
    text = nvbench_markdown.render(fixture()).decode()
    cuda = next(line for line in text.splitlines() if line.startswith("| cuda "))
    assert "780.436 us" in cuda and "4.127 TB/s" in cuda and "98.75%" in cuda


# --- summary -------------------------------------------------------------------------------


def test_summary_contents(doc):
    text = summary_markdown(doc)
    assert text.startswith("## kernelgap: kernelgap-core v1 on NVIDIA H200\n")
    assert "6 cases: 5 ok, 1 failed" in text
    geomean = text.split("### Geometric-mean gap (the suite's fixed set of cases)")[1]
    geomean = geomean.split("###")[0]
    ptx = geomean_gaps(doc)["ptx"]
    interval = f"{ptx['ci_low']:.4f} to {ptx['ci_high']:.4f}"
    row = (
        rf"\| ptx +\| +{ptx['value']:.4f}x \| +{interval} \| +4 of 6 \| noisy +\| broken, unchecked"
    )
    assert re.search(row, geomean), geomean
    assert re.search(r"\| forth +\| +1\.50\d\dx \| .* \| +1 of 1 \| - +\| - ", geomean)
    gaps = text.split("### Gaps per case")[1].split("###")[0]
    gemm_gap = impl(doc, "gemm", "forth")["gap"]
    gemm_line = next(line for line in gaps.splitlines() if "forth vs cuda" in line)
    assert f"{gemm_gap['ci_low']:.4f} – {gemm_gap['ci_high']:.4f}" in gemm_line
    assert "stable" in gemm_line
    assert "**unstable**" in next(
        line for line in gaps.splitlines() if line.startswith("| noisy v1")
    )
    unstable = text.split("### Unstable")[1].split("###")[0]
    assert "- `noisy` / `ptx`: noise (MAD / median)" in unstable
    problems = text.split("### Failed, skipped or without a gap")[1].split("###")[0]
    assert (
        "- `broken` v1 failed: timing: CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access\n"
        in problems
    )
    assert "Traceback" not in text
    assert "- `unchecked` / `ptx` has no gap: not checked" in problems
    signature = text.split("### Hardware and toolchain")[1]
    for expected in (
        "NVIDIA H200 (sm_90, 132 SMs",
        "| Driver ",
        "580.159.04",
        "| CUDA (driver API) ",
        "13.0",
        "Build cuda_13.0.r13.0/compiler.36424714_0",
        "Toolchain ptx",
        "prebuilt",
    ):
        assert expected in signature, expected


def test_the_summary_marks_cold_gaps_read_by_events_and_not_cuptis():
    """Cold samples by CUDA events are an explicit choice whose overhead compresses the gap
    toward 1: the gap table says so on their rows, never on CUPTI's."""
    cold = make_document(
        {"axpy": {"cuda": samples(1e-6, seed=1), "ptx": samples(1.2e-6, seed=2)}}, mode="cold"
    )

    def gap_line(document):
        gaps = summary_markdown(document).split("### Gaps per case")[1].split("###")[0]
        return next(line for line in gaps.splitlines() if "ptx vs cuda" in line)

    assert gap_line(cold).rstrip(" |").endswith("stable, cold by events")
    for implementation in cold["cases"][0]["implementations"].values():
        implementation["timing"]["timer"] = "cupti"
    assert "by events" not in gap_line(cold)


def test_summary_of_a_run_without_stable_gaps_and_incomplete():
    partial = make_document(
        {"a": {"cuda": samples(1e-3), "ptx": samples(1e-3, seed=1)}}, unstable=["a"]
    )
    partial["complete"] = False
    text = summary_markdown(partial)
    # the unstable case stays in the geomean, marked
    assert re.search(r"\| ptx +\| .* \| +1 of 1 \| a ", text), text
    assert "**Incomplete run: not every case finished.**" in text


# --- command line --------------------------------------------------------------------------


@pytest.fixture
def doc_file(tmp_path, doc):
    path = tmp_path / "result.json"
    path.write_bytes(orjson.dumps(doc))
    return path


@pytest.mark.parametrize("name", sorted(EXPORT_FORMATS))
def test_cli_export_writes_the_format_to_stdout(doc_file, doc, name):
    done = CliRunner().invoke(export, ["--format", name, str(doc_file)])
    assert done.exit_code == 0, done.output
    module = {
        "github-action-benchmark": github_action_benchmark,
        "markdown": markdown,
        "nvbench-markdown": nvbench_markdown,
        "csv": csv_export,
    }[name]
    assert done.stdout_bytes == module.render(doc)


def test_cli_end_to_end_summary_and_export(doc_file):
    def harness(*args):
        return subprocess.run(
            [sys.executable, "-m", "harness", *args], cwd=ROOT, capture_output=True, timeout=120
        )

    done = harness("summary", str(doc_file))
    assert done.returncode == 0 and done.stdout.startswith(b"## kernelgap: kernelgap-core v1")
    done = harness("export", "--format", "github-action-benchmark", str(doc_file))
    assert done.returncode == 0
    assert any(e["name"] == "suite/geomean_gap/ptx" for e in orjson.loads(done.stdout))
    done = harness("export", "--format", "xml", str(doc_file))
    assert done.returncode == 2 and b"'xml' is not one of" in done.stderr


def test_cli_summary_rejects_an_invalid_document(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_bytes(orjson.dumps({**fixture(), "kind": "something else"}))
    done = CliRunner().invoke(summary, [str(bad)])
    assert done.exit_code == 2
    assert str(bad) in done.stderr and "kind" in done.stderr and done.stdout == ""


# --- the example workflow ------------------------------------------------------------------


def test_workflow_matches_the_github_workflow_schema():
    tool = shutil.which("check-jsonschema") or shutil.which(
        "check-jsonschema", path=str(ROOT / ".venv" / "bin")
    )
    if tool is None:
        pytest.skip(
            "check-jsonschema is not installed (it is in the test extra: pip install -e '.[test]')"
        )
    done = subprocess.run(
        [tool, "--builtin-schema", "vendor.github-workflows", str(WORKFLOW)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_workflow_passes_actionlint_where_installed():
    tool = shutil.which("actionlint")
    if tool is None:
        pytest.skip("actionlint is not installed (not installable here; the schema test covers it)")
    done = subprocess.run([tool, str(WORKFLOW)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def _load_workflow() -> dict:
    try:
        from ruamel.yaml import YAML
    except ImportError:
        yaml = pytest.importorskip("yaml", reason="neither ruamel.yaml nor PyYAML is installed")
        return yaml.safe_load(WORKFLOW.read_text())
    return YAML(typ="safe").load(WORKFLOW.read_text())


def test_workflow_rents_once_and_writes_history_only_in_the_trusted_job():
    """The layout (tests/harness/test_ci_workflow.py checks permissions and gating)."""
    workflow = _load_workflow()
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 readers turn `on` into True
    assert triggers["push"]["branches"] == ["main"] and "pull_request" in triggers
    assert "pull_request_target" not in triggers  # would hand secrets to untrusted code
    assert workflow["permissions"] == {"contents": "read"}
    jobs = workflow["jobs"]
    assert set(jobs) == {"benchmark", "publish"}
    steps = jobs["benchmark"]["steps"]
    scripts = [s.get("run", "") for s in steps]
    every_script = [s.get("run", "") for job in jobs.values() for s in job["steps"]]
    rentals = [s for s in every_script if "harness run" in s]
    assert len(rentals) == 1 and '--target vast:"$GPU"' in rentals[0]
    assert "--bundle bundle" in rentals[0] and "-- --budget-s" in rentals[0]
    assert "${{ secrets.VAST_API_KEY }}" in str(
        next(s for s in steps if "harness run" in s.get("run", ""))
    )
    assert any('runner build "$SUITE" --out bundle/' in s for s in scripts)

    upload = next(s for s in steps if s.get("uses", "").startswith("actions/upload-artifact"))
    assert upload["if"] == "always()"
    assert any("harness summary" in s and '>> "$GITHUB_STEP_SUMMARY"' in s for s in scripts)
    # Pull requests: base and head on the same rental (harness pr), never another host's result
    paired = next(s for s in steps if "harness pr" in s.get("run", ""))
    assert "github.event_name == 'pull_request'" in paired["if"]
    assert not any("harness compare" in s for s in scripts)

    writes = [
        s
        for s in every_script
        if "harness ingest" in s or "harness dashboard" in s or "git push" in s
    ]
    assert writes and not [s for s in scripts if s in writes]  # none in the benchmark job
    ingest = next(s for s in every_script if "harness ingest" in s)
    assert "--trusted" in ingest
    assert sum("--trusted" in s for s in every_script) == 1


def test_workflow_uses_only_commands_and_formats_that_exist():
    text = WORKFLOW.read_text()
    known = {name for names in COMMANDS.values() for name in names}
    used = set(re.findall(r"kernelgap-harness (\w+)", text))
    assert used and used <= known, used - known
    for name in re.findall(r"harness export --format (\S+)", text):
        assert name in EXPORT_FORMATS
