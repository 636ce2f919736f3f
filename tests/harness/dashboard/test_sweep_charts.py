"""The dashboard with swept cases: the overview keeps headline points only (no case, chart or
table row per point, the geomean over headlines), and a swept case's page draws its gap by
size (log2 x axis; the newest run solid, the oldest dashed) and its times by size."""

from __future__ import annotations

import re

import pytest

from harness.dashboard import build_site
from harness.history.store import Store
from tests.support.browser import Browser, chromium_path
from tests.support.dashboard_page import read_js_json
from tests.support.sweep_documents import falling, swept_document


def earlier(pid: str) -> dict[str, float]:
    k = int(pid.split("^")[1])
    return {**falling(pid), "warpforth": 1.0 + (27 - k) / 10}


@pytest.fixture
def site(tmp_path):
    db = tmp_path / "h.sqlite"
    with Store(db) as store:
        store.ingest(swept_document(earlier, run_id="3"), trusted=True)
        store.ingest(swept_document(falling, run_id="9"), trusted=True)
    out = tmp_path / "site"
    build_site(db, out)
    return out


def test_the_overview_keeps_headline_points_and_the_data_holds_the_curves(site):
    data = read_js_json(site / "data.js", "window.KERNELGAP_DATA = ")
    ids = [c["id"] for c in data["cases"]]
    assert "axpy_f64" in ids and not any("[" in i for i in ids)
    assert not any("[" in row["case"] for row in data["table"])
    sweep = data["sweeps"]["axpy_f64"]
    assert [p["x"] for p in sweep["latest"]["points"]] == list(range(11, 28, 2))
    assert sweep["latest"]["gaps"]["warpforth"][0] == 2.0
    assert sweep["earlier"]["gaps"]["warpforth"][0] == pytest.approx(2.6)
    assert sweep["earlier_run"].startswith("the oldest hot run")
    assert sweep["latest"]["times"]["cuda"][0] > 0


def case_page(site):
    (page,) = (site / "cases").glob("axpy_f64-*.html")
    return page


def test_the_case_page_draws_gap_and_time_by_size(site):
    text = case_page(site).read_text()
    assert "<h2>Gap by size" in text
    gap_chart, time_chart = re.findall(
        r'<svg [^>]*aria-label="(gap by size|median time by size)"', text
    )
    assert (gap_chart, time_chart) == ("gap by size", "median time by size")
    charts = text.split('aria-label="gap by size"')[1].split("</svg>")[0]
    assert charts.count("<polyline") == 6  # 3 candidates, newest and oldest
    assert charts.count('stroke-dasharray="5 3"') == 3
    assert all(f">2^{k}</text>" in charts for k in range(11, 28, 2))
    times = text.split('aria-label="median time by size"')[1].split("</svg>")[0]
    assert times.count("<polyline") == 4  # the baseline and 3 candidates
    unswept = [p for p in (site / "cases").glob("*.html") if p != case_page(site)]
    assert unswept and not any("Gap by size" in p.read_text() for p in unswept)


@pytest.mark.skipif(
    chromium_path() is None, reason="chromium is not installed (apt-get install chromium)"
)
def test_the_sweep_chart_in_headless_chromium(site, tmp_path):
    with Browser(width=1200, height=1400) as browser:
        browser.open(case_page(site).as_uri())
        box = browser.evaluate(
            "(() => { const r = document.querySelector('svg[aria-label=\"gap by size\"]')"
            ".getBoundingClientRect(); return [r.width, r.height]; })()"
        )
        lines = browser.evaluate(
            "[...document.querySelectorAll('svg[aria-label=\"gap by size\"] polyline')]"
            ".map(p => p.points.numberOfItems)"
        )
        shot = browser.screenshot(tmp_path / "sweep.png")
        assert browser.errors() == []
    assert box[0] > 400 and box[1] > 200
    assert lines == [9] * 6  # every point of every line drawn
    assert shot.stat().st_size > 10_000
