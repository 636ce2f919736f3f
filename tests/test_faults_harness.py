"""Fault injection, host side: hostile data, a full disk, a corrupt store, an untrusted run.

The harness half of tests/test_faults.py (issue 12): each test reproduces one defect found under
bad input or a fault and checks what replaced it. New faults of the harness go here, next to
their class; the README's "What kernelgap promises under faults" table points at these tests.
"""

from __future__ import annotations

import errno
import re
import shutil
import sqlite3
import subprocess
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner
from harness_docs import make_document, samples

from harness.cli import main
from harness.store import Store, StoreError

HTML = "<img src=x onerror=alert(1)>"
LINK = "<a href=javascript:alert(1)>x</a>"
ESCAPE = "\x1b[2J\x1b]0;owned\x07"  # clear the screen, set the terminal's title
BIDI = "\u202e"  # right-to-left override: text shown reversed


def small_document(k: int = 0, **kwargs) -> dict:
    """Run k of a one-case history: 'cuda' at 1 ms, 'forth' at 1.2 ms."""
    cases = {"axpy": {"cuda": samples(1e-3, seed=k), "forth": samples(1.2e-3, seed=100 + k)}}
    kwargs.setdefault("started_utc", f"2026-12-01T10:00:{k:02d}Z")
    return make_document(cases, commit=f"{k:040x}", **kwargs)


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
    shown = {"ingest": invoke("ingest", path, "--db", db).stdout}
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
    assert done.exit_code == 0 and "would store" in done.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == before == ["h.sqlite", "run.json"]


# ---- a full disk ------------------------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path):
    """A folder on its own 512 KiB tmpfs, to be filled with fill() (a real full disk). Mounting
    needs root (CAP_SYS_ADMIN): skipped where that is not allowed."""
    folder = tmp_path / "small-disk"
    folder.mkdir()
    try:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(folder)],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except OSError as exc:
        pytest.skip(f"cannot mount a tmpfs here: {exc}")
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {done.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False, timeout=30)


def fill(folder: Path) -> None:
    """Write a filler file until the filesystem holding `folder` has no byte left."""
    with open(folder / "filler", "wb", buffering=0) as filler:
        try:
            while True:
                filler.write(b"\0" * 4096)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
        try:
            while True:
                filler.write(b"\0")
        except OSError as exc:
            assert exc.errno == errno.ENOSPC


def wal_at_rest(db: Path) -> None:
    """Leave `db` in WAL mode when closed, as kernelgap before issue 12 did."""
    with sqlite3.connect(db) as raw:
        raw.execute("PRAGMA journal_mode=WAL")


def test_a_full_disk_at_open_says_disk_full_not_wrong_file(small_disk, tmp_path):
    db = small_disk / "h.sqlite"
    with Store(tmp_path / "h.sqlite") as store:
        store.ingest(small_document(0), trusted=True)
    wal_at_rest(tmp_path / "h.sqlite")
    shutil.copyfile(tmp_path / "h.sqlite", db)
    fill(small_disk)
    for command in (["history"], ["regressions"]):  # a reader must create the -shm file
        done = invoke(*command, "--db", db)
        assert done.exit_code == 2, done.output
        assert f"{db}: cannot open the history database: the disk is full" in done.stderr
        assert "pointing at the right file" not in done.stderr and "Traceback" not in done.output


def test_a_full_disk_at_a_trusted_ingest_says_disk_full(small_disk, tmp_path):
    db = small_disk / "h.sqlite"
    with Store(db) as store:
        store.ingest(small_document(0), trusted=True)
    fill(small_disk)
    with Store(db) as store, pytest.raises(StoreError) as refused:
        store.ingest(small_document(1), trusted=True)
    assert f"{db}: cannot write the history: the disk is full" in str(refused.value)
    (small_disk / "filler").unlink()
    with Store(db, readonly=True) as store:  # nothing half-written: the first run only
        assert len(store.runs()) == 1


@pytest.mark.parametrize(
    ("code", "name", "free_bytes", "expected"),
    [
        (4874, "SQLITE_IOERR_SHMSIZE", 0, "the disk is full"),
        (13, "SQLITE_FULL", 10**9, "the disk is full"),
        (4874, "SQLITE_IOERR_SHMSIZE", 10**9, "an I/O error reading or writing it"),
        (266, "SQLITE_IOERR_READ", 10**9, "an I/O error reading or writing it"),
        (14, "SQLITE_CANTOPEN", 10**9, "it cannot be opened"),
        (5, "SQLITE_BUSY", 10**9, "another process holds a lock on it"),
    ],
)
def test_sqlite_errors_at_open_name_their_cause(
    tmp_path, monkeypatch, code, name, free_bytes, expected
):
    from harness import store as store_module
    from harness import store_integrity

    db = tmp_path / "h.sqlite"
    with Store(db) as store:
        store.ingest(small_document(0), trusted=True)

    def failing(*args, **kwargs):
        error = sqlite3.OperationalError("disk I/O error")
        error.sqlite_errorcode, error.sqlite_errorname = code, name
        raise error

    monkeypatch.setattr(store_module.sqlite3, "connect", failing)
    monkeypatch.setattr(store_integrity, "_free_bytes", lambda path: free_bytes)
    for readonly in (True, False):
        with pytest.raises(StoreError) as refused:
            Store(db, readonly=readonly)
        assert str(refused.value).startswith(f"{db}: cannot open the history database: {expected}")
        assert name in str(refused.value) and "pointing at the right file" not in str(refused.value)


# ---- a corrupt store ---------------------------------------------------------------------------


def break_an_index(db: Path) -> None:
    """Damage the store so that every read still works but integrity_check reports it: the
    runs_by_date index now claims to index another column than the one it holds."""
    with sqlite3.connect(db) as raw:
        raw.execute("PRAGMA writable_schema=ON")
        raw.execute(
            "UPDATE sqlite_master SET sql = 'CREATE INDEX runs_by_date ON runs (finished_utc)' "
            "WHERE name = 'runs_by_date'"
        )


def test_a_trusted_ingest_refuses_a_corrupt_store_and_writes_nothing(tmp_path):
    db = tmp_path / "h.sqlite"
    with Store(db) as store:
        for k in range(3):
            store.ingest(small_document(k), trusted=True)
    break_an_index(db)
    before = db.read_bytes()
    path = tmp_path / "run.json"
    path.write_bytes(orjson.dumps(small_document(3)))
    with Store(db, readonly=True) as store:  # reading it is still possible (and the plan is)
        assert len(store.runs()) == 3 and store.ingest(small_document(3)).points
    done = invoke("ingest", path, "--db", db, "--trusted")
    assert done.exit_code == 2, done.output
    assert f"{db}: the history database is corrupt; nothing was written" in done.stderr
    assert "integrity_check: row 1 missing from index runs_by_date" in done.stderr
    assert db.read_bytes() == before
