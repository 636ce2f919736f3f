"""The dashboard's change-point marks and open alerts (harness.dashboard.alerts, marks.js), and
the size of its github-action-benchmark data (harness.dashboard.gab)."""

from __future__ import annotations

import numpy as np
import pytest

from harness.dashboard import build_site
from harness.dashboard.gab import GAB_DATA
from harness.history.store import Store
from tests.support.browser import Browser, chromium_path
from tests.support.dashboard_page import draw_every_chart, read_js_json
from tests.support.harness_docs import make_document, samples

RUNS = 40
STEP_AT = 20  # axpy's forth is 8% slower from this run on: a change point, long since the newest
NEWEST_SLOWER = 1.2  # scale's forth is 20% slower in the newest run only: a newest-point alert


def run_document(k: int) -> dict:
    rng = np.random.default_rng(k)
    axpy = 1.2e-3 * (1.08 if k >= STEP_AT else 1.0) * (1 + 0.004 * rng.uniform(-1, 1))
    scale = 2.4e-6 * (NEWEST_SLOWER if k == RUNS - 1 else 1.0) * (1 + 0.004 * rng.uniform(-1, 1))
    cases = {
        "axpy": {"cuda": samples(1e-3, seed=k), "forth": samples(axpy, seed=100 + k)},
        "scale": {"cuda": samples(2e-6, seed=200 + k), "forth": samples(scale, seed=300 + k)},
    }
    return make_document(
        cases, commit=f"{k:040x}", started_utc=f"2026-12-01T10:{k:02d}:00Z", resamples=50
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    db = tmp_path_factory.mktemp("history") / "history.sqlite"
    with Store(db) as store:
        for k in range(RUNS):
            assert store.ingest(run_document(k), trusted=True).stored
    out = tmp_path_factory.mktemp("site") / "site"
    build_site(db, out, formats=("github-action-benchmark",))
    return out, read_js_json(out / "data.js", "window.KERNELGAP_DATA = ")


def test_data_marks_the_step_and_lists_the_open_alerts(site):
    out, data = site
    axpy = next(c for c in data["cases"] if c["id"] == "axpy")
    steps = [m for m in axpy["changes"] if m["kind"] == "step" and m["impl"] == "forth"]
    assert {m["metric"] for m in steps} == {"gap", "time"}
    for m in steps:
        assert data["runs"]["commit"][m["run"]] == f"{STEP_AT:040x}"  # the first run after it
        assert data["runs"]["commit"][m["from"]] == f"{STEP_AT - 1:040x}"
        assert m["relative"] == pytest.approx(0.08, abs=0.01)
    # Two changes, two events, the bigger first: scale's newest run (+20%), then axpy's step,
    # 20 runs old and within the regression rule's window of recent points (Policy.window)
    event, step = data["alerts"]
    assert event["kind"] == "gap" and event["cases"] == ["scale"] and event["mode"] == "hot"
    assert {(a["metric"], a["kind"]) for a in event["series"]} == {
        ("gap", "newest point"),
        ("time", "newest point"),
    }
    assert all(a["direction"] == "slower" and a["anchor"] for a in event["series"])
    assert data["runs"]["commit"][event["run"]] == f"{RUNS - 1:040x}"
    assert step["cases"] == ["axpy"] and {a["kind"] for a in step["series"]} == {"step"}
    assert data["runs"]["commit"][step["run"]] == f"{STEP_AT:040x}"
    assert (out / "marks.js").is_file()
    assert '<script src="marks.js"></script>' in (out / "index.html").read_text()


def test_github_action_benchmark_data_keeps_gaps_and_names_the_raw_document(site):
    out, _ = site
    gab = read_js_json(out / GAB_DATA, "window.BENCHMARK_DATA = ")
    (entries,) = gab["entries"].values()
    assert len(entries) == RUNS
    last = entries[-1]
    names = [b["name"] for b in last["benches"]]
    assert names == ["axpy/v1/gap/forth", "scale/v1/gap/forth", "suite/geomean_gap/forth"]
    assert all(set(b) == {"name", "unit", "value"} for b in last["benches"])
    assert "raw document: runs/" in last["commit"]["message"]
    per_run = (out / GAB_DATA).stat().st_size / RUNS
    assert per_run < 2_000  # 2 cases: a 67-case suite stays under 10 kB a run (RESULTS.md)


@pytest.mark.skipif(
    chromium_path() is None, reason="chromium is not installed (apt-get install chromium)"
)
def test_the_page_shows_the_alerts_on_top_and_the_marks_on_the_charts(site, tmp_path):
    out, _ = site
    with Browser(width=1400, height=1600) as browser:
        browser.open((out / "index.html").as_uri())
        state = draw_every_chart(browser)
        items = browser.evaluate(
            "[...document.querySelectorAll('#alerts ul.alerts > li')].map(li => li.textContent)"
        )
        alerts_top = browser.evaluate(
            "document.getElementById('alerts').getBoundingClientRect().top"
        )
        dashed = browser.evaluate(
            "document.getElementById('chart-case-axpy').layout.shapes"
            ".filter(s => s.line && s.line.dash === 'dash' && s.xref !== 'x domain').length"
        )
        browser.screenshot(tmp_path / "marks.png")
    assert state["errors"] == [] and state["alerts"] == len(items) == 2
    assert "scale" in items[0] and "axpy" in items[1] and all("slower" in t for t in items)
    assert all(text.startswith("▲ hot") for text in items)  # each alert names its mode
    assert alerts_top < 1000  # in the first window, beside the lead chart
    assert dashed == 1  # the step, in the gap panel (the one shown)


# Each step label's box and every point of the lowest series of its chart's panel, in px.
LABELS_AND_LOWEST_JS = """((id) => {
  const gd = document.getElementById(id);
  gd.scrollIntoView();
  const box = gd.getBoundingClientRect(), fl = gd._fullLayout;
  const labels = [...gd.querySelectorAll('.annotation')]
    .filter(a => /^[▲▼]/.test(a.textContent))
    .map(a => { const r = a.querySelector('.annotation-text-g').getBoundingClientRect();
                return [r.left, r.top, r.right, r.bottom]; });
  const lines = gd._fullData.filter(t => t.meta && !t.meta.band && !t.meta.unstable && t.y.length);
  const median = (ys) => { const s = [...ys].sort((a, b) => a - b); return s[s.length >> 1]; };
  const lowest = lines.reduce((a, b) => (median(b.y) < median(a.y) ? b : a));
  const xa = fl[lowest.xaxis.replace('x', 'xaxis')], ya = fl[lowest.yaxis.replace('y', 'yaxis')];
  const points = lowest.x.map((x, k) => [box.left + xa._offset + xa.d2p(x),
                                          box.top + ya._offset + ya.d2p(lowest.y[k])]);
  return { labels, points, name: lowest.name };
})"""


@pytest.mark.skipif(
    chromium_path() is None, reason="chromium is not installed (apt-get install chromium)"
)
def test_no_step_label_covers_a_point_of_the_lowest_series(site, tmp_path):
    """Step labels were drawn at the foot of a panel, over the lowest series' points (issue 51
    item 8): each chart with a label leaves room under its points for them."""
    out, _ = site
    with Browser(width=1400, height=1600) as browser:
        browser.open((out / "index.html").as_uri())
        draw_every_chart(browser)
        panels = {"gap": browser.evaluate(LABELS_AND_LOWEST_JS + "('chart-case-axpy')")}
        browser.evaluate("document.querySelector('#case-axpy button[data-panel=times]').click()")
        browser.evaluate("kernelgapIdle()")
        panels["times"] = browser.evaluate(LABELS_AND_LOWEST_JS + "('chart-case-axpy')")
        browser.screenshot(tmp_path / "labels.png")
    assert panels["times"]["name"].startswith("cuda")  # the baseline: the lowest times
    r = 3  # a marker's radius and a pixel
    for panel, found in panels.items():
        assert found["labels"] and found["points"], (panel, found)
        covered = [
            (p, box)
            for p in found["points"]
            for box in found["labels"]
            if box[0] - r <= p[0] <= box[2] + r and box[1] - r <= p[1] <= box[3] + r
        ]
        assert not covered, (panel, found["name"], covered[:3])
