"""The dashboard's counter panels without a compiler (harness.dashboard.counter_panels and the
history read under them): which runs a panel keeps, its steps in words, the change marks they
explain and the case page's anchors. The real compilers' pairs, in Chromium too, are in
tests/test_counters_compilers.py."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta

import orjson
import pytest

from harness.dashboard import build_site
from harness.history.counter_series import counter_sets, static_changes
from harness.history.store import Store
from tests.conftest import ROOT
from tests.support.dashboard_page import read_js_json
from tests.support.harness_docs import make_document, samples

RUNS, SWITCH = 24, 12
STATIC = orjson.loads((ROOT / "tests" / "fixtures" / "static-axpy-forth.json").read_bytes())["base"]
SPILLS = copy.deepcopy(STATIC)
SPILLS["resources"].update(registers=16, spill_store_bytes=16, spill_load_bytes=16)


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    """RUNS hot runs of two cases: 'axpy' whose candidate 'forth' (the primary) spills from
    run SWITCH on, 10% slower, beside 'other' candidate 'llvm'; and 'plain' with no counters."""
    db = tmp_path_factory.mktemp("counters") / "h.sqlite"
    start = datetime(2026, 11, 1, tzinfo=UTC)
    with Store(db) as store:
        for k in range(RUNS):
            late = k >= SWITCH
            doc = make_document(
                {"axpy": {"cuda": samples(1e-3, seed=k),
                          "forth": samples(1.2e-3 * (1.1 if late else 1.0), seed=50 + k),
                          "llvm": samples(1.1e-3, seed=90 + k)},
                 "plain": {"cuda": samples(2e-3, seed=k), "forth": samples(2.2e-3, seed=70 + k)}},
                commit=f"{k:040x}",
                started_utc=(start + timedelta(hours=k)).strftime("%Y-%m-%dT%H:%M:%SZ"),
            )  # fmt: skip
            doc["suite"]["primary"] = "forth"
            impls = doc["cases"][0]["implementations"]
            impls["cuda"]["static"] = STATIC
            impls["llvm"]["static"] = SPILLS if k % 2 else STATIC  # not the primary: not shown
            impls["forth"]["static"] = SPILLS if late else STATIC
            store.ingest(doc, trusted=True)
    return db


def test_the_history_keeps_only_the_runs_around_each_change(history):
    with Store(history, readonly=True) as store:
        runs = {r["run_id"]: k for k, r in enumerate(store.runs())}
        ids = {(s["case_id"], s["impl"]): s["series_id"] for s in store.list_series()}
        found = static_changes(store, list(ids.values()))
        forth = [(runs[r], k) for r, k in found[ids["axpy", "forth"]]]
        cuda = [runs[r] for r, _ in found[ids["axpy", "cuda"]]]
        decoded = counter_sets(store, {k for _, k in forth})
    assert [r for r, _ in forth] == [0, SWITCH - 1, SWITCH, RUNS - 1]
    assert forth[0][1] == forth[1][1] != forth[2][1] == forth[3][1]
    assert cuda == [0, RUNS - 1]  # no change: its first and newest run
    assert ids["plain", "forth"] not in found  # no counters, nothing read
    assert decoded[forth[2][1]]["static/spill_store_bytes"] == [16, "bytes/thread"]


def test_a_panel_holds_the_primary_and_baseline_with_each_step_explained(history, tmp_path):
    build_site(history, tmp_path / "site")
    data = read_js_json(tmp_path / "site" / "data.js", "window.KERNELGAP_DATA = ")
    cases = {c["id"]: c for c in data["cases"]}
    panel = cases["axpy"]["counters"]
    assert cases["plain"]["counters"] is None
    assert {(line["impl"], line["role"]) for line in panel["lines"]} == {
        ("forth", "candidate"),
        ("cuda", "baseline"),
    }  # llvm's builds changed too, but it is not the primary
    (step,) = panel["steps"]
    assert (
        data["runs"]["n"][step["run"]] == SWITCH and data["runs"]["n"][step["from"]] == SWITCH - 1
    )
    assert step["names"][:2] == ["static/spill_load_bytes", "static/spill_store_bytes"]
    assert "after spills 16 bytes/thread (stores) where before spilled none" in step["text"]
    assert "registers down (22 → 16 registers/thread)" in step["text"]
    registers = panel["names"].index("static/registers")
    forth = next(line for line in panel["lines"] if line["impl"] == "forth")
    assert [panel["sets"][k][registers] for k in forth["set"]] == [22, 22, 16, 16]
    assert panel["labels"][registers] == "registers"
    marked = [m for m in cases["axpy"]["changes"] if m.get("step")]
    assert marked and {m["impl"] for m in marked} == {"forth"}
    assert all(m["step"] == step["id"] for m in marked)
    page = (tmp_path / "site" / cases["axpy"]["page"]).read_text()
    assert f'id="{step["id"]}"' in page and f'href="#{step["id"]}"' in page
    assert (
        "Counters: what changed in the code"
        not in (tmp_path / "site" / cases["plain"]["page"]).read_text()
    )
