"""A swept case in the harness: its points are rows `case[point]` (protocol.points), a history
series each (the headline keeps the case's own key, so an unswept history continues), named
by compare and the exports; the geomean stays over headline points; `harness summary` shows a
gap-by-size table per swept case."""

from __future__ import annotations

import copy

import orjson
import pytest

from harness.analysis.compare import compare
from harness.history.series import series_id, series_key
from harness.history.store import Store
from harness.reporting import summary
from harness.reporting.export import github_action_benchmark
from harness.reporting.sweep_table import curve_sentence, sweep_tables
from protocol.points import as_rows, point_case_id, split_id
from protocol.validation import load_result, validate
from tests.support.sweep_documents import RECORDED, falling, swept_document


def test_points_become_rows_after_their_case_and_as_rows_is_idempotent():
    doc = swept_document(falling)
    rows = as_rows(doc)
    validate(rows, "result", "as rows")
    ids = [c["id"] for c in rows["cases"]]
    start = ids.index("axpy_f64")
    assert ids[start + 1 : start + 9] == [f"axpy_f64[n=2^{k}]" for k in range(11, 27, 2)]
    row = rows["cases"][start + 1]
    assert (row["point_of"], row["point"], row["version"], row["baseline"]) == (
        "axpy_f64",
        "n=2^11",
        1,
        "cuda",
    )
    case = rows["cases"][start]
    assert all("implementations" not in p for p in case["points"])  # references only
    assert as_rows(rows) == rows and as_rows(RECORDED) is RECORDED
    assert split_id("axpy_f64[n=2^11]") == ("axpy_f64", "n=2^11")
    assert split_id("axpy_f64") == ("axpy_f64", None)
    assert point_case_id("transpose_f32", "rows=2^5,cols=2^5") == "transpose_f32[rows=2^5,cols=2^5]"


def test_the_geomean_stays_over_headline_points():
    doc = swept_document(falling)
    plain = summary.geomean_gaps(RECORDED)["warpforth"]
    for found in (doc["summary"]["geomean_gap"], summary.geomean_gaps(as_rows(doc))):
        assert found["warpforth"]["of"] == plain["of"] == 8
    assert doc["summary"]["points"] == {"cases": 1, "points": 9, "ok": 9, "failed": 0, "skipped": 0}


def test_a_point_is_a_series_of_its_own_and_the_headline_keeps_the_cases_key(tmp_path):
    doc = swept_document(falling)
    rows = as_rows(doc)
    headline = next(c for c in rows["cases"] if c["id"] == "axpy_f64")
    before = next(c for c in RECORDED["cases"] if c["id"] == "axpy_f64")
    assert series_key(rows, headline, "warpforth") == series_key(RECORDED, before, "warpforth")
    point = next(c for c in rows["cases"] if c["id"] == "axpy_f64[n=2^21]")
    key = series_key(rows, point, "warpforth")
    assert key["case_id"] == "axpy_f64[n=2^21]" and series_id(key) != series_id(
        series_key(rows, headline, "warpforth")
    )
    with Store(tmp_path / "h.sqlite") as store:
        store.ingest(copy.deepcopy(RECORDED), trusted=True)
        store.ingest(doc, trusted=True)  # nested: the store makes the rows
        series = {s["case_id"]: s for s in store.list_series() if s["impl"] == "warpforth"}
        assert series["axpy_f64"]["points"] == 2  # the unswept run and the headline: one series
        assert series["axpy_f64[n=2^11]"]["points"] == 1
        assert len([c for c in series if c.startswith("axpy_f64[")]) == 8


def test_compare_and_exports_name_the_point():
    base = swept_document(falling)
    head = swept_document(lambda pid: {**falling(pid), "warpforth": 1.0}, run_id="7")
    found = compare(base, head)
    gaps = {g.case_id: g for g in found.gaps if g.candidate == "warpforth"}
    assert (gaps["axpy_f64[n=2^11]"].base_gap, gaps["axpy_f64[n=2^11]"].head_gap) == (2.0, 1.0)
    assert gaps["axpy_f64"].base_gap == gaps["axpy_f64"].head_gap == 1.0  # the headline
    assert len([c for c in gaps if c.startswith("axpy_f64[")]) == 8
    data = orjson.loads(github_action_benchmark.render(load_result(orjson.dumps(head), "head")))
    names = {entry["name"] for entry in data}
    assert any("axpy_f64[n=2^21]" in name for name in names)


def test_summary_has_a_gap_by_size_table_per_swept_case():
    text = summary.markdown(load_result(orjson.dumps(swept_document(falling)), "doc"))
    assert "### Gap by size" in text and "**axpy_f64 v1**" in text
    assert "| n=2^27 (headline) |" in text and "2.000x" in text
    assert "- warpforth: 1.000x (n=2^27) to 2.000x (n=2^11); within 1.1x from n=2^27 on" in text
    gaps = text.split("### Gaps per case")[1].split("###")[0]
    assert "axpy_f64[" not in gaps  # points are in the size table
    (table,) = sweep_tables(swept_document(falling))
    assert table.candidates[0] == "warpforth" and len(table.rows) == 9


@pytest.mark.parametrize(
    ("near", "sentence"),
    [
        ("n=2^21", "wf: 1.000x (n=2^27) to 2.000x (n=2^11); within 1.1x from n=2^21 on"),
        (None, "wf: 1.000x (n=2^27) to 2.000x (n=2^11); not within 1.1x at the largest sizes"),
    ],
)
def test_curve_sentence(near, sentence):
    curve = {"min_gap": 1.0, "min_at": "n=2^27", "max_gap": 2.0, "max_at": "n=2^11"}
    assert curve_sentence("wf", {**curve, "points": 9, "near_parity_from": near}) == sentence
