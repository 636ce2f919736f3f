"""Counters from real compilers, carried through the history, `harness pr`, `harness changes`,
`harness explain A B` and the dashboard (its counter panels, in Chromium): two warpforthc builds that differ by one word (one extra DMUL in the loop
must show as exactly that), nvcc's NVVM at -O0 against -O3, and a register-capped build that
spills (`.maxnreg` in the PTX: what -maxrregcount does at assembly, which a PTX bundle never
reaches). Each needs its compiler and ptxas with a disassembler, and skips without them."""

from __future__ import annotations

import html
import re
import shutil
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from harness.analysis import pull_request
from harness.analysis.change_counters import annotate
from harness.analysis.change_review import find_changes
from harness.analysis.counter_diff import differences, sentence
from harness.cli import main
from harness.dashboard import build_site
from harness.history.counter_series import counter_points, counter_series
from harness.history.counters import static_counters
from harness.history.store import Store, bundle_statics
from runner.definition import manifest, toolchains
from runner.definition.bundle import write_bundle
from runner.explain import static
from tests.conftest import ROOT
from tests.runner.execution.test_pairs import pair_document
from tests.support.browser import Browser, chromium_path
from tests.support.dashboard_page import draw_every_chart, read_js_json
from tests.support.harness_docs import make_document, samples, suite_manifest

ARCH = "sm_90"
FORTH = (ROOT / "benchmarks" / "kernels" / "axpy_f64.forth").read_text()
LOOP_LINE = "  A OVER CELLS X + F@ F*\n"
ONE_WORD_MORE = FORTH.replace(LOOP_LINE, "  A OVER CELLS X + F@ F* A F*\n")  # y = a*a*x + y
HEAVY_CU = """extern "C" __global__ void heavy(const double *x, double *y, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    double a[24];
#pragma unroll
    for (int k = 0; k < 24; k++) a[k] = x[i + k * n];
    double s = 0;
#pragma unroll
    for (int k = 0; k < 24; k++) s += a[k] * a[23 - k] / (a[(k * 7) % 24] + 3.0);
    y[i] = s;
}
"""


def _need(program: str) -> None:
    if shutil.which(program) is None:
        pytest.skip(f"{program} is not installed")


def _static(ptx: str, entry: str) -> dict:
    found = static.analyze(ptx, entry, ARCH, 256)
    if found["status"] != "ok":
        pytest.skip(f"no static analysis here: {found['reason']}")
    return found


def _capped(ptx: str, entry: str, registers: int) -> str:
    """The PTX with `.maxnreg` on its entry: the register cap ptxas then honours."""
    return re.sub(rf"(\.entry {entry}\([^)]*\))", rf"\1\n.maxnreg {registers}", ptx, count=1)


@pytest.fixture(scope="module")
def forth(tmp_path_factory):
    _need("warpforthc")
    folder = tmp_path_factory.mktemp("forth")
    out = {}
    for name, text in (("base", FORTH), ("head", ONE_WORD_MORE)):
        (folder / f"{name}.forth").write_text(text)
        built = toolchains.build(
            "command", folder / f"{name}.forth", ARCH, (), "warpforthc {source}"
        )
        out[name] = _static(built.ptx, "axpy_f64")
    return out


@pytest.fixture(scope="module")
def cuda(tmp_path_factory):
    _need("nvcc")
    folder = tmp_path_factory.mktemp("cuda")
    (folder / "heavy.cu").write_text(HEAVY_CU)
    o3 = toolchains.build("nvcc", folder / "heavy.cu", ARCH)
    o0 = toolchains.build("nvcc", folder / "heavy.cu", ARCH, ("-Xcicc", "-O0"))
    return {
        "O3": _static(o3.ptx, "heavy"),
        "O0": _static(o0.ptx, "heavy"),
        "capped": _static(_capped(o3.ptx, "heavy", 24), "heavy"),
    }


# -- the counters themselves ------------------------------------------------------------------
def test_one_extra_forth_word_shows_as_exactly_one_more_dmul_in_the_loop(forth):
    found = differences(static_counters(forth["base"]), static_counters(forth["head"]))
    assert {c.name: c.delta for c in found} == {
        "static/in_loops/total": 1,
        "static/in_loops/fp64_mul": 1,
        "static/instructions/total": 1,
        "static/instructions/fp64_mul": 1,
    }
    assert found[0].name.startswith("static/in_loops/")  # inside the loop leads
    assert "1 more f64 multiply (DMUL) in loops (1 → 2 instructions)" in map(sentence, found)


def test_nvvm_at_O0_keeps_its_loops_and_uses_another_register_count(cuda):
    o3, o0 = static_counters(cuda["O3"]), static_counters(cuda["O0"])
    assert o3["static/loops"][0] == 0 and o0["static/loops"][0] > 0  # -O3 unrolled them all
    names = {c.name for c in differences(o3, o0)}
    assert {"static/registers", "static/loops", "static/in_loops/total"} <= names


def test_a_register_cap_that_spills_leads_the_differences(cuda):
    capped = static_counters(cuda["capped"])
    assert capped["static/registers"][0] <= 24 and capped["static/spill_store_bytes"][0] > 0
    found = differences(static_counters(cuda["O3"]), capped)
    assert found[0].name.startswith("static/spill_")
    stores = capped["static/spill_store_bytes"][0]
    assert f"head spills {stores} bytes/thread (stores) where base spilled none" in map(
        sentence, found
    )


# -- harness pr ---------------------------------------------------------------------------------
def _paired(forth, cuda, slowed_head: str = "capped") -> dict:
    """test_pairs' base/head document: scale_aa's head twice as slow and built from
    cuda[slowed_head] (spilling, by default), and scale_double_work's head the same time with
    one more instruction."""
    doc = pair_document()
    blocks = {
        ("scale_aa", "cuda_again@base"): cuda["O3"],
        ("scale_aa", "cuda_again@head"): cuda[slowed_head],
        ("scale_double_work", "twice@base"): forth["base"],
        ("scale_double_work", "twice@head"): forth["head"],
    }
    for case in doc["cases"]:
        for name, impl in case["implementations"].items():
            if (case["id"], name) in blocks:
                impl["static"] = blocks[(case["id"], name)]
    return doc


def test_pr_puts_the_counters_beside_each_verdict_and_gates_on_them(forth, cuda, tmp_path):
    path = tmp_path / "result.json"
    path.write_bytes(orjson.dumps(_paired(forth, cuda)))
    done = CliRunner().invoke(main, ["pr", str(path)])
    assert done.exit_code == 0, done.output
    rows = {
        line.split("|")[1].strip(): line
        for line in done.stdout.splitlines()
        if line.startswith("| scale")
    }
    assert "**slower**" in rows["scale_aa"] and "head spills" in rows["scale_aa"]
    assert "same (the code changed: see counters)" in rows["scale_double_work"]
    assert "1 more instruction in loops" in rows["scale_double_work"]
    spills = CliRunner().invoke(main, ["pr", str(path), "--fail-on", "spills"])
    assert spills.exit_code == 1 and "scale_aa/cuda_again spills" in spills.stderr
    assert "scale_double_work" not in spills.stderr
    more = CliRunner().invoke(main, ["pr", str(path), "--fail-on", "instructions:1"])
    assert "scale_double_work" not in more.stderr  # 1 more is not more than 1
    assert CliRunner().invoke(main, ["pr", str(path), "--fail-on", "registers:100"]).exit_code == 0
    data = orjson.loads(CliRunner().invoke(main, ["pr", str(path), "--format", "json"]).stdout)
    same = next(r for r in data["rows"] if r["case_id"] == "scale_double_work")
    assert same["code_changed"] and same["verdict"] == "same"
    words = {c["name"]: c["words"] for c in same["counters"]}
    assert (
        words["static/in_loops/fp64_mul"]
        == "1 more f64 multiply (DMUL) in loops (1 → 2 instructions)"
    )


def test_pr_says_what_nvvm_at_O0_changed_beside_the_slower_verdict(forth, cuda, tmp_path):
    path = tmp_path / "result.json"
    path.write_bytes(orjson.dumps(_paired(forth, cuda, slowed_head="O0")))
    data = orjson.loads(CliRunner().invoke(main, ["pr", str(path), "--format", "json"]).stdout)
    row = next(r for r in data["rows"] if r["case_id"] == "scale_aa")
    names = {c["name"] for c in row["counters"]}
    assert row["verdict"] == "slower" and row["code_changed"]
    assert {"static/registers", "static/loops", "static/in_loops/total"} <= names
    loops = next(c for c in row["counters"] if c["name"] == "static/loops")
    assert loops["before"] == 0 and loops["after"] > 0  # -O3 unrolled every loop; -O0 kept them


def _suite(folder: Path, forth_source: str) -> Path:
    """benchmarks' axpy_f64 case alone, baseline cuda and candidate warpforth, its Forth kernel
    `forth_source`."""
    shutil.copytree(ROOT / "benchmarks" / "kernels", folder / "kernels")
    shutil.copy2(ROOT / "benchmarks" / "reference.py", folder / "reference.py")
    (folder / "kernels" / "axpy_f64.forth").write_text(forth_source)
    text = (ROOT / "benchmarks" / "cases.toml").read_text()
    head, *blocks = text.split("[[case]]\n")
    case = next(b for b in blocks if b.startswith('id = "axpy_f64"'))
    impls = case.split("[[case.impl]]\n")
    kept = [impls[0], *(i for i in impls[1:] if re.search(r'^name = "(cuda|warpforth)"$', i, re.M))]
    (folder / "cases.toml").write_text(head + "[[case]]\n" + "[[case.impl]]\n".join(kept))
    return folder / "cases.toml"


@pytest.fixture(scope="module")
def bundles(tmp_path_factory, forth):
    _need("nvcc")
    out = {}
    for name, text in (("base", FORTH), ("head", ONE_WORD_MORE)):
        folder = tmp_path_factory.mktemp(f"suite-{name}")
        suite = manifest.load(_suite(folder, text))
        made = write_bundle(suite, ARCH, folder / "bundle")
        assert made["failures"] == 0 and not made["skipped"]
        out[name] = folder / "bundle"
    return out


def test_pr_from_two_bundles_needs_no_gpu(bundles):
    done = CliRunner().invoke(main, ["pr", "--bundles", str(bundles["base"]), str(bundles["head"])])
    assert done.exit_code == 0, done.output
    assert "1 of 1 candidate builds changed their code" in done.stdout
    assert "1 more f64 multiply (DMUL) in loops" in done.stdout
    gated = CliRunner().invoke(
        main,
        [
            "pr",
            "--bundles",
            str(bundles["base"]),
            str(bundles["head"]),
            "--fail-on",
            "instructions",
        ],
    )
    assert gated.exit_code == 1 and "axpy_f64/warpforth instructions" in gated.stderr
    bad = CliRunner().invoke(main, ["pr", "--fail-on", "spils", "--bundles", "a", "b"])
    assert bad.exit_code == 2 and "unknown word 'spils'" in bad.output


def test_explain_across_two_bundles_compares_each_implementation_with_itself(bundles):
    done = CliRunner().invoke(
        main, ["explain", str(bundles["base"]), str(bundles["head"]), "--format", "text"]
    )
    assert done.exit_code == 0, done.output
    assert "axpy_f64: warpforth@B vs warpforth@A (baseline)" in done.stdout
    assert "axpy_f64: cuda@B vs cuda@A (baseline)" in done.stdout
    assert "f64 multiply (DMUL)" in done.stdout


# -- history and harness changes ----------------------------------------------------------------
RUNS, SWITCH = 24, 12  # the head compiler from run SWITCH on, 10% slower


def _history(db: Path, forth, bundle_for_static: dict | None = None) -> None:
    start = datetime(2026, 11, 1, tzinfo=UTC)
    with Store(db) as store:
        for k in range(RUNS):
            late = k >= SWITCH
            doc = make_document(
                {"axpy_f64": {
                    "cuda": samples(1e-3, seed=k),
                    "warpforth": samples(1.1e-3 * (1.1 if late else 1.0), seed=100 + k),
                }},
                commit=f"{k:040x}",
                started_utc=(start + timedelta(hours=k)).strftime("%Y-%m-%dT%H:%M:%SZ"),
            )  # fmt: skip
            impl = doc["cases"][0]["implementations"]["warpforth"]
            impl["static"] = forth["head" if late else "base"]
            impl.setdefault("build", {})["version"] = "warpforthc 2" if late else "warpforthc 1"
            store.ingest(doc, trusted=True)


def _forth_series(store: Store) -> str:
    return next(s["series_id"] for s in store.list_series() if s["impl"] == "warpforth")


def test_static_counters_are_series_whose_steps_are_exact(forth, tmp_path):
    _history(tmp_path / "h.sqlite", forth)
    with Store(tmp_path / "h.sqlite", readonly=True) as store:
        panel = counter_series(store, _forth_series(store))["counters"]
    assert panel["static/in_loops/fp64_mul"]["values"] == [1] * SWITCH + [2] * (RUNS - SWITCH)
    assert panel["static/in_loops/fp64_mul"]["steps"] == [SWITCH]
    assert panel["static/registers"]["steps"] == []
    assert panel["static/registers"]["unit"] == "registers/thread"
    stepped = {name for name, s in panel.items() if s["steps"]}
    assert stepped == {
        c.name for c in differences(static_counters(forth["base"]), static_counters(forth["head"]))
    }


def test_changes_names_the_counters_and_compilers_across_a_step(forth, tmp_path):
    db = tmp_path / "h.sqlite"
    _history(db, forth)
    with Store(db, readonly=True) as store:
        found = annotate(store, find_changes(store, store.list_series()))
    step = next(
        f for f in found if f.kind == "step" and f.impl == "warpforth" and f.metric == "time"
    )
    assert step.counters_recorded and {c.name for c in step.counters} >= {
        "static/in_loops/fp64_mul"
    }
    assert "warpforthc 1" in step.compiler_before and "warpforthc 2" in step.compiler_after
    done = CliRunner().invoke(main, ["changes", "--db", str(db)])
    assert done.exit_code == 0, done.output
    assert "What changed in the code across each step:" in done.stdout
    assert "1 more f64 multiply (DMUL) in loops (1 → 2 instructions)" in done.stdout


def test_a_version_4_file_gets_its_counters_from_the_stored_documents(forth, tmp_path):
    db = tmp_path / "h.sqlite"
    _history(db, forth)
    with Store(db, readonly=True) as store:
        before = counter_points(store, _forth_series(store))
    with sqlite3.connect(db) as raw:
        raw.execute("DROP TABLE counters")
        raw.execute("PRAGMA user_version = 4")
    with Store(db, readonly=True) as store:  # read before its migration: no counters
        assert counter_points(store, _forth_series(store)) == []
    with Store(db) as store:  # a trusted ingest migrates it
        doc = make_document({"other": {"cuda": samples(1e-3), "warpforth": samples(1e-3)}})
        store.ingest(doc, trusted=True)
    with Store(db, readonly=True) as store:
        assert counter_points(store, _forth_series(store)) == before


def test_a_bundle_gives_static_counters_to_a_document_without_them(bundles, tmp_path):
    bundle = orjson.loads((bundles["base"] / "bundle.json").read_bytes())
    entry = next(e for e in bundle["implementations"] if e["impl"] == "warpforth")
    doc = make_document({"axpy_f64": {"cuda": samples(1e-3), "warpforth": samples(1.1e-3)}})
    doc["cases"][0]["implementations"]["warpforth"].setdefault("build", {})["ptx_sha256"] = entry[
        "build"
    ]["ptx_sha256"]
    cases = suite_manifest(tmp_path, doc)  # the suite it is a run of (a trusted ingest checks)
    path = tmp_path / "result.json"
    path.write_bytes(orjson.dumps(doc))
    db = tmp_path / "h.sqlite"
    argv = ["ingest", str(path), "--db", str(db), "--trusted", "--cases", str(cases)]
    done = CliRunner().invoke(main, [*argv, "--bundle", str(bundles["base"])])
    assert done.exit_code == 0, done.output
    with Store(db, readonly=True) as store:
        (point,) = counter_points(store, _forth_series(store))
    assert point.static == static_counters(entry["static"])


def test_pr_reads_a_bundle_where_the_document_has_no_static(bundles):
    head = orjson.loads((bundles["head"] / "bundle.json").read_bytes())
    entry = next(e for e in head["implementations"] if e["impl"] == "warpforth")
    sha = entry["build"]["ptx_sha256"]
    case = {"id": "axpy_f64", "implementations": {
        "warpforth@head": {"variant_of": "warpforth", "build": {"ptx_sha256": sha}},
        "warpforth@other": {"variant_of": "warpforth", "build": {"ptx_sha256": "0" * 64}},
    }}  # fmt: skip
    statics = bundle_statics(head)
    found = pull_request._counters(case, "warpforth@head", statics)
    assert found == static_counters(entry["static"])
    assert pull_request._counters(case, "warpforth@other", statics) == {}  # another PTX: none


# -- the three pairs through history, harness changes and the dashboard (Chromium) --------------
PAIRS = {  # case -> (candidate, its build before and after SWITCH, counters the step must name)
    "axpy_f64": ("warpforth", ("forth", "base"), ("forth", "head"), "static/in_loops/fp64_mul"),
    "heavy_opt": ("nvvm", ("cuda", "O3"), ("cuda", "O0"), "static/in_loops/total"),
    "heavy_cap": ("capped", ("cuda", "O3"), ("cuda", "capped"), "static/spill_store_bytes"),
}


def _pairs_history(db: Path, builds: dict) -> None:
    """RUNS runs of the three PAIRS cases: each candidate's build switches at run SWITCH, with
    a compiler of another version and a 10% slower time."""
    start = datetime(2026, 11, 1, tzinfo=UTC)
    with Store(db) as store:
        for k in range(RUNS):
            late = k >= SWITCH
            doc = make_document(
                {case: {"cuda": samples(1e-3, seed=k),
                        impl: samples(1.1e-3 * (1.1 if late else 1.0), seed=100 + k)}
                 for case, (impl, *_) in PAIRS.items()},
                commit=f"{k:040x}",
                started_utc=(start + timedelta(hours=k)).strftime("%Y-%m-%dT%H:%M:%SZ"),
            )  # fmt: skip
            for case in doc["cases"]:
                impl, before, after, _ = PAIRS[case["id"]]
                chosen = case["implementations"][impl]
                chosen["static"] = builds[after if late else before]
                chosen.setdefault("build", {})["version"] = f"{impl} {2 if late else 1}"
            store.ingest(doc, trusted=True)


@pytest.fixture(scope="module")
def pairs_site(tmp_path_factory, forth, cuda):
    """The three pairs' history, `harness changes` of it, and its dashboard."""
    builds = {(group, name): block for group, found in (("forth", forth), ("cuda", cuda))
              for name, block in found.items()}  # fmt: skip
    folder = tmp_path_factory.mktemp("pairs")
    db = folder / "h.sqlite"
    _pairs_history(db, builds)
    changes = CliRunner().invoke(main, ["changes", "--db", str(db)])
    assert changes.exit_code == 0, changes.output
    build_site(db, folder / "site")
    return db, changes.stdout, folder / "site", builds


def test_each_pair_steps_once_in_history_and_changes_names_it(pairs_site):
    db, changes, _, builds = pairs_site
    with Store(db, readonly=True) as store:
        for case, (impl, before, after, _) in PAIRS.items():
            sid = next(
                s["series_id"]
                for s in store.list_series()
                if (s["case_id"], s["impl"]) == (case, impl)
            )
            panel = counter_series(store, sid)["counters"]
            expected = {
                c.name
                for c in differences(
                    static_counters(builds[before]), static_counters(builds[after])
                )
            }
            assert {n for n, s in panel.items() if s["steps"] == [SWITCH]} == expected
    assert "1 more f64 multiply (DMUL) in loops (1 → 2 instructions)" in changes
    assert "after spills" in changes and "where before spilled none" in changes
    assert "nvvm 1 -> " in changes and "capped 1 -> " in changes


def test_the_dashboard_data_and_case_pages_explain_each_pair(pairs_site):
    site = pairs_site[2]
    data = read_js_json(site / "data.js", "window.KERNELGAP_DATA = ")
    for case in data["cases"]:
        impl, *_, name = PAIRS[case["id"]]
        panel = case["counters"]
        (step,) = [s for s in panel["steps"] if s["impl"] == impl]
        assert name in step["names"] and data["runs"]["n"][step["run"]] == SWITCH
        assert step["text"].startswith("compiler ") and f"{impl} 1 -> " in step["text"]
        assert not [s for s in panel["steps"] if s["impl"] == "cuda"]  # the baseline kept its build
        assert any(m.get("step") == step["id"] for m in case["changes"])  # the time step's mark
        page = (site / case["page"]).read_text()
        assert f'id="{step["id"]}"' in page and html.escape(step["text"]) in page
        assert f'href="#{step["id"]}"' in page  # the time chart's mark links to it


@pytest.mark.skipif(chromium_path() is None, reason="chromium is not installed")
def test_the_dashboard_marks_each_pairs_step_under_its_chart(pairs_site, tmp_path):
    _, _, site, _ = pairs_site
    with Browser(width=1400, height=1600) as browser:
        browser.open((site / "index.html").as_uri())
        state = draw_every_chart(browser)
        links = browser.evaluate(
            "[...document.querySelectorAll('.counters a.step')]"
            ".map(a => [a.closest('.case').id, a.getAttribute('href')])"
        )
        marked = browser.evaluate(
            "[...document.querySelectorAll('.chart')].flatMap(gd => ((gd.layout || {}).annotations"
            " || []).filter(a => a.meta && a.meta.href).map(a => a.meta.href))"
        )  # the time step's mark on each gap chart opens the counter step's explanation
        browser.evaluate("document.getElementById('case-heavy_cap').scrollIntoView()")
        browser.screenshot(tmp_path / "counters.png")
    assert state["errors"] == []
    for case, (impl, _, _, name) in PAIRS.items():
        drawn = state["counters"][case]
        assert name in drawn["rows"] and drawn["marks"] >= 1 and len(drawn["steps"]) == 1
        assert any(
            f"{impl} unchanged: " in t or "cuda unchanged: " in t for t in drawn["unchanged"]
        )
    hrefs = {href for _, href in links}
    assert len({case for case, _ in links}) == len(PAIRS)
    assert set(marked) == hrefs  # each pair's time step links to the same explanation
    for href in hrefs:
        page, anchor = href.split("#")
        assert f'id="{anchor}"' in (site / page).read_text()
