"""harness compare: detection, significance and policy on synthetic samples with a known shift."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import orjson
import pytest
from click.testing import CliRunner

from harness.analysis.compare import (
    Bootstrap,
    Change,
    Policy,
    compare,
    decide,
    detect,
    detect_gap,
    gate,
    significance,
)
from harness.commands.compare import compare as compare_command
from harness.reporting.compare_report import markdown
from tests.conftest import ROOT
from tests.support.harness_docs import make_document, samples

FAST = Bootstrap(resamples=2000)


def draws(median_s: float, seed: int, n: int = 30, noise: float = 0.01) -> list[float]:
    """n samples, normal around median_s with a relative sd of `noise`, plus a slow tail."""
    rng = np.random.default_rng(seed)
    values = median_s * (1 + noise * rng.standard_normal(n))
    values[rng.random(n) < 0.1] *= 1.05  # a few clock dips, as real samples have
    return [float(v) for v in values]


def two_impl_doc(cuda_s: float, ptx_s: float, seed: int, **kw) -> dict:
    return make_document(
        {
            "axpy": {"cuda": draws(cuda_s, seed), "ptx": draws(ptx_s, seed + 1)},
            "scale": {"cuda": draws(2e-6, seed + 2), "ptx": draws(2.4e-6, seed + 3)},
        },
        **kw,
    )


def by_label(comparison) -> dict[str, str]:
    return {r.label: r.verdict for r in (*comparison.times, *comparison.gaps)}


# --- the pieces ----------------------------------------------------------------------------


def test_detect_finds_the_ratio_of_medians_inside_its_interval():
    base, head = draws(1e-3, 1, n=60), draws(1.1e-3, 2, n=60)
    change = detect(base, head, FAST)
    assert change.ratio == pytest.approx(np.median(head) / np.median(base))
    assert change.ci_low < change.ratio < change.ci_high
    assert change.ci_low < 1.1 < change.ci_high and change.ci_low > 1.05
    assert change.percent == pytest.approx((change.ratio - 1) * 100)
    assert detect(base, head, FAST) == change  # seeded: the interval is reproducible
    assert detect(base, head, Bootstrap(resamples=2000, seed=7)) != change


def test_detect_with_one_sample_each_gives_a_point_interval():
    change = detect([2.0], [3.0], FAST)
    assert (change.ratio, change.ci_low, change.ci_high) == (1.5, 1.5, 1.5)


def test_detect_rejects_empty_nan_or_zero_median_samples():
    with pytest.raises(ValueError, match="base samples"):
        detect([], [1.0])
    with pytest.raises(ValueError, match="head samples"):
        detect([1.0], [float("nan")])
    with pytest.raises(ValueError, match=r"median time is 0\.0 s"):
        detect([0.0, 0.0, 1.0], [1.0])


def test_detect_gap_keeps_pairs_and_compares_the_two_gaps():
    cuda, ptx = draws(1e-3, 1), draws(1.2e-3, 2)
    same = detect_gap((cuda, ptx), (cuda, ptx), FAST)
    assert same.ratio == 1.0
    # Both sides 10% slower: the machine moved, the gap did not.
    shifted = detect_gap((cuda, ptx), ([x * 1.1 for x in cuda], [x * 1.1 for x in ptx]), FAST)
    assert shifted.ratio == pytest.approx(1.0)
    worse = detect_gap((cuda, ptx), (cuda, [x * 1.1 for x in ptx]), FAST)
    assert worse.ratio == pytest.approx(1.1)
    assert worse.ci_low < 1.1 < worse.ci_high
    with pytest.raises(ValueError, match="one sample of each per round"):
        detect_gap((cuda, ptx[:-1]), (cuda, ptx), FAST)


def test_significance_is_a_two_sided_u_test():
    base = draws(1e-3, 1)
    assert significance(base, base) == pytest.approx(1.0)
    assert significance([1.0] * 30, [1.0] * 30) == 1.0
    assert significance(base, [x * 1.1 for x in base]) < 1e-6
    assert significance(base, [x * 0.9 for x in base]) < 1e-6  # both directions


def test_significance_is_scipys_mannwhitneyu_without_scipy():
    """protocol.statistics.significance (no scipy import: 0.9 s of `harness compare`'s start)
    gives scipy.stats.mannwhitneyu's two-sided "auto" p-value to 1e-12, small and large sides,
    ties and shifts; a NaN or an empty side is no evidence."""
    from scipy.stats import mannwhitneyu

    rng = np.random.default_rng(3)
    for k in range(300):
        n1, n2 = (int(n) for n in rng.integers(2, 120, 2))
        base = rng.lognormal(0, 0.02, n1)
        head = rng.lognormal([0, 0.01, 0.05][k % 3], 0.02, n2)
        if k % 5 == 0:
            base, head = np.round(base, 2), np.round(head, 2)
        want = mannwhitneyu(base, head, alternative="two-sided").pvalue
        assert significance(base, head) == pytest.approx(float(want), rel=1e-12, abs=0), k
    assert significance([1.0, float("nan")], [1.0, 2.0]) == 1.0
    assert significance([], [1.0, 2.0]) == 1.0


def test_policy_needs_both_significance_and_the_minimum_effect():
    policy = Policy(min_effect=0.02, alpha=0.05)
    assert decide(Change(1.10, 1.08, 1.12), 1e-6, True, policy) == "slower"
    assert decide(Change(0.90, 0.88, 0.92), 1e-6, True, policy) == "faster"
    assert decide(Change(1.01, 1.005, 1.015), 1e-6, True, policy) == "same"  # too small
    assert decide(Change(1.10, 0.9, 1.3), 0.2, True, policy) == "same"  # not significant
    assert decide(Change(1.10, 1.08, 1.12), 1e-6, False, policy) == "unstable"
    assert decide(Change(1.01, 1.005, 1.015), 1e-6, True, Policy(min_effect=0.005)) == "slower"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"min_effect": -0.1}, "Policy.min_effect"),
        ({"min_effect": "2%"}, "Policy.min_effect"),
        ({"alpha": 0.0}, "Policy.alpha"),
        ({"alpha": 1.5}, "Policy.alpha"),
    ],
)
def test_policy_rejects_bad_thresholds_naming_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        Policy(**kwargs)


def test_bootstrap_rejects_bad_settings():
    with pytest.raises(ValueError, match=r"Bootstrap.resamples must be >= 1"):
        Bootstrap(resamples=0)
    with pytest.raises(ValueError, match=r"Bootstrap.resamples must be an int"):
        Bootstrap(resamples=True)
    with pytest.raises(ValueError, match=r"Bootstrap.confidence"):
        Bootstrap(confidence=1.0)


# --- documents -----------------------------------------------------------------------------


def test_a_ten_percent_slowdown_is_found_as_slower():
    base = two_impl_doc(1e-3, 1.2e-3, seed=10)
    head = two_impl_doc(1e-3, 1.32e-3, seed=20)  # ptx 10% slower, cuda unchanged
    result = compare(base, head, bootstrap=FAST)
    verdicts = by_label(result)
    assert verdicts["axpy/ptx"] == "slower"
    assert verdicts["axpy/ptx gap"] == "slower"
    assert verdicts["axpy/cuda"] == "same"
    row = next(r for r in result.times if r.label == "axpy/ptx")
    assert row.change.percent == pytest.approx(10, abs=1.5)
    assert row.change.ci_low < 1.1 < row.change.ci_high
    assert row.base_median_s == pytest.approx(1.2e-3, rel=0.02)
    assert row.head_median_s == pytest.approx(1.32e-3, rel=0.02)
    assert result.counts()["slower"] == 2


def test_a_ten_percent_speedup_is_found_as_faster():
    result = compare(
        two_impl_doc(1e-3, 1.2e-3, seed=10), two_impl_doc(1e-3, 1.08e-3, seed=20), bootstrap=FAST
    )
    verdicts = by_label(result)
    assert verdicts["axpy/ptx"] == "faster" and verdicts["axpy/ptx gap"] == "faster"


@pytest.mark.parametrize("seeds", [(1, 101), (2, 202), (3, 303), (4, 404), (5, 505)])
def test_an_a_a_pair_is_same(seeds):
    """Two documents drawn from one distribution with different seeds: every verdict is same."""
    base = two_impl_doc(1e-3, 1.2e-3, seed=seeds[0])
    head = two_impl_doc(1e-3, 1.2e-3, seed=seeds[1])
    result = compare(base, head, bootstrap=FAST)
    assert len(result.times) == 4 and len(result.gaps) == 2 and not result.not_compared
    assert set(by_label(result).values()) == {"same"}


def test_a_machine_shift_moves_times_but_not_the_gap():
    base = two_impl_doc(1e-3, 1.2e-3, seed=1)
    head = make_document(
        {
            "axpy": {"cuda": draws(1.1e-3, 1), "ptx": draws(1.32e-3, 2)},
            "scale": {"cuda": draws(2e-6, 3), "ptx": draws(2.4e-6, 4)},
        }
    )
    verdicts = by_label(compare(base, head, bootstrap=FAST))
    assert verdicts["axpy/cuda"] == verdicts["axpy/ptx"] == "slower"
    assert verdicts["axpy/ptx gap"] == "same"


def test_an_unstable_side_gives_unstable_whatever_the_shift():
    base = two_impl_doc(1e-3, 1.2e-3, seed=10)
    head = two_impl_doc(1e-3, 1.32e-3, seed=20, unstable=[("axpy", "ptx")])
    verdicts = by_label(compare(base, head, bootstrap=FAST))
    assert verdicts["axpy/ptx"] == "unstable"
    assert verdicts["axpy/ptx gap"] == "unstable"  # the gap depends on ptx's samples
    assert verdicts["axpy/cuda"] == "same"
    # an unstable base counts too
    verdicts = by_label(compare(head, base, bootstrap=FAST))
    assert verdicts["axpy/ptx"] == "unstable"


def test_a_changed_source_hash_is_not_comparable():
    base = two_impl_doc(1e-3, 1.2e-3, seed=10)
    head = two_impl_doc(1e-3, 1.32e-3, seed=20, source_sha={("axpy", "ptx"): "ab" * 32})
    result = compare(base, head, bootstrap=FAST)
    assert "axpy/ptx" not in by_label(result) and "axpy/ptx gap" not in by_label(result)
    (row,) = [r for r in result.not_compared if r.case_id == "axpy"]
    assert row.impl == "ptx"
    assert row.reason.startswith("not comparable: series key changed: source_sha256")
    assert "-> abababababab" in row.reason
    assert by_label(result)["scale/ptx"] == "same"


def test_a_changed_baseline_source_makes_the_whole_case_not_comparable():
    base = two_impl_doc(1e-3, 1.2e-3, seed=10)
    head = two_impl_doc(1e-3, 1.2e-3, seed=20, source_sha={("axpy", "cuda"): "cd" * 32})
    result = compare(base, head, bootstrap=FAST)
    skipped = {r.impl: r.reason for r in result.not_compared}
    assert set(skipped) == {"cuda", "ptx"}
    assert "baseline_source_sha256" in skipped["ptx"]
    assert [r.label for r in result.times] == ["scale/cuda", "scale/ptx"]


def test_another_gpu_or_mode_is_not_comparable():
    base = two_impl_doc(1e-3, 1.2e-3, seed=10)
    other_gpu = two_impl_doc(1e-3, 1.2e-3, seed=20, gpu="NVIDIA A100-SXM4-80GB")
    result = compare(base, other_gpu, bootstrap=FAST)
    assert not result.times and not result.gaps and len(result.not_compared) == 4
    assert all("'NVIDIA H200' -> 'NVIDIA A100-SXM4-80GB'" in r.reason for r in result.not_compared)
    cold = two_impl_doc(1e-3, 1.2e-3, seed=20, mode="cold")
    assert all("mode 'hot' -> 'cold'" in r.reason for r in compare(base, cold).not_compared)


def test_cases_and_implementations_in_one_side_only_are_listed():
    base = make_document({"a": {"cuda": draws(1e-3, 1), "ptx": draws(1e-3, 2)}})
    head = make_document(
        {
            "a": {"cuda": draws(1e-3, 3), "forth": draws(1e-3, 4)},
            "b": {"cuda": draws(1e-3, 5)},
        }
    )
    result = compare(base, head, bootstrap=FAST)
    listed = {(r.case_id, r.impl, r.reason) for r in result.not_compared}
    assert listed == {
        ("a", "ptx", "only in base"),
        ("a", "forth", "only in head"),
        ("b", None, "only in head"),
    }
    assert [r.label for r in result.times] == ["a/cuda"]


def test_a_failed_case_is_not_compared_and_says_why():
    base = two_impl_doc(1e-3, 1.2e-3, seed=10)
    head = two_impl_doc(
        1e-3, 1.2e-3, seed=20, failed={"axpy": "CUDA_ERROR_ILLEGAL_ADDRESS\nTraceback ..."}
    )
    result = compare(base, head, bootstrap=FAST)
    (row,) = result.not_compared
    assert (row.case_id, row.impl) == ("axpy", None)
    assert row.reason == "failed in head (timing: CUDA_ERROR_ILLEGAL_ADDRESS)"


def test_an_unchecked_candidate_has_no_gap_to_compare():
    base = two_impl_doc(1e-3, 1.2e-3, seed=10)
    head = two_impl_doc(1e-3, 1.2e-3, seed=20, not_checked=[("axpy", "ptx")])
    result = compare(base, head, bootstrap=FAST)
    assert "axpy/ptx" in by_label(result) and "axpy/ptx gap" not in by_label(result)
    assert any(r.impl == "ptx gap" and "no gap in head" in r.reason for r in result.not_compared)


def test_gate_levels():
    result = compare(
        two_impl_doc(1e-3, 1.2e-3, seed=10),
        two_impl_doc(1e-3, 1.32e-3, seed=20, unstable=[("scale", "ptx")]),
        bootstrap=FAST,
    )
    assert gate(result, "never") == []
    assert {r.label for r in gate(result, "slower")} == {"axpy/ptx", "axpy/ptx gap"}
    assert {r.label for r in gate(result, "unstable")} == {
        "axpy/ptx",
        "axpy/ptx gap",
        "scale/ptx",
        "scale/ptx gap",
    }
    assert {r.label for r in gate(result, "gap-slower")} == {"axpy/ptx gap"}
    assert {r.label for r in gate(result, "changed")} == {"axpy/ptx", "axpy/ptx gap"}
    with pytest.raises(ValueError, match="fail_on must be one of"):
        gate(result, "faster")


def test_fail_on_words_mean_the_same_for_compare_and_regressions():
    from harness.analysis import fail_on
    from harness.commands.compare import compare as compare_cli
    from harness.commands.history import regressions

    for command in (compare_cli, regressions):
        (option,) = [p for p in command.params if p.name == "fail_on"]
        assert list(option.type.choices) == [*fail_on.WORDS, "any"]
    assert fail_on.trips("gap-slower", "gap", "slower") and not fail_on.trips(
        "gap-slower", "time", "slower"
    )
    assert fail_on.trips("changed", "time", "faster") and not fail_on.trips(
        "slower", "gap", "faster"
    )
    assert fail_on.trips("unstable", "time", "unstable") and not fail_on.trips(
        "never", "gap", "slower"
    )


def test_markdown_report_shows_rows_policy_and_skipped():
    base = two_impl_doc(1e-3, 1.2e-3, seed=10)
    head = two_impl_doc(1e-3, 1.32e-3, seed=20, source_sha={("scale", "ptx"): "ab" * 32})
    text = markdown(compare(base, head, bootstrap=FAST))
    assert text.startswith("## kernelgap compare\n")
    assert "below 0.05" in text and "at least 2.0%" in text
    ptx_line = next(line for line in text.splitlines() if "| ptx (candidate)" in line)
    assert ptx_line.startswith("| axpy v1 ") and ptx_line.endswith("| **slower** |")
    assert re.search(r"\| \+(9|10)\.\d\d% \|", ptx_line)
    assert "### Gaps (candidate / baseline; lower is better)" in text
    assert "- `scale` / `ptx`: not comparable: series key changed: source_sha256" in text


def test_to_json_is_encodable_and_complete():
    result = compare(
        two_impl_doc(1e-3, 1.2e-3, 10), two_impl_doc(1e-3, 1.32e-3, 20), bootstrap=FAST
    )
    data = orjson.loads(orjson.dumps(result.to_json()))
    assert data["kind"] == "kernelgap.comparison"
    assert data["policy"] == {"min_effect": 0.02, "alpha": 0.05, "interval": False}
    ptx = next(r for r in data["times"] if r["impl"] == "ptx" and r["case_id"] == "axpy")
    assert ptx["verdict"] == "slower" and ptx["change"]["percent"] > 5
    assert data["counts"]["slower"] == 2


# --- command line --------------------------------------------------------------------------


@pytest.fixture
def slower_pair(tmp_path):
    base, head = tmp_path / "base.json", tmp_path / "head.json"
    base.write_bytes(orjson.dumps(two_impl_doc(1e-3, 1.2e-3, seed=10)))
    head.write_bytes(orjson.dumps(two_impl_doc(1e-3, 1.32e-3, seed=20)))
    return base, head


def test_cli_end_to_end_gates_on_slower(slower_pair):
    base, head = slower_pair
    done = subprocess.run(
        [sys.executable, "-m", "harness", "compare", str(base), str(head), "--fail-on", "slower"],
        cwd=ROOT,
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr.decode()
    assert b"## kernelgap compare" in done.stdout
    err = done.stderr.decode()
    assert "--fail-on slower tripped by 2" in err and "axpy/ptx slower" in err


def test_cli_exit_status_per_fail_on_level(slower_pair):
    base, head = slower_pair
    run = CliRunner().invoke
    assert run(compare_command, [str(base), str(head)]).exit_code == 0  # default: never
    assert run(compare_command, [str(base), str(head), "--fail-on", "never"]).exit_code == 0
    assert run(compare_command, [str(base), str(head), "--fail-on", "unstable"]).exit_code == 1
    assert run(compare_command, [str(base), str(base), "--fail-on", "unstable"]).exit_code == 0
    # a 10% slowdown is under a 15% minimum effect
    loose = [str(base), str(head), "--fail-on", "slower", "--min-effect", "0.15"]
    assert run(compare_command, loose).exit_code == 0


def test_cli_json_format(slower_pair):
    base, head = slower_pair
    done = CliRunner().invoke(compare_command, [str(base), str(head), "--format", "json"])
    assert done.exit_code == 0
    data = orjson.loads(done.stdout)
    assert {r["verdict"] for r in data["gaps"]} == {"slower", "same"}


def test_cli_bad_input_exits_2_naming_the_file(tmp_path, slower_pair):
    base, _ = slower_pair
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    wrong = tmp_path / "wrong.json"
    doc = orjson.loads(base.read_bytes())
    del doc["cases"][0]["implementations"]["cuda"]["role"]
    wrong.write_bytes(orjson.dumps(doc))
    newer = tmp_path / "newer.json"
    newer.write_bytes(orjson.dumps({**orjson.loads(base.read_bytes()), "schema_version": "2.0.0"}))
    for bad, expected in [
        (broken, "malformed JSON"),
        (wrong, "cases[0].implementations.cuda"),
        (newer, "newer than this tool understands"),
        (tmp_path / "missing.json", "cannot read"),
    ]:
        done = CliRunner().invoke(compare_command, [str(base), str(bad)])
        assert done.exit_code == 2, (bad, done.output)
        assert str(bad) in done.stderr and expected in done.stderr
        assert done.stdout == ""


def test_gap_slower_gate_ignores_a_machine_wide_shift():
    from harness.analysis.compare import Bootstrap, Policy, compare, gate

    base = make_document(
        {"c": {"cuda": samples(1e-3, 30, 0.003, 1), "llvm": samples(1.2e-3, 30, 0.003, 2)}}
    )
    # head ran on a machine 10% slower: both times move, the gap does not
    head = make_document(
        {"c": {"cuda": samples(1.1e-3, 30, 0.003, 3), "llvm": samples(1.32e-3, 30, 0.003, 4)}}
    )
    result = compare(base, head, Policy(), Bootstrap(resamples=500))
    assert gate(result, "slower"), "times are slower"
    assert gate(result, "gap-slower") == []
    # a real slowdown of the candidate trips both
    worse = make_document(
        {"c": {"cuda": samples(1e-3, 30, 0.003, 5), "llvm": samples(1.44e-3, 30, 0.003, 6)}}
    )
    assert gate(compare(base, worse, Policy(), Bootstrap(resamples=500)), "gap-slower")
