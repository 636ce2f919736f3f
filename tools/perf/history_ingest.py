"""Benchmark (not a test): ingest many synthetic result documents into a fresh history, then
list the regressions.

Documents: --documents (10,000) runs of --cases (30) cases x 3 implementations (baseline 'cuda',
candidates 'forth' and 'ptx') x --samples (30) samples, one minute apart, each with its own commit.
They are variants of one document built by tests/support/harness_docs.py from the real H200 fixture:
samples drawn around per-case medians (+-0.2%), statistics from numpy over the same formulas
as the runner, the gap's interval a fixed +-0.1% (synthetic; the store does not recompute it).
Planted in them:
  - case 4 'forth' steps +10% at the middle run (the new normal by the end: no alert);
  - case 5 'forth' changes its source hash at the middle run (a new series);
  - about 1 point in 100 is marked unstable, and case 7 fails in every 997th run;
  - in the newest run, cases 0-2 'forth' are 10% slower (gap and time alerts) and case 3's
    baseline is 8% slower with its candidates (a machine shift: baseline and candidate time alerts,
    no gap alert).
Timed: Store.ingest() per document (one transaction each; schema validation is timed separately
on --validate-sample documents, since the harness validates a file once when it reads it),
then the regression review of every current series, in process and as `python -m harness
regressions`, then `python -m harness changes` (change points and drift over every point of
every series). Targets on the 2-core development machine: ingest under 60 s, regressions under
2 s, changes under 10 s. Planted for changes: case 4 'forth' steps +10% at the middle run (a
change point on its gap and time); nothing else is a change (the newest run's 10% is one point).

With --static every implementation carries a recorded static analysis (tests/fixtures/
static-axpy-forth.json: WarpForth's axpy, and the same with one word more in its loop, which
case 4 'forth' switches to at the middle run, with its +10% step), so the ingest also keeps the
counters and `harness changes` annotates the step with them.

    python tools/perf/history_ingest.py [--documents 10000] [--static] [--db PATH [--reuse]]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import orjson

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from harness.analysis.regressions import Policy, current_series, review  # noqa: E402
from harness.history.counter_series import counter_series  # noqa: E402
from harness.history.store import Store  # noqa: E402
from protocol.validation import validate  # noqa: E402
from tests.support.harness_docs import make_document  # noqa: E402

IMPLS = ("cuda", "forth", "ptx")
START = datetime(2026, 1, 1, tzinfo=UTC)
STATIC = ROOT / "tests" / "fixtures" / "static-axpy-forth.json"


class Variants:
    """Cheap variants of one template document: new samples, statistics, gaps, commit, date."""

    def __init__(
        self,
        cases: int,
        samples: int,
        documents: int,
        seed: int = 0,
        impls: dict[str, float] | None = None,
        modes: tuple[str, ...] = ("hot",),
        static: bool = False,
    ):
        """impls: name -> its time against the baseline (the first); modes: document k runs
        in modes[k % len(modes)]."""
        impls = impls or dict(zip(IMPLS, (1.0, 1.2, 0.9), strict=True))
        self.impls = tuple(impls)
        self.rng = np.random.default_rng(seed)
        self.static = orjson.loads(STATIC.read_bytes()) if static else None
        self.n_cases, self.n_samples, self.documents = cases, samples, documents
        self.medians_s = self.rng.uniform(5e-6, 5e-3, size=(cases, 1)) * list(impls.values())
        stub = [1e-3] * samples
        names = [f"case_{i:02d}" for i in range(cases)]
        self.modes = modes
        self.templates = [
            orjson.dumps(
                make_document(
                    {n: dict.fromkeys(self.impls, stub) for n in names}, mode=mode, resamples=1
                )
            )
            for mode in modes
        ]

    def factors(self, k: int) -> np.ndarray:
        """Each case's and implementation's time in document k against its usual median."""
        f = np.ones((self.n_cases, len(self.impls)))
        if k >= self.documents // 2:
            f[4, 1] = 1.10
        if k == self.documents - 1:
            f[0:3, 1] *= 1.10
            f[3, :] *= 1.08
        return f

    def document(self, k: int) -> dict:
        doc = orjson.loads(self.templates[k % len(self.modes)])
        started = START + timedelta(minutes=k)
        doc["started_utc"] = started.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        doc["finished_utc"] = (started + timedelta(seconds=40)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        doc["suite"]["commit"] = f"{k:040x}"
        shape = (self.n_cases, len(self.impls), self.n_samples)
        s = (self.medians_s * self.factors(k))[..., None] * (
            1 + self.rng.uniform(-0.002, 0.002, shape)
        )
        median = np.median(s, axis=2)
        mad = np.median(np.abs(s - median[..., None]), axis=2)
        stats = {
            "median_s": median,
            "p95_s": np.percentile(s, 95, axis=2),
            "mad_s": mad,
            "min_s": s.min(axis=2),
            "max_s": s.max(axis=2),
            "mean_s": s.mean(axis=2),
            "noise": mad / median,
        }
        stats = {key: value.tolist() for key, value in stats.items()}
        stable = self.rng.random((self.n_cases, len(self.impls))) > 0.01
        stable = (stable | (k == self.documents - 1)).tolist()  # the planted steps must count
        ratio = (median / median[:, :1]).tolist()
        round_ratio = np.median(s / s[:, :1, :], axis=2).tolist()
        samples = s.tolist()
        for i, case in enumerate(doc["cases"]):
            if k % 997 == 0 and i == 7:
                case["status"] = "failed"
                case["error"] = {"phase": "timing", "message": "synthetic: launch timed out"}
                for impl in case["implementations"].values():
                    for key in ("timing", "gap", "throughput"):
                        impl.pop(key, None)
                continue
            impls = case["implementations"]
            if self.static is not None:
                for name, impl in impls.items():
                    late = (i, name) == (4, "forth") and k >= self.documents // 2
                    impl["static"] = self.static["head" if late else "base"]
            if i == 5 and k >= self.documents // 2 and "forth" in impls:
                impls["forth"]["build"]["source_sha256"] = "5" * 64
            for j, name in enumerate(self.impls):
                timing = impls[name]["timing"]
                timing["samples_s"] = samples[i][j]
                block = timing["stats"]
                for key, values in stats.items():
                    block[key] = values[i][j]
                block["stable"] = stable[i][j]
                if j:
                    impls[name]["gap"].update(
                        ratio_of_medians=ratio[i][j],
                        median_of_round_ratios=round_ratio[i][j],
                        ci_low=ratio[i][j] * 0.999,
                        ci_high=ratio[i][j] * 1.001,
                        stable=stable[i][j] and stable[i][0],
                    )
        return doc


def regressions_in_process(db: Path, window: int) -> tuple[float, list]:
    t0 = time.perf_counter()
    with Store(db, readonly=True) as store:
        series = current_series(store.list_series())
        points_of = {s["series_id"]: store.recent(s["series_id"], window) for s in series}
    findings = review(series, points_of, Policy(window=window))
    return time.perf_counter() - t0, findings


def _arguments():
    """(the arguments, the database's path, the temporary folder that holds it by default)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--documents", type=int, default=10_000)
    parser.add_argument("--cases", type=int, default=30)
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--validate-sample", type=int, default=20)
    parser.add_argument(
        "--static", action="store_true", help="every implementation carries a static analysis"
    )
    parser.add_argument("--db", type=Path, help="a new file (default: in a temporary directory)")
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="--db names a history this script built before: skip the ingest, time the reads",
    )
    args = parser.parse_args()
    if args.cases < 8 or args.documents < 4:
        parser.error("--cases must be >= 8 and --documents >= 4 (the planted steps need them)")
    tmp = tempfile.TemporaryDirectory(prefix="kernelgap-history-")
    db = args.db or Path(tmp.name) / "history.sqlite"
    if db.exists() and not args.reuse:
        parser.error(f"--db {db}: exists; the benchmark needs a fresh database (or --reuse)")
    if args.reuse and not db.exists():
        parser.error(f"--reuse: --db {db} does not exist")
    return args, db, tmp


def _validation_s(variants: Variants, count: int) -> float:
    """Seconds to validate one document against the schema (not part of the ingest)."""
    check = [variants.document(k) for k in range(count)]
    t0 = time.perf_counter()
    for d in check:
        validate(d, "result", "synthetic document")
    return (time.perf_counter() - t0) / max(1, len(check))


def _ingest(db: Path, variants: Variants, documents: int) -> tuple[float, float, float]:
    """(seconds ingesting, seconds building the documents, wall seconds) for `documents`."""
    ingest_s = build_s = 0.0
    wall0 = time.perf_counter()
    with Store(db) as store:
        for k in range(documents):
            t0 = time.perf_counter()
            d = variants.document(k)
            t1 = time.perf_counter()
            if not store.ingest(d, trusted=True, check=False).stored:
                raise SystemExit(f"document {k} was not stored")
            ingest_s += time.perf_counter() - t1
            build_s += t1 - t0
            if (k + 1) % 1000 == 0:
                print(f"  {k + 1} documents, ingest {ingest_s:.1f} s", file=sys.stderr)
    return ingest_s, build_s, time.perf_counter() - wall0


def _dashboard_read(db: Path) -> tuple[float, int]:
    """What a dashboard does: list the series, read every point of the longest; (seconds,
    points)."""
    with Store(db, readonly=True) as store:
        t0 = time.perf_counter()
        listed = store.list_series()
        longest = max(listed, key=lambda s: s["points"])
        series_points = store.points(longest["series_id"])
        return time.perf_counter() - t0, len(series_points)


def _harness_command(db: Path, command: str) -> tuple[float, subprocess.CompletedProcess]:
    """`python -m harness COMMAND --db DB --format json`, timed: (wall seconds, the process)."""
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "harness", command, "--db", str(db), "--format", "json"],
        cwd=ROOT,
        capture_output=True,
    )
    return time.perf_counter() - t0, done


def main() -> int:
    args, db, _tmp = _arguments()
    variants = Variants(args.cases, args.samples, args.documents, static=args.static)
    validate_s = _validation_s(variants, args.validate_sample)
    ingest_s, build_s, wall_s = _ingest(db, variants, 0 if args.reuse else args.documents)
    size = sum(p.stat().st_size for p in db.parent.glob(db.name + "*"))
    regress_s, findings = regressions_in_process(db, Policy.window)
    points_s, series_points = _dashboard_read(db)
    cli_s, cli = _harness_command(db, "regressions")
    alerts = sorted((f.case_id, f.impl, f.metric) for f in findings if f.alert)
    changes_s, changes_cli = _harness_command(db, "changes")
    found = orjson.loads(changes_cli.stdout)["changes"] if changes_cli.returncode == 0 else []
    steps = sorted((c["case_id"], c["impl"], c["metric"], c["kind"]) for c in found)
    points = args.documents * args.cases * len(IMPLS)

    print(
        f"history_ingest: {args.documents} documents x {args.cases} cases x {len(IMPLS)} "
        f"implementations x {args.samples} samples ({points} points)"
    )
    print(
        f"ingest:      {ingest_s:.1f} s ({ingest_s / args.documents * 1e3:.2f} ms/document), "
        f"target < 60 s: {'met' if ingest_s < 60 else 'MISSED'}"
    )
    print(f"  (building the documents: {build_s:.1f} s more, untimed; wall {wall_s:.1f} s)")
    print(
        f"  schema validation, not in the ingest figure: {validate_s * 1e3:.1f} ms/document "
        f"(= {validate_s * args.documents:.0f} s for {args.documents})"
    )
    print(
        f"regressions: {regress_s:.3f} s in process over {len(set(f.series_id for f in findings))} "
        f"current series, target < 2 s: {'met' if regress_s < 2 else 'MISSED'}; "
        f"`python -m harness regressions`: {cli_s:.2f} s wall, exit {cli.returncode}"
    )
    print(
        f"dashboard:   list_series() + points() of a {series_points}-point series: {points_s:.3f} s"
    )
    print(f"db size:     {size / 2**20:.1f} MiB ({size / args.documents / 1024:.1f} KiB/document)")
    print(f"alerts ({len(alerts)}): {alerts}")
    print(
        f"changes:     `python -m harness changes` over every point: {changes_s:.2f} s wall, "
        f"exit {changes_cli.returncode}, target <= 10 s: {'met' if changes_s <= 10 else 'MISSED'}"
    )
    print(f"  found ({len(steps)}): {steps}")
    if args.static:
        counters_report(db, found)
    return 0


def counters_report(db: Path, found: list[dict]) -> None:
    """The steps' counter annotations, and the dashboard's counter panel of the stepped series."""
    for c in found:
        if c.get("counters"):
            words = "; ".join(x["words"] for x in c["counters"][:2])
            print(f"  {c['case_id']}/{c['impl']} {c['metric']} step: {words}")
    with Store(db, readonly=True) as store:
        series = [s for s in store.list_series("case_04") if s["impl"] == "forth"]
        t0 = time.perf_counter()
        panel = counter_series(store, max(series, key=lambda s: s["points"])["series_id"])
        panel_s = time.perf_counter() - t0
    stepped = sorted(name for name, c in panel["counters"].items() if c["steps"])
    print(
        f"counters:    counter_series() of case_04/forth ({len(panel['counters'])} counters x "
        f"{len(panel['run_ids'])} points): {panel_s:.3f} s; stepped: {stepped}"
    )


if __name__ == "__main__":
    raise SystemExit(main())
