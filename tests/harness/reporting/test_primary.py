"""The primary candidate leads the summary, the exports and the dashboard (harness.reporting.table).

The documents: baseline `cuda`; `llvm` in every case, `handptx` in one, and (after the suite
gained it) `warpforth`, the suite's primary. Names sort handptx < llvm < warpforth, so a
report that merely sorts would put the primary last.
"""

from __future__ import annotations

import csv
import io

import pytest

from harness.dashboard import collect
from harness.history.store import Store
from harness.reporting.export import csv as csv_export
from harness.reporting.export import github_action_benchmark, markdown, nvbench_markdown
from harness.reporting.summary import geomean_gaps, headline
from harness.reporting.summary import markdown as summary_markdown
from harness.reporting.table import lead_first, primary_candidate
from protocol.validation import load_result, validate
from tests.conftest import ROOT
from tests.support.harness_docs import make_document, samples


def suite_document(*, with_warpforth: bool = True, primary: str | None = "warpforth", **kw):
    """scale: cuda, llvm (+ warpforth); axpy: cuda, llvm, handptx (+ warpforth)."""
    scale = {"cuda": samples(2e-6, seed=1), "llvm": samples(2.2e-6, seed=2)}
    axpy = {
        "cuda": samples(1e-3, seed=3),
        "llvm": samples(1.1e-3, seed=4),
        "handptx": samples(0.98e-3, seed=5),
    }
    if with_warpforth:
        scale["warpforth"] = samples(3e-6, seed=6)
        axpy["warpforth"] = samples(1.4e-3, seed=7)
    doc = make_document({"scale": scale, "axpy": axpy}, resamples=50, **kw)
    if primary is not None:
        doc["suite"]["primary"] = primary
    validate(doc, "result", "test document")
    return doc


@pytest.fixture(scope="module")
def doc() -> dict:
    return suite_document()


def test_the_primary_is_the_suites_alone():
    assert primary_candidate(suite_document(primary="llvm")) == "llvm"
    # no fallback by name: a document whose suite declares none (or an older one) has none
    assert primary_candidate(suite_document(primary=None)) is None
    assert primary_candidate(suite_document(with_warpforth=False, primary=None)) is None
    # a named primary this run lacks still leads (and is said to have no gap)
    assert primary_candidate(suite_document(with_warpforth=False)) == "warpforth"
    assert lead_first(["handptx", "llvm", "warpforth"], "warpforth") == [
        "warpforth",
        "handptx",
        "llvm",
    ]
    assert lead_first(["handptx", "llvm"], "warpforth") == ["handptx", "llvm"]
    assert lead_first(["handptx", "llvm"], None) == ["handptx", "llvm"]


def test_the_summary_leads_with_the_primary_geomean(doc):
    text = summary_markdown(doc)
    found = geomean_gaps(doc)["warpforth"]
    interval = f"(95% interval {found['ci_low']:.4f} to {found['ci_high']:.4f})"
    lead = f"**Primary candidate warpforth: geometric-mean gap {found['value']:.4f}x vs cuda {interval} over 2 cases.**"
    assert found["cases"] == found["of"] == 2 and lead in text
    assert text.index(lead) < text.index("### Geometric-mean gap")
    table = text.split("### Geometric-mean gap (the suite's fixed set")[1].split("###")[0]
    rows = [line.split("|")[1].strip() for line in table.splitlines() if line.startswith("| ")]
    assert rows == ["Candidate", "warpforth", "handptx", "llvm"]


def test_a_run_without_a_primary_keeps_the_existing_order():
    old = suite_document(with_warpforth=False, primary=None)
    assert headline(old) is None
    text = summary_markdown(old)
    assert "Primary candidate" not in text
    table = text.split("### Geometric-mean gap (the suite's fixed set")[1].split("###")[0]
    rows = [line.split("|")[1].strip() for line in table.splitlines() if line.startswith("| ")]
    assert rows == ["Candidate", "handptx", "llvm"]
    assert markdown.render(old).startswith(b"| Case ")
    names = [e["name"] for e in github_action_benchmark.entries(old)]
    assert names[-2:] == ["suite/geomean_gap/handptx", "suite/geomean_gap/llvm"]


def test_a_named_primary_with_only_unstable_gaps_keeps_them_marked():
    """The headline's set is fixed: unstable cases stay in it, named; only a primary without
    any gap has no headline."""
    doc = suite_document(unstable=["warpforth"])
    lead = headline(doc)
    assert lead.startswith("Primary candidate warpforth: geometric-mean gap ")
    assert lead.endswith("over 2 cases (unstable: scale, axpy)")
    names = [e["name"] for e in github_action_benchmark.entries(doc)]
    assert names[0] == "suite/geomean_gap/warpforth"
    none = suite_document(with_warpforth=False)
    assert headline(none) == "Primary candidate warpforth: no gap in this run"
    assert "**Primary candidate warpforth: no gap in this run.**" in summary_markdown(none)


def test_the_table_exports_lead_with_the_primary(doc):
    lead = headline(doc)
    assert markdown.render(doc).decode().startswith(f"**{lead}.**\n\n| Case ")
    assert (
        nvbench_markdown.render(doc)
        .decode()
        .startswith(f"# Benchmark Results\n\n{lead}.\n\n## scale v1\n")
    )
    # CSV keeps one header line; the primary's rows are found by implementation
    rows = list(csv.DictReader(io.StringIO(csv_export.render(doc).decode())))
    assert {r["implementation"] for r in rows} == {"cuda", "llvm", "handptx", "warpforth"}


def test_github_action_benchmark_leads_with_the_primary_and_renames_nothing():
    before = [e["name"] for e in github_action_benchmark.entries(suite_document(with_warpforth=False, primary=None))]  # fmt: skip
    after_entries = github_action_benchmark.entries(suite_document())
    after = [e["name"] for e in after_entries]
    assert after[0] == "suite/geomean_gap/warpforth"
    assert after_entries[0]["value"] == pytest.approx(
        geomean_gaps(suite_document())["warpforth"]["value"]
    )
    # every entry the suite had before warpforth joined keeps its name (scale's llvm gap stays
    # `scale/v1/gap/llvm`, though the case now has two candidates)
    assert set(before) <= set(after), set(before) - set(after)
    assert "scale/v1/gap/llvm" in before and "scale/v1/gap/llvm" in after
    added = set(after) - set(before)
    assert added == {
        "suite/geomean_gap/warpforth",
        "scale/v1/warpforth",
        "scale/v1/gap/warpforth",
        "axpy/v1/warpforth",
        "axpy/v1/gap/warpforth",
    }
    assert len(after) == len(set(after))


def test_the_primary_entry_names_depend_on_case_version_and_name_only():
    """The primary's entries are `<case>/v<version>/gap/<primary>` and
    `suite/geomean_gap/<primary>` whether it is a case's only candidate or one of several."""
    alone = make_document({"scale": {"cuda": samples(2e-6, seed=1), "warpforth": samples(3e-6, seed=6)}}, resamples=50)  # fmt: skip
    alone["suite"]["primary"] = "warpforth"
    assert [e["name"] for e in github_action_benchmark.entries(alone)] == [
        "suite/geomean_gap/warpforth",
        "scale/v1/cuda",
        "scale/v1/warpforth",
        "scale/v1/gap/warpforth",
    ]
    with_others = {e["name"] for e in github_action_benchmark.entries(suite_document())}
    assert {"suite/geomean_gap/warpforth", "scale/v1/gap/warpforth"} <= with_others


def test_the_dashboard_leads_with_the_primary(tmp_path):
    db = tmp_path / "h.sqlite"
    with Store(db) as store:
        for k in range(2):
            doc = suite_document(commit=f"{k:040x}", started_utc=f"2026-12-0{k + 1}T10:00:00Z")
            store.ingest(doc, trusted=True)
    with Store(db, readonly=True) as store:
        data = collect(store)
    assert data["primary"] == "warpforth"
    cards = data["latest"]["cards"]
    assert [c["candidate"] for c in cards] == ["warpforth", "handptx", "llvm"]
    assert [c["primary"] for c in cards] == [True, False, False]
    assert [t["impl"] for t in data["suite"]] == ["warpforth", "handptx", "llvm"]
    assert cards[0]["gap"] == pytest.approx(geomean_gaps(doc)["warpforth"]["value"], rel=1e-12)


def test_a_dashboard_without_a_primary_keeps_its_order(tmp_path):
    db = tmp_path / "h.sqlite"
    with Store(db) as store:
        store.ingest(suite_document(with_warpforth=False, primary=None), trusted=True)
    with Store(db, readonly=True) as store:
        data = collect(store)
    assert data["primary"] is None
    assert [c["candidate"] for c in data["latest"]["cards"]] == ["handptx", "llvm"]
    assert not any(c["primary"] for c in data["latest"]["cards"])


def test_the_real_warpforth_run_leads_with_warpforth():
    """The frozen 1.2.0 document of the suite on the H200 (tests/fixtures)."""
    path = ROOT / "tests" / "fixtures" / "result-1.2.0-h200-warpforth.json"
    real = load_result(path.read_bytes(), str(path))
    assert primary_candidate(real) == "warpforth"
    found = geomean_gaps(real)["warpforth"]
    interval = f"(95% interval {found['ci_low']:.4f} to {found['ci_high']:.4f})"
    assert headline(real) == (
        f"Primary candidate warpforth: geometric-mean gap {found['value']:.4f}x vs cuda "
        f"{interval} over {found['of']} cases"
    )
    names = [e["name"] for e in github_action_benchmark.entries(real)]
    assert names[0] == "suite/geomean_gap/warpforth"
    # every candidate's gap is named after it, however many candidates its case has
    assert "scale_i64/v1/gap/llvm" in names and "scale_i64/v1/gap/warpforth" in names
    assert "axpy_f64/v1/gap/llvm" in names and "axpy_f64/v1/gap/handptx" in names
    assert not any(n.endswith("/gap") or n == "suite/geomean_gap" for n in names)


def test_the_dashboard_of_the_real_run(tmp_path):
    """Its primary first; the mode it ran in named though options.mode was left to the suite."""
    path = ROOT / "tests" / "fixtures" / "result-1.2.0-h200-warpforth.json"
    real = load_result(path.read_bytes(), str(path))
    assert real["options"]["mode"] is None
    with Store(tmp_path / "h.sqlite") as store:
        store.ingest(real, trusted=True)
        data = collect(store)
    assert data["latest"]["mode"] == "hot"
    assert data["latest"]["cards"][0]["candidate"] == "warpforth"
