"""The dashboard: built from a synthetic history, then opened from file:// in headless Chromium.

The history (12 runs, one hour apart, one commit each; baseline 'cuda', candidates 'llvm' and
'handptx'): axpy's llvm steps 10% slower from run 8 on; reduce's llvm source changes at run 6
(a new series key: two traces); matmul's llvm is unstable in run 4; in the newest run transpose
failed and matmul's handptx is unstable (so the headline leaves both out).
"""

from __future__ import annotations

import hashlib
import math
import shutil

import numpy as np
import orjson
import pytest
from click.testing import CliRunner

from harness.cli import main
from harness.dashboard import build_site, collect, display_indices
from harness.dashboard.build import (
    GAB_DATA,
    MAX_POINTS,
    TAIL_POINTS,
    github_action_benchmark_data,
)
from harness.history.store import Store
from tests.support.browser import Browser, chromium_path
from tests.support.dashboard_page import draw_every_chart, page_state, read_js_json
from tests.support.harness_docs import default_source_sha, make_document, samples

RUNS = 12
CASES = {"axpy": 100e-6, "reduce": 40e-6, "matmul": 2e-3, "transpose": 8e-6}  # baseline medians
FACTORS = {"llvm": 1.05, "handptx": 0.97}  # candidate / baseline before any change
STEP_RUN, SOURCE_RUN, UNSTABLE_RUN = 8, 6, 4
SCREENSHOT_COPY = "/tmp/kernelgap-dashboard.png"


def commit(k: int) -> str:
    return hashlib.sha1(f"commit {k}".encode()).hexdigest()


def run_samples(k: int) -> dict[str, dict[str, list[float]]]:
    """The synthetic samples of run k: {case: {impl: samples_s}}."""
    cases = {}
    for c, (case_id, base_s) in enumerate(CASES.items()):
        impls = {"cuda": samples(base_s, seed=1000 * k + 10 * c)}
        for i, (name, factor) in enumerate(FACTORS.items(), start=1):
            if case_id == "axpy" and name == "llvm" and k >= STEP_RUN:
                factor *= 1.10
            if case_id == "reduce" and name == "llvm" and k >= SOURCE_RUN:
                factor *= 0.9  # the new source is faster
            impls[name] = samples(base_s * factor, seed=1000 * k + 10 * c + i)
        cases[case_id] = impls
    return cases


def run_document(k: int) -> dict:
    unstable = [("matmul", "llvm")] if k == UNSTABLE_RUN else []
    failed = None
    if k == RUNS - 1:
        unstable.append(("matmul", "handptx"))
        failed = {"transpose": "synthetic: launch timed out"}
    source = {
        ("reduce", "llvm"): default_source_sha("reduce", "llvm", "v2" if k >= SOURCE_RUN else "")
    }
    return make_document(
        run_samples(k),
        commit=commit(k),
        started_utc=f"2026-11-{10 + k // 24:02d}T{k % 24:02d}:00:00Z",
        unstable=unstable,
        failed=failed,
        source_sha=source,
        resamples=50,
    )


def expected_logs(k: int) -> dict[str, dict[str, float]]:
    """{candidate: {case: ln gap}} over the cases of run k with a gap (unstable ones in), from
    the samples alone."""
    skip = {("transpose", n) for n in FACTORS} if k == RUNS - 1 else set()  # failed
    return {
        name: {
            case_id: math.log(np.median(impls[name]) / np.median(impls["cuda"]))
            for case_id, impls in run_samples(k).items()
            if (case_id, name) not in skip
        }
        for name in FACTORS
    }


def expected_geomeans(k: int) -> dict[str, float]:
    """Geomean gap per candidate over the cases of run k with a gap, from the samples alone."""
    return {
        name: math.exp(sum(logs.values()) / len(logs)) for name, logs in expected_logs(k).items()
    }


def expected_changes(k: int, j: int) -> dict[str, tuple[float, int]]:
    """{candidate: (change of run k against run j, cases)} over the cases with a gap in both."""
    now, before = expected_logs(k), expected_logs(j)
    out = {}
    for name in FACTORS:
        common = now[name].keys() & before[name].keys()
        ratio = math.exp(sum(now[name][c] - before[name][c] for c in common) / len(common))
        out[name] = (ratio - 1, len(common))
    return out


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    db = tmp_path_factory.mktemp("history") / "history.sqlite"
    with Store(db) as store:
        for k in range(RUNS):
            assert store.ingest(run_document(k), trusted=True).stored
    return db


@pytest.fixture(scope="module")
def site(history, tmp_path_factory):
    out = tmp_path_factory.mktemp("site") / "site"
    report = build_site(history, out, formats=("github-action-benchmark",))
    return out, report


def test_site_files(site, history):
    out, report = site
    for name in ("index.html", "app.js", "data.js", "plotly.min.js"):
        assert (out / name).is_file(), name
    page = (out / "index.html").read_text()
    assert "cdn" not in page.lower() and "http" not in page
    # app.js loads plotly.min.js from beside the page once the first view is on screen.
    assert '"plotly.min.js"' in (out / "app.js").read_text()
    for script in ("data.js", "marks.js", "overview.js", "charts.js", "lazy.js", "app.js"):
        assert f'<script src="{script}"></script>' in page and (out / script).is_file(), script
    import plotly

    shipped = __import__("pathlib").Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    assert (out / "plotly.min.js").read_bytes() == shipped.read_bytes()
    data = read_js_json(out / "data.js", "window.KERNELGAP_DATA = ")
    assert data["counts"]["runs"] == RUNS == report.runs
    # Every drawn run's raw document is published (12 < RAW_RUNS) and equals the stored one.
    assert all(data["runs"]["raw"])
    with Store(history, readonly=True) as store:
        for run_id in data["runs"]["id"]:
            assert orjson.loads((out / "runs" / f"{run_id}.json").read_bytes()) == (
                store.raw_document(run_id)
            )


def test_build_leaves_the_store_alone(history, tmp_path):
    before = hashlib.sha256(history.read_bytes()).hexdigest()
    build_site(history, tmp_path / "a", max_points=50)
    assert hashlib.sha256(history.read_bytes()).hexdigest() == before


def test_data_keeps_series_keys_apart(site):
    data = read_js_json(site[0] / "data.js", "window.KERNELGAP_DATA = ")
    cases = {c["id"]: c for c in data["cases"]}
    assert list(cases) == list(CASES)
    reduce_llvm = [s for s in cases["reduce"]["series"] if s["impl"] == "llvm"]
    assert [s["name"] for s in reduce_llvm] == ["llvm", "llvm · source changed"]
    # The old source's points end where the new one's begin: no run is on both.
    first, second = reduce_llvm
    assert max(first["run"]) < min(second["run"])
    assert len(first["run"]) == SOURCE_RUN and len(second["run"]) == RUNS - SOURCE_RUN
    matmul_llvm = next(s for s in cases["matmul"]["series"] if s["impl"] == "llvm")
    assert matmul_llvm["ok"].count(0) == 1 and matmul_llvm["gap_ok"].count(0) == 1
    table = {(r["case"], r["candidate"]): r["status"] for r in data["table"]}
    assert table[("transpose", None)] == "failed"
    assert table[("matmul", "handptx")] == "unstable"
    assert table[("axpy", "llvm")] == "stable"


def test_new_suite_version_starts_new_lines(tmp_path):
    db = tmp_path / "h.sqlite"
    with Store(db) as store:
        for k in range(5):
            cases = {"axpy": {"cuda": samples(1e-4, seed=k), "llvm": samples(1.1e-4, seed=50 + k)}}
            started = f"2026-12-01T0{k}:00:00Z"
            doc = make_document(
                cases, suite_version=1 + (k >= 3), started_utc=started, resamples=20
            )
            store.ingest(doc, trusted=True)
    with Store(db, readonly=True) as store:
        data = collect(store)
    names = [s["name"] for s in data["cases"][0]["series"]]
    assert names == ["cuda (baseline)", "cuda (baseline) · suite v2", "llvm", "llvm · suite v2"]
    assert [len(s["run"]) for s in data["cases"][0]["series"]] == [3, 2, 3, 2]
    assert [(t["name"], len(t["run"])) for t in data["suite"]] == [
        ("llvm", 3),
        ("llvm · suite v2", 2),
    ]
    # The headline compares with the previous run of the same suite version only.
    card = data["latest"]["cards"][0]
    assert card["suite_version"] == 2 and data["runs"]["date"][card["previous"]["run"]].startswith(
        "2026-12-01 03:00"
    )


def test_display_indices_trim_for_display_only():
    n = 1000
    unstable = np.zeros(n, bool)
    unstable[123] = True
    values = np.ones(n)
    values[500:] = 1.2  # a step between 499 and 500
    kept = display_indices(n, unstable, (values,), max_points=MAX_POINTS)
    assert len(kept) <= MAX_POINTS + 4  # the stride's share, the tail, 1 unstable, 2 step sides
    assert {123, 499, 500, 0, n - 1} <= set(kept.tolist())
    assert set(range(n - TAIL_POINTS, n)) <= set(kept.tolist())
    assert list(kept) == sorted(kept)
    assert display_indices(10, np.zeros(10, bool)).tolist() == list(range(10))


def test_github_action_benchmark_layout(site):
    gab = read_js_json(site[0] / GAB_DATA, "window.BENCHMARK_DATA = ")
    assert set(gab) == {"lastUpdate", "repoUrl", "entries"}
    assert isinstance(gab["lastUpdate"], int)
    assert list(gab["entries"]) == ["kernelgap NVIDIA H200 hot suite v1"]
    entries = gab["entries"]["kernelgap NVIDIA H200 hot suite v1"]
    assert len(entries) == RUNS
    assert [e["commit"]["id"] for e in entries] == [commit(k) for k in range(RUNS)]
    assert [e["date"] for e in entries] == sorted(e["date"] for e in entries)
    first = entries[0]
    assert first["tool"] == "customSmallerIsBetter"
    assert set(first["commit"]) >= {"id", "message", "timestamp", "url"}
    assert first["commit"]["committer"]["username"]  # that action's page reads it
    names = {b["name"]: b for b in entries[-1]["benches"]}
    # Gaps and geomeans only, without range and extra: times, intervals and provenance stay in
    # the raw document the run's message names (harness.dashboard.gab).
    for bench in names.values():
        assert set(bench) == {"name", "value", "unit"}
    assert "axpy/v1/cuda" not in names and names["axpy/v1/gap/handptx"]["unit"] == "x cuda"
    assert f"runs/{entries[-1]['commit']['message'].split('runs/')[1]}".endswith(".json)")
    expected = expected_geomeans(RUNS - 1)
    for name, value in expected.items():
        assert names[f"suite/geomean_gap/{name}"]["value"] == pytest.approx(value, rel=1e-4)


def test_github_action_benchmark_key_per_gpu_mode_suite(tmp_path):
    # That action draws one line per bench name across a key's entries: runs on another GPU,
    # mode or suite version must sit under another key, or its page would join them.
    runs = [
        ("NVIDIA H200", "hot", 1),
        ("NVIDIA H100 80GB HBM3", "hot", 1),
        ("NVIDIA H200", "hot", 1),
        ("NVIDIA H200", "cold", 1),
        ("NVIDIA H200", "hot", 2),
    ]
    db = tmp_path / "h.sqlite"
    with Store(db) as store:
        for k, (gpu, mode, version) in enumerate(runs):
            cases = {"axpy": {"cuda": samples(1e-4, seed=k), "llvm": samples(1.1e-4, seed=9 + k)}}
            doc = make_document(
                cases,
                gpu=gpu,
                mode=mode,
                suite_version=version,
                commit=commit(k),
                started_utc=f"2026-12-01T0{k}:00:00Z",
                resamples=20,
            )
            assert store.ingest(doc, trusted=True).stored
    with Store(db, readonly=True) as store:
        gab = github_action_benchmark_data(store)
    by_key = {key: [e["commit"]["id"] for e in entries] for key, entries in gab["entries"].items()}
    assert by_key == {
        "kernelgap NVIDIA H200 hot suite v1": [commit(0), commit(2)],
        "kernelgap NVIDIA H100 80GB HBM3 hot suite v1": [commit(1)],
        "kernelgap NVIDIA H200 cold suite v1": [commit(3)],
        "kernelgap NVIDIA H200 hot suite v2": [commit(4)],
    }


def test_headline_keeps_its_fixed_set_of_cases(tmp_path):
    # Case b (gap 2.0) turns unstable in run 1 and case c (1.5) fails in run 2; no gap moves.
    # Over stable cases only the geomean would fall from 1.442x to 1.225x in run 1; over the
    # fixed set it stays 1.442x, b marked unstable, and run 2 is over 2 of 3 cases, c missing.
    gaps = {"a": 1.0, "b": 2.0, "c": 1.5}
    db = tmp_path / "h.sqlite"
    with Store(db) as store:
        for k in range(3):
            cases = {
                c: {"cuda": samples(1e-4, seed=k), "llvm": samples(1e-4 * g, seed=k)}
                for c, g in gaps.items()
            }
            doc = make_document(
                cases,
                started_utc=f"2026-12-01T0{k}:00:00Z",
                unstable=[("b", "llvm")] if k == 1 else (),
                failed={"c": "synthetic: launch timed out"} if k == 2 else None,
                resamples=20,
            )
            assert store.ingest(doc, trusted=True).stored
    with Store(db, readonly=True) as store:
        data = collect(store)
    (card,) = data["latest"]["cards"]
    assert card["gap"] == pytest.approx(math.sqrt(1.0 * 2.0), rel=1e-9)
    assert (card["cases"], card["of"], card["missing"], card["unstable"]) == (2, 3, ["c"], [])
    assert card["ci_low"] <= card["gap"] <= card["ci_high"]
    previous = card["previous"]
    assert previous["gap"] == pytest.approx((1.0 * 2.0 * 1.5) ** (1 / 3), rel=1e-9)
    assert (previous["cases"], previous["common"]) == (3, 2)
    assert card["change"] == pytest.approx(0.0, abs=1e-12)
    (trace,) = data["suite"]
    assert trace["gap"][:2] == pytest.approx([(1.0 * 2.0 * 1.5) ** (1 / 3)] * 2, rel=1e-4)
    assert (trace["cases"], trace["of"], trace["unstable"]) == ([3, 3, 2], [3, 3, 3], [0, 1, 0])
    assert trace["cases_note"] == ["", "", "missing: c"]  # the set did not change; c has no gap
    assert all(
        lo <= g <= hi for lo, g, hi in zip(trace["lo"], trace["gap"], trace["hi"], strict=True)
    )


def test_cli(history, tmp_path):
    runner = CliRunner()
    out = tmp_path / "cli-site"
    result = runner.invoke(
        main,
        ["dashboard", "--db", str(history), "--out", str(out), "--repo-url", "https://x.test/r/"],
    )
    assert result.exit_code == 0, result.output
    assert "index.html" in result.stderr and not (out / GAB_DATA).exists()
    assert result.stdout == ""  # what was written is progress: stderr
    data = read_js_json(out / "data.js", "window.KERNELGAP_DATA = ")
    assert data["repo_url"] == "https://x.test/r"
    missing = runner.invoke(
        main, ["dashboard", "--db", str(tmp_path / "no.sqlite"), "--out", str(out)]
    )
    assert missing.exit_code == 2 and "no history database" in missing.output
    bad_url = runner.invoke(
        main, ["dashboard", "--db", str(history), "--out", str(out), "--repo-url", "javascript:x"]
    )
    assert bad_url.exit_code == 2 and "--repo-url" in bad_url.output


POINT_JS = """(() => {
  const gd = document.getElementById('chart-case-axpy');
  gd.scrollIntoView();
  const trace = gd._fullData.find(t => t.name === 'llvm' && t.meta.panel === 'gap');
  const k = trace.x.length - 1, xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
  const box = gd.getBoundingClientRect();
  return [box.left + xa._offset + xa.c2p(trace.x[k]), box.top + ya._offset + ya.c2p(trace.y[k])];
})()"""


@pytest.mark.skipif(
    chromium_path() is None, reason="chromium is not installed (apt-get install chromium)"
)
def test_page_in_headless_chromium(site, history, tmp_path):
    out, _ = site
    with_repo = build_site(history, tmp_path / "with-repo", repo_url="https://x.test/r").out
    with Browser(width=1400, height=2400) as browser:
        browser.open((out / "index.html").as_uri())
        state = draw_every_chart(browser)
        shot = browser.screenshot(tmp_path / "dashboard.png")
        browser.screenshot(tmp_path / "dashboard-full.png", full_page=True)
        cards = browser.evaluate(
            "[...document.querySelectorAll('.card')].map(c => [c.dataset.candidate, "
            "Number(c.dataset.gap), Number(c.dataset.change), c.querySelector('.big').textContent, "
            "c.querySelector('.delta').textContent])"
        )
        traces = browser.evaluate(
            "Object.fromEntries([...document.querySelectorAll('#case-list .chart')].map(d => "
            "[d.dataset.case, d.data.filter(t => !t.meta.band).map(t => [t.meta.panel, t.name, "
            "t.x.length, t.marker.symbol || 'circle'])]))"
        )
        rows = browser.evaluate(
            "[...document.querySelectorAll('#gap-table tbody tr')].map(r => [r.dataset.case, "
            "r.dataset.candidate || null, r.dataset.status, r.querySelector('a').getAttribute('href')])"
        )
        failed_marks = browser.evaluate(
            "document.getElementById('chart-case-transpose').layout.annotations"
            ".filter(a => a.text === '✕').length"
        )
        # Each case shows its gaps; its times are one click away.
        browser.evaluate("kernelgapSetPanel('matmul', 'times')")
        browser.evaluate("kernelgapIdle()")
        times = browser.evaluate(
            "document.getElementById('chart-case-matmul').data.filter(t => !t.meta.band)"
            ".map(t => [t.meta.panel, t.name, t.x.length, t.marker.symbol || 'circle'])"
        )
        matmul = page_state(browser)["cases"]["matmul"]
        lead_rows = browser.evaluate(
            "[...document.querySelectorAll('#chart-overview svg a')].map(a => "
            "[a.querySelector('text').firstChild.nodeValue, a.getAttribute('href')])"
        )
        lead_points = browser.evaluate(
            "[...document.querySelectorAll('#chart-overview g.point')].map(g => [g.dataset.case, "
            "g.dataset.candidate, g.querySelector('circle').getAttribute('fill')])"
        )
        # Hover the newest point of axpy's llvm gap, then click it (window.open is recorded).
        x, y = browser.evaluate(POINT_JS)
        browser.mouse(x, y)
        hover = browser.wait_for("document.querySelector('.hoverlayer .hovertext')?.textContent")
        browser.evaluate("window.open = (url) => { window.openedUrl = url; return null; }")
        browser.mouse(x, y, click=True)
        opened = browser.wait_for("window.openedUrl")
        # The x axis switches to dates (axpy's chart, in view, is drawn again at once).
        browser.evaluate("window.kernelgapSetX('date')")
        browser.evaluate("kernelgapIdle()")
        date_x = browser.evaluate(
            "document.getElementById('chart-case-axpy')._fullLayout.xaxis.type"
        )
        errors = browser.errors()
        browser.open((with_repo / "index.html").as_uri())
        browser.wait_for("document.body.dataset.rendered", timeout_s=60)
        repo_link = browser.evaluate("window.kernelgapLink(window.KERNELGAP_DATA.latest.run)")
        errors += browser.errors()
    shutil.copyfile(shot, SCREENSHOT_COPY)

    assert errors == [] and state["errors"] == []
    # Headline: the newest run's geomean gap over its fixed set (matmul, unstable for handptx,
    # in it; transpose, failed, missing), and its change against run 10 over the cases with a
    # gap in both.
    latest, changes = expected_geomeans(RUNS - 1), expected_changes(RUNS - 1, RUNS - 2)
    assert {name: n for name, (_, n) in changes.items()} == {"llvm": 3, "handptx": 3}
    assert sorted(c[0] for c in cards) == sorted(FACTORS)
    for name, gap, change, text, delta in cards:
        assert gap == pytest.approx(latest[name], rel=1e-12)
        assert change == pytest.approx(changes[name][0], rel=1e-9, abs=1e-12)
        assert f"over the {changes[name][1]} cases in both" in delta, delta
        assert text == f"{latest[name]:.3f}x"
    assert {h["candidate"]: h["cases"] for h in state["headline"]} == {"llvm": 3, "handptx": 3}
    # Table: one row per candidate of an ok case, one for the failed case, linked to its charts.
    assert len(rows) == 3 * 2 + 1
    assert ["transpose", None, "failed", "#case-transpose"] in rows
    assert ["matmul", "handptx", "unstable", "#case-matmul"] in rows
    assert failed_marks == 1  # the newest run, in the panel shown
    # The lead chart: a row per case with a gap, the largest (llvm's, the first candidate) on
    # top, linked to its charts; unstable points hollow.
    table = read_js_json(out / "data.js", "window.KERNELGAP_DATA = ")["table"]
    llvm = {r["case"]: r["gap"] for r in table if r["candidate"] == "llvm" and r["gap"]}
    assert lead_rows == [[c, f"#case-{c}"] for c in sorted(llvm, key=llvm.get, reverse=True)]
    assert len(lead_points) == 2 * len(llvm) == 6
    hollow = [p[:2] for p in lead_points if p[2] == "#fff"]
    assert hollow == [["matmul", "handptx"]]
    # Every case shows its gap panel at open, its times a click away; the new source of
    # reduce/llvm is a second trace.
    assert set(traces) == set(CASES) == set(state["cases"])
    for case_id, case in state["cases"].items():
        assert case["panel"] == "gap" and case["mode"] == "hot", case_id
        assert "cuda (baseline)" not in case["traces"]
    assert matmul["panel"] == "times" and "cuda (baseline)" in matmul["traces"]
    gap_names = [t[1] for t in traces["reduce"] if t[0] == "gap"]
    assert gap_names == ["handptx", "llvm", "llvm · source changed"]
    llvm = {t[1]: t[2] for t in traces["reduce"] if t[0] == "gap" and t[1].startswith("llvm")}
    assert llvm == {"llvm": SOURCE_RUN, "llvm · source changed": RUNS - SOURCE_RUN}
    # Unstable points are hollow, off the line: run 4's llvm and the newest run's handptx.
    hollow = {(t[0], t[2]) for t in traces["matmul"] + times if t[3] == "circle-open"}
    assert hollow == {("gap", 2), ("times", 2)}
    assert next(t[2] for t in traces["matmul"] if t[:2] == ["gap", "llvm"]) == RUNS - 1
    assert state["cases"]["axpy"]["unstable"] == 0
    # The suite geomean: one trace per candidate, a point per run.
    assert sorted(state["suite"]["traces"]) == sorted(FACTORS)
    assert state["suite"]["points"] == 2 * RUNS
    # Points whose set differs from the previous point's, or with a case missing, are marked:
    # run 11 of both candidates (transpose failed); matmul's unstable runs stay in the set.
    assert state["suite"]["changed"] == 2
    # Hover names the commit, date, value, noise and run; a click opens the raw document.
    newest = read_js_json(out / "data.js", "window.KERNELGAP_DATA = ")["runs"]["id"][-1]
    for part in (commit(RUNS - 1)[:12], "2026-11-10 11:00:00", "noise", newest[:12], "gap 1.1"):
        assert part in hover, (part, hover)
    assert opened == f"runs/{newest}.json"
    assert repo_link == f"https://x.test/r/commit/{commit(RUNS - 1)}"
    assert date_x == "date"
    assert shot.stat().st_size > 50_000
