"""protocol.points.merge_points against the runner's own sweep assembly (run_points, on the CPU
with a measuring stand-in): scale_i64 (its sizes and clang's -O level for llvm) run one point at
a time, as a cluster deals it, and merged on the run's skeleton equals the sweep run whole, the
option axis's curve and a headline that was not selected included."""

from __future__ import annotations

from protocol.points import measured_at, merge_points
from protocol.validation import validate
from runner.definition import manifest
from runner.document import document, summary
from runner.execution.sweep_run import run_points
from tests.support.sweep_documents import RECORDED, ROOT, _at

SCALE = manifest.load(ROOT / "benchmarks/cases.toml").case("scale_i64")
BLOCK = next(c for c in RECORDED["cases"] if c["id"] == "scale_i64")
IDS = [p.id for p in SCALE.sweep.points]


def measure(point: str, built) -> dict:
    """The recorded block at `point`, llvm's gap growing along the declared points."""
    return _at(BLOCK, SCALE.sweep.point(point).dims, {"llvm": 0.8 + 0.05 * IDS.index(point)})


def sweep(selected: tuple[str, ...] | None, skeleton: bool = False) -> dict:
    """The case block runner bench writes (`skeleton`: past its budget, nothing measured)."""
    left_s = (lambda: 0.0) if skeleton else (lambda: None)
    return run_points(SCALE, selected, measure, left_s, 1e-6, lambda text: None)


def per_point(selected: tuple[str, ...] | None) -> dict:
    points = selected or IDS
    at = {p: measured_at(sweep((p,)), p) for p in points}
    return merge_points(sweep(selected, skeleton=True), at)


def test_a_sweep_run_point_by_point_merges_into_the_block_of_the_whole_run():
    assert SCALE.sweep.options is not None and len(IDS) > 3
    whole = sweep(None)
    merged = per_point(None)
    assert merged == whole
    assert merged["curve"]["llvm"]["points"] < len(IDS)  # the size curve leaves the options out
    environment = {**RECORDED["environment"], "sensors_start": None, "sensors_end": None}
    run = document(RECORDED["suite"], environment, RECORDED["options"], [merged],
                   RECORDED["started_utc"], RECORDED["finished_utc"])  # fmt: skip
    validate(run, "result", "the merged sweep")
    assert summary([merged])["points"]["ok"] == len(IDS)


def test_points_without_the_headline_merge_as_a_run_of_those_points():
    chosen = (IDS[0], "clang_O=O1")
    assert SCALE.sweep.headline not in chosen
    merged = per_point(chosen)
    assert merged == sweep(chosen)
    assert merged["status"] == "skipped" and merged["error"]["phase"] == "setup"


def test_a_point_keeps_the_device_it_ran_on():
    skeleton = sweep(None, skeleton=True)
    at = {p: {**measured_at(sweep((p,)), p), "device": {"index": i}} for i, p in enumerate(IDS)}
    merged = merge_points(skeleton, at)
    head = IDS.index(SCALE.sweep.headline)
    assert merged["device"] == {"index": head}
    assert [p.get("device") for p in merged["points"]] == [
        None if i == head else {"index": i} for i in range(len(IDS))
    ]
