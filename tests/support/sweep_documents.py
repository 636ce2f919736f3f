"""Swept result documents for the harness's tests, made from a recorded H200 run: axpy_f64's
block copied to each point of its sweep with the gaps (and candidate times) a test asks for,
assembled by the runner's own runner.document.sweep_block."""

from __future__ import annotations

import copy
from pathlib import Path

import orjson

from runner.definition import manifest
from runner.document import summary, sweep_block

ROOT = Path(__file__).resolve().parents[2]
RECORDED = orjson.loads((ROOT / "tests/fixtures/result-1.2.0-h200-warpforth.json").read_bytes())
AXPY = manifest.load(ROOT / "benchmarks/cases.toml").case("axpy_f64")


def _at(block: dict, dims: dict, gaps: dict[str, float]) -> dict:
    """`block` with its dims and each candidate's gap (interval +-1%) and median set."""
    doc = copy.deepcopy(block)
    doc["dims"] = dims
    base = doc["implementations"][doc["baseline"]]["timing"]["stats"]["median_s"]
    for name, impl in doc["implementations"].items():
        if name in gaps and impl.get("gap"):
            g = gaps[name]
            impl["gap"].update(ratio_of_medians=g, ci_low=g * 0.99, ci_high=g * 1.01)
            impl["timing"]["stats"]["median_s"] = base * g
    return doc


def swept_document(gaps_at, run_id: str = "") -> dict:
    """The recorded document with axpy_f64 swept: `gaps_at(point id)` gives {candidate: gap}
    at each point. `run_id` makes the run distinct (its start time's seconds)."""
    doc = copy.deepcopy(RECORDED)
    doc["schema_version"] = "1.10.0"
    if run_id:
        doc["started_utc"] = (
            doc["started_utc"][:17] + f"{int(run_id):02d}" + doc["started_utc"][19:]
        )
    index = next(i for i, c in enumerate(doc["cases"]) if c["id"] == "axpy_f64")
    block = doc["cases"][index]
    sweep = AXPY.sweep
    points = [(p.id, p.dims, _at(block, p.dims, gaps_at(p.id))) for p in sweep.points]
    headline = next(d for pid, _, d in points if pid == sweep.headline)
    doc["cases"][index] = sweep_block(sweep.headline, headline, list(sweep.axes), points)
    doc["summary"] = summary(doc["cases"])
    return doc


def headline_only_document(gaps_at, run_id: str = "") -> dict:
    """swept_document as a run of axpy_f64's headline point alone (`--point`, `--case
    'axpy_f64[n=2^27]'`) writes it: the case block lists that one point."""
    doc = swept_document(gaps_at, run_id)
    index = next(i for i, c in enumerate(doc["cases"]) if c["id"] == "axpy_f64")
    block = doc["cases"][index]
    headline = AXPY.sweep.headline
    only = next(p for p in block["points"] if p["point"] == headline)
    doc["cases"][index] = {**block, "points": [only]}
    doc["summary"] = summary(doc["cases"])
    return doc


def falling(pid: str) -> dict[str, float]:
    """Gaps that fall toward parity as n grows: warpforth 2.0x at 2^11 to 1.0x at 2^27."""
    k = int(pid.split("^")[1])
    return {"warpforth": 1.0 + (27 - k) / 16, "llvm": 1.0, "handptx": 1.02}


SCALE = manifest.load(ROOT / "benchmarks/cases.toml").case("scale_i64")
LLVM_GAP = {"clang_O=O1": 1.30, "clang_O=O2": 1.05}


def option_document() -> dict:
    """The recorded H200 run with scale_i64 swept as the bundled suite sweeps it (dims and
    clang's -O level for `llvm`, LLVM_GAP at the option points), assembled by the runner's own
    runner.document.sweep_block."""
    doc = copy.deepcopy(RECORDED)
    doc["schema_version"] = "1.10.0"
    index = next(i for i, c in enumerate(doc["cases"]) if c["id"] == "scale_i64")
    block = doc["cases"][index]
    sweep = SCALE.sweep
    points = [
        (p.id, p.dims, _at(block, p.dims, {"llvm": LLVM_GAP.get(p.id, 0.98)})) for p in sweep.points
    ]
    headline = next(d for pid, _, d in points if pid == sweep.headline)
    doc["cases"][index] = {
        **sweep_block(sweep.headline, headline, list(sweep.axes), points),
        "options": sweep.options.block(),
    }
    doc["summary"] = summary(doc["cases"])
    return doc
