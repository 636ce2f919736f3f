"""Fault injection, host side: schema-valid documents the harness must still read, store and show
(issue 52): values nested deeper than the store's JSON writer takes, numbers past what SQLite and
the dashboards hold, every optional field absent, every string field in every output format,
and mutated documents through `harness ingest` (the ingest fuzzer). docs/faults.md's table points
at these tests.
"""

from __future__ import annotations

import sqlite3

import orjson
import pytest
from click.testing import CliRunner

from harness.cli import main
from harness.history.store import Store
from harness.history.store_schema import MAX_DEPTH, MAX_INTEGER
from tests.support.harness_docs import small_run, suite_manifest


def invoke(*args, **kwargs):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False, **kwargs)


DEEP = "deep value here"


def ingest(folder, document, *options, deep: int = 0):
    """`harness ingest` of `document` into folder/h.sqlite (options: --trusted, --cases ...);
    with `deep`, the string DEEP in it is written as that many nested containers."""
    path = folder / "run.json"
    path.write_bytes(orjson.dumps(document).replace(orjson.dumps(DEEP), nested(deep)))
    return invoke("ingest", path, "--db", folder / "h.sqlite", *options)


def nested(levels: int) -> bytes:
    """JSON text of `levels` containers, one inside the other: {"x": [{"x": [... 1 ...]}]}
    (as text: orjson writes fewer levels than it reads)."""
    opening = b"".join(b'{"x":' if level % 2 == 0 else b"[" for level in range(levels))
    closing = b"".join(b"}" if level % 2 == 0 else b"]" for level in reversed(range(levels)))
    return opening + b"1" + closing


def trusted(folder, document) -> tuple[str, ...]:
    return ("--trusted", "--cases", str(suite_manifest(folder, document)))


# ---- values the store's writer cannot take --------------------------------------------------


@pytest.mark.parametrize("trust", [False, True])
@pytest.mark.parametrize("levels", [MAX_DEPTH - 1, MAX_DEPTH, 1023])
def test_a_value_nested_past_the_stores_writer_is_refused_by_name(tmp_path, trust, levels):
    """orjson writes 254 nested containers, reads 1024: one more level in an object the schema
    leaves open (environment.software) was a TypeError traceback at ingest, trusted or not."""
    document = small_run(0)
    # the document and environment are two levels; software a third
    document["environment"]["software"]["deep"] = DEEP
    options = trusted(tmp_path, document) if trust else ()
    done = ingest(tmp_path, document, *options, deep=levels - 3)
    if levels <= MAX_DEPTH:
        assert done.exit_code == 0, done.output
        return
    assert done.exit_code == 2, done.output
    assert "Traceback" not in done.output and "TypeError" not in done.output
    assert "environment.software.deep.x[0].x" in done.stderr, done.stderr
    assert f"nested deeper than the {MAX_DEPTH} levels" in done.stderr, done.stderr
    assert "run.json" in done.stderr and "refused for the history" in done.stderr
    assert not (tmp_path / "h.sqlite").exists()


@pytest.mark.parametrize(
    ("where", "field"),
    [
        (("timing", "stats", "noise"), "timing.stats.noise"),
        (("timing", "stats", "min_s"), "timing.stats.min_s"),
        (("timing", "stats", "count"), "timing.stats.count"),
    ],
)
@pytest.mark.parametrize("value", [2**63, 2**64 - 1, MAX_INTEGER + 1])
def test_an_integer_past_what_the_history_holds_is_refused_naming_the_field(
    tmp_path, where, field, value
):
    """An integer past 2^63 in a REAL or INTEGER column was an OverflowError from SQLite; past
    2^53 the dashboards' JavaScript no longer holds it exactly. Refused naming the field."""
    document = small_run(0)
    block = document["cases"][0]["implementations"]["forth"]
    for key in where[:-1]:
        block = block[key]
    block[where[-1]] = value
    done = ingest(tmp_path, document, *trusted(tmp_path, document))
    assert done.exit_code == 2, done.output
    assert "OverflowError" not in done.output and "Traceback" not in done.output
    assert f"cases[0].implementations.forth.{field}: the integer {value}" in done.stderr
    assert f"+-{MAX_INTEGER}" in done.stderr
    assert not (tmp_path / "h.sqlite").exists()


def test_a_refused_document_leaves_the_history_as_it_was(tmp_path):
    """A run stored, then one refused (too deep, too large): the first is still there, whole."""
    first = small_run(0)
    options = trusted(tmp_path, first)
    assert ingest(tmp_path, first, *options).exit_code == 0
    second = small_run(1)
    second["suite"]["sha256"] = first["suite"]["sha256"]
    second["cases"][0]["implementations"]["cuda"]["timing"]["stats"]["max_s"] = 2**63
    done = ingest(tmp_path, second, *options)
    assert done.exit_code == 2 and "timing.stats.max_s" in done.stderr, done.output
    with Store(tmp_path / "h.sqlite", readonly=True) as store:
        (run,) = store.runs()
        assert store.raw_document(run["run_id"]) == first
    db = sqlite3.connect(tmp_path / "h.sqlite")
    assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)


def test_the_integer_limit_keeps_every_integer_a_run_records(tmp_path):
    """The largest integers a real run writes (bytes of device memory, driver versions) are far
    inside the limit; the limit itself is stored."""
    document = small_run(0)
    document["environment"]["device"]["memory_bytes"] = MAX_INTEGER
    done = ingest(tmp_path, document, *trusted(tmp_path, document))
    assert done.exit_code == 0, done.output
