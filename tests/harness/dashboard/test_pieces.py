"""Two pieces of the dashboard without a browser: the explain report as HTML (report_html) and
the steps every series of a case took together (together)."""

from __future__ import annotations

from harness.dashboard.report_html import to_html
from harness.dashboard.together import moved_together
from harness.escaping import markdown as md


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
