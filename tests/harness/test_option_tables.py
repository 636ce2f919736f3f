"""A case with an option axis in the harness (issue 54): its option points are rows and series
of their own (`scale_i64[clang_O=O1]`), `harness summary` gives one gap-by-option table per
case beside its gap-by-size table, and the size charts draw sizes only. The document is the
recorded H200 run with scale_i64 swept as the bundled suite sweeps it (dims and clang's -O
level for `llvm`), assembled by the runner's own runner.document.sweep_block."""

from __future__ import annotations

import re

from harness.dashboard.sweep_charts import curves
from harness.history.series import series_id, series_key
from harness.reporting.summary import markdown
from harness.reporting.sweep_table import sweep_tables
from protocol.points import as_rows, is_option_point
from tests.support.sweep_documents import SCALE, option_document


def test_the_bundled_suite_sweeps_clangs_optimisation_level_for_llvm():
    assert SCALE.sweep.options.impl == "llvm" and SCALE.sweep.axes[-1] == "clang_O"
    ids = [p.id for p in SCALE.sweep.points]
    assert ids[-2:] == ["clang_O=O2", "clang_O=O1"] and "clang_O=O3" not in ids


def test_an_option_point_is_a_row_and_a_series_of_its_own():
    document = as_rows(option_document())
    rows = {c["id"]: c for c in document["cases"]}
    assert {"scale_i64[clang_O=O1]", "scale_i64[clang_O=O2]"} <= set(rows)
    keys = {
        cid: series_id(series_key(document, rows[cid], "llvm"))
        for cid in ("scale_i64", "scale_i64[clang_O=O1]", "scale_i64[clang_O=O2]")
    }
    assert len(set(keys.values())) == 3  # the headline's series goes on; each option apart
    case = rows["scale_i64"]
    assert is_option_point(case, "clang_O=O1") and not is_option_point(case, "n=2^11")


def test_summary_has_a_gap_by_option_table_per_case_and_the_size_table_keeps_sizes():
    tables = {(t.case_id, t.kind): t for t in sweep_tables(option_document())}
    option = tables[("scale_i64", "option")]
    assert [r[0] for r in option.rows] == [
        "clang_O=O3 (headline)", "clang_O=O2", "clang_O=O1"
    ]  # fmt: skip
    llvm = 2 + option.candidates.index("llvm")  # after the point and the baseline time
    assert [r[llvm] for r in option.rows] == ["0.980x", "1.050x", "1.300x"]
    sizes = tables[("scale_i64", "size")]
    assert len(sizes.rows) == 9 and not any("clang_O" in r[0] for r in sizes.rows)
    text = markdown(option_document())
    options = text[text.index("### Gap by option") :]
    assert re.search(r"\| clang_O=O1 +\| +[0-9.]+ us \|", options), options


def test_size_charts_draw_sizes_only():
    curve = curves(option_document())["scale_i64"]
    assert len(curve["points"]) == 9 and all(p["id"].startswith("n=") for p in curve["points"])


def test_the_case_page_draws_gap_and_time_by_option_beside_the_size_charts():
    from harness.dashboard.sweep_charts import measured_points, svg

    latest = curves(option_document())["scale_i64"]
    options = latest["options"]
    assert [p["id"] for p in options["points"]] == ["clang_O=O3", "clang_O=O2", "clang_O=O1"]
    assert options["gaps"]["llvm"] == [0.98, 1.05, 1.30]
    assert measured_points(latest) == 9 + 3
    page = svg(latest, None, {"llvm": "#a00"}, "", "run 1")
    assert page.count("<svg") == 4  # gap and time by size, then by option
    assert 'aria-label="gap by option"' in page and ">O1</text>" in page
    assert ">clang_O</text></svg>" in page  # the option chart's axis is named for the axis
