"""The headline carries two intervals and says what each covers (protocol.headline)."""

from __future__ import annotations

import math

import pytest

from protocol import RESULT_SCHEMA_VERSION
from protocol.headline import BETWEEN_CARD_SD, COVERS_CARDS, COVERS_RUN, candidate_headlines
from protocol.validation import errors


def case(case_id: str, gap: float, half: float) -> dict:
    return {
        "id": case_id,
        "status": "ok",
        "implementations": {
            "cuda": {"role": "baseline"},
            "forth": {
                "role": "candidate",
                "gap": {"ratio_of_medians": gap, "ci_low": gap - half, "ci_high": gap + half},
            },
        },
    }


def test_the_headline_gives_this_runs_interval_and_the_one_across_cards():
    cases = [case("a", 1.2, 0.001), case("b", 1.4, 0.002)]
    h = candidate_headlines(cases)["forth"]
    across = h["across_cards"]
    assert h["covers"] == COVERS_RUN and across["covers"] == COVERS_CARDS
    assert across["between_card_sd"] == BETWEEN_CARD_SD and across["source"] == "default"
    assert across["ci_low"] < h["ci_low"] < h["value"] < h["ci_high"] < across["ci_high"]
    # the run's half-width and z x the card term add in quadrature, in log space
    run_half = math.log(h["ci_high"] / h["value"])
    assert math.log(across["ci_high"] / h["value"]) == pytest.approx(
        math.hypot(run_half, 1.959964 * BETWEEN_CARD_SD), rel=1e-5
    )
    history = candidate_headlines(cases, between_cards=(0.002, "history"))["forth"]
    assert history["across_cards"]["ci_high"] < across["ci_high"]


def test_a_document_with_both_headline_intervals_validates():
    from tests.support.harness_docs import fixture  # the frozen result document

    document = fixture()
    document["schema_version"] = RESULT_SCHEMA_VERSION
    document["summary"]["geomean_gap"] = candidate_headlines(document["cases"])
    assert document["summary"]["geomean_gap"], "the fixture has a candidate with a gap"
    assert not list(errors(document, "result"))
