"""tools/perf/two_boxes.py: two documents of one suite from two cards, built here."""

from __future__ import annotations

import json
from pathlib import Path

from harness.history import cards
from runner.measurement import aa_control
from tests.support.harness_docs import make_document, samples
from tests.support.perf_script import load

two_boxes = load("two_boxes")


def card(uuid: str, forth_s: float, seed: int) -> dict:
    """One card's run: two cases, warpforth at `forth_s` on axpy, each with an A/A control."""
    cases = {
        "axpy": {"cuda": samples(1e-3, seed=seed), "warpforth": samples(forth_s, seed=seed + 1)},
        "scale": {"cuda": samples(2e-3, seed=seed + 2), "warpforth": samples(2e-3, seed=seed + 3)},
    }
    doc = make_document(cases)
    doc["environment"]["device"]["uuid"] = uuid
    loads = [int(v) for v in aa_control.loads_of_samples(30)]
    for case in doc["cases"]:
        base = case["implementations"]["cuda"]["timing"]["samples_s"]
        control = samples(base[0], seed=seed + 9)
        case["aa_control"] = aa_control.document_block(base, control, loads, 1)
    return doc


def write(tmp_path: Path, name: str, doc: dict) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def test_two_cards_give_gaps_controls_the_between_card_term_and_geomeans(tmp_path, capsys):
    a = write(tmp_path, "a.json", card("GPU-aaaa", 1.20e-3, seed=1))
    b = write(tmp_path, "b.json", card("GPU-bbbb", 1.26e-3, seed=20))
    assert two_boxes.main([str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "card A: GPU-aaaa (a.json)" in out and "card B: GPU-bbbb (b.json)" in out
    cells = [line.split(" | ") for line in out.splitlines() if line.count(" | ") >= 5]
    rows = {c[0] + c[1]: " | ".join(c) for c in cells}
    # warpforth on axpy: 1.2x on A, 1.26x on B, 5% apart: beyond the term, so not held
    axpy = rows["| axpywarpforth"]
    assert "x1.2" in axpy and "x1.26" in axpy and axpy.endswith("| no |")
    assert rows["| scalewarpforth"].endswith("| yes |")
    # both cases' controls on both cards, with the term each set
    controls = [line for line in out.splitlines() if line.startswith("| axpy | x")]
    assert controls and controls[0].count("%)") == 2
    # two cards: the raw two-card figure, and the default the history uses below MIN_CARDS
    assert "from these two (2 cards, 2 series, cards.estimate raw)" in out
    assert f"(default; documented default {cards.DEFAULT_BETWEEN_CARD_SD:.3%}" in out
    assert "over 2 of 2" in out  # each card's geomean with its interval


def test_two_suites_or_one_card_are_named(tmp_path, capsys):
    a_doc = card("GPU-aaaa", 1.2e-3, seed=1)
    other = card("GPU-bbbb", 1.2e-3, seed=2)
    other["suite"]["version"] = 99
    a, b = write(tmp_path, "a.json", a_doc), write(tmp_path, "b.json", other)
    assert two_boxes.main([str(a), str(b)]) == 2
    err = capsys.readouterr().err
    assert "b.json: suite.version is 99" in err
    same = write(tmp_path, "same.json", card("GPU-aaaa", 1.2e-3, seed=3))
    assert two_boxes.main([str(a), str(same)]) == 0
    assert "both documents ran on one card" in capsys.readouterr().out
    assert two_boxes.main([str(a)]) == 2
