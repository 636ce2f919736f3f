"""The dashboard with swept cases: the overview keeps headline points only (no case, chart or
table row per point, the geomean over headlines), and a swept case's page draws its gap by
size (log2 x axis; the newest run solid, the oldest dashed) and its times by size."""

from __future__ import annotations

import math
import re

import pytest

from harness.dashboard import build_site
from harness.history.store import Store
from tests.support.browser import Browser, chromium_path
from tests.support.dashboard_page import read_js_json
from tests.support.sweep_documents import falling, headline_only_document, swept_document


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
    sweep = data["sweeps"]["hot"]["axpy_f64"]
    assert [p["x"] for p in sweep["latest"]["points"]] == list(range(11, 28, 2))
    assert sweep["latest"]["gaps"]["warpforth"][0] == 2.0
    assert sweep["earlier"]["gaps"]["warpforth"][0] == pytest.approx(2.6)
    assert sweep["earlier_run"].startswith("the oldest hot run that swept it")
    assert sweep["latest_run"].startswith("the newest hot run that swept it")
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


def test_a_newer_run_of_the_headline_point_alone_keeps_the_curve(tmp_path):
    """A `--point` run after the sweeps measures one point: the chart keeps the newest run
    that swept the case (it drew a single dot before), the tick labels tell 0.998x from
    1.000x, and the case's headline series takes the new point as usual."""
    db = tmp_path / "h.sqlite"
    with Store(db) as store:
        store.ingest(swept_document(earlier, run_id="3"), trusted=True)
        store.ingest(swept_document(falling, run_id="9"), trusted=True)
        store.ingest(headline_only_document(falling, run_id="12"), trusted=True)
    out = tmp_path / "site"
    build_site(db, out)
    data = read_js_json(out / "data.js", "window.KERNELGAP_DATA = ")
    sweep = data["sweeps"]["hot"]["axpy_f64"]
    assert sweep["latest"]["gaps"]["warpforth"][0] == 2.0  # run 9's curve, all 9 points
    assert all(g is not None for g in sweep["latest"]["gaps"]["warpforth"])
    assert sweep["earlier"]["gaps"]["warpforth"][0] == pytest.approx(2.6)
    case = next(c for c in data["cases"] if c["id"] == "axpy_f64")
    assert {len(s["run"]) for s in case["series"]} == {3}  # the headline series: 3 runs
    text = case_page(out).read_text()
    charts = text.split('aria-label="gap by size"')[1].split("</svg>")[0]
    assert charts.count("<polyline") == 6
    ticks = re.findall(r'text-anchor="end">([0-9.]+x)</text>', charts)
    assert 3 <= len(ticks) <= 9 and len(set(ticks)) == len(ticks), ticks


def test_gap_ticks_are_round_values_with_the_decimals_their_spacing_needs():
    """A tick labelled 1.0x sits on parity: ticks at multiples of a round step (they were
    spread evenly over the range and rounded for the label, so "1.0x" sat at 1.022)."""
    from harness.dashboard.sweep_charts import nice_step, svg
    from harness.dashboard.sweep_charts import tick_label as label

    assert [nice_step(r) for r in (0.123, 0.03, 0.0011, 0.4, 0.0)] == [0.2, 0.05, 0.002, 0.5, 1]
    assert [label(0.998 + k * 0.001, 0.001, "x") for k in range(5)] == [
        "0.998x", "0.999x", "1.000x", "1.001x", "1.002x",
    ]  # fmt: skip
    assert label(1.25, 0.25, "x") == "1.25x" and label(1.5, 0.5, "x") == "1.5x"
    assert label(80, 10, least=0) == "80" and label(82.5, 2.5, least=0) == "82.5"
    assert nice_step(0.00005) == 0.0001  # gaps within 0.0002 of each other: no repeated label
    latest = {
        "points": [{"id": f"n=2^{k}", "x": float(k)} for k in (10, 12)],
        "baseline": "cuda",
        "gaps": {"warpforth": [1.39, 1.2], "llvm": [0.899, 0.995]},
        "times": {"cuda": [1e-6, 2e-6]},
    }
    gap = svg(latest, None, {}, "").split('aria-label="gap by size"')[1].split("</svg>")[0]
    ticks = re.findall(r'y2="([0-9.]+)" stroke="#eceff2"/><text [^>]*>([0-9.]+)x</text>', gap)
    assert [t for _, t in ticks] == ["0.8", "1.0", "1.2", "1.4"], ticks  # the range covered
    parity = re.search(r'y1="([0-9.]+)" y2="\1" stroke="#5b6470"', gap).group(1)
    assert parity in {y for y, t in ticks if float(t) == 1.0}, (parity, ticks)
    wide = {**latest, "gaps": {"warpforth": [3.0, 10.0]}}  # a step above 1: parity still a tick
    gap = svg(wide, None, {}, "").split('aria-label="gap by size"')[1].split("</svg>")[0]
    labels = re.findall(r'stroke="#eceff2"/><text [^>]*>([0-9.]+)x</text>', gap)
    assert "1.0x" in [f"{float(t):.1f}x" for t in labels] and len(labels) <= 7, labels


def test_a_line_breaks_where_a_point_was_not_measured():
    from harness.dashboard.sweep_charts import svg

    latest = {
        "points": [{"id": f"n=2^{k}", "x": float(k)} for k in (11, 13, 15, 17)],
        "baseline": "cuda",
        "gaps": {"warpforth": [1.2, None, 1.1, 1.0]},  # 2^13 failed
        "times": {"cuda": [1e-6, 2e-6, 4e-6, 8e-6], "warpforth": [1.2e-6, None, 4.4e-6, 8e-6]},
    }
    text = svg(latest, None, {"warpforth": "#009e73"}, "")
    gap = text.split('aria-label="gap by size"')[1].split("</svg>")[0]
    lines = re.findall(r'<polyline points="([^"]*)"', gap)
    assert [len(p.split()) for p in lines] == [1, 2]  # 2^11 alone, then 2^15-2^17
    assert gap.count("<circle") == 3


def test_runs_of_another_case_or_of_two_points_never_replace_the_curve(tmp_path):
    """After two full sweeps: a run without axpy_f64 and a run of two of its nine points
    (a sweep cut short) leave the chart on run 9's full curve, against run 3's."""
    from runner.document import summary

    other = swept_document(falling, run_id="12")
    other["cases"] = [c for c in other["cases"] if c["id"] != "axpy_f64"]
    other["summary"] = summary(other["cases"])
    partial = swept_document(lambda pid: {"warpforth": 3.0, "llvm": 1.0, "handptx": 1.0}, "15")
    block = next(c for c in partial["cases"] if c["id"] == "axpy_f64")
    block["points"] = [p for p in block["points"] if p.get("headline")] + block["points"][:1]
    partial["summary"] = summary(partial["cases"])
    db = tmp_path / "h.sqlite"
    with Store(db) as store:
        for doc in (swept_document(earlier, run_id="3"), swept_document(falling, run_id="9")):
            store.ingest(doc, trusted=True)
        store.ingest(other, trusted=True)
        store.ingest(partial, trusted=True)
    out = tmp_path / "site"
    build_site(db, out)
    sweep = read_js_json(out / "data.js", "window.KERNELGAP_DATA = ")["sweeps"]["hot"]["axpy_f64"]
    assert sweep["latest"]["gaps"]["warpforth"][0] == 2.0
    assert None not in sweep["latest"]["gaps"]["warpforth"]
    assert sweep["earlier"]["gaps"]["warpforth"][0] == pytest.approx(2.6)


def test_gab_keeps_the_headline_point_summarises_the_others_and_thins_old_runs(
    tmp_path, monkeypatch
):
    from harness.dashboard import gab
    from harness.history.store import Store

    db = tmp_path / "history.sqlite"
    with Store(db) as store:
        for k in range(6):
            store.ingest(swept_document(falling, run_id=str(k)), trusted=True)
    monkeypatch.setattr(gab, "FULL_RUNS", 2)
    monkeypatch.setattr(gab, "THIN", 3)
    with Store(db, readonly=True) as store:
        (entries,) = gab.github_action_benchmark_data(store)["entries"].values()
    names = [[b["name"] for b in e["benches"]] for e in entries]
    newest = {b["name"]: b for b in entries[-1]["benches"]}
    # the headline point (n=2^27) as its own entry, the other 8 points as one per candidate
    assert newest["axpy_f64/v1/gap/warpforth"]["value"] == pytest.approx(1.0)
    summary = newest["axpy_f64/v1/sweep_geomean_gap/warpforth"]
    assert summary["unit"].endswith(", 8 points")
    falls = [1.0 + (27 - k) / 16 for k in range(11, 27, 2)]
    expected = math.exp(sum(map(math.log, falls)) / len(falls))
    assert summary["value"] == pytest.approx(expected, rel=1e-4)
    assert not any("[" in n for n in newest)  # no point's own entry
    # within the newest FULL_RUNS every run keeps its cases; older, only every THIN-th age
    kept = [any("/gap/" in n for n in run) for run in names]
    assert kept == [False, False, True, False, True, True]  # ages 5, 4, 3, 2, 1, 0
    assert all(any(n.startswith("suite/") for n in run) for run in names)


def test_a_point_id_that_gives_no_size_has_no_position(tmp_path):
    """A schema-valid point id whose value is no number (`n=2^13x`) ended `harness dashboard` in
    a ValueError; it is left off the size charts, the other points drawn."""
    from click.testing import CliRunner

    from harness.cli import main
    from protocol.validation import validator

    document = swept_document(falling, run_id="4")
    case = next(c for c in document["cases"] if c["id"] == "axpy_f64")
    odd = next(p for p in case["points"] if p["point"] == "n=2^13")
    odd["point"] = "n=2^13x"
    assert not list(validator("result").iter_errors(document))
    db = tmp_path / "h.sqlite"
    with Store(db) as store:
        store.ingest(document, trusted=True)
    done = CliRunner().invoke(main, ["dashboard", "--db", str(db), "--out", str(tmp_path / "s")])
    assert done.exception is None or isinstance(done.exception, SystemExit), done.exception
    assert done.exit_code == 0, done.output[-2000:]
    text = case_page(tmp_path / "s").read_text()
    charts = text.split('aria-label="gap by size"')[1].split("</svg>")[0]
    assert ">2^11</text>" in charts and ">2^15</text>" in charts
    assert "2^13" not in charts and charts.count("<circle") == 3 * 8  # 3 candidates, 8 points


def test_gab_suite_geomeans_are_gaps_by_runs_over_every_series(tmp_path):
    """gab's suite geomeans (grouped with numpy) equal the mean ln gap of each run's cases in
    geomeans.gaps_by_run, also where a source change splits a case into two series and where
    two series give one run the same case (the later one counts, as in its dict)."""
    import dataclasses

    import numpy as np

    from harness.dashboard import gab
    from harness.dashboard.case_charts import read_series
    from harness.dashboard.geomeans import gaps_by_run

    db = tmp_path / "history.sqlite"
    with Store(db) as store:
        for k in range(5):
            document = swept_document(earlier if k % 2 else falling, run_id=str(k))
            if k >= 3:  # a new source: new series of every point of the swept case
                for case in document["cases"]:
                    for impl in case["implementations"].values():
                        if impl.get("build"):
                            impl["build"]["source_sha256"] = "e" * 64
            store.ingest(document, trusted=True)
    with Store(db, readonly=True) as store:
        series = read_series(store, store.runs())
    candidate = next(s for s in series if s.info["role"] == "candidate" and s.run.size > 1)
    twice = dataclasses.replace(candidate, gap=candidate.gap * 1.5)  # the same runs and case
    for every in (series, [*series, twice]):
        expected: dict[int, dict[str, float]] = {}
        for key, per_run in gaps_by_run(every)[0].items():
            for run, cases in per_run.items():
                mean = math.fsum(v[0] for v in cases.values()) / len(cases)
                expected.setdefault(run, {})[key[3]] = math.exp(mean)
        assert gab._suite_geomeans(every) == expected
    split = [(s.info["case_id"], s.info["impl"]) for s in series if s.info["role"] == "candidate"]
    assert len(split) > len(set(split))  # a case in two series of a key
    assert not np.array_equal(twice.gap, candidate.gap)
