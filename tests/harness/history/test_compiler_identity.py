"""The compiler's identity is metadata of each history point, never part of its series key.

WarpForth's `--version` prints only its LLVM's version, so the runner also records the sha256 of
the compiler's binary (build.compiler_sha256, result schema 1.2.0). A rebuilt compiler must
continue the series (same Forth source, same key) while each point says which compiler built it.
tests/fixtures/history-store-v1.sqlite is a frozen store of schema version 1 (written by the
store of commit 772e86c from two runs), which must stay readable and migrate forward.
"""

from __future__ import annotations

import shutil
import sqlite3
import zlib

import orjson
import pytest

from harness.dashboard import build_site, collect
from harness.errors import StoreError
from harness.history.series import COMPILER_FIELDS, series_id, series_key
from harness.history.store import STORE_SCHEMA_VERSION, Store
from harness.reporting.export import github_action_benchmark
from harness.reporting.summary import markdown as summary_markdown
from harness.reporting.summary import signature
from protocol.validation import validate
from tests.conftest import ROOT
from tests.support.browser import Browser, chromium_path
from tests.support.dashboard_page import draw_every_chart
from tests.support.harness_docs import make_document, samples

V1_STORE = ROOT / "tests" / "fixtures" / "history-store-v1.sqlite"
LLVM_22 = "Debian LLVM version 22.1.8; Optimized build."
OLD_SHA, NEW_SHA = "a1" * 32, "b2" * 32


def warpforth_document(k: int, compiler_sha256: str | None = OLD_SHA) -> dict:
    """Run k: one case, cuda against warpforth (toolchain `command`), the same Forth source in
    every run; the compiler binary's hash as given (None: a document older than 1.2.0)."""
    doc = make_document(
        {"scale": {"cuda": samples(2e-6, seed=k), "warpforth": samples(3e-6, seed=100 + k)}},
        commit=f"{k:040x}",
        started_utc=f"2026-12-0{k + 1}T10:00:00Z",
        resamples=50,
    )
    doc["suite"]["primary"] = "warpforth"
    impl = doc["cases"][0]["implementations"]["warpforth"]
    impl["toolchain"] = "command"
    impl["build"].update(
        toolchain="command", version=LLVM_22, command=["warpforthc", "/src/scale.forth"]
    )
    if compiler_sha256:
        impl["build"]["compiler_sha256"] = compiler_sha256
    validate(doc, "result", f"run {k}")
    return doc


def test_a_rebuilt_compiler_continues_the_series_and_each_point_names_its_compiler(tmp_path):
    first, second = warpforth_document(0, OLD_SHA), warpforth_document(1, NEW_SHA)
    keys = [series_key(d, d["cases"][0], "warpforth") for d in (first, second)]
    assert keys[0] == keys[1] and not set(COMPILER_FIELDS) & set(keys[0])
    with Store(tmp_path / "h.sqlite") as store:
        assert store.ingest(first, trusted=True).new_series  # the first run starts the series
        report = store.ingest(second, trusted=True)
        assert report.stored and report.new_series == []  # the rebuilt compiler starts none
        (series,) = [s for s in store.list_series() if s["impl"] == "warpforth"]
        assert series["series_id"] == series_id(keys[0]) and series["points"] == 2
        points = store.points(series["series_id"])
    identities = [tuple(p[f] for f in COMPILER_FIELDS) for p in points]
    assert identities == [("command", LLVM_22, OLD_SHA), ("command", LLVM_22, NEW_SHA)]


def test_the_summary_names_each_implementations_compiler_the_primary_first():
    doc = warpforth_document(0)
    compilers = [value for what, value in signature(doc) if what == "Compiler"]
    assert compilers[0] == f"warpforth: command, {LLVM_22}, compiler sha256 {OLD_SHA[:12]}"
    assert compilers[1].startswith("cuda: nvcc, Build cuda_13.0")
    text = summary_markdown(doc).split("### Hardware and toolchain")[1]
    assert f"warpforth: command, {LLVM_22}, compiler sha256 {OLD_SHA[:12]}" in text
    # an older document has no compiler hash: the line says what it knows
    old = warpforth_document(0, compiler_sha256=None)
    assert f"warpforth: command, {LLVM_22}" in [v for w, v in signature(old) if w == "Compiler"]


def test_github_action_benchmark_carries_the_compiler_in_extra_not_in_names():
    entries = [github_action_benchmark.entries(warpforth_document(k, sha)) for k, sha in ((0, OLD_SHA), (1, NEW_SHA))]  # fmt: skip
    assert [e["name"] for e in entries[0]] == [e["name"] for e in entries[1]]
    gap = {e["name"]: e for e in entries[1]}["scale/v1/gap/warpforth"]
    assert f"compiler_sha256: {NEW_SHA}" in gap["extra"]
    assert f"compiler_version: {LLVM_22}" in gap["extra"]


def test_the_dashboard_data_gives_each_point_its_compiler(tmp_path):
    db = tmp_path / "h.sqlite"
    with Store(db) as store:
        for k, sha in enumerate((OLD_SHA, OLD_SHA, NEW_SHA)):
            store.ingest(warpforth_document(k, sha), trusted=True)
    with Store(db, readonly=True) as store:
        data = collect(store)
    (case,) = data["cases"]
    (warpforth,) = [s for s in case["series"] if s["impl"] == "warpforth"]
    assert warpforth["change"] == ""  # one trace: the compiler is not part of the key
    shown = [data["compilers"][i] for i in warpforth["compiler"]]
    old, new = (f"command, {LLVM_22}, compiler sha256 {sha[:12]}" for sha in (OLD_SHA, NEW_SHA))
    assert shown == [old, old, new]
    assert f"warpforth: command, {LLVM_22}, compiler sha256 {NEW_SHA[:12]}" in [
        value for _, value in data["latest"]["signature"]
    ]


# --- the store's schema version 2 and its migration from version 1 ------------------------------


@pytest.fixture
def v1_copy(tmp_path):
    path = tmp_path / "history.sqlite"
    shutil.copyfile(V1_STORE, path)
    return path


def user_version(path) -> int:
    with sqlite3.connect(path) as db:
        return db.execute("PRAGMA user_version").fetchone()[0]


def every_point(store: Store) -> dict:
    return {s["series_id"]: store.points(s["series_id"]) for s in store.list_series()}


def test_a_version_1_store_is_read_as_it_is_before_any_write(v1_copy):
    assert STORE_SCHEMA_VERSION >= 2 and user_version(v1_copy) == 1
    with Store(v1_copy, readonly=True) as store:
        points = every_point(store)
        runs = store.runs()
        assert [store.raw_document(r["run_id"])["suite"]["name"] for r in runs] == [
            "kernelgap-core"
        ] * 2
    assert len(runs) == 2 and sum(len(p) for p in points.values()) == 8
    for point in (p for series in points.values() for p in series):
        assert all(point[f] is None for f in COMPILER_FIELDS)  # not recorded in version 1
    with Store(v1_copy) as store:  # a writable store that only reads does not migrate
        every_point(store)
    assert user_version(v1_copy) == 1


def test_a_version_1_store_migrates_forward_at_its_first_trusted_ingest(v1_copy, tmp_path):
    with Store(v1_copy, readonly=True) as store:
        before = every_point(store)
        documents = [store.raw_document(r["run_id"]) for r in store.runs()]
    with Store(v1_copy) as store:
        report = store.ingest(warpforth_document(5, NEW_SHA), trusted=True)
        assert report.stored
        after = every_point(store)
        assert [store.raw_document(r["run_id"]) for r in store.runs()][:2] == documents
    assert user_version(v1_copy) == STORE_SCHEMA_VERSION
    assert set(before) <= set(after)  # every series id survives
    for sid, points in before.items():
        migrated = after[sid][: len(points)]
        added = (*COMPILER_FIELDS, "gpu_uuid")
        strip = [{k: v for k, v in p.items() if k not in added} for p in migrated]
        assert strip == [{k: v for k, v in p.items() if k not in added} for p in points]
        for point in migrated:  # backfilled from the run's stored document
            assert point["toolchain"] in ("nvcc", "ptx") and point["toolchain_version"]
            assert point["compiler_sha256"] is None  # 1.0.0 documents have none
            assert point["gpu_uuid"].startswith("GPU-")  # version 4: the card
    # the migrated file reads exactly as the same documents ingested by this version
    with Store(tmp_path / "fresh.sqlite") as fresh:
        for document in documents:
            fresh.ingest(document, trusted=True)
        fresh.ingest(warpforth_document(5, NEW_SHA), trusted=True)
        assert every_point(fresh) == after


def test_a_migration_that_fails_leaves_the_file_at_version_1(v1_copy):
    with sqlite3.connect(v1_copy) as db:
        (run, blob) = db.execute("SELECT run, document FROM runs ORDER BY run").fetchone()
        document = orjson.loads(zlib.decompress(blob))
        document["cases"] = []  # no longer matches its points
        db.execute(
            "UPDATE runs SET document = ? WHERE run = ?",
            (zlib.compress(orjson.dumps(document)), run),
        )
    with Store(v1_copy) as store, pytest.raises(StoreError, match="migrating to version 2"):
        store.ingest(warpforth_document(5), trusted=True)
    assert user_version(v1_copy) == 1
    with sqlite3.connect(v1_copy) as db:
        columns = {row[1] for row in db.execute("PRAGMA table_info(points)")}
        assert not set(COMPILER_FIELDS) & columns
        assert db.execute("SELECT count(*) FROM runs").fetchone()[0] == 2


@pytest.mark.skipif(
    chromium_path() is None, reason="chromium is not installed (apt-get install chromium)"
)
def test_hovering_a_point_names_the_compiler_that_built_it(tmp_path):
    db = tmp_path / "h.sqlite"
    with Store(db) as store:
        for k, sha in enumerate((OLD_SHA, NEW_SHA)):
            store.ingest(warpforth_document(k, sha), trusted=True)
    out = build_site(db, tmp_path / "site").out
    point_js = """(() => {
      const gd = document.getElementById('chart-case-scale');
      gd.scrollIntoView();
      const t = gd._fullData.find(t => t.name === 'warpforth' && t.meta.panel === 'gap');
      const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis, box = gd.getBoundingClientRect();
      const k = t.x.length - 1;
      return [box.left + xa._offset + xa.c2p(t.x[k]), box.top + ya._offset + ya.c2p(t.y[k])];
    })()"""
    with Browser(width=1400, height=1600) as browser:
        browser.open((out / "index.html").as_uri())
        draw_every_chart(browser)
        browser.mouse(*browser.evaluate(point_js))
        hover = browser.wait_for("document.querySelector('.hoverlayer .hovertext')?.textContent")
        primary = browser.evaluate(
            "[...document.querySelectorAll('.card')].map(c => [c.dataset.candidate, "
            "c.dataset.primary || null, c.querySelector('.tag')?.textContent || null])"
        )
        errors = browser.errors()
    assert errors == []
    assert f"compiler command, {LLVM_22}, compiler sha256 {NEW_SHA[:12]}" in hover, hover
    assert primary == [["warpforth", "1", "primary candidate · ▲ hot"]]  # the mode in words
