"""History store, series keys, regression rules and the ingest/history/regressions commands.

Everything runs against real SQLite files in a temporary directory; documents are built from
the real H200 fixture by tests/support/harness_docs.py.
"""

from __future__ import annotations

import hashlib
import sqlite3

import orjson
import pytest
from click.testing import CliRunner

from harness.analysis.regressions import (
    Policy,
    change,
    current_series,
    review,
    review_series,
    threshold,
)
from harness.cli import main
from harness.errors import GpuMismatchError, StoreError
from harness.history.series import KEY_FIELDS, series_id, series_key
from harness.history.store import STORE_SCHEMA_VERSION, Store, run_id
from protocol.validation import validate
from tests.support.harness_docs import make_document, samples, suite_manifest

BASE_S, CAND_S = 1.0e-3, 1.2e-3


def doc(k: int = 0, *, cand_factor: float = 1.0, base_factor: float = 1.0, **kwargs) -> dict:
    """Run k of a one-case history: baseline 'cuda' at 1 ms, candidate 'forth' at 1.2 ms."""
    cases = {
        "axpy": {
            "cuda": samples(BASE_S * base_factor, seed=k),
            "forth": samples(CAND_S * cand_factor, seed=1000 + k),
        }
    }
    kwargs.setdefault("commit", f"{k:040x}")
    kwargs.setdefault("started_utc", f"2026-12-01T10:{k // 60:02d}:{k % 60:02d}Z")
    return make_document(cases, **kwargs)


def file_sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def ingest_all(path, documents) -> None:
    with Store(path) as store:
        for d in documents:
            assert store.ingest(d, trusted=True).stored


# -- the synthetic documents and series keys ---------------------------------------------------
def test_builder_documents_validate_and_carry_the_marks():
    d = make_document(
        {"a": {"cuda": samples(1e-3), "x": samples(1.1e-3, seed=1)}, "b": {"cuda": samples(2e-3)}},
        failed={"b": "launch timed out"},
        unstable={("a", "x")},
        suite_gpu="NVIDIA H200",
    )
    validate(d, "result", "synthetic")
    a, b = d["cases"]
    assert a["implementations"]["x"]["timing"]["stats"]["stable"] is False
    assert a["implementations"]["x"]["gap"]["stable"] is False
    assert a["implementations"]["x"]["gap"]["ratio_of_medians"] == pytest.approx(1.1, rel=0.01)
    assert b["status"] == "failed" and "timing" not in b["implementations"]["cuda"]
    assert d["summary"]["failed"] == 1


def test_series_key_fields_and_a_stable_id():
    d = doc()
    case = d["cases"][0]
    key = series_key(d, case, "forth")
    assert tuple(key) == KEY_FIELDS
    assert key["gpu"] == "NVIDIA H200" and key["mode"] == "hot" and key["impl"] == "forth"
    assert key["source_sha256"] == case["implementations"]["forth"]["build"]["source_sha256"]
    assert (
        key["baseline_source_sha256"] == case["implementations"]["cuda"]["build"]["source_sha256"]
    )
    assert series_id(dict(reversed(list(key.items())))) == series_id(key)
    assert len(series_id(key)) == 16
    for field in KEY_FIELDS:  # every field of the key separates series
        assert series_id({**key, field: "other"}) != series_id(key), field
    with pytest.raises(KeyError, match="no implementation 'nope'"):
        series_key(d, case, "nope")


# -- ingest ------------------------------------------------------------------------------------
def test_ingest_is_idempotent_and_keeps_the_raw_document(tmp_path):
    db, d = tmp_path / "h.sqlite", doc()
    with Store(db) as store:
        first = store.ingest(d, trusted=True)
        again = store.ingest(orjson.loads(orjson.dumps(d, option=orjson.OPT_INDENT_2)), True)
        assert first.stored and not first.already_stored
        assert again.already_stored and not again.stored and again.run_id == first.run_id
        assert first.run_id == run_id(d)
        assert [r["run_id"] for r in store.runs()] == [first.run_id]
        assert {s["points"] for s in store.list_series()} == {1}
        assert store.raw_document(first.run_id) == d
        samples_back = store.points(first.points[1].series_id, with_samples=True)[0]["samples_s"]
        assert samples_back == d["cases"][0]["implementations"]["forth"]["timing"]["samples_s"]
    with sqlite3.connect(db) as raw:
        assert raw.execute("SELECT count(*) FROM points").fetchone()[0] == 2
        # WAL while writing; at rest a rollback journal, so readers leave no -wal/-shm files
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        assert raw.execute("PRAGMA user_version").fetchone()[0] == STORE_SCHEMA_VERSION


def test_a_changed_source_hash_starts_a_new_series_and_leaves_the_old_one(tmp_path):
    db = tmp_path / "h.sqlite"
    ingest_all(db, [doc(k) for k in range(3)])
    with Store(db) as store:
        (old,) = [s for s in store.list_series("axpy") if s["impl"] == "forth"]
        old_points = store.points(old["series_id"])
        report = store.ingest(doc(3, source_sha={"forth": "ab" * 32}), trusted=True)
        assert [p.key["impl"] for p in report.new_series] == ["forth"]
        forth = [s for s in store.list_series("axpy") if s["impl"] == "forth"]
        assert len(forth) == 2
        new = next(s for s in forth if s["series_id"] != old["series_id"])
        assert new["source_sha256"] == "ab" * 32 and new["points"] == 1
        assert store.points(old["series_id"]) == old_points  # untouched: 3 points, same values
        assert len(old_points) == 3
        # The baseline's series goes on: its key did not change.
        (cuda,) = [s for s in store.list_series("axpy") if s["impl"] == "cuda"]
        assert cuda["points"] == 4
        # A changed baseline source moves every implementation of the case to new series.
        report = store.ingest(doc(4, source_sha={"cuda": "cd" * 32}), trusted=True)
        assert sorted(p.key["impl"] for p in report.new_series) == ["cuda", "forth"]


def test_two_writers_store_a_run_once(tmp_path):
    db, d = tmp_path / "h.sqlite", doc()
    with Store(db) as first, Store(db) as second:  # both opened before the file existed
        assert first.ingest(d, trusted=True).stored
        late = second.ingest(d, trusted=True)
        assert late.already_stored and not late.stored
        assert second.ingest(doc(1), trusted=True).stored
        assert len(first.runs()) == 2


def test_a_run_on_another_gpu_than_the_suite_pins_is_refused(tmp_path):
    db = tmp_path / "h.sqlite"
    d = doc(gpu="NVIDIA A100-SXM4-80GB", suite_gpu="NVIDIA H200")
    for trusted in (True, False):
        with Store(db) as store, pytest.raises(GpuMismatchError) as refused:
            store.ingest(d, trusted=trusted)
        assert "NVIDIA A100-SXM4-80GB" in str(refused.value)
        assert "NVIDIA H200" in str(refused.value)
    assert not db.exists()
    with Store(db) as store:  # the pinned model itself is accepted
        assert store.ingest(doc(suite_gpu="NVIDIA H200"), trusted=True).stored


def test_untrusted_ingest_writes_nothing(tmp_path):
    db = tmp_path / "h.sqlite"
    with Store(db) as store:
        report = store.ingest(doc(0), trusted=False)
    assert not db.exists() and not report.stored and len(report.points) == 2
    assert "would store" in report.text() and "nothing written" in report.text()
    ingest_all(db, [doc(0)])
    before = file_sha(db)
    with Store(db) as store:
        report = store.ingest(doc(1), trusted=False)
        assert not report.stored and not report.new_series  # both series exist already
        assert len(store.runs()) == 1
    with Store(db, readonly=True) as store:
        assert not store.ingest(doc(2), trusted=False).stored
        with pytest.raises(StoreError, match="read-only"):
            store.ingest(doc(2), trusted=True)
    assert file_sha(db) == before


def test_failed_cases_are_stored_as_points_with_their_error(tmp_path):
    db = tmp_path / "h.sqlite"
    ingest_all(db, [doc(0), doc(1, failed={"axpy": "kernel timed out after 60 s"})])
    with Store(db) as store:
        for s in store.list_series():
            newest = store.points(s["series_id"])[-1]
            assert newest["case_status"] == "failed" and newest["error_phase"] == "timing"
            assert newest["error_message"] == "kernel timed out after 60 s"
            assert newest["median_s"] is None and newest["gap"] is None


def test_an_incomplete_document_is_not_history(tmp_path):
    d = doc()
    d.update(complete=False, finished_utc=None)
    with Store(tmp_path / "h.sqlite") as store, pytest.raises(StoreError, match="incomplete"):
        store.ingest(d, trusted=True)


# -- the database file -------------------------------------------------------------------------
def test_a_corrupt_or_foreign_database_is_an_error(tmp_path):
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"this is not a database\n" * 200)
    for readonly in (True, False):
        with pytest.raises(StoreError, match="not a readable SQLite database") as err:
            Store(garbage, readonly=readonly)
        assert str(garbage) in str(err.value)
    foreign = tmp_path / "foreign.sqlite"
    with sqlite3.connect(foreign) as raw:
        raw.execute("CREATE TABLE notes (text)")
    with pytest.raises(StoreError, match=r"not a kernelgap history database.*notes"):
        Store(foreign)
    # Damaged pages inside a real history: the read fails loudly, naming the file.
    db = tmp_path / "h.sqlite"
    ingest_all(db, [doc(k) for k in range(40)])
    data = bytearray(db.read_bytes())
    page = 4096
    data[2 * page : len(data) - page] = b"\xa5" * (len(data) - 3 * page)
    db.write_bytes(bytes(data))
    with pytest.raises(StoreError, match=str(db)), Store(db, readonly=True) as store:
        for s in store.list_series():
            store.points(s["series_id"])


def test_a_newer_database_schema_is_refused(tmp_path):
    db = tmp_path / "h.sqlite"
    ingest_all(db, [doc()])
    with sqlite3.connect(db) as raw:
        raw.execute(f"PRAGMA user_version = {STORE_SCHEMA_VERSION + 1}")
    for readonly in (True, False):
        with pytest.raises(StoreError, match="newer than this kernelgap understands"):
            Store(db, readonly=readonly)
    with pytest.raises(StoreError, match="no history database here"):
        Store(tmp_path / "missing.sqlite", readonly=True)


# -- the regression rule -----------------------------------------------------------------------
def point(k: int, median_s: float, gap: float | None = None, stable: bool = True, **extra):
    return {
        "run_id": f"run{k}",
        "commit_sha": f"{k:040x}",
        "started_utc": f"2026-12-01T10:00:{k:02d}.000000Z",
        "median_s": median_s,
        "stable": stable,
        "gap": gap,
        "gap_stable": stable if gap is not None else None,
        "check_status": "passed",
        "error_message": None,
        **extra,
    }


CANDIDATE = {
    "series_id": "c" * 16,
    "label": "axpy / forth",
    "case_id": "axpy",
    "impl": "forth",
    "role": "candidate",
}
BASELINE = {**CANDIDATE, "series_id": "b" * 16, "impl": "cuda", "role": "baseline"}
JITTER = [1.0, 1.004, 0.997, 1.002, 0.999, 1.003, 0.998, 1.001, 1.0, 0.996]


def candidate_points(last_factor: float, *, stable: bool = True, n: int = 10):
    history = [point(k, CAND_S * JITTER[k], 1.2 * JITTER[k]) for k in range(n)]
    return [*history, point(n, CAND_S * last_factor, 1.2 * last_factor, stable=stable)]


def test_a_ten_percent_step_alerts_on_gap_and_time():
    findings = review_series(CANDIDATE, candidate_points(1.10))
    assert [(f.metric, f.status, f.direction) for f in findings] == [
        ("gap", "alert", "slower"),
        ("time", "alert", "slower"),
    ]
    gap = findings[0]
    # the newest alone: at_once (20) standard errors of a 0.3% history, under 10%
    assert gap.relative == pytest.approx(0.10, abs=0.005) and 0.01 < gap.threshold < 0.08
    assert gap.reference == pytest.approx(1.2, rel=0.003) and gap.history == 10
    faster = review_series(CANDIDATE, candidate_points(0.88))
    assert {(f.status, f.direction) for f in faster} == {("alert", "faster")}


def test_no_step_no_alert():
    findings = review_series(CANDIDATE, candidate_points(1.003))
    assert {f.status for f in findings} == {"ok"}
    assert not any(f.alert for f in findings)


def test_an_unstable_newest_point_is_shown_but_never_alerts():
    findings = review_series(CANDIDATE, candidate_points(1.30, stable=False))
    assert {f.status for f in findings} == {"unstable"}
    assert not any(f.alert for f in findings)
    assert findings[0].relative == pytest.approx(0.30, abs=0.01)  # still computed and shown


def test_unstable_points_are_left_out_of_the_history():
    points = candidate_points(1.50)
    points[3:8] = [
        {**p, "stable": False, "gap_stable": False, "median_s": 9.9} for p in points[3:8]
    ]
    _, time = review_series(CANDIDATE, points)
    assert time.history == 5 and time.reference == pytest.approx(CAND_S, rel=0.01)
    assert time.status == "alert"


def test_the_threshold_grows_with_the_history_spread():
    noisy = [1.0, 1.04, 0.96, 1.03, 0.97, 1.04, 0.96, 1.0, 1.03, 0.97]
    found = change(noisy, 1.08)
    assert found.spread == pytest.approx(1.4826 * 0.03)  # sigma-scaled MAD / median
    # the newest alone: at least at_once standard errors, far beyond the old 3 x raw MAD
    assert threshold(found, Policy()) > Policy().at_once * found.spread
    assert abs(found.relative) < threshold(found, Policy())
    assert threshold(change([1.0] * 5, 1.0), Policy()) == 0.01  # MAD 0: the floor
    calm = change([1.0, 1.002, 0.998] * 10, 1.08)
    assert threshold(calm, Policy()) < threshold(found, Policy())
    with pytest.raises(ValueError, match="history is empty"):
        change([], 1.0)
    with pytest.raises(ValueError, match=r"Policy\.window must be an int >= 1"):
        Policy(window=0)
    with pytest.raises(ValueError, match=r"Policy\.min_change"):
        Policy(min_change=float("nan"))


def test_a_short_history_and_a_failed_newest_point_do_not_alert():
    short = review_series(CANDIDATE, candidate_points(1.5, n=2))
    assert {f.status for f in short} == {"short"}
    failed = candidate_points(1.0)
    failed[-1] = {**failed[-1], "median_s": None, "gap": None, "error_message": "boom"}
    assert {(f.status, f.note) for f in review_series(CANDIDATE, failed)} == {("failed", "boom")}


def test_a_baseline_only_shift_points_at_the_machine():
    base = [point(k, BASE_S * JITTER[k]) for k in range(10)] + [point(10, BASE_S * 1.10)]
    cand = [point(k, CAND_S * JITTER[k], 1.2 * JITTER[k]) for k in range(10)]
    cand.append(point(10, CAND_S * 1.10, 1.2))  # both slower by 10%, the gap unchanged
    series = [{**BASELINE, "gpu": "g", "mode": "hot", "last_utc": "x"}]
    series.append({**CANDIDATE, "gpu": "g", "mode": "hot", "last_utc": "x"})
    findings = review(series, {BASELINE["series_id"]: base, CANDIDATE["series_id"]: cand})
    by = {(f.impl, f.metric): f for f in findings}
    assert by[("cuda", "time")].alert
    assert "machine" in by[("cuda", "time")].note and "not at the code" in by[("cuda", "time")].note
    assert by[("forth", "gap")].status == "ok"
    assert by[("forth", "time")].alert and "baseline moved" in by[("forth", "time")].note


def test_superseded_series_are_not_current():
    rows = [
        {
            "series_id": "old",
            "gpu": "g",
            "mode": "hot",
            "case_id": "a",
            "impl": "x",
            "last_utc": "1",
        },
        {
            "series_id": "new",
            "gpu": "g",
            "mode": "hot",
            "case_id": "a",
            "impl": "x",
            "last_utc": "2",
        },
        {"series_id": "b", "gpu": "g", "mode": "hot", "case_id": "a", "impl": "y", "last_utc": "1"},
        {"series_id": "c", "gpu": "g", "mode": "hot", "case_id": "b", "impl": "x", "last_utc": "2"},
        {"series_id": "d", "gpu": "h", "mode": "hot", "case_id": "a", "impl": "y", "last_utc": "1"},
    ]
    # b: implementation y left the suite (the newest run on g/hot has no point for it): not
    # checked any more, so an old alert cannot fail every later run; d is current on its own GPU.
    assert [s["series_id"] for s in current_series(rows)] == ["new", "c", "d"]


def test_the_store_feeds_the_rule_end_to_end(tmp_path):
    db = tmp_path / "h.sqlite"
    factors = [*JITTER, 1.50]
    ingest_all(db, [doc(k, cand_factor=f) for k, f in enumerate(factors)])
    with Store(db, readonly=True) as store:
        series = store.list_series()
        recent = {s["series_id"]: store.recent(s["series_id"], 5) for s in series}
        assert {len(points) for points in recent.values()} == {6}
    found = {(f.impl, f.metric): f for f in review(series, recent, Policy(window=5))}
    assert found[("forth", "gap")].alert and found[("forth", "time")].alert
    assert found[("cuda", "time")].status == "ok"


def test_recent_skips_unstable_points_in_the_store(tmp_path):
    db = tmp_path / "h.sqlite"
    unstable = {k: {("axpy", "forth")} for k in (7, 8)}
    ingest_all(db, [doc(k, unstable=unstable.get(k, ())) for k in range(10)])
    with Store(db, readonly=True) as store:
        forth = next(s for s in store.list_series() if s["impl"] == "forth")
        recent = store.recent(forth["series_id"], 4)
    # newest (9), then 4 stable times (6, 5, 4, 3) and 4 stable gaps (the same runs)
    assert [p["commit_sha"][-1] for p in recent] == ["3", "4", "5", "6", "9"]


# -- the commands ------------------------------------------------------------------------------
def write(path, document) -> str:
    path.write_bytes(orjson.dumps(document))
    return str(path)


def test_cli_ingest_history_and_regressions(tmp_path):
    run = CliRunner().invoke
    db = str(tmp_path / "h.sqlite")
    runs = [doc(k, cand_factor=f) for k, f in enumerate(JITTER)]
    step_run = doc(20, cand_factor=1.50)
    cases = str(suite_manifest(tmp_path, *runs, step_run))  # the suite they ran: the pin's source
    files = [write(tmp_path / f"r{k:02d}.json", d) for k, d in enumerate(runs)]

    done = run(main, ["ingest", files[0], "--db", db])
    assert done.exit_code == 0, done.output
    assert "would store (untrusted: nothing written)" in done.stderr and "new series" in done.stderr
    assert done.stdout == ""  # a report, not a document: stderr
    assert not (tmp_path / "h.sqlite").exists()

    for f in files:
        done = run(main, ["ingest", f, "--db", db, "--trusted", "--cases", cases])
        assert done.exit_code == 0 and "stored run" in done.stderr, done.output
    done = run(main, ["ingest", files[0], "--db", db, "--trusted", "--cases", cases])
    assert done.exit_code == 0 and "already stored" in done.stderr

    done = run(main, ["history", "--db", db])
    assert done.exit_code == 0 and "forth" in done.stdout and "cuda" in done.stdout
    done = run(main, ["history", "--db", db, "--series", "axpy/forth", "--last", "3"])
    assert done.exit_code == 0 and "(3 of 10 points)" in done.stdout
    listed = orjson.loads(run(main, ["history", "--db", db, "--format", "json"]).stdout)
    sid = next(s["series_id"] for s in listed["series"] if s["impl"] == "forth")
    shown = orjson.loads(
        run(main, ["history", "--db", db, "--series", sid[:6], "--format", "json"]).stdout
    )
    assert [s["series_id"] for s in shown["series"]] == [sid] and len(
        shown["series"][0]["shown"]
    ) == 10
    done = run(main, ["history", "--db", db, "--series", "nope/none"])
    assert done.exit_code == 2 and "axpy/forth" in done.stderr

    done = run(main, ["regressions", "--db", db])
    assert done.exit_code == 0 and "0 alert(s)" in done.stdout, done.output
    step = write(tmp_path / "step.json", step_run)
    assert run(main, ["ingest", step, "--db", db, "--trusted", "--cases", cases]).exit_code == 0
    done = run(main, ["regressions", "--db", db])
    assert done.exit_code == 1 and "**ALERT**" in done.stdout and "% slower" in done.stdout
    report = orjson.loads(
        run(main, ["regressions", "--db", db, "--format", "json", "--window", "5"]).stdout
    )
    assert report["alerts"] == 2 and report["policy"]["window"] == 5
    assert {f["metric"] for f in report["findings"] if f["alert"]} == {"gap", "time"}


def test_cli_bad_input_exits_2_naming_file_and_field(tmp_path):
    run = CliRunner().invoke
    db = str(tmp_path / "h.sqlite")
    broken = tmp_path / "broken.json"
    broken.write_text('{"schema_version": ')
    done = run(main, ["ingest", str(broken), "--db", db, "--trusted"])
    assert done.exit_code == 2 and str(broken) in done.stderr and "malformed JSON" in done.stderr
    bad = doc()
    bad["cases"][0]["implementations"]["forth"]["timing"]["stats"]["median_s"] = -1.0
    path = write(tmp_path / "bad.json", bad)
    done = run(main, ["ingest", path, "--db", db, "--trusted"])
    assert done.exit_code == 2 and path in done.stderr and "median_s" in done.stderr
    a100 = doc(gpu="NVIDIA A100", suite_gpu="NVIDIA H200")
    cases = str(suite_manifest(tmp_path, a100))
    wrong_gpu = write(tmp_path / "a100.json", a100)
    done = run(main, ["ingest", wrong_gpu, "--db", db, "--trusted", "--cases", cases])
    assert done.exit_code == 2 and "NVIDIA A100" in done.stderr and "NVIDIA H200" in done.stderr
    assert not (tmp_path / "h.sqlite").exists()
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"\x00not sqlite" * 100)
    for command in (["history"], ["regressions"], ["ingest", write(tmp_path / "ok.json", doc())]):
        done = run(main, [*command, "--db", str(garbage)])
        assert done.exit_code == 2 and str(garbage) in done.stderr, command
    done = run(main, ["regressions", "--db", str(tmp_path / "missing.sqlite")])
    assert done.exit_code == 2 and "no history database" in done.stderr


def test_regressions_fail_on_slower_by_default_but_show_improvements(tmp_path):
    from click.testing import CliRunner

    from harness.commands.history import regressions
    from harness.history.store import Store

    db = tmp_path / "h.sqlite"
    with Store(db) as store:
        for i, factor in enumerate([1.0] * 6 + [0.8]):  # a 20% improvement at the end
            day = f"2026-11-{10 + i:02d}T12:00:00Z"
            doc = make_document(
                {
                    "c": {
                        "cuda": samples(1e-3, 30, 0.002, i),
                        "llvm": samples(1.2e-3 * factor, 30, 0.002, 50 + i),
                    }
                },
                commit=f"{i:040x}",
                started_utc=day,
            )
            store.ingest(doc, trusted=True)
    shown = CliRunner().invoke(regressions, ["--db", str(db)])
    assert shown.exit_code == 0, shown.output
    assert "faster" in shown.output
    assert CliRunner().invoke(regressions, ["--db", str(db), "--fail-on", "changed"]).exit_code == 1
    # the llvm time and gap are faster: no word about slower results trips, whichever metric
    for word in ("slower", "gap-slower", "unstable", "never"):
        assert CliRunner().invoke(regressions, ["--db", str(db), "--fail-on", word]).exit_code == 0
    old = CliRunner().invoke(regressions, ["--db", str(db), "--fail-on", "any"])  # the old word
    assert old.exit_code == 1 and "--fail-on any is deprecated; it means --fail-on changed" in (
        old.stderr
    )


def test_history_columns_are_as_wide_as_their_data():
    from harness.commands.history import _series_table

    row = {
        "series_id": "0123456789abcdef", "case_id": "c", "case_version": 1, "impl": "llvm",
        "role": "candidate", "mode": "hot", "suite_version": 1, "source_sha256": "ab" * 32,
        "baseline_source_sha256": None, "points": 3, "first_utc": None, "last_utc": None,
    }  # fmt: skip
    gpus = ["NVIDIA H200", "NVIDIA GeForce RTX 4090 Laptop GPU with a long name", "A"]
    lines = _series_table([{**row, "gpu": gpu} for gpu in gpus])
    starts = {line.index(" hot ") if " hot " in line else line.index(" mode ") for line in lines}
    assert len(starts) == 1, lines  # the mode column starts at one offset on every line
    assert all(gpu in line for gpu, line in zip(gpus, lines[1:], strict=True))
