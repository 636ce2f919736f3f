"""The physically sound rate ceiling (issue 30, item 8; runner.measurement.environment): bandwidth by
kind of access from the runner's stream kernels, an allowance of the L2's size, a margin; on the
CPU with figures of the size the H200 gives."""

from __future__ import annotations

import pytest

from runner.measurement import environment as ceiling

L2 = 50 * 2**20
STREAM = {
    "measured_read_bytes_per_s": 4.55e12,
    "measured_write_bytes_per_s": 4.15e12,
    "measured_copy_kernel_bytes_per_s": 4.30e12,
    "measured_memory_bytes_per_s": 4.168e12,
    "l2_bytes": L2,
}


def add_bytes(n: int) -> float:
    return 3 * 4 * n  # torch.add in float32: two reads and one write a element


def test_an_honest_add_at_2_24_refused_before_passes_now():
    """4623 GB/s at 2^24, cold, refused against a cuMemcpy of 4168 GB/s x1.1 (issue 30)."""
    nbytes = add_bytes(1 << 24)
    median_s = nbytes / 4623e9
    bound = ceiling.judge_rate(nbytes, median_s, STREAM)
    assert not bound["exceeded"], bound
    assert bound["achieved_bytes_per_s"] == pytest.approx(
        (nbytes - 2 * L2) / median_s
    )  # unknown footprint
    assert bound["bandwidth_source"].startswith("measured read-only, the most favourable")
    only_copy = {"measured_memory_bytes_per_s": 4.168e12, "l2_bytes": L2}  # no stream figures
    assert not ceiling.judge_rate(nbytes, median_s, only_copy)["exceeded"]


def test_a_cheat_doing_an_eighth_of_the_work_at_2_26_is_flagged_with_both_figures():
    nbytes = add_bytes(1 << 26)
    honest_s = nbytes / 4.3e12
    assert not ceiling.judge_rate(nbytes, honest_s, STREAM)["exceeded"]
    bound = ceiling.judge_rate(nbytes, honest_s / 8, STREAM)
    assert bound["exceeded"] and bound["achieved_bytes_per_s"] > bound["ceiling_bytes_per_s"]
    assert bound["ceiling_bytes_per_s"] == pytest.approx(4.55e12 * ceiling.BANDWIDTH_MARGIN)
    assert bound["message"].startswith(f"{bound['achieved_bytes_per_s'] / 1e9:.0f} GB/s is above")
    assert "4550 GB/s (x1.1 allowed)" in bound["message"]
    assert "1.05e+08 allowed to the L2" in bound["message"]  # twice the L2: footprint unknown


def test_the_split_of_reads_and_writes_picks_the_bandwidth():
    def source(read, write):
        return ceiling.bandwidth_ceiling(STREAM, read, write)["bandwidth_source"]

    assert source(100.0, 0.0).startswith("measured read-only (the row only reads)")
    assert source(0.0, 100.0).startswith("measured write-only (the row only writes)")
    assert source(200.0, 100.0) == "measured read-only, the most favourable (reads and writes)"
    write_fast = {**STREAM, "measured_write_bytes_per_s": 5e12}
    assert ceiling.bandwidth_ceiling(write_fast, None, None)["bandwidth_bytes_per_s"] == 5e12
    assert ceiling.bandwidth_ceiling(STREAM, 0.0, 100.0)["bandwidth_bytes_per_s"] == 4.15e12


def test_fallbacks_and_nothing_to_judge():
    nominal = {"nominal_memory_bytes_per_s": 4.8e12}
    assert ceiling.bandwidth_ceiling(nominal)["bandwidth_source"] == "nominal"
    assert ceiling.bandwidth_ceiling(nominal)["l2_allowance_bytes"] == 0.0
    assert ceiling.bandwidth_ceiling({}) is None
    assert ceiling.judge_rate(None, 1e-3, STREAM) is None
    assert ceiling.judge_rate(1e9, 0.0, STREAM) is None
    # a call that moves less than the L2 holds is never over the ceiling
    small = ceiling.judge_rate(L2 / 2, 1e-9, STREAM)
    assert small["counted_bytes"] == 0 and not small["exceeded"]


# -- issue 50 item 11: what the L2 may serve, by the row's footprint ----------------------------------


@pytest.mark.parametrize("share", [0.8, 0.85, 0.9, 1.2])
@pytest.mark.parametrize("ratio", [2.5, 3.5])
def test_an_honest_in_place_kernel_near_the_l2_size_is_not_refused(share, ratio):
    """An in-place buffer of `share` x L2, read and written once a call, served by an L2
    `ratio` times the DRAM's bandwidth: the L2's size allowed once refused it (2B - L2 bytes
    in the time of 2B at the L2's rate); every access to a resident line allowed, not."""
    buffer = share * L2
    nbytes, dram = 2 * buffer, 4.55e12
    resident = min(buffer, L2)
    # the fastest an honest kernel can be: resident lines at the L2's rate, the rest at DRAM's
    honest_s = 2 * resident / (ratio * dram) + 2 * (buffer - resident) / dram
    # the traffic taken for the footprint (what the L2's size once amounts to)
    old = ceiling.judge_rate(nbytes, honest_s, STREAM, footprint_bytes=nbytes)
    new = ceiling.judge_rate(nbytes, honest_s, STREAM, footprint_bytes=buffer)
    unknown = ceiling.judge_rate(nbytes, honest_s, STREAM)  # runner.bench: footprint unknown
    assert not new["exceeded"], new
    assert not unknown["exceeded"], unknown
    # the refusal the issue found: (2B - L2) / (2B) x ratio above the margin
    assert old["exceeded"] == ((2 * share - 1) / (2 * share) * ratio > ceiling.BANDWIDTH_MARGIN)
    assert new["l2_allowance_bytes"] == pytest.approx(nbytes * min(1.0, L2 / buffer))


def test_the_footprint_allowance_still_refuses_a_cheat_and_keeps_the_old_one_out_of_place():
    """Out of place the footprint is the traffic (the L2's size once, as before); an in-place
    kernel doing an eighth of its work above the L2 is refused."""
    nbytes = add_bytes(1 << 26)
    assert ceiling.l2_allowance(nbytes, L2, nbytes) == pytest.approx(L2)
    # the footprint unknown: reads left resident and writes not yet written back, the L2 each
    assert ceiling.l2_allowance(nbytes, L2) == 2 * L2
    assert ceiling.l2_allowance(L2 / 2, L2) == L2 / 2
    buffer = 4 * L2
    honest_s = 2 * (buffer - L2) / 4.55e12
    assert ceiling.judge_rate(2 * buffer, honest_s / 8, STREAM, footprint_bytes=buffer)["exceeded"]
    assert ceiling.judge_rate(2 * buffer, honest_s / 8, STREAM)["exceeded"]  # footprint unknown


@pytest.mark.parametrize("share", [0.5, 0.85, 1.0, 2.0, 8.0])
@pytest.mark.parametrize("ratio", [1.5, 3.0, 10.0])
def test_with_the_footprint_unknown_no_honest_in_place_kernel_is_refused(share, ratio):
    """runner.bench knows a call's declared traffic, not its footprint: twice the L2 allowed
    covers an in-place buffer of any size served by an L2 of any speed (its resident part at the
    L2's rate, the rest at DRAM's), while a row claiming twice the DRAM rate beyond is refused."""
    buffer, dram = share * L2, STREAM["measured_read_bytes_per_s"]
    resident = min(buffer, L2)
    honest_s = 2 * resident / (ratio * dram) + 2 * (buffer - resident) / dram
    assert not ceiling.judge_rate(2 * buffer, honest_s, STREAM)["exceeded"]
    if buffer > L2:
        assert ceiling.judge_rate(2 * buffer, honest_s / 2.5, STREAM)["exceeded"]
