"""Fault injection, host side: schema-valid documents the harness must still read, store and show
(issue 52): values nested deeper than the store's JSON writer takes, numbers past what SQLite and
the dashboards hold, every optional field absent, every string field in every output format,
and mutated documents through `harness ingest` (the ingest fuzzer). docs/faults.md's table points
at these tests.
"""

from __future__ import annotations

import re
import sqlite3

import orjson
import pytest
from click.testing import CliRunner

from harness import escaping
from harness.cli import main
from harness.history.store import Store
from harness.history.store_schema import MAX_DEPTH, MAX_INTEGER
from tests.support.document_variants import (
    block_fields,
    full_bundle,
    full_document,
    hollow,
    hostile,
    minimal,
    revisions_document,
    without,
)
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
@pytest.mark.parametrize("levels", [MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, 1023])
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


@pytest.mark.parametrize("command", ["ingest", "summary", "explain"])
def test_a_value_too_deep_for_the_schemas_checker_is_refused_naming_it(tmp_path, command):
    """1000 levels where the schema wants a number: jsonschema's message quoting the value
    was a RecursionError traceback (found by the ingest fuzzer)."""
    document = small_run(0)
    document["cases"][0]["implementations"]["forth"]["timing"]["stats"]["noise"] = DEEP
    path = tmp_path / "run.json"
    path.write_bytes(orjson.dumps(document).replace(orjson.dumps(DEEP), nested(1000)))
    done = invoke(command, path)
    assert done.exit_code == 2 and "Traceback" not in done.output, done.output[-2000:]
    assert f"{path}: does not match schemas/result.schema.json at " in done.stderr
    assert "cases[0].implementations.forth.timing.stats.noise.x" in done.stderr
    assert "(1006 levels): a value nested too deeply to check" in done.stderr


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


# ---- every command on documents at the schema's edges ----------------------------------------

COMMANDS = {
    "summary": ("summary", "{doc}"),
    "compare": ("compare", "{doc}", "{doc}"),
    "compare json": ("compare", "{doc}", "{doc}", "--format", "json"),
    "robust": ("robust", "{doc}", "{doc}"),
    "explain": ("explain", "{doc}"),
    "explain text": ("explain", "{doc}", "--format", "text"),
    "explain two": ("explain", "{doc}", "{doc}", "--format", "text"),
    "export csv": ("export", "{doc}", "--format", "csv"),
    "export markdown": ("export", "{doc}", "--format", "markdown"),
    "export nvbench-markdown": ("export", "{doc}", "--format", "nvbench-markdown"),
    "export github-action-benchmark": ("export", "{doc}", "--format", "github-action-benchmark"),
    "ingest": ("ingest", "{doc}", "--db", "{db}"),
}


def every_command(folder, document, commands=tuple(COMMANDS)) -> dict[str, object]:
    """Each of `commands` (COMMANDS' names) run on `document` in this process: exit 0 or 1,
    never an exception; an AssertionError names the command."""
    doc = folder / "doc.json"
    doc.write_bytes(orjson.dumps(document))
    done = {}
    for name in commands:
        args = COMMANDS[name]
        argv = [a.format(doc=doc, db=folder / "h.sqlite") for a in args]
        result = CliRunner().invoke(main, argv)
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise AssertionError(f"{name}: {result.exception!r}") from result.exception
        assert result.exit_code in (0, 1), (name, result.output[-2000:])
        done[name] = result
    return done


@pytest.mark.parametrize("shape", ["full", "minimal", "hollow"])
def test_every_command_reads_a_document_with_every_optional_field_absent(tmp_path, shape):
    """A schema-valid document with every optional field absent (minimal), or with each block
    present but holding only what the schema requires (hollow: a `static` block of `status`
    alone, an occupancy without block_threads): `harness explain` ended in a KeyError."""
    document = full_document()
    document = {"full": document, "minimal": minimal(document), "hollow": hollow(document)}[shape]
    every_command(tmp_path, document)


# compare's bootstrap takes most of a second a document; the three shapes above run it
QUICK = [name for name in COMMANDS if not name.startswith("compare")]


def test_every_command_reads_a_document_missing_any_one_optional_block(tmp_path):
    """Each optional object or list taken out on its own (a static block's tools.ptxas, a
    case's points, a profile's stalls, ...): every command still reads the document."""
    document = full_document()
    failed = []
    for path in block_fields(document):
        try:
            every_command(tmp_path, without(document, path), QUICK)
        except AssertionError as exc:
            failed.append(f"{'.'.join(path)}: {str(exc)[:300]}")
    assert not failed, "\n".join(failed)


def test_pr_reads_a_base_head_run_with_any_optional_field_absent(tmp_path):
    """`harness pr` on a base/head run: whole, hollow (its revisions kept) and with each
    optional block taken out; a run left with no revisions is refused saying so."""
    document = revisions_document()
    hollowed = hollow(document)
    for case, whole in zip(hollowed["cases"], document["cases"], strict=True):
        case["pairs"] = whole["pairs"]
        for name, impl in case["implementations"].items():
            impl.update({k: v for k, v in whole["implementations"][name].items()
                         if k in ("variant_of", "revision")})  # fmt: skip
    variants = [("full", document), ("hollow", hollowed)]
    variants += [(".".join(map(str, p)), without(document, p)) for p in block_fields(document)]
    path, failed = tmp_path / "run.json", []
    for name, variant in variants:
        path.write_bytes(orjson.dumps(variant))
        for options in ((), ("--format", "json")):
            result = CliRunner().invoke(main, ["pr", str(path), *options])
            if result.exception is not None and not isinstance(result.exception, SystemExit):
                failed.append(f"{name}: {result.exception!r}")
            elif result.exit_code == 2 and "has no revisions" not in result.stderr:
                failed.append(f"{name}: {result.stderr[-300:]}")
    assert not failed, "\n".join(failed)


STORE_COMMANDS = {
    "history": ("history", "--db", "{db}"),
    "history case": ("history", "--db", "{db}", "--case", "axpy_f64", "--format", "json"),
    "changes": ("changes", "--db", "{db}", "--format", "markdown"),
    "regressions": ("regressions", "--db", "{db}"),
    "dashboard": ("dashboard", "--db", "{db}", "--out", "{site}"),
}


def test_the_history_commands_read_stored_documents_with_every_optional_field_absent(tmp_path):
    """Runs of every shape (minimal, hollow, full: three runs of one suite) stored, then every
    command that reads the history: none ends in an exception."""
    document = full_document()
    cases = suite_manifest(tmp_path, document)
    for k, variant in enumerate((minimal(document), hollow(document), document)):
        variant["suite"]["sha256"] = document["suite"]["sha256"]
        variant["started_utc"] = f"2026-12-0{k + 2}T10:00:00Z"
        variant["finished_utc"] = f"2026-12-0{k + 2}T10:05:00Z"
        done = ingest(tmp_path, variant, "--trusted", "--cases", str(cases))
        assert done.exit_code == 0, done.output[-2000:]
    for name, args in STORE_COMMANDS.items():
        argv = [a.format(db=tmp_path / "h.sqlite", site=tmp_path / "site") for a in args]
        result = CliRunner().invoke(main, argv)
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise AssertionError(f"{name}: {result.exception!r}") from result.exception
        assert result.exit_code in (0, 1), (name, result.output[-2000:])


BUNDLE_COMMANDS = {
    "explain": ("explain", "{bundle}"),
    "explain text": ("explain", "{bundle}", "--format", "text"),
    "explain two": ("explain", "{bundle}", "{bundle}"),
    "explain with": ("explain", "{doc}", "--bundle", "{bundle}"),
    "ingest with": ("ingest", "{doc}", "--bundle", "{bundle}", "--db", "{db}"),
}


def every_bundle_command(folder, bundle) -> None:
    """Each of BUNDLE_COMMANDS on `bundle` (beside full_document()): exit 0, never an exception."""
    (folder / "bundle.json").write_bytes(orjson.dumps(bundle))
    (folder / "doc.json").write_bytes(orjson.dumps(full_document()))
    for name, args in BUNDLE_COMMANDS.items():
        argv = [
            a.format(bundle=folder / "bundle.json", doc=folder / "doc.json", db=folder / "h.sqlite")
            for a in args
        ]
        result = CliRunner().invoke(main, argv)
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise AssertionError(f"{name}: {result.exception!r}") from result.exception
        assert result.exit_code == 0, (name, result.output[-2000:])


def test_explain_and_ingest_read_a_bundle_with_any_optional_field_absent(tmp_path):
    """A bundle's schema asks a `static` block for its status alone: one with `status: ok`
    and nothing else (or lacking any one part) was a KeyError in `harness explain`; it is
    now read as a static analysis that is not there, saying what it lacks."""
    bundle = full_bundle()
    failed = []
    variants = [("full", bundle), ("minimal", minimal(bundle)), ("hollow", hollow(bundle))]
    variants += [(".".join(map(str, p)), without(bundle, p)) for p in block_fields(bundle)]
    for name, variant in variants:
        try:
            every_bundle_command(tmp_path, variant)
        except AssertionError as exc:
            failed.append(f"{name}: {str(exc)[:300]}")
    assert not failed, "\n".join(failed)
    (tmp_path / "bundle.json").write_bytes(orjson.dumps(hollow(bundle)))
    done = invoke("explain", tmp_path / "bundle.json", "--format", "text")
    assert "No static analysis (" in done.stdout and ": static: " in done.stdout, done.stdout


# ---- every string field into every output format ----------------------------------------------

HOSTILE = '<img src=x onerror=alert(1)>|[a](http://e.x)`\x1b[2J\u202e\r=HYPERLINK("http://e.x")'
MARKDOWN_OUTPUTS = ("summary", "compare", "robust", "explain", "export markdown",
                    "export nvbench-markdown")  # fmt: skip
TEXT_OUTPUTS = ("explain text", "explain two")
CODE_SPAN = re.compile(r"(?<![\\`])(`+)(?!`).+?(?<!`)\1(?!`)")


def test_every_string_field_reaches_every_output_format_escaped(tmp_path):
    """Every string field a document may carry (ids, names, point ids, messages, tool versions,
    `limited_by`, ...) holding HTML, a link, a pipe, a backtick, an escape sequence, a bidi
    override, a carriage return and a formula: no output carries any of them live. Markdown
    (escaping.markdown), terminal text (escaping.terminal, stderr reports too), CSV
    (escaping.csv_text and csv_row: one row per implementation, whatever a cell holds); the
    JSON formats escape by JSON's rules."""
    import csv
    import io

    document, changed = hostile(full_document(), HOSTILE)
    assert changed > 500, changed
    done = every_command(tmp_path, document)
    for name in MARKDOWN_OUTPUTS:
        out = CODE_SPAN.sub("", done[name].stdout)  # a code span's content is literal
        assert "<img" not in out and not re.search(r"(?<!\\)\]\(http", out), name
        assert "http://" not in out, name  # no autolink: `http\://`
        assert "&lt;img src=x" in out, name  # the data is there, shown
    for name in (*MARKDOWN_OUTPUTS, *TEXT_OUTPUTS):
        out = done[name].stdout
        assert not {"\x1b", "\u202e", "\r"} & set(out), (name, out[:3000])
        assert "x1b" in out and "u202e" in out, name  # shown visibly
    for result in done.values():
        assert not {"\x1b", "\u202e", "\r"} & set(result.stderr), result.stderr[:2000]
    for page in dashboard_pages(tmp_path, document):  # escaping.html
        text = page.read_text()
        assert "<img" not in text and not {"\x1b", "\u202e", "\r"} & set(text), page.name
    rows = list(csv.reader(io.StringIO(done["export csv"].stdout, newline="")))
    blocks = [b for c in document["cases"] for b in (c, *c.get("points", ()))]
    expected = sum(len(b.get("implementations", ())) for b in blocks)
    assert len(rows) == 1 + expected  # no row split at a carriage return
    for row in rows:
        assert len(row) == len(rows[0]), row
        for cell in row:
            assert not cell.startswith(("=", "+", "@", "\t", "\r", "\n")), cell
            assert not cell.startswith("-") or cell.lstrip("-")[:1].isdigit(), cell


def dashboard_pages(folder, document) -> list:
    """The HTML pages of `harness dashboard` over a history of `document` alone (a point id
    that gives no size included: no exception)."""
    db = folder / "hostile.sqlite"
    with Store(db) as store:
        store.ingest(document, trusted=True)
    site = folder / "hostile-site"
    result = CliRunner().invoke(main, ["dashboard", "--db", str(db), "--out", str(site)])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"dashboard: {result.exception!r}") from result.exception
    assert result.exit_code in (0, 1), result.output[-2000:]
    pages = sorted(site.rglob("*.html"))
    assert len(pages) > 2, pages  # the index, case and explain pages
    return pages


def test_explain_text_shows_escapes_in_limited_by_visibly(tmp_path):
    """`harness explain --format text` printed static.occupancy.limited_by raw."""
    document = full_document()
    for case in document["cases"]:
        for impl in case["implementations"].values():
            impl["static"]["occupancy"]["limited_by"] = ["warps\x1b]0;owned\x07\u202e"]
    path = tmp_path / "run.json"
    path.write_bytes(orjson.dumps(document))
    done = invoke("explain", path, "--format", "text")
    assert done.exit_code == 0, done.output
    assert "\x1b" not in done.stdout and "\u202e" not in done.stdout
    assert "warps\\x1b]0;owned\\x07\\u202e" in done.stdout


def test_a_carriage_return_in_a_name_is_quoted_in_csv_and_formulas_stay_text(tmp_path):
    """A carriage return in a name was left unquoted: a spreadsheet split the row there and
    the rest began an un-neutralised formula cell."""
    import csv
    import io

    name = 'forth\r=HYPERLINK("http://e.x")'
    document = small_run(0)
    impls = document["cases"][0]["implementations"]
    impls[name] = impls.pop("forth")
    path = tmp_path / "run.json"
    path.write_bytes(orjson.dumps(document))
    done = invoke("export", path, "--format", "csv")
    rows = list(csv.reader(io.StringIO(done.stdout, newline="")))
    assert len(rows) == 3 and {len(r) for r in rows} == {len(rows[0])}, rows
    assert [r[2] for r in rows[1:]] == ["cuda", name]
    assert escaping.csv_row(["=1+1", "a\rb"]) == '=1+1,"a\rb"'
    assert escaping.csv_text("\r=1") == "'\r=1" and escaping.csv_text("-x") == "'-x"


def test_summary_escapes_a_swept_cases_point_ids_in_its_range_sentence(tmp_path):
    """`harness summary` wrote a swept case's point ids raw in the curve's sentence (the
    sweep table above it escaped the same ids)."""
    document = full_document()
    swept = document["cases"][1]
    swept["curve"]["warpforth"]["min_at"] = "<img src=x onerror=alert(1)>"
    swept["curve"]["warpforth"]["max_at"] = "[a](http://e.x)"
    path = tmp_path / "run.json"
    path.write_bytes(orjson.dumps(document))
    done = invoke("summary", path)
    assert done.exit_code == 0, done.output
    assert "<img" not in done.stdout and not re.search(r"(?<!\\)\]\(http", done.stdout)
    assert "(&lt;img src=x onerror=alert(1)&gt;)" in done.stdout


def test_one_html_function_escapes_markup_and_shows_controls():
    text = escaping.html('<a href="x">\u202e\x1b</a>\n')
    assert text == "&lt;a href=&quot;x&quot;&gt;\\u202e\\x1b&lt;/a&gt;\n"


# ---- the ingest fuzzer ------------------------------------------------------------------------

FUZZED = 200  # documents; about 20 s on a loaded 2-core machine
FUZZ_SECONDS = 60  # and at most this long on a slower one


def test_mutated_documents_are_stored_intact_or_refused_by_name(tmp_path):
    """Mutated result documents through `harness ingest --trusted`, one call each: each is
    stored (and reads back exactly as ingested) or refused with exit 2 naming its file, never
    a traceback; after all of them the store passes SQLite's integrity and foreign-key checks
    and still holds every run it stored, intact."""
    import time

    from harness.history.store import run_id
    from protocol.points import as_rows
    from protocol.validation import load_result
    from tests.support.ingest_fuzz import mutants

    base = full_document()
    cases = suite_manifest(tmp_path, base)
    db, path = tmp_path / "h.sqlite", tmp_path / "run.json"
    stored, refused, kinds = {}, 0, set()
    started = time.monotonic()
    for mutant in mutants(base, seed=52, count=FUZZED):
        if time.monotonic() - started > FUZZ_SECONDS:
            break
        path.write_bytes(mutant.data)
        done = CliRunner().invoke(main, ["ingest", str(path), "--db", str(db), "--trusted",
                                         "--cases", str(cases)])  # fmt: skip
        assert done.exception is None or isinstance(done.exception, SystemExit), (
            mutant.kind,
            repr(done.exception),
        )
        assert "Traceback" not in done.output, (mutant.kind, done.output[-2000:])
        kinds.add(mutant.kind.split("+")[0])
        if done.exit_code == 2:
            assert done.stderr.startswith(f"error: {path}") or f"{path}:" in done.stderr, (
                mutant.kind,
                done.stderr[:500],
            )
            refused += 1
            continue
        assert done.exit_code == 0, (mutant.kind, done.output[-2000:])
        document = as_rows(load_result(mutant.data, "fuzzed"))
        stored[run_id(document)] = document
    assert stored and refused, (len(stored), refused)
    assert len(kinds) >= 6, kinds
    connection = sqlite3.connect(db)
    assert connection.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    assert connection.execute("PRAGMA foreign_key_check").fetchall() == []
    connection.close()
    with Store(db, readonly=True) as store:
        assert {r["run_id"] for r in store.runs()} == set(stored)
        for rid, document in stored.items():
            assert store.raw_document(rid) == document, rid
