"""The dashboard page shows what the data holds literally (names and errors that look like
Plotly's HTML subset stay text) and says where a click on a point leads, also when it leads
nowhere (a run whose raw document is not published). Headless Chromium."""

from __future__ import annotations

import hashlib

import pytest

from harness.dashboard import build_site
from harness.history.store import Store
from tests.support.browser import Browser, BrowserError, chromium_path
from tests.support.dashboard_page import draw_every_chart, read_js_json
from tests.support.harness_docs import make_document, samples


def commit(k: int) -> str:
    return hashlib.sha1(f"commit {k}".encode()).hexdigest()


NASTY_ERROR = "<b>bold</b> & template<T>"
NASTY_NAMES = ("<i>x</i>", '<a href="https://x.test/evil">ev</a>')
RAW_RUNS_SHOWN, NASTY_RUNS = 2, 5

NTH_POINT_JS = """((k) => {
  const gd = document.getElementById('chart-case-axpy');
  gd.scrollIntoView();
  const trace = gd._fullData.find(t => t.meta.panel === 'gap' && !t.meta.band && !t.meta.unstable);
  const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
  const box = gd.getBoundingClientRect();
  return [box.left + xa._offset + xa.c2p(trace.x[k]), box.top + ya._offset + ya.c2p(trace.y[k])];
})"""

FAILED_MARK_JS = """(() => {
  const gd = document.getElementById('chart-case-bad');
  gd.scrollIntoView();
  const mark = [...gd.querySelectorAll('.annotation')].find(a => a.textContent === '✕');
  const box = mark.querySelector('.annotation-text-g').getBoundingClientRect();
  return [box.left + box.width / 2, box.top + box.height / 2];
})()"""

HOVER_JS = "(document.querySelector('#{} .hoverlayer .hovertext')?.textContent || '')"


@pytest.mark.skipif(
    chromium_path() is None, reason="chromium is not installed (apt-get install chromium)"
)
def test_page_shows_names_and_errors_literally_and_says_where_clicks_lead(tmp_path):
    # Candidate names and a compiler error that look like Plotly's HTML subset; only the newest
    # 2 of 5 runs get a raw document, and no --repo-url: older points must say why a click
    # does nothing.
    db = tmp_path / "h.sqlite"
    with Store(db) as store:
        for k in range(NASTY_RUNS):
            impls = {"cuda": samples(1e-4, seed=k)}
            impls.update({n: samples(1.1e-4, seed=7 * k + i) for i, n in enumerate(NASTY_NAMES)})
            doc = make_document(
                {"axpy": impls, "bad": dict(impls)},
                commit=commit(k),
                started_utc=f"2026-12-02T0{k}:00:00Z",
                failed={"bad": NASTY_ERROR} if k == NASTY_RUNS - 1 else None,
                resamples=20,
            )
            assert store.ingest(doc, trusted=True).stored
    out = build_site(db, tmp_path / "site", raw_runs=RAW_RUNS_SHOWN).out
    ids = read_js_json(out / "data.js", "window.KERNELGAP_DATA = ")["runs"]["id"]
    assert len(ids) == NASTY_RUNS and sorted((out / "runs").iterdir()) == sorted(
        out / "runs" / f"{run_id}.json" for run_id in ids[-RAW_RUNS_SHOWN:]
    )
    with Browser(width=1400, height=1600) as browser:
        browser.open((out / "index.html").as_uri())
        draw_every_chart(browser)
        legends = browser.evaluate(
            "[...document.querySelectorAll('#chart-case-axpy .legendtext, #chart-suite "
            ".legendtext')].map(n => n.textContent)"
        )
        styled = browser.evaluate(
            "document.querySelectorAll('.js-plotly-plot a, .js-plotly-plot [style*=italic], "
            ".legendtext [style*=bold]').length"
        )
        browser.mouse(*browser.evaluate(FAILED_MARK_JS))
        failed_hover = browser.wait_for(HOVER_JS.format("chart-case-bad"))
        browser.evaluate("window.opened = []; window.open = (url) => { opened.push(url); }")
        hovers = []
        for k in (0, NASTY_RUNS - 1):  # the oldest run's point, then the newest one's
            x, y = browser.evaluate(f"{NTH_POINT_JS}({k})")
            browser.mouse(x, y)
            hovers.append(
                browser.wait_for(f"{HOVER_JS.format('chart-case-axpy')}.includes('{ids[k][:12]}')")
                and browser.evaluate(HOVER_JS.format("chart-case-axpy"))
            )
            browser.mouse(x, y, click=True)
        opened = None
        for _ in range(5):  # a click that lands while Plotly is still redrawing the hover is lost
            try:
                opened = browser.wait_for("window.opened.length && window.opened", timeout_s=6)
                break
            except BrowserError:
                x, y = browser.evaluate(f"{NTH_POINT_JS}({NASTY_RUNS - 1})")
                browser.mouse(x, y)
                browser.mouse(x, y, click=True)
        errors = browser.errors()
    assert errors == []
    for name in NASTY_NAMES:
        assert name in legends, (name, legends)
        assert f"{name} · " not in "".join(legends)  # one line per candidate, no key change
    assert styled == 0  # no <a> or <i> from the data became markup (the page bolds titles)
    assert NASTY_ERROR in failed_hover, failed_hover
    old, new = hovers
    assert (
        f"raw document not published: only the newest {RAW_RUNS_SHOWN} runs are; "
        f"rebuild with --raw-runs {NASTY_RUNS} to publish this one"
    ) in old, old
    assert "click: open the raw run document" in new and "not published" not in new, new
    assert opened == [f"runs/{ids[-1]}.json"]  # the old point's click opened nothing
