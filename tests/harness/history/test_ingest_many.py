"""`harness ingest A.json B.json ...`: every file read and checked first, then all stored in one
transaction (Store.ingest_many), or none of them."""

from __future__ import annotations

import orjson
import pytest
from click.testing import CliRunner

from harness.cli import main
from harness.history.store import Store, StoreError
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
