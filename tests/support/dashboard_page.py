"""What the dashboard's browser tests do with its page: it draws each chart only when it comes
into (or near) the window, so a test that reads every chart scrolls them all into view first."""

from __future__ import annotations

import orjson

from tests.support.browser import Browser

__all__ = ["draw_every_chart", "page_state", "read_js_json"]


def draw_every_chart(browser: Browser, timeout_s: float = 60.0) -> dict:
    """Scroll the open dashboard through, a window at a time, until every chart is drawn (the
    page says so: data-rendered 'all'); back at the top. The page's render state."""
    browser.wait_for("document.body.dataset.rendered", timeout_s=timeout_s)
    browser.scroll_through("kernelgapIdle()")
    browser.wait_for("document.body.dataset.rendered === 'all'", timeout_s=timeout_s)
    return page_state(browser)


def page_state(browser: Browser) -> dict:
    """What the page says it drew (app.js's <script id="render-state">)."""
    return browser.evaluate("JSON.parse(document.getElementById('render-state').textContent)")


def read_js_json(path, prefix: str):
    """The JSON a site's .js data file holds after `prefix` (`window.KERNELGAP_DATA = `)."""
    text = path.read_text()
    assert text.startswith(prefix), text[:80]
    return orjson.loads(text[len(prefix) :].rstrip().rstrip(";"))
