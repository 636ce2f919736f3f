"""The dashboard's first window, its hot/cold switch, its "last 50 runs / all" range, its step
labels and its case pages, in headless Chromium, on the planted history of
tools/perf/dashboard_history.py (documents as the current runner writes them: hot and
cold-mean runs, steps, a driver shift, a run on another GPU model, a throttled run); and the
page on a phone (390 x 844)."""

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
PHONE = (390, 844)

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
            "[b.dataset.mode, b.getAttribute('aria-pressed'), b.textContent, b.title])"
        )
        tags = browser.evaluate(
            "[...document.querySelectorAll('#alerts .mode-tag')].map(t => [t.textContent, t.title])"
        )
        state = page_state(browser)
        errors = browser.errors()
    assert errors == [] and state["errors"] == []
    # A current runner's cold runs are keyed cold-mean: labelled cold, never hot (issue 51)
    assert data["mode"] == "hot"
    assert [s[:2] for s in switch] == [["hot", "true"], ["cold-mean", "false"]]
    # hot and cold told apart by words and symbols, not colour alone
    assert [s[2] for s in switch] == ["▲ hot", "◆ cold-mean"]
    assert "L2 flush" in switch[1][3] and "graph replay" not in switch[1][3]
    assert "graph replay" in switch[0][3]
    cold_tags = [t for t in tags if "cold-mean" in t[0]]
    assert cold_tags and all(t[0].startswith("◆") and "L2 flush" in t[1] for t in cold_tags)
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
    assert any(a[0] == "cold-mean" and a[3] == "gap" and a[4] == "case_03" for a in alerts)
    assert all(a[0] in ("hot", "cold-mean") for a in alerts) and len(alerts) <= 6
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
        browser.evaluate(
            "document.querySelector('#mode-switch button[data-mode=cold-mean]').focus()"
        )
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
    assert hot["mode"] == "hot" and cold["mode"] == "cold-mean" and set(modes) == {"cold-mean"}
    assert hot["cases"]["case_00"]["mode"] == "hot"
    assert cold["cases"]["case_00"]["mode"] == "cold-mean"
    assert "◆ cold-mean" in header and "forth" in header  # the case's current gap, in its mode
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
    # every hot run of the primary model: one of the RUNS // 2 ran on another model
    assert every["range"][1] - every["range"][0] == pytest.approx(RUNS // 2 - 1)
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
    # per mode and GPU model: 3 candidates' gaps and 4 implementations' times (case_03 has
    # one key each); hot on the H200, hot on the other model (its one run), cold on the H200
    assert charts == 3 * (3 + 4)
    # the planted history's counters step on case_03 (dashboard_history.py): explained here
    assert headings[:4] == [
        "▲ hot mode",
        "▲ hot mode · NVIDIA A100-SXM4-80GB",
        "◆ cold-mean mode",
        "Counters: what changed in the code",
    ]
    assert "harness explain" in headings[4]
    assert back == f"../index.html#{case['anchor']}"
    assert "kernelgap explain" in page.read_text()


def test_each_gpu_model_has_its_own_charts_and_a_throttled_run_is_named(site):
    """The hot run at 90% ran on another GPU model, 5% slower there; the one at 97% was
    throttled (tools/perf/dashboard_history.py)."""
    out, data = site
    primary, other = data["gpus"]
    with Browser(*FIRST_WINDOW) as browser:
        opened(browser, out)
        browser.evaluate("kernelgapSetRange('all')")
        here = scrolled_to(browser, "case_00")
        browser.evaluate("document.getElementById('chart-suite').scrollIntoView()")
        browser.evaluate("kernelgapIdle()")
        suite_here = page_state(browser)["suite"]
        browser.evaluate(f"kernelgapSetGpu({other!r})")
        browser.evaluate("document.getElementById('chart-suite').scrollIntoView()")
        browser.evaluate("kernelgapIdle()")
        suite_there = page_state(browser)["suite"]
        there = scrolled_to(browser, "case_00")
        errors = browser.errors()
    assert errors == [] and (primary, other) == ("NVIDIA H200", "NVIDIA A100-SXM4-80GB")
    # no point of the other model on this model's charts, and the other's alone on its own
    assert here["cases"]["case_00"]["gpus"] == [primary] and suite_here["gpus"] == [primary]
    assert there["cases"]["case_00"]["gpus"] == [other] and suite_there["gpus"] == [other]
    assert suite_there["points"] == 3  # its one run: a point per candidate
    # the throttled run is named where it is drawn, with the reason from its document
    for throttled in (suite_here["throttled"], here["cases"]["case_00"]["throttled"]):
        assert throttled and all(t[1] == "⚠ throttled" for t in throttled)
        assert all("HW thermal slowdown" in t[2] and "12 of 12 cases" in t[2] for t in throttled)
    assert suite_there["throttled"] == []
    page = (out / next(c for c in data["cases"] if c["id"] == "case_00")["page"]).read_text()
    assert page.count('<g class="throttled"><title>') == 2  # the hot gap and time charts


def test_a_phone_gets_one_column_no_sideways_scroll_and_every_chart_named(site):
    out, data = site
    case = next(c for c in data["cases"] if c["id"] == "case_03")
    named = (
        "[...document.querySelectorAll('.chart, svg[role=img], [role=figure]')]"
        ".filter(e => !(e.getAttribute('aria-label') || '').trim()).map(e => e.id || e.tagName)"
    )
    with Browser(*PHONE) as browser:
        opened(browser, out)
        browser.evaluate("window.scrollTo(0, document.body.scrollHeight)")
        browser.evaluate("kernelgapIdle()")
        widths = browser.evaluate(
            "[document.documentElement.scrollWidth, document.documentElement.clientWidth]"
        )
        columns = browser.evaluate(
            "getComputedStyle(document.querySelector('.first')).gridTemplateColumns.split(' ').length"
        )
        lead = browser.evaluate(
            "document.querySelector('#chart-overview svg').getBoundingClientRect().width"
        )
        unnamed = browser.evaluate(named)
        charts = browser.evaluate("document.querySelectorAll('.chart').length")
        trends = browser.evaluate("document.querySelectorAll('#chart-overview .case-trend').length")
        browser.open((out / case["page"]).as_uri())
        page_widths = browser.evaluate(
            "[document.documentElement.scrollWidth, document.documentElement.clientWidth]"
        )
        page_unnamed = browser.evaluate(named)
        page_charts = browser.evaluate("document.querySelectorAll('svg[role=img]').length")
        table = browser.evaluate(
            "document.querySelector('details.history-table table').rows.length"
        )
        browser.open(
            (out / next(r["explain"] for r in data["table"] if r["case"] == "case_03")).as_uri()
        )
        explain_widths = browser.evaluate(
            "[document.documentElement.scrollWidth, document.documentElement.clientWidth]"
        )
        errors = browser.errors()
    assert errors == []
    assert widths[0] <= widths[1] == PHONE[0] and page_widths[0] <= page_widths[1] == PHONE[0]
    assert explain_widths[0] <= explain_widths[1] == PHONE[0]
    assert columns == 1 and lead <= PHONE[0]
    assert charts == 2 + CASES and unnamed == [] and page_charts >= 4 and page_unnamed == []
    assert trends == CASES  # each case's gap trend since the start, in the first window
    assert table == 1 + 10  # the newest runs of the case's history as text
