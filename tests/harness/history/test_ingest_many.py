"""`harness ingest A.json B.json ...`: every file read and checked first, then all stored in one
transaction (Store.ingest_many), or none of them."""

from __future__ import annotations

import sqlite3
import subprocess
import sys

import orjson
import pytest
from click.testing import CliRunner

from harness.cli import main
from harness.commands.ingest import EVERY_POINT_UP_TO, PARALLEL_FROM
from harness.errors import StoreError
from harness.history.store import Store, prepared
from tests.conftest import ROOT
from tests.support.harness_docs import small_run, suite_manifest


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def written(tmp_path, documents):
    cases = suite_manifest(tmp_path, *documents)
    paths = []
    for k, doc in enumerate(documents):
        paths.append(tmp_path / f"run-{k}.json")
        paths[-1].write_bytes(orjson.dumps(doc))
    return cases, paths


def test_many_files_are_stored_in_one_call(tmp_path):
    db = tmp_path / "h.sqlite"
    cases, paths = written(tmp_path, [small_run(k) for k in range(5)])
    done = invoke("ingest", *paths, paths[0], "--db", db, "--trusted", "--cases", cases)
    assert done.exit_code == 0, done.output
    assert "5 of 6 runs stored" in done.stderr  # the same run given twice is stored once
    with Store(db, readonly=True) as store:
        assert len(store.runs()) == 5
        assert all(s["points"] == 5 for s in store.list_series())
    again = invoke("ingest", *paths, "--db", db, "--trusted", "--cases", cases)
    assert again.exit_code == 0 and "0 of 5 runs stored" in again.stderr


def test_one_bad_file_stores_none(tmp_path):
    db = tmp_path / "h.sqlite"
    cases, paths = written(tmp_path, [small_run(k) for k in range(3)])
    paths[1].write_text('{"schema_version": "1.0.0"}')
    done = invoke("ingest", *paths, "--db", db, "--trusted", "--cases", cases)
    assert done.exit_code == 2 and str(paths[1]) in done.stderr
    assert not db.exists()


def test_ingest_many_rolls_back_all_on_an_error(tmp_path):
    db = tmp_path / "h.sqlite"
    good, bad = small_run(0), small_run(1)
    bad["cases"].append(bad["cases"][0])  # a case id listed twice
    with Store(db) as store:
        with pytest.raises(StoreError, match="listed twice"):
            store.ingest_many([(good, "good"), (bad, "bad")])
        assert store.runs() == []
        reports = store.ingest_many([(good, "good")])
        assert reports[0].stored and len(store.runs()) == 1


STATIC = orjson.loads((ROOT / "tests" / "fixtures" / "static-axpy-forth.json").read_bytes())
# Every column but the moment of the ingest itself (runs.ingested_utc, meta.created_utc).
TABLES = {
    "runs": "run, run_id, started_utc, finished_utc, commit_sha, dirty, gpu, suite_name, "
    "suite_version, suite_sha256, suite_gpu, schema_version, environment, document",
    "series": "*",
    "points": "*",
    "counters": "*",
    "counter_sets": "*",
}


def mixed_runs(n: int) -> list[dict]:
    """n runs of one case: counters (static from run 3, a new static analysis and ncu metrics
    from run 8), a new source (a new series) from run 6, an unstable run and a failed case."""
    docs = []
    for k in range(n):
        doc = small_run(
            k,
            source_sha={"forth": "6" * 64} if k >= 6 else None,
            unstable={"forth"} if k == 4 else (),
            failed={"axpy": "launch"} if k == 9 else None,
        )
        forth = doc["cases"][0]["implementations"]["forth"]
        if k >= 3 and "timing" in forth:
            forth["static"] = STATIC["head" if k >= 8 else "base"]
        if k >= 8 and "timing" in forth:
            metric = {"value": 1e6 + k, "unit": "inst"}
            forth["profile"] = {"status": "ok", "profiled": True, "tool": "ncu",
                                "version": "2025.3", "stalls": [],
                                "metrics": {"smsp__inst_executed.sum": metric}}  # fmt: skip
        docs.append(doc)
    return docs


def contents(db) -> dict[str, list[tuple]]:
    with sqlite3.connect(db) as con:
        return {
            table: con.execute(f"SELECT {columns} FROM {table} ORDER BY 1, 2").fetchall()
            for table, columns in TABLES.items()
        }


def test_the_bulk_path_stores_exactly_what_one_ingest_per_run_stores(tmp_path):
    docs = mixed_runs(PARALLEL_FROM + 4)  # enough files for the worker processes
    cases, paths = written(tmp_path, docs)
    bulk, one = tmp_path / "bulk.sqlite", tmp_path / "one.sqlite"
    done = invoke("ingest", *paths, paths[5], "--db", bulk, "--trusted", "--cases", cases)
    assert done.exit_code == 0, done.output
    assert f"{len(docs)} of {len(docs) + 1} runs stored" in done.stderr  # the duplicate once
    with Store(one) as store:
        for k, doc in enumerate(docs):
            assert store.ingest(doc, trusted=True, what=f"run {k}").stored
    found, expected = contents(bulk), contents(one)
    assert found["counters"] and found["counter_sets"] and len(found["series"]) == 3
    assert found == expected


def test_a_bulk_ingest_reports_a_line_a_run_and_its_news_and_every_point_when_asked(tmp_path):
    """More than EVERY_POINT_UP_TO files: each run's headline, and the lines of the points that
    start a series or did not run ok (mixed_runs: the first run's series, the new source from
    run 6, the failed case of run 9); --verbose: every point of every run."""
    docs = mixed_runs(EVERY_POINT_UP_TO + 2)
    cases, paths = written(tmp_path, docs)
    done = invoke("ingest", *paths, "--db", tmp_path / "a.sqlite", "--trusted", "--cases", cases)
    assert done.exit_code == 0, done.output
    lines = done.stderr.splitlines()
    headlines = [line for line in lines if ": stored run " in line]
    assert len(headlines) == len(docs)
    point_lines = [line for line in lines if line.startswith("  ")]
    started = [line for line in point_lines if line.startswith("  new series ")]
    failed = [line for line in point_lines if line.endswith(": failed: timing: launch")]
    # run 0 starts the baseline's and forth's series, run 6 forth's new source; run 9 failed
    assert len(started) == 3 and len(failed) == 2 and len(point_lines) == 5, point_lines
    verbose = invoke(
        "ingest", *paths, "--db", tmp_path / "b.sqlite", "--trusted", "--cases", cases, "--verbose"
    )
    assert verbose.exit_code == 0, verbose.output
    every = [
        line for line in verbose.stderr.splitlines() if "series " in line and line.startswith("  ")
    ]
    assert len(every) == sum(len(r) for r in (_points(d) for d in docs))


def _points(document: dict) -> list:
    """The (case, implementation) pairs a document's run stores (not skipped)."""
    return [
        (c["id"], name)
        for c in document["cases"]
        if c["status"] != "skipped"
        for name, impl in c["implementations"].items()
        if impl.get("status") != "skipped"
    ]


def test_a_refused_document_in_the_middle_of_a_bulk_ingest_stores_none_and_keeps_the_rest(
    tmp_path,
):
    docs = mixed_runs(PARALLEL_FROM + 4)
    cases, paths = written(tmp_path, docs)
    db = tmp_path / "h.sqlite"
    assert invoke("ingest", *paths[:3], "--db", db, "--trusted", "--cases", cases).exit_code == 0
    before = contents(db)
    paths[11].write_bytes(paths[11].read_bytes().replace(b'"median_s":', b'"median_s":"x",', 1))
    done = invoke("ingest", *paths, "--db", db, "--trusted", "--cases", cases)
    assert done.exit_code == 2 and str(paths[11]) in done.stderr
    assert "does not match" in done.stderr or "JSON" in done.stderr
    assert contents(db) == before  # nothing stored by the refused call, nothing lost
    with Store(db, readonly=True) as store:
        assert len(store.runs()) == 3


def test_ingest_planned_takes_plans_made_elsewhere(tmp_path):
    """Store.ingest_planned with store.prepared: the worker processes' path, in one."""
    docs = mixed_runs(10)
    with Store(tmp_path / "h.sqlite") as store:
        first = store.ingest_planned(prepared(d, path=store.path, what="a") for d in docs[:6])
        reports = store.ingest_planned(
            prepared(doc, path=store.path, what=f"run {k}") for k, doc in enumerate(docs)
        )
        assert [r.stored for r in first] == [True] * 6
        assert [r.already_stored for r in reports] == [True] * 6 + [False] * 4
        assert [r.stored for r in reports] == [False] * 6 + [True] * 4
        # new against the store before the batch: run 6's new forth source, not its baseline
        assert [p.new_series for p in reports[6].points] == [False, True]
        assert store.raw_document(reports[8].run_id) == docs[8]


def test_a_bad_file_among_the_workers_leaves_no_history_file(tmp_path):
    docs = mixed_runs(PARALLEL_FROM + 4)
    cases, paths = written(tmp_path, docs)
    paths[13].write_text("{")
    db = tmp_path / "h.sqlite"
    done = invoke("ingest", *paths, "--db", db, "--trusted", "--cases", cases)
    assert done.exit_code == 2 and str(paths[13]) in done.stderr
    assert sorted(p.name for p in tmp_path.glob("h.sqlite*")) == []


def failing_after(plans: list, k: int):
    """The plans, then an error after the k-th, as a worker's bad file raises it."""
    yield from plans[:k]
    raise StoreError("run-k.json: refused")


def test_each_run_is_written_as_it_arrives_and_a_late_error_undoes_the_batch(tmp_path):
    db = tmp_path / "h.sqlite"
    docs = mixed_runs(4)
    with Store(db) as store:
        plans = [prepared(d, path=db, what=f"run {k}") for k, d in enumerate(docs)]
        seen = []

        def watched():
            for plan in plans:
                if store._db is not None:  # the file exists once the first run arrived
                    seen.append(store._db.execute("SELECT count(*) FROM runs").fetchone()[0])
                yield plan

        assert [r.stored for r in store.ingest_planned(watched())] == [True] * 4
        assert seen == [1, 2, 3]
    db.unlink()
    with Store(db) as store:
        with pytest.raises(StoreError, match="refused"):
            store.ingest_planned(failing_after(plans, 3))
        assert not db.exists() and store.runs() == []
        assert [r.stored for r in store.ingest_planned(iter(plans[:2]))] == [True, True]
    with Store(db) as store:
        with pytest.raises(StoreError, match="refused"):
            store.ingest_planned(failing_after(plans[2:], 1))
        assert len(store.runs()) == 2  # an existing file keeps what it held, and only that


def test_a_file_that_needs_a_migration_is_not_touched_when_a_later_file_is_bad(tmp_path):
    db = tmp_path / "h.sqlite"
    db.write_bytes((ROOT / "tests" / "fixtures" / "history-store-v1.sqlite").read_bytes())
    before = db.read_bytes()
    plans = [prepared(d, path=db, what=f"run {k}") for k, d in enumerate(mixed_runs(3))]
    with Store(db) as store, pytest.raises(StoreError, match="refused"):
        store.ingest_planned(failing_after(plans, 2))
    assert db.read_bytes() == before


def test_a_run_the_store_refuses_stops_the_plans_still_coming(tmp_path):
    good, bad = small_run(0), small_run(1)
    bad["cases"].append(bad["cases"][0])  # a case id listed twice
    plans = [prepared(d, path=tmp_path / "h.sqlite", what=w) for d, w in ((good, "a"), (bad, "b"))]
    stopped = []

    def producer():
        try:
            yield from plans
            yield from plans  # never reached
        finally:
            stopped.append(True)

    with Store(tmp_path / "h.sqlite") as store, pytest.raises(StoreError, match="b: cannot store"):
        store.ingest_planned(producer())
    assert stopped == [True] and not (tmp_path / "h.sqlite").exists()


def test_a_new_file_is_written_with_its_rollback_journal_and_an_existing_one_in_wal(tmp_path):
    db = tmp_path / "h.sqlite"
    plans = [prepared(d, path=db, what=f"run {k}") for k, d in enumerate(mixed_runs(4))]
    modes = []

    def watched(batch):
        for plan in batch:
            if store._db is not None:
                modes.append(store._db.execute("PRAGMA journal_mode").fetchone()[0])
            yield plan

    for batch in (plans[:2], plans[2:]):
        with Store(db) as store:
            assert all(r.stored for r in store.ingest_planned(watched(batch)))
    # batch 1 writing, batch 2 before its first write (the file at rest), then writing
    assert modes == ["delete", "delete", "wal"]
    assert sorted(p.name for p in tmp_path.glob("h.sqlite*")) == ["h.sqlite"]


def test_a_file_this_store_created_is_in_wal_from_its_first_commit_on(tmp_path):
    db = tmp_path / "h.sqlite"
    plans = [prepared(d, path=db, what=f"run {k}") for k, d in enumerate(mixed_runs(4))]
    with Store(db) as store:
        for batch in (plans[:2], plans[2:]):
            assert all(r.stored for r in store.ingest_planned(iter(batch)))
            assert store._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    with Store(db, readonly=True) as reader:
        assert len(reader._query("SELECT run_id FROM runs")) == 4
    assert sorted(p.name for p in tmp_path.glob("h.sqlite*")) == ["h.sqlite"]


def test_a_prerendered_report_reads_as_one_rendered_at_the_end(tmp_path):
    docs = mixed_runs(10)
    docs[9]["cases"][0]["error"]["message"] += " \x1b[31m\u202e"  # escapes from the data
    plain = [prepared(d, path=tmp_path / "h", what=f"run {k}")[0] for k, d in enumerate(docs)]
    early = [prepared(d, path=tmp_path / "h", what=f"run {k}")[0] for k, d in enumerate(docs)]
    for report in early:
        report.prerender()
    for a, b in zip(plain, early, strict=True):
        for p, q in zip(a.points, b.points, strict=True):
            p.new_series = q.new_series = p.series_id.startswith(tuple("0123456"))
        a.stored = b.stored = True
        assert a.text() == b.text()
    assert "\\x1b[31m\\u202e" in early[9].text()


def test_one_file_imports_neither_numpy_nor_multiprocessing(tmp_path):
    # A backfill of one `harness ingest` call per file pays for neither (numpy is for the
    # whole-history reads, the worker pool for PARALLEL_FROM files or more).
    cases, paths = written(tmp_path, [small_run(0)])
    db = tmp_path / "h.sqlite"
    code = (
        "import sys\nfrom harness.cli import main\n"
        f"main(['ingest', {str(paths[0])!r}, '--db', {str(db)!r}, '--trusted', '--cases', "
        f"{str(cases)!r}], standalone_mode=False)\n"
        "print(sorted({'numpy', 'multiprocessing', 'scipy'} & set(sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    with Store(db, readonly=True) as store:
        assert len(store.runs()) == 1


def test_one_call_reads_its_manifest_once_and_still_refuses_another_suite(tmp_path, monkeypatch):
    """The manifest is read once per call (not once per file); each document is still
    checked against it: a run of another suite version is refused, naming its file."""
    from harness.running import trust

    reads = []
    original = trust.Canon.from_manifest.__func__

    def counted(cls, path):
        reads.append(path)
        return original(cls, path)

    monkeypatch.setattr(trust.Canon, "from_manifest", classmethod(counted))
    db = tmp_path / "h.sqlite"
    cases, paths = written(tmp_path, [small_run(k) for k in range(4)])
    done = invoke("ingest", *paths, "--db", db, "--trusted", "--cases", cases)
    assert done.exit_code == 0, done.output
    assert "4 of 4 runs stored" in done.stderr and reads == [cases]
    other = small_run(9)
    other["suite"]["version"] += 1
    paths[2].write_bytes(orjson.dumps(other))
    refused = invoke("ingest", *paths, "--db", tmp_path / "o.sqlite", "--trusted", "--cases", cases)
    assert refused.exit_code == 2 and str(paths[2]) in refused.stderr
