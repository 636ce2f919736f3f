"""Pieces of the dashboard without a browser: the explain report as HTML (explain_pages.to_html), the
steps every series of a case took together and the alerts as events (alerts), and the mode
table (protocol.modes) on documents of the current runner."""

from __future__ import annotations

import pytest

from harness.dashboard.alerts import events, moved_together
from harness.dashboard.explain_pages import to_html
from harness.escaping import markdown as md
from harness.history.series import series_key
from protocol.modes import describe
from protocol.version import RESULT_SCHEMA_VERSION
from tests.support.harness_docs import make_document, samples


def test_the_report_becomes_html_and_data_never_becomes_markup():
    nasty = "<script>alert(1)</script> [x](javascript:y) `tick`"
    text = "\n".join(
        [
            "## kernelgap explain: " + md(nasty),
            "",
            "### " + md("case_a: forth vs cuda (baseline)"),
            "",
            "Most plausible differences:",
            "1. " + md("more <registers>") + " and " + md("a|b", code=True),
            "2. second",
            "",
            "<details><summary>Instruction mix</summary>",
            "",
            "| figure | cuda | forth |",
            "|---|---:|---:|",
            "| " + md("FMA | DFMA", cell=True) + " | 3 | 4 |",
            "</details>",
            "",
            "**Resources**",
        ]
    )
    page = to_html(text)
    assert "<script" not in page and "&lt;script&gt;" in page
    assert "<h2>" in page and "<h3>case_a: forth vs cuda (baseline)</h3>" in page
    assert "<ol><li>more &lt;registers&gt; and <code>a|b</code></li><li>second</li></ol>" in page
    assert "<details><summary>Instruction mix</summary>" in page and "</details>" in page
    assert "<th>figure</th>" in page and "<td>FMA | DFMA</td><td>3</td><td>4</td>" in page
    assert "<p><b>Resources</b></p>" in page
    assert 'href="javascript' not in page


def mark(impl, metric, run, relative, mode="hot", kind="step"):
    return {
        "impl": impl,
        "metric": metric,
        "run": run,
        "relative": relative,
        "mode": mode,
        "kind": kind,
    }


def test_a_shift_of_every_series_is_named_once_and_a_gap_step_is_not_one():
    impls = {"hot": {"cuda", "forth"}, "cold": {"cuda", "forth"}}
    shift = [mark("cuda", "time", 40, 0.02), mark("forth", "time", 41, 0.021)]
    (note,) = moved_together(shift, impls)
    assert note["mode"] == "hot" and note["run"] == 41 and "the gap did not" in note["text"]
    assert note["relative"] == 0.0205
    # the gap stepped too: the candidate moved more than the baseline, no note
    assert moved_together([*shift, mark("forth", "gap", 41, 0.01)], impls) == []
    # one series only, or opposite directions, or too far apart: no note
    assert moved_together(shift[:1], impls) == []
    assert moved_together([shift[0], mark("forth", "time", 41, -0.02)], impls) == []
    assert moved_together([shift[0], mark("forth", "time", 60, 0.02)], impls) == []
    # the other mode's steps are its own
    assert moved_together([shift[0], mark("forth", "time", 41, 0.02, "cold")], impls) == []


@pytest.mark.parametrize(
    ("mode", "timer", "name", "family", "symbol"),
    [
        ("hot", None, "hot", "hot", "▲"),
        ("cold", None, "cold-mean", "cold", "◆"),
        ("cold", "cupti", "cold-mean/cupti", "cold", "◆"),
        ("hot", "cupti", "hot/cupti", "hot", "▲"),
    ],
)
def test_every_mode_a_current_document_carries_has_its_family_symbol_and_words(
    mode, timer, name, family, symbol
):
    doc = make_document({"axpy": {"cuda": samples(1e-3), "forth": samples(1.2e-3)}}, mode=mode)
    doc["schema_version"] = RESULT_SCHEMA_VERSION  # as the current runner writes it
    for impl in doc["cases"][0]["implementations"].values():
        impl["timing"]["timer"] = timer or "events"
    key = series_key(doc, doc["cases"][0], "forth")
    info = describe(key["mode"])
    assert (key["mode"], info.family, info.symbol) == (name, family, symbol)
    assert ("L2 flush" in info.title) == (family == "cold")
    assert ("CUPTI" in info.title) == bool(timer)


def test_a_mode_this_version_does_not_know_is_never_taken_for_hot():
    assert describe("warm-ish").family == describe("hot/nosuchtimer").family == "other"
    assert describe(None).family == "other"


def alert(case, impl, metric, kind, relative, run, start=None, mode="hot", gpu="NVIDIA H200"):
    return {"case": case, "impl": impl, "mode": mode, "gpu": gpu, "metric": metric,
            "kind": kind, "relative": relative, "direction": "slower" if relative > 0 else "faster",
            "from": run - 1 if start is None else start, "run": run, "text": f"{kind} {relative}"}  # fmt: skip


def test_alerts_of_one_change_are_one_event_the_gap_change_first():
    shift = [  # a driver: every time of every case and point 2% slower, no gap moved
        alert(f"case_{c}[n=2^{p}]", impl, "time", "step", 0.02 + 0.001 * c, 98)
        for c in range(5)
        for p in (21, 23, 25)
        for impl in ("cuda", "forth")
    ]
    code = [  # a code regression of case_3's forth, 3%, a run later
        alert("case_3", "forth", "gap", "step", 0.03, 99),
        alert("case_3", "forth", "time", "step", 0.03, 99),
        alert("case_3", "forth", "gap", "newest point", 0.031, 100),
        alert("case_3", "forth", "gap", "drift", 0.058, 100, start=80),  # straddles the step
    ]
    other_gpu = [alert("case_1", "forth", "time", "step", 0.02, 98, gpu="NVIDIA A100")]
    older = [alert("case_2", "forth", "gap", "step", -0.06, 40)]
    found = events(shift + code + other_gpu + older)
    assert [(e["kind"], e["gpu"], e["relative"]) for e in found] == [
        ("gap", "NVIDIA H200", -0.06),  # the bigger change first
        ("gap", "NVIDIA H200", 0.03),
        ("baseline", "NVIDIA H200", 0.0215),  # case_3 sits with its gap change
        ("baseline", "NVIDIA A100", 0.02),
    ]
    gap, shared = found[1], found[2]
    # its step of gap and time (the newest point and the drift folded into the gap step), and
    # case_3's points' times from the shift: they moved with its code, so they sit with it
    assert gap["cases"] == ["case_3"] and len(gap["series"]) == 2 + 6 and gap["points"] == 3
    step = next(a for a in gap["series"] if a["metric"] == "gap")
    assert step["folded"] == ["newest point", "drift 0.058"]
    assert len(shared["series"]) == 24 and "case_3" not in shared["cases"]
    assert shared["points"] == 12 and "the baseline moved, the gap did not" in shared["text"]


def test_changes_far_apart_or_of_other_modes_are_events_apart_and_newest_break_ties():
    found = events(
        [
            alert("a", "forth", "gap", "step", 0.05, 10),
            alert("b", "forth", "gap", "step", 0.05, 30),
            alert("a", "forth", "gap", "step", 0.05, 30, mode="cold-mean"),
        ]
    )
    assert [e["run"] for e in found] == [30, 30, 10]
    assert {e["mode"] for e in found[:2]} == {"hot", "cold-mean"}
