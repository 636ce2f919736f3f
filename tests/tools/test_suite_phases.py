"""tools/perf/suite_phases.py: its phase table from result documents, old and new."""

from __future__ import annotations

import json

from tests.support.perf_script import load

suite_phases = load("suite_phases")


def case(phases: dict, worker_wall_s: float, calibration_s: float = 0.0, **extra) -> dict:
    return {
        "id": "axpy_f64",
        "phases_s": phases,
        "worker_wall_s": worker_wall_s,
        "implementations": {"cuda": {"timing": {"calibration_s": calibration_s}}, "x": {}},
        **extra,
    }


def test_phases_of_a_new_document_leave_the_rest_in_other():
    row = suite_phases.case_phases(
        case(
            {"worker_start_s": 1.0, "setup_s": 0.5, "timing_s": 4.0, "build_s": 0.2},
            worker_wall_s=7.0,
            calibration_s=1.5,
        )
    )
    assert row["calib"] == 1.5 and row["timing"] == 2.5  # timing without its calibration
    assert row["other"] == 7.0 - (1.0 + 0.5 + 1.5 + 2.5)
    assert row["case"] == 7.2 and row["xcheck"] is None


def test_an_old_document_falls_back_on_timing_wall_and_shows_missing_phases(tmp_path, capsys):
    old = case({"check_s": 2.0, "check_timed_size_s": 12.6}, 20.0, 1.0, timing_wall_s=5.0)
    new = case({"check_s": 2.0, "check_timed_size_s": 0.4, "timing_s": 5.0}, 9.0, 1.0)
    docs = []
    for name, c in (("before", old), ("after", new)):
        doc = {
            "schema_version": "1.8.0",
            "options": {"mode": "hot"},
            "started_utc": "2026-01-01T00:00:00Z",
            "finished_utc": "2026-01-01T00:00:30Z",
            "cases": [c],
        }
        (tmp_path / f"{name}.json").write_text(json.dumps(doc))
        docs.append(tmp_path / f"{name}.json")
    suite_phases.print_tables(docs)
    out = capsys.readouterr().out
    assert "| axpy_f64 | - | - | - | 2.00 | - | 12.60 |" in out
    assert "| xcheck | 12.60 | 0.40 |" in out and "| run | 30.00 | 30.00 |" in out


def test_the_session_30_table_is_the_built_in_before(tmp_path, capsys):
    """--before session30: RESULTS.md's hot table (issue 37's before) first, its totals as
    recorded there, then the new document's, side by side."""
    after = tmp_path / "after.json"
    after.write_text(
        json.dumps(
            {
                "options": {"mode": "hot"},
                "schema_version": "1.9.0",
                "cases": [case({"timing_s": 4.0, "integrity_s": 0.4}, worker_wall_s=5.0)],
                "started_utc": "2026-12-03T10:00:00Z",
                "finished_utc": "2026-12-03T10:00:55Z",
            }
        )
    )
    suite_phases.print_tables([after], before="session30")
    out = capsys.readouterr().out
    assert out.index("session30: hot mode") < out.index("after: hot mode")
    assert "| **total** |" in out and "65.06" in out and "84.78" in out
    assert "| run | 108.00 | 55.00 |" in out
