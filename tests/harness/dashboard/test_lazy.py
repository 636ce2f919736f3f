"""The dashboard draws each chart only when it comes into (or near) the window (lazy.js): at open
the charts below the fold are left undrawn, a chart scrolled to is drawn, and plotly.min.js is
loaded only after the first view is on screen. Headless Chromium on a 16-case history."""

from __future__ import annotations

import shutil

import pytest

from harness.dashboard import build_site
from harness.history.store import Store
from tests.support.browser import Browser, chromium_path
from tests.support.dashboard_page import draw_every_chart, page_state
from tests.support.harness_docs import make_document, samples

pytestmark = pytest.mark.skipif(
    chromium_path() is None, reason="chromium is not installed (apt-get install chromium)"
)

CASES = [f"case_{c:02d}" for c in range(16)]
RUNS = 4
NEAR = 0.25  # lazy.js draws what is within a quarter of a window above and below the screen

# Each history chart: [id, drawn, top and bottom (px from the window's top), Plotly traces].
CHARTS_JS = """[...document.querySelectorAll('#case-list .chart, #chart-suite')].map(n => {
  const box = n.getBoundingClientRect();
  return [n.id, n.dataset.drawn === '1', box.top, box.bottom, (n.data || []).length];
})"""


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    db = tmp_path_factory.mktemp("history") / "history.sqlite"
    with Store(db) as store:
        for k in range(RUNS):
            cases = {
                c: {"cuda": samples(1e-4, seed=100 * k + i), "llvm": samples(1.1e-4, seed=7 + k)}
                for i, c in enumerate(CASES)
            }
            doc = make_document(
                cases, commit=f"{k:040x}", started_utc=f"2026-12-03T0{k}:00:00Z", resamples=20
            )
            assert store.ingest(doc, trusted=True).stored
    return build_site(db, tmp_path_factory.mktemp("site") / "site").out


def near(top: float, bottom: float, window: float) -> bool:
    return bottom > -NEAR * window and top < (1 + NEAR) * window


def test_at_open_only_the_charts_in_or_near_the_window_are_drawn(site):
    with Browser(width=1400, height=2000) as browser:
        browser.open((site / "index.html").as_uri())
        browser.wait_for("document.body.dataset.rendered === 'view'", timeout_s=60)
        window = browser.evaluate("innerHeight")
        charts = browser.evaluate(CHARTS_JS)
        state = page_state(browser)
        overview = browser.evaluate(
            "[document.getElementById('chart-overview').dataset.drawn, "
            "document.querySelectorAll('#chart-overview svg g.point').length]"
        )
        errors = browser.errors()
    assert errors == [] and state["errors"] == []
    in_view = [c for c in charts if near(c[2], c[3], window)]
    below = [c for c in charts if c[2] > (1 + NEAR) * window]
    # The geometry makes both kinds: case charts in the window at open, and many below it.
    assert len(in_view) >= 2 and len(below) >= 8, (window, charts)
    assert all(c[1] and c[4] > 0 for c in in_view), in_view
    assert not any(c[1] or c[4] for c in below), below
    # The lead chart is SVG, drawn with the table: a marker per case.
    assert overview == ["1", len(CASES)]
    assert state["charts"] == len(CASES) + 2  # the cases, the suite and the lead chart
    assert state["drawn_at_open"] == state["drawn"] == len(in_view) + 1
    assert set(state["cases"]) == {c[0].removeprefix("chart-case-") for c in in_view}
    assert state["rendered_ms"] is None
    # plotly.min.js came after the first view, and the charts in view after it.
    assert state["first_view_ms"] <= state["plotly_ms"] <= state["in_view_ms"]


def test_a_chart_is_drawn_when_scrolled_to_and_the_ones_passed_over_are_not(site):
    with Browser(width=1400, height=900) as browser:
        browser.open((site / "index.html").as_uri())
        browser.wait_for("document.body.dataset.rendered === 'view'", timeout_s=60)
        at_open = browser.evaluate(CHARTS_JS)
        browser.evaluate("document.getElementById('chart-suite').scrollIntoView()")
        browser.evaluate("kernelgapIdle()")
        after = {c[0]: c for c in browser.evaluate(CHARTS_JS)}
        state = page_state(browser)
        errors = browser.errors()
    assert errors == []
    # A 900 px window shows the headline, the alerts and the lead chart; the table is folded,
    # so at most the first case chart is near it, and only charts near it are drawn.
    assert all(near(c[2], c[3], 900) for c in at_open if c[1]), at_open
    assert not at_open[-1][1]  # the suite chart, at the bottom
    opened = {c[0] for c in at_open if c[1]}
    assert after["chart-suite"][1] and after["chart-suite"][4] > 0
    assert state["suite"]["traces"] == ["llvm"] and state["suite"]["points"] == RUNS
    middle = after[f"chart-case-{CASES[len(CASES) // 2]}"]
    assert not middle[1] and middle[4] == 0, middle  # scrolled past, never in view: not drawn
    drawn = [c for c in after.values() if c[1] and c[0] not in opened]
    assert drawn and all(near(c[2], c[3], 900) for c in drawn), drawn


def test_scrolling_through_draws_every_chart_and_the_x_axis_switch_redraws_lazily(site):
    with Browser(width=1400, height=900) as browser:
        browser.open((site / "index.html").as_uri())
        state = draw_every_chart(browser)
        types = "document.getElementById('chart-case-{}')._fullLayout.xaxis.type"
        browser.evaluate(f"document.getElementById('chart-case-{CASES[0]}').scrollIntoView()")
        browser.evaluate("kernelgapSetX('date'); kernelgapIdle()")
        first_type = browser.evaluate(types.format(CASES[0]))
        last = browser.evaluate(
            f"[document.getElementById('chart-case-{CASES[-1]}').dataset.drawn || null, "
            f"{types.format(CASES[-1])}]"
        )
        browser.evaluate(f"document.getElementById('chart-case-{CASES[-1]}').scrollIntoView()")
        browser.evaluate("kernelgapIdle()")
        last_after = browser.evaluate(types.format(CASES[-1]))
        errors = browser.errors()
    assert errors == [] and state["errors"] == []
    assert state["drawn"] == state["charts"] and set(state["cases"]) == set(CASES)
    assert state["rendered_ms"] >= state["in_view_ms"]
    # In view: drawn again with dates at once; out of view: still the old axis, marked undrawn,
    # until it is scrolled to.
    assert first_type == "date"
    assert last == [None, "linear"]
    assert last_after == "date"


def test_without_plotly_the_page_still_opens_and_says_what_is_missing(site, tmp_path):
    broken = tmp_path / "site"
    shutil.copytree(site, broken)
    (broken / "plotly.min.js").unlink()
    with Browser(width=1400, height=900) as browser:
        browser.open((broken / "index.html").as_uri())
        browser.wait_for("document.body.dataset.rendered === 'view'", timeout_s=60)
        browser.evaluate("document.getElementById('chart-suite').scrollIntoView()")
        browser.evaluate("kernelgapIdle()")
        state = page_state(browser)
        box = browser.evaluate("document.getElementById('errors').textContent")
        suite_drawn = browser.evaluate("document.getElementById('chart-suite').dataset.drawn")
    assert state["table"] == len(CASES) and state["overview"]["points"] == len(CASES)
    assert any("plotly.min.js is missing beside index.html" in e for e in state["errors"])
    assert "plotly.min.js is missing" in box and suite_drawn is None
