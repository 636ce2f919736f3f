"""A synthetic history for the dashboard's benchmark, screenshots and browser tests: runs of
25 cases x 4 implementations (baseline 'cuda'; candidates 'forth', the suite's primary, 'llvm'
and 'triton'), alternately hot and cold, with planted changes:

  - 'forth' gets 2.5% faster on every case at a quarter, half and three quarters of the
    history (its suite geomean: 1.31x -> about 1.21x);
  - case_07 'forth' -4% (cold) at 80%; case_11 'llvm' +2% (both modes) at 95%; case_03
    'forth' +3% hot and +4% cold at 98.5% (open alerts, one per mode): steps of one series;
  - from 98% on, every implementation of every case is 2% slower in hot mode (a driver shift:
    every time moves, no gap does);
  - about 1 point in 100 unstable, case_07 fails in every 997th run (as history_ingest.py);
  - with --points N (N > 1), every case swept over N sizes (n = 2^(27-2(N-1)) to 2^27, the
    largest its headline): each smaller point's times halve per step and its candidates' gaps
    grow 3% per step (the dashboard's gap-by-size charts, issue 34's 8 points per case);
  - counters: every implementation carries a static analysis (tests/fixtures/
    static-axpy-forth.json's WarpForth axpy), with steps of the primary's code planted: case_04
    'forth' gets one more DMUL in its loop at the middle run (history_ingest.py's step, where
    every 'forth' gets 2.5% faster), case_03 'forth' the same with its +3% step at 98.5%, and
    case_11 'forth' a register-capped build that spills at 95% with no time step of its own (the
    code changed, the time did not): the dashboard's counter panels and the marks they explain.

  - documents as the current runner writes them (result schema RESULT_SCHEMA_VERSION: cold
    runs are keyed `cold-mean`), with --old-documents as result schema 1.0.0 (`cold`);
  - the hot run at 90% ran on another GPU model (OTHER_GPU), every time 5% slower there: its
    own series, never a point of the primary model's lines;
  - the hot run at 97% was throttled: every case's clocks block says most samples were taken
    below the run's clock (THROTTLE_REASON), its gaps unstable and its times 4% slower.

    python tools/perf/dashboard_history.py --db history.sqlite [--documents 1000] [--points 8]
        [--old-documents]
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from history_ingest import ROOT, Variants

sys.path.insert(0, str(ROOT))

from harness.history.store import Store
from protocol.version import RESULT_SCHEMA_VERSION
from runner.document import summary, sweep_block

__all__ = ["PlantedHistory", "make_history"]

IMPLS = {"cuda": 1.0, "forth": 1.31, "llvm": 1.12, "triton": 0.95}
MODES = ("hot", "cold")
OTHER_GPU, OTHER_AT = "NVIDIA A100-SXM4-80GB", 0.90
THROTTLED_AT = 0.97
THROTTLE_REASON = "HW thermal slowdown"


class PlantedHistory(Variants):
    """Variants with the dashboard's planted changes (module doc); document k runs in
    MODES[k % 2], and its place in the history is k / documents."""

    def __init__(
        self,
        documents: int,
        cases: int = 25,
        samples: int = 30,
        seed: int = 0,
        points: int = 1,
        current: bool = True,
    ):
        if cases < 12:
            raise ValueError(f"cases: {cases}; the planted steps need at least 12")
        if not 1 <= points <= 14:
            raise ValueError(f"points: {points}; expected 1 to 14 (2^27 down by 2^2 a step)")
        self.points, self.current = points, current
        # the hot runs that run elsewhere or throttled (k even: hot)
        self.other_k = int(OTHER_AT * documents) // 2 * 2
        self.throttled_k = int(THROTTLED_AT * documents) // 2 * 2
        super().__init__(cases, samples, documents, seed, impls=IMPLS, modes=MODES, static=True)
        base = self.static["base"]
        self.static["spills"] = {
            **base,
            "resources": {**base["resources"], "registers": 16, "spill_store_bytes": 24,
                          "spill_load_bytes": 24, "stack_bytes": 24},
        }  # fmt: skip

    def factors(self, k: int) -> np.ndarray:
        at = k / self.documents
        hot = MODES[k % 2] == "hot"
        f = np.ones((self.n_cases, len(self.impls)))
        forth, llvm = self.impls.index("forth"), self.impls.index("llvm")
        f[:, forth] *= 0.975 ** sum(at >= x for x in (0.25, 0.5, 0.75))
        if at >= 0.985:
            f[3, forth] *= 1.03 if hot else 1.04
        if at >= 0.80 and not hot:
            f[7, forth] *= 0.96
        if at >= 0.95:
            f[11, llvm] *= 1.02
        if at >= 0.98 and hot:
            f *= 1.02
        if k == self.other_k:
            f *= 1.05
        if k == self.throttled_k:
            f *= 1.04
        return f

    def document(self, k: int) -> dict:
        doc = super().document(k)
        doc["suite"]["primary"] = "forth"
        if self.current:
            doc["schema_version"] = RESULT_SCHEMA_VERSION
        if k == self.other_k:
            doc["environment"]["device"]["name"] = OTHER_GPU
        if k == self.throttled_k:
            for case in doc["cases"]:
                _throttle(case, self.n_samples * len(self.impls))
        at = k / self.documents
        impls = {case["id"]: case["implementations"] for case in doc["cases"]}
        if at >= 0.985 and "timing" in impls["case_03"]["forth"]:
            impls["case_03"]["forth"]["static"] = self.static["head"]
        if at >= 0.95 and "timing" in impls["case_11"]["forth"]:
            impls["case_11"]["forth"]["static"] = self.static["spills"]
        # Commit hashes like git's (the variants number them, so all would start 0000000).
        doc["suite"]["commit"] = hashlib.sha1(f"commit {k // 2}".encode()).hexdigest()
        if self.points > 1:
            doc["cases"] = [swept(case, self.points) for case in doc["cases"]]
            doc["summary"] = summary(doc["cases"])
        return doc


def swept(case: dict, points: int) -> dict:
    """`case` (measured at n = 2^27) as the headline of a sweep of `points` sizes, two powers of
    two apart: a smaller point's times are halved per step down, its candidates' gaps 3% higher
    per step."""
    ids = [f"n=2^{27 - 2 * (points - 1 - j)}" for j in range(points)]
    made = []
    for j, pid in enumerate(ids[:-1]):
        down = points - 1 - j
        impls = {}
        for name, impl in case["implementations"].items():
            g = 1 + 0.03 * down if impl.get("role") == "candidate" else 1.0
            impls[name] = _scaled(impl, 0.5**down * g, g)
        block = {**case, "dims": {"n": 2 ** (27 - 2 * down)}, "implementations": impls}
        made.append((pid, block["dims"], block))
    made.append((ids[-1], case["dims"], case))
    return sweep_block(ids[-1], case, ["n"], made)


def _throttle(case: dict, samples: int) -> None:
    """The case's clocks block as the runner writes it for a run mostly below its clock
    (runner.document.apply_clocks), its gaps unstable."""
    if case.get("status") != "ok":
        return
    flagged = samples * 4 // 5
    note = (
        f"unstable: {flagged} of {samples} samples were taken while throttled ({THROTTLE_REASON})"
    )
    case["clocks"] = {
        "source": "nvml",
        "run_max_sm_mhz": 1980,
        "samples": samples,
        "flagged": flagged,
        "reasons": {THROTTLE_REASON: flagged, "SM clock below the run's maximum": flagged},
        "unstable": True,
        "note": note,
    }
    case["notes"] = ["clocks: " + note]
    for impl in case["implementations"].values():
        if impl.get("gap"):
            impl["gap"]["stable"] = False


def _scaled(impl: dict, factor: float, gap_factor: float) -> dict:
    """A copy of `impl` with its times times `factor` and its gap times `gap_factor`; what is
    not scaled is shared with `impl` (a deep copy per point was most of a document's time)."""
    out = dict(impl)
    timing = impl.get("timing")
    if timing:
        stats = {k: v * factor if k.endswith("_s") else v for k, v in timing["stats"].items()}
        samples = [v * factor for v in timing["samples_s"]]
        out["timing"] = {**timing, "samples_s": samples, "stats": stats}
    if impl.get("gap"):
        out["gap"] = {k: v * gap_factor if k in _GAP_KEYS else v for k, v in impl["gap"].items()}
    return out


_GAP_KEYS = ("ratio_of_medians", "median_of_round_ratios", "ci_low", "ci_high")


def make_history(
    db: Path, documents: int, cases: int = 25, points: int = 1, current: bool = True
) -> float:
    """Store the planted history in a new database at `db` (a transaction per BATCH
    documents, so 10,000 swept runs never sit in memory at once); seconds the ingest took."""
    history = PlantedHistory(documents, cases, points=points, current=current)
    seconds = 0.0
    with Store(db) as store:
        for first in range(0, documents, BATCH):
            last = min(documents, first + BATCH)
            batch = [(history.document(k), f"synthetic {k}") for k in range(first, last)]
            t0 = time.perf_counter()
            store.ingest_many(batch)
            seconds += time.perf_counter() - t0
            print(f"{last} of {documents} runs stored", file=sys.stderr)
    return seconds


BATCH = 100


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", type=Path, required=True, help="a new file")
    parser.add_argument("--documents", type=int, default=1000)
    parser.add_argument("--cases", type=int, default=25)
    parser.add_argument("--points", type=int, default=1, help="sizes per case (1: no sweep)")
    parser.add_argument(
        "--old-documents", action="store_true", help="result schema 1.0.0 documents (cold: `cold`)"
    )
    args = parser.parse_args()
    if args.db.exists():
        parser.error(f"--db {args.db}: exists; give a new file")
    seconds = make_history(
        args.db, args.documents, args.cases, args.points, current=not args.old_documents
    )
    print(f"{args.documents} runs stored in {args.db} in {seconds:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
