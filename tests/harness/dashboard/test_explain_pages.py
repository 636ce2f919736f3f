"""The dashboard links each case of the newest run to its explanation (explain/<case>.html, with
the markdown beside it), written from the run's stored document."""

from __future__ import annotations

import shutil

import orjson
import pytest

from harness.dashboard import build_site
from harness.dashboard.explain_pages import file_stem
from harness.history.store import Store
from runner.explain import static
from tests.support.explain_documents import bench_document


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    if static.find("ptxas") is None or static.find("cuobjdump") is None:
        pytest.skip("ptxas or cuobjdump is not installed (pip install -e '.[test]')")
    mp = pytest.MonkeyPatch()
    try:
        doc = bench_document(mp, tmp_path_factory.mktemp("bench"), ("polynomial_f64",), False)
    finally:
        mp.undo()
    db = tmp_path_factory.mktemp("history") / "history.sqlite"
    with Store(db) as store:
        assert store.ingest(doc, trusted=True).stored
    out = tmp_path_factory.mktemp("site") / "site"
    (out / "explain").mkdir(parents=True)
    (out / "explain" / "gone_case.md").write_text("from an older run")
    build_site(db, out)
    return out, doc


def test_every_row_of_the_newest_run_links_to_its_explanation(site):
    out, _ = site
    text = (out / "data.js").read_text().removeprefix("window.KERNELGAP_DATA = ")
    data = orjson.loads(text.rstrip().rstrip(";"))
    rows = [r for r in data["table"] if r["case"] == "polynomial_f64"]
    stem = file_stem("polynomial_f64")
    assert rows and all(r["explain"] == f"explain/{stem}.html" for r in rows)
    assert 'class: "explain", href: r.explain' in (out / "app.js").read_text()


def test_the_explanation_pages_hold_the_report(site):
    out, doc = site
    stem = file_stem("polynomial_f64")
    page = (out / "explain" / f"{stem}.html").read_text()
    markdown = (out / "explain" / f"{stem}.md").read_text()
    assert page.startswith("<!doctype html>") and f'href="{stem}.md"' in page
    if shutil.which("warpforthc") is None:  # the primary is not built here: the page says why
        assert "warpforth" in page and "implementation skipped" in page
        return
    assert "polynomial_f64: warpforth vs cuda (baseline)" in page
    if doc["cases"][0]["implementations"]["warpforth"].get("static", {}).get("status") == "ok":
        assert "no DFMA" in page and "no DFMA" in markdown
    assert markdown.startswith("## kernelgap explain: result run ")
    assert not (out / "explain" / "gone_case.md").exists()  # pages of other runs go
