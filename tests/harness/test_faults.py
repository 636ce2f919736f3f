"""Fault injection, host side: a full disk, a corrupt store, a malformed suite at `harness run`.

The harness half of tests/runner/test_faults.py (issue 12; untrusted runs and hostile data are in
tests/harness/test_faults_untrusted.py): each test reproduces one defect found under a fault and checks
what replaced it. New faults of the harness go here, next to their class; docs/faults.md's "What
kernelgap promises under faults" table points at these tests.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from harness.cli import main
from harness.errors import ShippingError, StoreError
from harness.history.store import Store
from harness.running import result_files, shipping
from tests.conftest import ROOT
from tests.harness.running.test_run import FIXTURE, FakeRunner
from tests.support.harness_docs import small_run, suite_manifest


def invoke(*args, **kwargs):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False, **kwargs)


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
        store.ingest(small_run(0), trusted=True)
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
        store.ingest(small_run(0), trusted=True)
    fill(small_disk)
    with Store(db) as store, pytest.raises(StoreError) as refused:
        store.ingest(small_run(1), trusted=True)
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
    from harness.history import store as store_module

    db = tmp_path / "h.sqlite"
    with Store(db) as store:
        store.ingest(small_run(0), trusted=True)

    def failing(*args, **kwargs):
        error = sqlite3.OperationalError("disk I/O error")
        error.sqlite_errorcode, error.sqlite_errorname = code, name
        raise error

    monkeypatch.setattr(store_module.sqlite3, "connect", failing)
    monkeypatch.setattr(store_module, "_free_bytes", lambda path: free_bytes)
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
            store.ingest(small_run(k), trusted=True)
    break_an_index(db)
    before = db.read_bytes()
    newest = small_run(3)
    cases = suite_manifest(tmp_path, newest)
    path = tmp_path / "run.json"
    path.write_bytes(orjson.dumps(newest))
    with Store(db, readonly=True) as store:  # reading it is still possible (and the plan is)
        assert len(store.runs()) == 3 and store.ingest(newest).points
    done = invoke("ingest", path, "--db", db, "--trusted", "--cases", cases)
    assert done.exit_code == 2, done.output
    assert f"{db}: the history database is corrupt; nothing was written" in done.stderr
    assert "integrity_check: row 1 missing from index runs_by_date" in done.stderr
    assert db.read_bytes() == before


# ---- a full disk under harness run --out -------------------------------------------------------


def harness_run(fake: FakeRunner, *args, env=None) -> subprocess.CompletedProcess:
    """`python -m harness run --target local` with the stand-in runner, in its own process."""
    command = [sys.executable, "-m", "harness", "run", "--target", "local", "--python", fake.python]
    return subprocess.run(
        [*map(str, command), *map(str, args)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=300,
    )


def full_disk_under(folder: Path, monkeypatch) -> None:
    """Make every fsync of a file under `folder` fail as on a full disk (others still work)."""
    real = os.fsync

    def fsync(fd):
        if os.readlink(f"/proc/self/fd/{fd}").startswith(str(folder)):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)


@pytest.fixture
def elsewhere(tmp_path, monkeypatch) -> Path:
    """The system's temporary folder, for this test: where a document goes when --out fails."""
    folder = tmp_path / "system-tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder / result_files.FALLBACK_FOLDER


@pytest.mark.parametrize("runner_status", [0, 1])
def test_a_full_disk_under_out_keeps_the_document_elsewhere_and_exits_2(
    tmp_path, monkeypatch, elsewhere, runner_status
):
    fake = FakeRunner(tmp_path / "fake")
    fake.answer(FIXTURE.read_bytes(), runner_status)
    out = tmp_path / "results"
    full_disk_under(out, monkeypatch)
    done = CliRunner().invoke(
        main, ["run", "--target", "local", "--python", str(fake.python), "--out", str(out)]
    )
    assert done.exit_code == 2, done.output
    assert done.exc_info is None or done.exc_info[0] is SystemExit, done.exc_info
    assert f"{out}: cannot save the result document there: the disk is full" in done.stderr
    (kept,) = elsewhere.iterdir()
    assert f"it is kept in {kept} instead" in done.stderr
    assert kept.read_bytes() == FIXTURE.read_bytes() and done.stdout.strip() == str(kept)
    assert list(out.iterdir()) == []  # no temporary file, no part under the final name
    assert ("some case failed" in done.stderr) == (runner_status == 1)


def test_with_no_folder_left_the_document_goes_to_stdout(tmp_path, monkeypatch, elsewhere):
    fake = FakeRunner(tmp_path / "fake")
    out = tmp_path / "results"
    full_disk_under(tmp_path, monkeypatch)
    done = CliRunner().invoke(
        main, ["run", "--target", "local", "--python", str(fake.python), "--out", str(out)]
    )
    assert done.exit_code == 2, done.output
    assert f"nor in {elsewhere}: the disk is full" in done.stderr
    assert "it was written to stdout instead" in done.stderr
    assert done.stdout_bytes == FIXTURE.read_bytes()
    assert list(out.iterdir()) == [] and list(elsewhere.iterdir()) == []


def test_a_real_full_disk_under_out(small_disk, tmp_path):
    fake = FakeRunner(tmp_path / "fake")
    fill(small_disk)
    system_tmp = tmp_path / "system-tmp"
    system_tmp.mkdir()
    done = harness_run(fake, "--out", small_disk, env={**os.environ, "TMPDIR": str(system_tmp)})
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert f"{small_disk}: cannot save the result document there: the disk is full" in done.stderr
    kept = Path(done.stdout.strip())
    assert kept.parent == system_tmp / result_files.FALLBACK_FOLDER
    assert kept.read_bytes() == FIXTURE.read_bytes()
    assert [p.name for p in small_disk.iterdir()] == ["filler"]


# ---- a malformed suite at harness run ----------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("x = " + "[" * 100_000 + "]" * 100_000 + "\n", "nested too deeply to parse"),
        ("[suite\nname = 1\n", "malformed TOML: "),
    ],
    ids=["deep", "broken"],
)
def test_a_malformed_suite_is_refused_before_any_target_is_reached(tmp_path, text, expected):
    fake = FakeRunner(tmp_path / "fake")
    cases = tmp_path / "suite" / "cases.toml"
    cases.parent.mkdir()
    cases.write_text(text)
    done = harness_run(fake, "--cases", cases, "--out", tmp_path / "r")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert f"error: {cases}: malformed TOML" in done.stderr and expected in done.stderr
    assert not fake.argv.exists()  # the runner never ran


# ---- links and special files in the suite folder (issue 33 items 9, 10) -------------------------


def shipped_suite(tmp_path: Path) -> Path:
    """A copy of the GPU test suite outside the repository; returns its cases.toml."""
    shutil.copytree(ROOT / "tests" / "gpu_suite", tmp_path / "suite")
    return tmp_path / "suite" / "cases.toml"


def test_a_link_out_of_the_suite_folder_is_refused_naming_it(tmp_path):
    cases = shipped_suite(tmp_path)
    secret = tmp_path / "secret.txt"
    secret.write_text("not for the GPU box")
    (cases.parent / "kernels" / "notes.txt").symlink_to(secret)  # never referenced by a case
    with pytest.raises(ShippingError, match="outside") as caught:
        shipping.plan(cases)
    assert str(cases.parent / "kernels" / "notes.txt") in str(caught.value)
    (cases.parent / "kernels" / "notes.txt").unlink()
    (cases.parent / "kernels" / "same.cu").symlink_to("scale.cu")  # inside: its content ships
    plan = dict((name, path) for path, name in shipping.plan(cases).files)
    assert (
        plan["suite/kernels/same.cu"].read_bytes()
        == (cases.parent / "kernels" / "scale.cu").read_bytes()
    )


@pytest.mark.parametrize("kind", ["loop", "root", "parent", "fifo"])
def test_a_link_loop_a_link_to_root_or_a_fifo_is_refused_at_once(tmp_path, kind):
    cases = shipped_suite(tmp_path)
    folder = cases.parent
    if kind == "loop":
        (folder / "a").symlink_to(folder / "b")
        (folder / "b").symlink_to(folder / "a")
    elif kind == "root":
        (folder / "everything").symlink_to("/")
    elif kind == "parent":
        (folder / "kernels" / "again").symlink_to(folder)
    else:
        os.mkfifo(folder / "pipe")
    fake = FakeRunner(tmp_path / "fake")
    done = harness_run(fake, "--cases", cases, "--out", tmp_path / "r")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert f"error: {folder}" in done.stderr
    assert ("not a regular file" if kind == "fifo" else "symbolic link") in done.stderr
    assert not fake.argv.exists()  # the runner never ran


# ---- what is shipped: streamed, bounded per file and in all (issue 52) ----------------------------


def test_a_huge_sparse_file_in_the_suite_folder_is_refused_by_name_without_reading_it(tmp_path):
    """A 20 GB sparse file in the suite's folder: `harness run` built the whole tar in memory
    (MemoryError, or the host's memory taken); now refused from its size, naming it, before the
    target is reached (reading 20 GB would take far longer than this test's time limit)."""
    cases = shipped_suite(tmp_path)
    huge = cases.parent / "kernels" / "data.bin"
    with huge.open("wb") as file:
        file.truncate(20 * 10**9)
    fake = FakeRunner(tmp_path / "fake")
    done = harness_run(fake, "--cases", cases, "--out", tmp_path / "r")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert f"error: {huge}: 19,073.5 MiB, past the 256.0 MiB a shipped file may have" in (
        done.stderr
    )
    assert not fake.argv.exists()  # the runner never ran


def test_a_tree_past_the_total_limit_is_refused_naming_its_largest_files(tmp_path, monkeypatch):
    cases = shipped_suite(tmp_path)
    for name, size in (("a.bin", 3 * 2**20), ("b.bin", 2**20)):
        with (cases.parent / name).open("wb") as file:
            file.truncate(size)
    monkeypatch.setattr(shipping, "MAX_TREE_BYTES", 2 * 2**20)
    with pytest.raises(ShippingError, match=r"past the 2\.0 MiB a shipment may have") as e:
        shipping.plan(cases)
    assert f"its largest files: {cases.parent / 'a.bin'} (3.0 MiB), " in str(e.value)


def test_an_unreadable_file_in_the_suite_folder_is_refused_before_shipping(tmp_path, monkeypatch):
    """Found at plan(), naming it, not halfway through the stream. As root every file reads,
    so where the tests run as root the permission check is made to fail for that one file."""
    cases = shipped_suite(tmp_path)
    locked = cases.parent / "kernels" / "locked.txt"
    locked.write_text("x")
    locked.chmod(0)
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: real(p, mode) and Path(p) != locked)
    with pytest.raises(ShippingError, match="cannot be read") as caught:
        shipping.plan(cases)
    assert str(locked) in str(caught.value)


def test_the_tree_is_streamed_never_whole_in_memory_and_unpacks_as_it_was(tmp_path):
    """Reading the stream of a tree holding a 64 MiB file allocates a small part of that (the
    tar was built whole in memory before); the archive unpacks to the same files."""
    import tarfile
    import tracemalloc

    cases = shipped_suite(tmp_path)
    big = cases.parent / "kernels" / "big.bin"
    with big.open("wb") as file:
        file.seek(64 * 2**20)
        file.write(b"the end")
    plan = shipping.plan(cases)
    out = tmp_path / "shipped.tar"
    tracemalloc.start()
    try:
        with plan.stream() as stream, out.open("wb") as sink:
            while chunk := stream.read(shipping.CHUNK_BYTES):
                sink.write(chunk)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * 2**20, peak
    assert out.stat().st_size % tarfile.RECORDSIZE == 0
    with tarfile.open(out) as archive:
        names = archive.getnames()
        assert names == [name for _, name in plan.files]
        shipped = archive.extractfile("suite/kernels/big.bin")
        shipped.seek(64 * 2**20)
        assert shipped.read() == b"the end"
        for path, name in plan.files[:20]:
            assert archive.extractfile(name).read() == path.read_bytes(), name


# ---- --base/--head refs reaching a shell (issue 33 item 11) -------------------------------------


def compiler_checkout(tmp_path: Path) -> Path:
    """A git repository with one commit holding version.txt."""
    repo = tmp_path / "compiler"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    (repo / "version.txt").write_text("1")
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "v1"], check=True)
    return repo


@pytest.mark.parametrize(
    "ref", ["HEAD;touch PWNED", "$(touch PWNED)", "`touch PWNED`", "--orphan=x", "a b", "x..y", ""]
)
def test_a_ref_that_is_not_a_ref_name_is_refused_before_any_shell(tmp_path, ref):
    from harness.errors import RevisionBuildError
    from harness.running.revision_build import build_revisions

    repo = compiler_checkout(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    command = (
        'mkdir -p {out} && echo "{ref}" > {out}/bundle.json && echo {ref} >> {out}/bundle.json'
    )
    with pytest.raises(RevisionBuildError, match="not a git ref name or commit id"):
        build_revisions(repo, {"base": ref}, command, work)
    assert not list(tmp_path.rglob("PWNED")) and not list(repo.parent.glob("PWNED"))


def test_placeholder_values_reach_the_command_as_data_never_as_shell_text(tmp_path):
    from harness.running.revision_build import build_revisions

    repo = compiler_checkout(tmp_path)
    work = tmp_path / "w $(touch PWNED) `touch PWNED2`;x"  # the folders carry metacharacters
    work.mkdir()
    command = "mkdir -p {out} && cp {src}/version.txt {out}/bundle.json && echo {ref} > {out}/ref"
    ((_label, out),) = build_revisions(repo, {"base": "HEAD~0"}, command, work)
    assert (out / "bundle.json").read_text() == "1" and (out / "ref").read_text() == "HEAD~0\n"
    assert not list(tmp_path.rglob("PWNED*")) and not list(repo.glob("PWNED*"))


# ---- a manifest the runner refuses, odd manifest files (issue 33 items 12, 13) -----------------


SMALL_SUITE = (ROOT / "tests" / "gpu_suite" / "cases.toml").read_text()


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda t: t.replace("[suite]", "[suite]\nsurprise = 1", 1), "unknown field"),
        (lambda t: t.replace('flops = "n"', 'flops = "n +* __import__"', 1), "flops"),
        (lambda t: t.replace('length = "n"', 'length = "n * n * n"', 1), "length"),
    ],
    ids=["unknown-field", "bad-expression", "absurd-size"],
)
def test_harness_run_refuses_what_runner_check_refuses_before_any_target(tmp_path, edit, expected):
    cases = shipped_suite(tmp_path)
    cases.write_text(edit(SMALL_SUITE))
    refused = subprocess.run(
        [sys.executable, "-m", "runner", "check", "--manifest-only", str(cases)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert refused.returncode == 2, refused.stderr  # the runner's own loader refuses it
    fake = FakeRunner(tmp_path / "fake")
    done = harness_run(fake, "--cases", cases, "--out", tmp_path / "r")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert refused.stderr.strip().splitlines()[-1] in done.stderr  # the same words
    assert str(cases) in done.stderr and expected in done.stderr
    assert not fake.argv.exists()  # the runner never ran on the target


def test_a_valid_manifest_passes_the_hosts_check():
    from harness.running.manifest_check import check_manifest

    check_manifest(ROOT / "benchmarks" / "cases.toml")  # raises when refused


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "huge"])
def test_a_fifo_a_device_or_a_huge_manifest_is_refused_at_once_naming_it(tmp_path, kind):
    if kind == "fifo":
        cases = tmp_path / "cases.toml"
        os.mkfifo(cases)
        expected = "must be a regular file, not a FIFO"
    elif kind == "dev-zero":
        cases = Path("/dev/zero")
        expected = "must be a regular file, not a character device"
    else:
        cases = tmp_path / "cases.toml"
        cases.write_text('[suite]\nname = "' + "x" * 50_000_000 + '"\n')
        expected = "is larger than"
    for command in (["runner", "check"], ["harness", "run", "--target", "local"]):
        done = subprocess.run(
            [sys.executable, "-m", *command, str(cases)],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=60,
        )
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert f"{cases}: the " in done.stderr and expected in done.stderr, done.stderr


# ---- --identity and --known-hosts paths ssh would expand (issue 33 item 23) ---------------------


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    """A real OpenSSH server on 127.0.0.1 (tests/support/sshd.py); skipped where sshd is missing."""
    from tests.support.sshd import running_sshd

    with running_sshd(tmp_path_factory.mktemp("sshd")) as server:
        yield server


@pytest.mark.parametrize(
    "folder",
    ["with space", "per%cent", "per%h%%", "tab\tx", "q'uote", 'dq"x', "back\\slash", "dollar$HOME"],
)
def test_key_and_known_hosts_paths_reach_ssh_as_those_files(sshd, tmp_path, folder):
    from tests.harness.running.transport.test_ssh import PY, Collect, transport

    place = tmp_path / folder
    place.mkdir()
    shutil.copy(sshd.identity, place / "id")
    (place / "id").chmod(0o600)
    shutil.copy(sshd.known_hosts, place / "known hosts")
    with transport(sshd, identity=place / "id", known_hosts=place / "known hosts") as ssh:
        done = ssh.run([PY, "-c", "print(6 * 7)"], b"", timeout_s=60, stderr_sink=Collect())
    assert done.returncode == 0 and done.stdout.strip() == b"42"


def test_a_path_ssh_cannot_take_is_refused_plainly_before_connecting(tmp_path):
    place = tmp_path / "dollar${HOME}x"
    place.mkdir()
    (place / "id").write_text("not a key")
    command = [sys.executable, "-m", "harness", "run", "--target", "ssh://u@127.0.0.1:9"]
    done = subprocess.run(
        [*command, "--identity", str(place / "id"), "--connect-timeout", "1"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert f"--identity '{place / 'id'}': ssh cannot take a file name holding '${{'" in done.stderr
    assert "cannot connect" not in done.stderr  # refused before ssh ran


# ---- the docs' table of promises ---------------------------------------------------------------


def test_the_fault_table_names_tests_that_exist():
    table = (ROOT / "docs" / "faults.md").read_text()
    rows = [line for line in table.splitlines() if line.startswith("| ") and "`tests/" in line]
    # bad manifest, bad request, kernel, connection, disk, store, untrusted, cheating; then
    # issue 33's items 8-23 (links and loops share a row); issue 52's: command templates, the
    # launch service's path and answers (and its worker, which never outlives it), then nesting,
    # numbers, optional fields, shipping, every string in every output, the fuzzers
    assert len(rows) == 8 + 15 + 4 + 6
    for row in rows:
        assert re.search(r"`test_\w+`", row), f"a row that names no test: {row[:80]}"
        for cell in re.findall(r"`(tests/[\w/]+\.py)`((?:[^`;]|`test_\w+`)*)", row):
            path, names = ROOT / cell[0], re.findall(r"`(test_\w+)`", cell[1])
            source = path.read_text()
            for name in names:
                assert f"def {name}(" in source, f"{cell[0]}: no {name}"


def test_the_help_says_a_suite_is_code():
    for command in (["harness", "run"], ["runner", "check"]):
        done = subprocess.run(
            [sys.executable, "-m", *command, "--help"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=60,
        )
        text = " ".join(done.stdout.split())
        assert "A suite is code" in text and "as a build script" in text, command
    docs = (ROOT / "docs" / "suite-trust.md").read_text()
    assert "A suite is code" in docs


def test_a_targets_stderr_reaches_the_terminal_with_control_bytes_visible():
    import io

    from harness.running.transport.base import StderrTail

    shown = io.BytesIO()
    tail = StderrTail(shown)
    tail(b"progress \x1b]0;owned\x07 and \x1b[2J\ttab\n")
    tail(b"kernelgap-partial-document: {}\n")
    assert shown.getvalue() == b"progress \\x1b]0;owned\\x07 and \\x1b[2J\ttab\n"
    assert tail.partial == b"{}"  # the partial document is kept as it came
