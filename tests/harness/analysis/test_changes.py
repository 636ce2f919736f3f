"""Change points and drift (harness.analysis.changes, harness.analysis.drift, `harness changes`, the change section
of `harness regressions`) on synthetic histories, in pure functions and through a real store.

"5% noise" here is a band 5% wide: every run's value lies within +-2.5% of its level (uniform).
With that noise the best possible locator of a single 3% step (the least-squares split, knowing
there is exactly one) lands within +-2 points in about 94% of histories, so the tests assert
rates over many seeded histories, never a single lucky one. A wider +-5% band halves the step's
size against the noise; there the step is still found, but no method places it within +-2 points
more than about 60% of the time (benchmarks/perf/RESULTS.md has the figures).
"""

from __future__ import annotations

import re

import numpy as np
import orjson
import pytest
from click.testing import CliRunner

from harness.analysis.changes import ChangePolicy, candidates, robust_sigma, steps
from harness.analysis.drift import DriftPolicy, drift
from harness.cli import main
from harness.history.store import Store
from protocol.statistics import u_test, u_test_asymptotic
from tests.support.harness_docs import make_document, samples

SEEDS = range(50)


def history(n: int, *, step_at: int | None = None, step: float = 0.0, band: float = 0.05,
            seed: int = 0) -> np.ndarray:  # fmt: skip
    """n values around 1.0, uniform within +-band/2, times (1 + step) from index step_at on."""
    rng = np.random.default_rng(seed)
    values = 1 + band / 2 * rng.uniform(-1, 1, n)
    if step_at is not None:
        values[step_at:] *= 1 + step
    return values


def located(found, at: int, within: int = 2) -> bool:
    return any(abs(s.index - at) <= within for s in found)


# -- steps --------------------------------------------------------------------------------------
def test_a_3pct_step_in_5pct_noise_is_found_within_2_points():
    found = [steps(history(80, step_at=40, step=0.03, seed=s)) for s in SEEDS]
    assert all(found), "a 3% step in a 5% band must be found in every history"
    near = sum(located(f, 40) for f in found)
    assert near >= 0.9 * len(SEEDS), f"within +-2 points in {near} of {len(SEEDS)}"
    for f in found:
        step = min(f, key=lambda s: abs(s.index - 40))
        assert step.relative == pytest.approx(0.03, abs=0.012)
        assert step.p_value < ChangePolicy().alpha


def test_a_3pct_step_in_a_wider_5pct_either_side_noise_is_still_found():
    found = [steps(history(120, step_at=60, step=0.03, band=0.10, seed=s)) for s in SEEDS]
    assert sum(located(f, 60, within=10) for f in found) >= 0.8 * len(SEEDS)


def test_single_outliers_raise_nothing():
    for seed in SEEDS:
        clean = history(80, seed=1000 + seed)
        spiked = clean.copy()
        spiked[[10, 37, 60]] *= [2.0, 1.5, 0.7]
        assert [s.index for s in steps(spiked)] == [s.index for s in steps(clean)], seed
        assert drift(spiked) is None
    spiked = history(40, seed=7)
    spiked[-1] *= 1.5  # the newest point: the newest-point rule's business, not a change or drift
    assert steps(spiked) == [] and drift(spiked) is None


def test_pure_noise_rarely_raises_a_step():
    false = sum(len(steps(history(80, seed=2000 + s))) for s in range(100))
    assert false <= 2


def test_a_short_excursion_is_a_transient_not_two_changes():
    values = history(80, seed=3)
    values[40:44] *= 1.10  # four slow runs, then back
    assert steps(values) == []


def test_two_steps_are_both_found_with_their_medians():
    values = history(150, seed=4, band=0.01)
    values[50:] *= 1.05
    values[100:] *= 0.9
    found = steps(values)
    assert [s.index for s in found] == [50, 100]
    assert found[0].relative == pytest.approx(0.05, abs=0.005)
    assert found[1].relative == pytest.approx(-0.10, abs=0.005)
    assert found[0].points_before == 50 and found[0].points_after == 50


def test_long_histories_are_searched_in_windows_and_the_step_is_exact():
    values = history(10_000, step_at=6_123, step=0.10, band=0.004, seed=5)
    found = steps(values)
    assert [s.index for s in found] == [6_123]
    assert len(candidates(np.log(history(5_000, seed=6, band=0.004)))) <= 5


def test_short_constant_and_bad_series():
    assert steps([1.0] * 5) == [] and steps([]) == []
    assert steps([2.0] * 100) == []
    assert robust_sigma(np.zeros(2)) > 0
    for bad in ([1.0, float("nan")], [1.0, 0.0], [[1.0]]):
        with pytest.raises(ValueError, match="finite values > 0"):
            steps(bad)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [({"min_size": 1}, "min_size"), ({"alpha": 0}, "alpha"), ({"penalty": -1}, "penalty"),
     ({"window": 10}, "window"), ({"min_effect": 1.5}, "min_effect")],
)  # fmt: skip
def test_change_policy_rejects_bad_settings_naming_the_field(kwargs, field):
    with pytest.raises(ValueError, match=re.escape(f"ChangePolicy.{field}")):
        ChangePolicy(**kwargs)


# -- drift --------------------------------------------------------------------------------------
def drifting(seed: int, rate: float = 0.005, band: float = 0.05) -> np.ndarray:
    values = history(40, seed=seed, band=band)
    values[20:] *= (1 + rate) ** np.arange(1, 21)  # 0.5% per run over the newest 20 runs
    return values


def test_a_slow_drift_of_half_a_percent_per_run_over_20_runs_is_reported():
    for seed in SEEDS:
        found = drift(drifting(seed))
        assert found is not None, seed
        assert found.points == 20 and found.p_value < DriftPolicy().alpha
        assert found.slope == pytest.approx(0.005, abs=0.003)
        assert found.slope_low <= found.slope <= found.slope_high
        assert found.total == pytest.approx(0.095, abs=0.05)


def test_a_drift_in_wider_noise_is_reported_in_most_histories():
    reported = sum(drift(drifting(seed, band=0.10)) is not None for seed in SEEDS)
    assert reported >= 0.7 * len(SEEDS)


def test_no_drift_on_flat_noise_short_or_constant_series():
    assert sum(drift(history(40, seed=3000 + s)) is not None for s in range(100)) <= 2
    assert drift(history(19)) is None
    assert drift([1.0] * 30) is None
    speedup = drift(1 / drifting(0))
    assert speedup is not None and speedup.total < 0


def test_the_u_test_is_scipys_auto_method_exactly():
    """u_test (the merge step's small-sample test, exact where scipy's "auto" is) gives
    scipy.stats.mannwhitneyu(method="auto")'s p-value to 1e-13: sides of 1 to 30 points, with
    and without ties, shifted or not. Not to the last bit: the exact path divides by C(n, k)
    exactly (math.comb), where scipy's binom rounds a product or a beta function (a few ulp)."""
    from scipy.stats import mannwhitneyu

    rng = np.random.default_rng(11)
    tested = 0
    for k in range(1500):
        n1, n2 = (int(n) for n in rng.integers(1, 31, 2))
        if n1 * n2 > 400:
            continue
        left = rng.normal([0, 0.7, 3][k % 3], 1, n1)
        right = rng.normal(0, 1, n2)
        if k % 4 == 0:
            left, right = np.round(left, 1), np.round(right, 1)
        want = mannwhitneyu(left, right, alternative="two-sided", method="auto").pvalue
        assert u_test(left, right) == pytest.approx(float(want), rel=1e-13, abs=0), (n1, n2, k)
        tested += 1
    assert tested > 1000


def test_the_u_test_matches_scipys_asymptotic_test():
    """u_test_asymptotic (the change review's fast path) against scipy's own call: ties,
    rounded values, unequal sizes, a shift, every value the same."""
    from scipy.stats import mannwhitneyu

    rng = np.random.default_rng(7)
    for k in range(400):
        n1, n2 = (int(n) for n in rng.integers(21, 220, 2))
        decimals = int(rng.integers(0, 4))
        left = np.round(rng.normal(0, 1, n1), decimals)
        right = np.round(rng.normal([0, 0.2, 2][k % 3], 1, n2), decimals)
        want = mannwhitneyu(left, right, alternative="two-sided", method="asymptotic").pvalue
        assert u_test_asymptotic(left, right) == pytest.approx(float(want), rel=1e-12, abs=0)
    same = np.ones(30)
    assert u_test_asymptotic(same, same) == 1.0


def test_the_drift_screen_drops_only_what_the_tests_would_drop(monkeypatch):
    """drift() skips its scipy tests below min_total; with the screen off, every answer is the
    same (trends, flat noise, rounded values with ties)."""
    from harness.analysis import drift as drift_module

    rng = np.random.default_rng(11)
    series = [
        np.maximum(
            np.round(
                np.exp(rng.normal(0, [0.001, 0.01, 0.05][k % 3], 20) + np.arange(20) * slope),
                int(rng.integers(2, 8)),
            ),
            1e-3,
        )
        for k, slope in enumerate(rng.choice([0.0, 0.002, 0.003, -0.004], 600))
    ]
    screened = [drift(y) for y in series]
    monkeypatch.setattr(drift_module, "SCREEN", 0.0)
    assert screened == [drift(y) for y in series]
    assert sum(d is not None for d in screened) >= 50  # trends are there to be found


def test_kendall_and_theil_sen_are_scipys():
    """drift's Kendall p-value and Theil-Sen fit, computed without scipy, against
    scipy.stats.kendalltau (to 1e-13: the normal tail from math.erfc, not scipy's ndtr) and
    theilslopes (to the last bit): 5 to 60 points (exact and asymptotic), trends and flat
    noise, rounded values with ties."""
    from scipy.stats import kendalltau, theilslopes

    from harness.analysis.drift import kendall_p, theil_sen

    rng = np.random.default_rng(5)
    kinds = set()
    for k in range(1500):
        n = int(rng.integers(5, 61))
        y = np.exp(rng.normal(0, 0.01, n) + np.arange(n) * [0.0, 0.001, -0.003][k % 3])
        if k % 4 == 0:
            y = np.round(y, int(rng.integers(1, 4)))
        if np.all(y == y[0]):
            continue
        x = np.arange(n, dtype=np.float64)
        want = float(kendalltau(x, y).pvalue)
        got = kendall_p(y)
        both_nan = bool(np.isnan(want) and np.isnan(got))
        assert both_nan or got == pytest.approx(want, rel=1e-13, abs=0), (n, k)
        fit = theilslopes(y, x, alpha=0.95)
        assert theil_sen(y) == (fit.slope, fit.intercept, fit.low_slope, fit.high_slope), (n, k)
        kinds.add((n <= 33, np.unique(y).size < n))
    assert kinds == {(True, True), (True, False), (False, True), (False, False)}


def test_pelt_linear_is_ruptures_kernel_cpd():
    """changes.pelt_linear (ruptures' compiled PELT called without importing ruptures) against
    ruptures.KernelCPD(kernel="linear").predict(pen=...): windows with and without steps,
    min_size 1 to 5, penalties small and large."""
    import ruptures

    from harness.analysis.changes import pelt_linear

    rng = np.random.default_rng(3)
    found = 0
    for k in range(600):
        n, min_size = int(rng.integers(12, 120)), int(rng.integers(1, 6))
        y = rng.normal(0, 0.01, n)
        y[int(rng.integers(min_size, n - min_size)) :] += [0.0, 0.02, -0.05][k % 3]
        pen = float(10 ** rng.uniform(-5, -2))
        want = ruptures.KernelCPD(kernel="linear", min_size=min_size).fit(y).predict(pen=pen)
        assert pelt_linear(y, pen, min_size) == want[:-1], (n, min_size, pen)
        found += len(want) > 1
    assert found > 100


def test_drift_policy_rejects_bad_settings():
    with pytest.raises(ValueError, match=r"DriftPolicy\.window"):
        DriftPolicy(window=3)
    with pytest.raises(ValueError, match=r"DriftPolicy\.alpha"):
        DriftPolicy(alpha=1)


# -- through a real store and the command line --------------------------------------------------
def run_doc(k: int, factor: float, *, unstable: bool = False) -> dict:
    """Run k: baseline 'cuda' at 1 ms, candidate 'forth' at 1.2 ms x factor."""
    cases = {
        "axpy": {
            "cuda": samples(1e-3, seed=k),
            "forth": samples(1.2e-3 * factor, seed=1000 + k),
        }
    }
    return make_document(
        cases,
        commit=f"{k:040x}",
        started_utc=f"2026-12-{1 + k // 1440:02d}T{k // 60 % 24:02d}:{k % 60:02d}:00Z",
        unstable={("axpy", "forth")} if unstable else (),
        resamples=20,
    )


def ingest(path, factors, unstable=()) -> None:
    with Store(path) as store:
        for k, factor in enumerate(factors):
            assert store.ingest(run_doc(k, factor, unstable=k in unstable), trusted=True).stored


def changes_json(path, *args) -> tuple[int, dict]:
    result = CliRunner().invoke(main, ["changes", "--db", str(path), "--format", "json", *args])
    return result.exit_code, orjson.loads(result.stdout) if result.stdout.startswith("{") else {}


def test_cli_lists_a_step_with_its_commit_range_and_gates_on_it(tmp_path):
    db = tmp_path / "history.sqlite"
    ingest(db, history(80, step_at=40, step=0.03, seed=1))
    status, report = changes_json(db)
    assert status == 0  # --fail-on never by default: a listing
    found = [c for c in report["changes"] if c["kind"] == "step"]
    assert {(c["impl"], c["metric"]) for c in found} == {("forth", "gap"), ("forth", "time")}
    for c in found:
        first_after = int(c["to_commit"], 16)
        assert abs(first_after - 40) <= 2
        assert int(c["from_commit"], 16) == first_after - 1  # every point stable: one commit
        assert c["direction"] == "slower" and c["relative"] == pytest.approx(0.03, abs=0.012)
        assert c["before"] < c["after"] and c["p_value"] < 1e-4
        assert c["points_before"] + c["points_after"] == 80
    assert changes_json(db, "--fail-on", "slower")[0] == 1
    assert changes_json(db, "--fail-on", "slower", "--since", "2026-12-02")[0] == 0
    assert changes_json(db, "--case", "nope")[1]["changes"] == []
    text = CliRunner().invoke(main, ["changes", "--db", str(db)]).output
    assert "step" in text and "axpy / forth (candidate)" in text and "slower" in text
    md = CliRunner().invoke(main, ["changes", "--db", str(db), "--format", "markdown"]).output
    assert md.startswith("## Change points: 2 (2 slower) over 2 series")
    assert all(line.count(" | ") == 9 for line in md.splitlines() if line.startswith("| "))


def test_cli_reports_a_drift(tmp_path):
    db = tmp_path / "history.sqlite"
    ingest(db, drifting(2))
    found = changes_json(db)[1]["changes"]
    drifts = [c for c in found if c["kind"] == "drift"]
    assert {c["metric"] for c in drifts} == {"gap", "time"}
    assert all(c["points_after"] == 20 and c["relative"] > 0.05 for c in drifts)
    assert all(int(c["to_commit"], 16) == 39 and int(c["from_commit"], 16) == 20 for c in drifts)


def test_unstable_points_never_alert(tmp_path):
    db = tmp_path / "history.sqlite"
    factors = list(history(60, seed=5))
    for k in range(30, 60):
        factors[k] *= 1.2  # a 20% step, but every point after it is unstable
    ingest(db, factors, unstable=set(range(30, 60)))
    assert changes_json(db, "--fail-on", "any") == (0, changes_json(db)[1])
    assert changes_json(db)[1]["changes"] == []
    result = CliRunner().invoke(main, ["regressions", "--db", str(db), "--format", "json"])
    assert result.exit_code == 0, result.output
    report = orjson.loads(result.stdout)
    assert report["changes"] == [] and report["alerts"] == 0


def test_a_bad_since_is_bad_input(tmp_path):
    db = tmp_path / "history.sqlite"
    ingest(db, [1.0] * 3)
    result = CliRunner().invoke(main, ["changes", "--db", str(db), "--since", "last week"])
    assert result.exit_code == 2 and "--since 'last week'" in result.output


def test_regressions_alerts_on_a_recent_step_the_newest_point_rule_misses(tmp_path):
    db = tmp_path / "history.sqlite"
    factors = history(70, step_at=62, step=0.04, band=0.01, seed=8)  # 4%, 8 runs ago
    ingest(db, factors)
    result = CliRunner().invoke(main, ["regressions", "--db", str(db), "--format", "json"])
    assert result.exit_code == 1, result.output
    report = orjson.loads(result.stdout)
    # the newest run alone is within its noise; the median of the newest 10 is not
    pooled = [f for f in report["findings"] if f["alert"]]
    assert pooled and all(f["direction"] == "slower" for f in pooled)
    assert all("median of the newest 10 runs" in f["note"] for f in pooled)
    steps_found = [c for c in report["changes"] if c["kind"] == "step"]
    assert {c["metric"] for c in steps_found} == {"gap", "time"}
    assert all(c["age"] <= 10 and c["direction"] == "slower" for c in steps_found)
    md = CliRunner().invoke(main, ["regressions", "--db", str(db)])
    assert md.exit_code == 1 and "### Change points and drifts in the newest 100" in md.output
    never = CliRunner().invoke(main, ["regressions", "--db", str(db), "--fail-on", "never"])
    assert never.exit_code == 0
