"""The dashboard's first window, its hot/cold switch, its "last 50 runs / all" range, its step
labels and its case pages, in headless Chromium, on the planted history of
tools/perf/dashboard_history.py (hot and cold runs, steps, a driver shift)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from harness.dashboard import build_site
from tests.support.browser import Browser, chromium_path
from tests.support.dashboard_page import page_state, read_js_json

pytestmark = pytest.mark.skipif(
    chromium_path() is None, reason="chromium is not installed (apt-get install chromium)"
)
RUNS, CASES = 1000, 12
FIRST_WINDOW = (1400, 1000)

# Rectangles of a chart's step labels (the annotations marks.js adds): [left, top, right, bottom].
LABELS_JS = """((id) => [...document.getElementById(id).querySelectorAll('.annotation')]
  .filter(a => /^[▲▼]/.test(a.textContent)).map(a => {
    const r = a.querySelector('.annotation-text-g').getBoundingClientRect();
    return [r.left, r.top, r.right, r.bottom];
  }))"""


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    # tools/ is not shipped to a GPU box: imported here, where the tests run, not at collection
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tools" / "perf"))
    from dashboard_history import make_history

    db = tmp_path_factory.mktemp("history") / "history.sqlite"
    make_history(db, RUNS, CASES)
    out = build_site(db, tmp_path_factory.mktemp("site") / "site").out
    return out, read_js_json(out / "data.js", "window.KERNELGAP_DATA = ")


def opened(browser: Browser, out: Path) -> None:
    browser.open((out / "index.html").as_uri())
    browser.wait_for("document.body.dataset.rendered", timeout_s=60)
    browser.evaluate("kernelgapIdle()")


def scrolled_to(browser: Browser, case_id: str) -> dict:
    """Scroll case `case_id` into view, wait until it is drawn; the page's render state."""
    browser.evaluate(f"document.getElementById('case-{case_id}').scrollIntoView()")
    browser.evaluate("kernelgapIdle()")
    return page_state(browser)


def top_bottom(browser: Browser, selector: str) -> list[float]:
    return browser.evaluate(
        f"(() => {{ const r = document.querySelector({selector!r}).getBoundingClientRect(); "
        "return [r.top, r.bottom]; })()"
    )


def test_the_first_window_answers_how_far_and_whether_it_is_closing(site):
    out, data = site
    with Browser(*FIRST_WINDOW) as browser:
        opened(browser, out)
        cards = browser.evaluate(
            "[...document.querySelectorAll('#headline .card')].map(c => [c.dataset.candidate, "
            "c.dataset.mode, c.textContent, !!c.querySelector('svg.spark path')])"
        )
        alerts = browser.evaluate(
            "[...document.querySelectorAll('#alerts ul.alerts > li')].map(li => "
            "[li.dataset.mode, li.textContent, li.hidden, li.dataset.kind, li.dataset.cases])"
        )
        heading = browser.evaluate("document.querySelector('#alerts h2').textContent")
        lead, hardware = (
            top_bottom(browser, "#chart-overview svg"),
            top_bottom(browser, "#hardware"),
        )
        folded = browser.evaluate("document.getElementById('hardware').open")
        switch = browser.evaluate(
            "[...document.querySelectorAll('#mode-switch button')].map(b => "
            "[b.dataset.mode, b.getAttribute('aria-pressed'), b.textContent])"
        )
        state = page_state(browser)
        errors = browser.errors()
    assert errors == [] and state["errors"] == []
    assert data["mode"] == "hot" and [s[:2] for s in switch] == [["hot", "true"], ["cold", "false"]]
    # hot and cold told apart by words and symbols, not colour alone
    assert [s[2] for s in switch] == ["▲ hot", "◆ cold"]
    assert cards[0][0] == "forth" and all(c[1] == "hot" and "hot" in c[2] for c in cards)
    primary = state["headline"][0]
    assert primary["primary"] and cards[0][3]
    # the trend: 1.31x at the first run, about 1.21x now (three planted 2.5% steps)
    assert primary["trend"].startswith("1.310x → 1.2") and "since 2026-01-01" in primary["trend"]
    # alerts with their mode, the chosen mode's first; the driver shift folded into one line
    # One alert per planted event, the planted code regression first (gap before time), the
    # driver shift one event apart, and one count: the heading's is the number of events.
    assert heading == f"Open alerts ({len(alerts)})" == f"Open alerts ({len(data['alerts'])})"
    assert alerts[0][0] == "hot" and alerts[0][3] == "gap" and alerts[0][4] == "case_03"
    assert alerts[0][1].startswith("▲ hot gap +3.0% slower case_03")
    shifts = [a for a in alerts if a[3] == "baseline"]
    assert len(shifts) == 1 and "the baseline moved, the gap did not" in shifts[0][1]
    assert any(a[0] == "cold" and a[3] == "gap" and a[4] == "case_03" for a in alerts)
    assert all(a[0] in ("hot", "cold") for a in alerts) and len(alerts) <= 6
    assert 0 < sum(not a[2] for a in alerts) <= 6  # more would be one click away
    assert lead[0] < FIRST_WINDOW[1] and not folded and hardware[0] > lead[0]


def test_the_trend_starts_at_a_chosen_commit_a_typed_date_or_a_clicked_point(site):
    out, data = site
    runs, view = data["runs"], data["views"]["hot"]
    trend = next(c for c in view["cards"] if c["primary"])["trend"]
    at = len(trend["run"]) // 3  # after the first planted step
    r = trend["run"][at]
    moment = runs["date"][trend["run"][2 * len(trend["run"]) // 3]][:16]  # "YYYY-MM-DD HH:MM"
    by_day = next(k for k, q in enumerate(trend["run"]) if runs["date"][q].startswith(moment))
    change = "(() => { const i = document.getElementById('trend-from'); i.value = %r; "
    change += "i.dispatchEvent(new Event('change')); })()"

    def since(point: int) -> str:
        q = trend["run"][point]
        return f"since {runs['date'][q][:10]} ({runs['commit'][q][:7]})"

    with Browser(*FIRST_WINDOW) as browser:
        opened(browser, out)
        browser.evaluate(change % runs["commit"][r][:9].upper())
        by_commit = page_state(browser)
        browser.evaluate(change % moment)
        typed_day = page_state(browser)
        browser.evaluate(change % "no-such-commit")
        refused = browser.evaluate(
            "[document.getElementById('trend-from').getAttribute('aria-invalid'), "
            "document.getElementById('trend-since').value]"
        )
        browser.evaluate(
            "(() => { const s = document.getElementById('trend-since'); s.value = 'all'; "
            "s.dispatchEvent(new Event('change')); "
            "const svg = document.querySelector('#headline .card.primary svg.spark'); "
            "const b = svg.getBoundingClientRect(); svg.dispatchEvent(new MouseEvent('click', "
            "{clientX: b.left + b.width / 2, clientY: b.top + b.height / 2, bubbles: true})); })()"
        )
        clicked = page_state(browser)
        browser.evaluate(
            "(() => { const svg = document.querySelector('#headline .card.primary svg.spark'); "
            "const b = svg.getBoundingClientRect(); svg.dispatchEvent(new MouseEvent('click', "
            "{clientX: b.right - 1, clientY: b.top + 1, bubbles: true})); })()"
        )
        newest = page_state(browser)
        errors = browser.errors()
    assert errors == [] and clicked["errors"] == []
    middle = round((len(trend["run"]) - 1) / 2)
    assert 0 < at < by_day != middle
    for state, point in ((by_commit, at), (typed_day, by_day), (clicked, middle)):
        primary = state["headline"][0]
        assert state["since"] == f"run:{trend['run'][point]}"
        assert primary["trend"].startswith(f"{trend['gap'][point]:.3f}x → ")
        assert primary["trend"].endswith(since(point))
    # the first planted step is behind the chosen commit: the trend starts below 1.31x
    assert trend["gap"][at] < 1.29 < trend["gap"][0]
    # the newest point clicked (the span so far ends at the middle run): from it, the newest run
    assert newest["since"] == f"run:{trend['run'][-1]}"
    assert newest["headline"][0]["trend"].startswith("the newest run only (")
    # a commit no run has is refused where it was typed, and the span stays as it was
    assert refused == ["true", f"run:{trend['run'][by_day]}"]


def test_the_mode_switch_changes_every_card_chart_and_header(site):
    out, _ = site
    with Browser(*FIRST_WINDOW) as browser:
        opened(browser, out)
        hot = scrolled_to(browser, "case_00")
        note_hot = browser.evaluate("document.querySelectorAll('#case-case_00 .together').length")
        # The keyboard reaches the switch: focus it and press Enter.
        browser.evaluate("document.querySelector('#mode-switch button[data-mode=cold]').focus()")
        for kind in ("keyDown", "keyUp"):
            key = {"key": "Enter", "code": "Enter", "windowsVirtualKeyCode": 13}
            browser.send("Input.dispatchKeyEvent", {"type": kind, **key, "text": "\r"})
        # the switch redraws the header, alerts and table above, which can move the case out of
        # the window: bring it back, as a reader would, and let it draw
        cold = scrolled_to(browser, "case_00")
        note_cold = browser.evaluate("document.querySelectorAll('#case-case_00 .together').length")
        modes = browser.evaluate(
            "[...document.querySelectorAll('#headline .card')].map(c => c.dataset.mode)"
        )
        header = browser.evaluate("document.querySelector('#case-case_00 .now').textContent")
        errors = browser.errors()
    assert errors == [] and cold["errors"] == []
    assert hot["mode"] == "hot" and cold["mode"] == "cold" and set(modes) == {"cold"}
    assert hot["cases"]["case_00"]["mode"] == "hot"
    assert cold["cases"]["case_00"]["mode"] == "cold"
    assert "cold" in header and "forth" in header  # the case's current gap, in its mode
    # the driver shift is hot only: its note shows in hot mode, not in cold
    assert note_hot == 1 and note_cold == 0


def test_the_range_and_the_times_are_one_click_away(site):
    out, _ = site
    with Browser(*FIRST_WINDOW) as browser:
        opened(browser, out)
        last50 = scrolled_to(browser, "case_03")["cases"]["case_03"]
        browser.evaluate("document.querySelector('.toolbar button[data-range=all]').click()")
        browser.evaluate("kernelgapIdle()")
        every = page_state(browser)["cases"]["case_03"]
        browser.evaluate("document.querySelector('#case-case_03 button[data-panel=times]').click()")
        browser.evaluate("kernelgapIdle()")
        times = page_state(browser)["cases"]["case_03"]
        errors = browser.errors()
    assert errors == []
    assert last50["range"][1] - last50["range"][0] == pytest.approx(50)
    assert every["range"][1] - every["range"][0] == pytest.approx(RUNS // 2)
    assert times["panel"] == "times" and "cuda (baseline)" in times["traces"]
    assert last50["panel"] == "gap" and "cuda (baseline)" not in last50["traces"]


def test_step_labels_never_overlap(site):
    out, _ = site
    with Browser(*FIRST_WINDOW) as browser:
        opened(browser, out)
        browser.evaluate("window.kernelgapSetRange('all')")
        for panel in ("gap", "times"):
            browser.evaluate(f"window.kernelgapSetPanel('case_03', '{panel}')")
            scrolled_to(browser, "case_03")
            boxes = browser.evaluate(f"{LABELS_JS}('chart-case-case_03')")
            assert len(boxes) >= 4, (panel, boxes)
            for i, a in enumerate(boxes):
                for b in boxes[i + 1 :]:
                    apart = a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1]
                    assert apart, (panel, a, b)
        assert browser.errors() == []


def test_a_case_page_has_its_history_its_explanation_and_links_back(site):
    out, data = site
    case = next(c for c in data["cases"] if c["id"] == "case_03")
    page = out / case["page"]
    with Browser(*FIRST_WINDOW) as browser:
        browser.open(page.as_uri())
        charts = browser.evaluate("document.querySelectorAll('svg polyline').length")
        headings = browser.evaluate("[...document.querySelectorAll('h2')].map(h => h.textContent)")
        back = browser.evaluate("document.querySelector('a').getAttribute('href')")
        errors = browser.errors()
    assert errors == []
    # per mode: 3 candidates' gaps and 4 implementations' times (case_03 has one key each)
    assert charts == 2 * (3 + 4)
    # the planted history's counters step on case_03 (dashboard_history.py): explained here
    assert headings[:3] == ["▲ hot mode", "◆ cold mode", "Counters: what changed in the code"]
    assert "harness explain" in headings[3]
    assert back == f"../index.html#{case['anchor']}"
    assert "kernelgap explain" in page.read_text()
