"""The between-card term (harness.history.cards): every history point records its card's UUID outside
the series key; the term is estimated from points of one series on several cards, with a
default until there are enough; compare widens a gap's interval by it for two cards only."""

from __future__ import annotations

import copy
import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

from harness.analysis.change_review import review_changes
from harness.analysis.compare import Policy, compare
from harness.analysis.regressions import Policy as RegressionPolicy
from harness.analysis.regressions import review_series
from harness.cli import main
from harness.history import cards
from harness.history.store import RunInfo, SeriesValues, Store
from harness.reporting.compare_report import markdown
from tests.support.harness_docs import make_document, samples, small_run


def on_card(document: dict, uuid: str) -> dict:
    doc = copy.deepcopy(document)
    doc["environment"]["device"]["uuid"] = uuid
    return doc


def gap_block(ratio: float, half: float = 0.002) -> dict:
    return {"ratio_of_medians": ratio, "ci_low": ratio / (1 + half), "ci_high": ratio * (1 + half)}


def synthetic(card_sd: float, series: int = 4, cards_each: int = 6, runs: int = 4, seed: int = 1):
    """Points of `series` series on `cards_each` cards, `runs` runs a card: each card moves a
    gap by a factor exp(N(0, card_sd)), each run by exp(N(0, 0.002))."""
    rng = np.random.default_rng(seed)
    points = []
    for s in range(series):
        for c in range(cards_each):
            card = rng.normal(0, card_sd)
            for _ in range(runs):
                ratio = 1.2 * math.exp(card + rng.normal(0, 0.002))
                points.append((f"series{s}", f"GPU-{s}-{c}", gap_block(ratio)))
    return points


def test_the_estimate_finds_the_card_to_card_spread():
    found = cards.estimate(synthetic(0.01))
    assert found.source == "history" and found.cards == 24 and found.series == 4
    assert found.sd == pytest.approx(0.01, rel=0.35)
    none = cards.estimate(synthetic(0.0))
    assert none.source == "history" and none.sd < 0.002  # the runs' own noise is taken out


def test_too_few_cards_keep_the_documented_default():
    two = [p for p in synthetic(0.05, series=1, cards_each=2)]
    found = cards.estimate(two)
    assert (found.sd, found.source, found.cards) == (cards.DEFAULT_BETWEEN_CARD_SD, "default", 2)
    unknown = [(sid, None, gap) for sid, _, gap in synthetic(0.05)]  # no UUIDs recorded
    assert cards.estimate(unknown).source == "default"
    assert cards.estimate([]).sd == cards.DEFAULT_BETWEEN_CARD_SD


def test_one_point_a_card_uses_its_interval_as_its_own_noise():
    points = synthetic(0.01, runs=1, cards_each=10)
    found = cards.estimate(points)
    assert found.source == "history" and found.sd == pytest.approx(0.01, rel=0.4)


def reference_estimate(points, min_cards=cards.MIN_CARDS):
    """The module docstring's estimator written out loop by loop (cards.estimate groups with
    numpy): per series, each card's mean ln gap and own variance, pooled."""
    import statistics
    from collections import defaultdict

    from protocol.headline import log_standard_error

    by_series = defaultdict(lambda: defaultdict(list))
    for sid, uuid, gap in points:
        if uuid and gap and gap["ratio_of_medians"] > 0:
            by_series[sid][uuid].append(
                (math.log(gap["ratio_of_medians"]), log_standard_error(gap))
            )
    between, dof, within, seen, used = 0.0, 0, [], set(), 0
    for per_card in by_series.values():
        if len(per_card) < 2:
            continue
        used += 1
        seen.update(per_card)
        means = []
        for values in per_card.values():
            logs = [v for v, _ in values]
            means.append(math.fsum(logs) / len(logs))
            own = statistics.variance(logs) / len(logs) if len(logs) > 1 else values[0][1] ** 2
            within.append(own)
        grand = math.fsum(means) / len(means)
        between += math.fsum((m - grand) ** 2 for m in means)
        dof += len(means) - 1
    if len(seen) < min_cards or dof == 0:
        return cards.DEFAULT_BETWEEN_CARD_SD, "default", len(seen), used
    return (
        math.sqrt(max(0.0, between / dof - math.fsum(within) / len(within))),
        "history",
        len(seen),
        used,
    )


def test_the_grouped_estimate_is_the_documented_estimator():
    """Random pools: one to four runs a card, cards with one point (their interval is their
    noise), degenerate intervals, points without a UUID, series seen on one card only."""
    rng = np.random.default_rng(5)
    for _ in range(200):
        points = []
        for s in range(int(rng.integers(0, 6))):
            for c in range(int(rng.integers(1, 5))):
                for _ in range(int(rng.integers(1, 4))):
                    ratio = 1.2 * math.exp(rng.normal(0, 0.01))
                    uuid = (
                        [f"GPU-{c}", None, ""][int(rng.integers(0, 3))]
                        if rng.random() < 0.2
                        else f"GPU-{c}"
                    )
                    points.append(
                        (
                            f"s{s}",
                            uuid,
                            gap_block(ratio, [0.002, 0.0, 0.01][int(rng.integers(0, 3))]),
                        )
                    )
        found = cards.estimate(points)
        sd, source, n_cards, n_series = reference_estimate(points)
        assert (found.source, found.cards, found.series) == (source, n_cards, n_series)
        assert found.sd == pytest.approx(sd, rel=1e-9, abs=1e-12)


def test_every_point_records_its_card_outside_the_series_key(tmp_path):
    first = on_card(small_run(0), "GPU-aaaa")
    second = on_card(small_run(1), "GPU-bbbb")
    with Store(tmp_path / "h.sqlite") as store:
        store.ingest(first, trusted=True)
        report = store.ingest(second, trusted=True)
        assert report.new_series == []  # another card, the same series
        (forth,) = [s for s in store.list_series() if s["impl"] == "forth"]
        assert [p["gpu_uuid"] for p in store.points(forth["series_id"])] == [
            "GPU-aaaa",
            "GPU-bbbb",
        ]
        found = cards.from_store(store)
    assert found.source == "default" and found.cards == 2


def test_the_case_device_uuid_wins_over_the_runs():
    doc = on_card(small_run(0), "GPU-run")
    case = {"device": {"index": 1, "uuid": "GPU-case", "name": "NVIDIA H200"}}
    assert cards.card_of(doc, case) == "GPU-case" and cards.card_of(doc) == "GPU-run"
    assert not cards.same_card(doc, on_card(doc, "GPU-other"))
    assert not cards.same_card(on_card(doc, None), on_card(doc, None))  # unknown: not one card


def pair(head_factor: float) -> tuple[dict, dict]:
    base = make_document(
        {"axpy": {"cuda": samples(1e-3, seed=1), "ptx": samples(1.1e-3, seed=2)}}, resamples=200
    )
    head = make_document(
        {"axpy": {"cuda": samples(1e-3, seed=1), "ptx": samples(1.1e-3 * head_factor, seed=2)}},
        resamples=200,
    )
    return base, head


def test_compare_widens_a_gap_only_between_two_cards():
    base, head = pair(1.01)  # the gap 1% slower, well outside one run's noise
    policy = Policy(min_effect=0.005)
    one = compare(on_card(base, "GPU-a"), on_card(head, "GPU-a"), policy)
    (gap,) = one.gaps
    assert gap.verdict == "slower" and gap.between_cards is None
    two = compare(on_card(base, "GPU-a"), on_card(head, "GPU-b"), policy)
    (wide,) = two.gaps
    assert wide.between_cards == cards.DEFAULT_BETWEEN_CARD_SD
    assert wide.change.ci_low < gap.change.ci_low and wide.change.ci_high > gap.change.ci_high
    assert wide.change.ci_low <= 1.0 <= wide.change.ci_high
    assert wide.verdict == "same"  # 1% is within what two cards differ by
    assert "ran on different cards" in markdown(two)
    assert "ran on different cards" not in markdown(one)
    big = compare(on_card(base, "GPU-a"), on_card(pair(1.05)[1], "GPU-b"), policy)
    assert big.gaps[0].verdict == "slower"  # 5% is not


def test_widen_adds_the_term_in_quadrature_in_log_space():
    low, high = cards.widen(1.0, 1.0, 1.0, 0.01)
    z = 1.959963984540054
    assert math.log(high) == pytest.approx(z * math.sqrt(2) * 0.01)
    assert math.log(low) == pytest.approx(-z * math.sqrt(2) * 0.01)
    assert cards.widen(1.1, 1.0, 1.2, 0.0) == (1.0, 1.2)


def point(k: int, gap: float, uuid: str | None) -> dict:
    return {
        "run_id": f"run{k}",
        "commit_sha": f"{k:040x}",
        "started_utc": f"2026-12-01T10:00:{k:02d}.000000Z",
        "gap": gap,
        "gap_stable": True,
        "median_s": 1e-3,
        "stable": True,
        "gpu_uuid": uuid,
    }


SERIES = {"series_id": "s", "label": "axpy forth", "case_id": "axpy", "impl": "forth"}


def test_regressions_widen_the_gap_threshold_for_a_point_from_another_card():
    policy = RegressionPolicy(min_change=0.005)
    history = [point(k, 1.2 * (1 + 0.0005 * (-1) ** k), "GPU-a") for k in range(20)]
    series = {**SERIES, "role": "candidate"}

    def gap_finding(newest_card: str, between: float):
        newest = point(20, 1.2 * 1.03, newest_card)
        found = review_series(series, [*history, newest], policy, between)
        return next(f for f in found if f.metric == "gap")

    assert gap_finding("GPU-a", 0.012).status == "alert"  # one card: 3% is a change
    assert gap_finding("GPU-b", 0.0).status == "alert"  # no term: as before
    across = gap_finding("GPU-b", 0.012)
    assert across.status == "ok" and across.threshold > 0.03
    assert "between-card SD 1.20%" in across.note


def test_changes_leave_out_a_gap_step_that_is_only_a_card_change():
    n = 40
    rng = np.random.default_rng(2)
    gap = 1.2 * np.where(np.arange(n) < n // 2, 1.0, 1.01) * (1 + 0.0005 * rng.standard_normal(n))
    values = SeriesValues(
        run=np.arange(n),
        median_s=np.full(n, 1e-3),
        stable=np.ones(n, bool),
        gap=gap,
        gap_stable=np.ones(n, bool),
    )
    series = [{**SERIES, "role": "candidate"}]

    def info(runs):
        return {r: RunInfo(f"run{r}", None, f"2026-12-01T10:00:{r:02d}Z") for r in runs}

    def steps(card_of):
        found = review_changes(
            series,
            {"s": values},
            info,
            cards_of=lambda sid, runs: {r: card_of(r) for r in runs},
            between_cards=0.007,
        )
        return [f for f in found if f.kind == "step" and f.metric == "gap"]

    (same,) = steps(lambda r: "GPU-a")  # one card: the 1% step is the code's
    assert same.relative == pytest.approx(0.01, abs=0.002) and same.note == ""
    assert steps(lambda r: "GPU-a" if r < n // 2 else "GPU-b") == []  # within the cards' term
    big = gap.copy()
    big[n // 2 :] *= 1.04
    values = SeriesValues(values.run, values.median_s, values.stable, big, values.gap_stable)
    (step,) = steps(lambda r: "GPU-a" if r < n // 2 else "GPU-b")
    assert "different cards" in step.note


def test_the_term_is_estimated_per_gpu_model(tmp_path):
    db = tmp_path / "h.sqlite"
    with Store(db) as store:
        for k, (gpu, uuid) in enumerate(
            [("NVIDIA H200", "GPU-a"), ("NVIDIA H200", "GPU-b"), ("NVIDIA H100 80GB HBM3", "GPU-c")]
        ):
            store.ingest(on_card(small_run(k, gpu=gpu), uuid), trusted=True)
    with Store(db, readonly=True) as store:
        models = cards.by_model(store)
        assert set(models) == {"NVIDIA H200", "NVIDIA H100 80GB HBM3"}
        h200 = cards.from_store(store, "NVIDIA H200")
        assert (h200.cards, h200.series, h200.source) == (2, 1, "default")
        assert cards.from_store(store, "NVIDIA H100 80GB HBM3").series == 0
    assert cards.sd_for(models, "another model") == cards.DEFAULT_BETWEEN_CARD_SD
    assert cards.sd_for(0.01, "any") == 0.01


def test_compare_cli_takes_the_history_estimate(tmp_path):
    base, head = pair(1.01)
    paths = []
    for name, doc in (("base", on_card(base, "GPU-a")), ("head", on_card(head, "GPU-b"))):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(doc))
        paths.append(str(path))
    db = tmp_path / "h.sqlite"
    with Store(db) as store:
        store.ingest(on_card(small_run(0), "GPU-a"), trusted=True)
    runner = CliRunner()
    done = runner.invoke(main, ["compare", *paths, "--format", "json", "--history", str(db)])
    assert done.exit_code == 0, done.output
    (gap,) = json.loads(done.stdout)["gaps"]
    assert gap["between_cards"] == cards.DEFAULT_BETWEEN_CARD_SD  # one card: the default


def test_a_case_whose_cards_differ_more_than_its_models_gets_its_own_wider_term():
    """16 series move 0.2% between cards and one 1.5%: the pooled term fits the many, the
    odd one's own estimate (pooled with the model's by degrees of freedom) is wider."""
    rng = np.random.default_rng(4)
    series, uuid, log_gap = [], [], []
    for s in range(17):
        shift = 0.015 if s == 16 else 0.002
        for c in range(4):
            offset = shift * rng.standard_normal()
            for _ in range(3):
                series.append(s)
                uuid.append(f"GPU-{c}")
                log_gap.append(offset + 1e-4 * rng.standard_normal())
    arrays = (
        np.array(series),
        np.array(uuid, dtype=object),
        np.array(log_gap),
        np.full(len(series), 1e-4),
    )
    pooled = cards.estimate_arrays(*arrays)
    own = cards.per_series_arrays(*arrays)
    assert pooled.source == "history" and pooled.dof == 17 * 3
    assert own[16].sd > 2 * pooled.sd and own[16].source == "case" and own[16].dof == 3 + 2
    assert max(own[s].sd for s in range(16)) < own[16].sd
    assert cards.sd_for({"g": pooled.sd, "odd": own[16].sd}, "g", "odd") == own[16].sd
    assert cards.sd_for({"g": pooled.sd}, "g", "other") == pooled.sd


def test_a_history_gives_each_series_on_two_cards_its_own_term(tmp_path):
    db = tmp_path / "h.sqlite"
    with Store(db) as store:
        for k, uuid in enumerate(["GPU-a", "GPU-b", "GPU-c"]):
            store.ingest(on_card(small_run(k), uuid), trusted=True)
    with Store(db, readonly=True) as store:
        own = cards.by_series(store)
        candidates = {s["series_id"] for s in store.list_series() if s["role"] == "candidate"}
        models = cards.by_model(store)
    assert own and set(own) <= candidates
    sid = next(iter(own))
    assert cards.sd_for({**models, **own}, "NVIDIA H200", sid) == own[sid]
    assert 0 <= own[sid] <= cards.DEFAULT_BETWEEN_CARD_SD * 2
