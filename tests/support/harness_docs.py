"""Synthetic result documents for harness tests, built from the real H200 fixture.

`make_document()` copies tests/fixtures/result-1.0.0-h200-axpy.json and replaces its cases with
ones whose samples you choose; statistics, gaps and the summary come from the runner's own
functions (runner.measurement.stats, runner.execution.result), so the document is what a runner would have written
and it validates against schemas/result.schema.json.
"""

from __future__ import annotations

import copy
import functools
import hashlib
from collections.abc import Collection, Mapping
from datetime import datetime, timedelta
from pathlib import Path

import orjson

from protocol import statistics
from runner import document as document_run

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "result-1.0.0-h200-axpy.json"
COMMIT = "c0ffee" + "0" * 34
STARTED_UTC = "2026-11-29T12:00:00Z"


@functools.cache
def _fixture_bytes() -> bytes:
    return FIXTURE.read_bytes()


def fixture() -> dict:
    """A fresh copy of the real fixture document."""
    return orjson.loads(_fixture_bytes())


def default_source_sha(case_id: str, impl: str, salt: str = "") -> str:
    """Deterministic stand-in for an implementation's source hash."""
    return hashlib.sha256(f"{case_id}/{impl}{salt}".encode()).hexdigest()


def _lookup(table, case_id: str, impl: str, default):
    """`table` is a value for all, or a mapping keyed by (case_id, impl), impl or case_id."""
    if not isinstance(table, Mapping):
        return default if table is None else table
    for key in ((case_id, impl), impl, case_id):
        if key in table:
            return table[key]
    return default


def _marked(marks: Collection, case_id: str, impl: str) -> bool:
    return (case_id, impl) in marks or impl in marks or case_id in marks


def make_document(
    cases: Mapping[str, Mapping[str, list[float]]],
    *,
    gpu: str = "NVIDIA H200",
    suite_gpu: str | None = None,
    mode: str = "hot",
    suite_version: int = 1,
    commit: str | None = COMMIT,
    started_utc: str = STARTED_UTC,
    case_version: int | Mapping = 1,
    source_sha: str | Mapping | None = None,
    unstable: Collection = (),
    failed: Mapping[str, str] | None = None,
    not_checked: Collection = (),
    resamples: int = 200,
) -> dict:
    """A schema-valid result document.

    cases: {case_id: {impl_name: samples_s}}; in each case the FIRST implementation is the
    baseline, the others are candidates (baseline and candidates need equal sample counts, as
    samples are paired by round).
    gpu: environment.device.name; suite_gpu: the model the suite pins (suite.gpu).
    case_version, source_sha: one value for all, or a mapping keyed by (case_id, impl), impl
    or case_id; source_sha None means `default_source_sha(case_id, impl)`.
    unstable: (case_id, impl) pairs, impl names or case ids whose stats are marked unstable
    (the gaps that depend on them too). failed: {case_id: message} marks the case failed at
    the timing phase (no timing, no gap). not_checked: like `unstable`, check status
    'not_checked' and no gap. resamples: bootstrap size of the gap's interval (small for speed).
    """
    failed = dict(failed or {})
    doc = fixture()
    template = doc["cases"][0]
    doc["suite"].update(version=suite_version, gpu=suite_gpu, commit=commit)
    doc["options"]["mode"] = mode
    doc["environment"]["device"]["name"] = gpu
    doc["started_utc"] = started_utc
    start = datetime.fromisoformat(started_utc.replace("Z", "+00:00"))
    doc["finished_utc"] = (start + timedelta(seconds=10)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    marks = (unstable, not_checked, resamples)
    doc["cases"] = [
        _case(template, case_id, impls, mode, case_version, source_sha, marks, failed)
        for case_id, impls in cases.items()
    ]
    doc["summary"] = document_run.summary(doc["cases"])
    return doc


def _case(template, case_id, impls, mode, case_version, source_sha, marks, failed) -> dict:
    unstable, not_checked, resamples = marks
    names = list(impls)
    if not names:
        raise ValueError(f"make_document: case {case_id!r} has no implementations")
    case = {k: v for k, v in template.items() if k not in ("implementations", "error")}
    case["id"] = case_id
    case["version"] = _lookup(case_version, case_id, "", 1)
    case["baseline"] = names[0]
    case["settings"] = {**template["settings"], "mode": mode}
    base_cuda, base_cand = (
        template["implementations"]["cuda"],
        template["implementations"]["handptx"],
    )
    built = {}
    for i, name in enumerate(names):
        impl = copy.deepcopy(base_cuda if i == 0 else base_cand)
        for key in ("timing", "gap", "throughput"):
            impl.pop(key, None)
        impl["role"] = "baseline" if i == 0 else "candidate"
        sha = _lookup(source_sha, case_id, name, None) or default_source_sha(case_id, name)
        impl["build"]["source_sha256"] = sha
        if _marked(not_checked, case_id, name):
            impl["check"] = {"status": "not_checked"}
        built[name] = impl
    case["implementations"] = built
    if case_id in failed:
        case["status"] = "failed"
        case["error"] = {"phase": "timing", "message": failed[case_id]}
        return case
    case["status"] = "ok"
    for name, impl in built.items():
        samples = [float(s) for s in impls[name]]
        summary = statistics.summarize(samples)
        if _marked(unstable, case_id, name):
            summary["stable"] = False
        impl["timing"] = {
            **template["implementations"]["cuda"]["timing"],
            "mode": mode,
            "samples_s": samples,
            "stats": summary,
        }
    base = built[names[0]]["timing"]
    for name in names[1:]:
        impl = built[name]
        if impl["check"]["status"] != "passed":
            impl["gap"] = None
            impl["gap_note"] = "not checked: no gap is given for an unchecked result"
            continue
        g = statistics.gap(base["samples_s"], impl["timing"]["samples_s"], resamples=resamples)
        impl["gap"] = {
            **g,
            "stable": impl["timing"]["stats"]["stable"] and base["stats"]["stable"],
        }
    return case


def samples(median_s: float, n: int = 30, noise: float = 0.002, seed: int = 0) -> list[float]:
    """`n` positive samples around `median_s`, spread +-`noise` (relative), reproducible."""
    import numpy as np

    rng = np.random.default_rng(seed)
    return [float(x) for x in median_s * (1 + noise * rng.uniform(-1, 1, n))]


def small_run(k: int = 0, **kwargs) -> dict:
    """Run k of a one-case history: case 'axpy', baseline 'cuda' at 1 ms and candidate 'forth'
    at 1.2 ms, commit k and a start k seconds after 10:00 (keyword arguments: make_document's)."""
    cases = {"axpy": {"cuda": samples(1e-3, seed=k), "forth": samples(1.2e-3, seed=100 + k)}}
    kwargs.setdefault("started_utc", f"2026-12-01T10:00:{k:02d}Z")
    kwargs.setdefault("commit", f"{k:040x}")
    return make_document(cases, **kwargs)


def suite_manifest(folder: Path, *documents: dict, gpu: str | None = "keep") -> Path:
    """Write folder/cases.toml, a suite manifest whose [suite] is the first document's (its
    name and version; `gpu`, or the document's own pin when "keep"), and make every document a
    run of it: their suite.sha256 becomes the file's. Returns the path (for --cases)."""
    suite = documents[0]["suite"]
    pin = suite.get("gpu") if gpu == "keep" else gpu
    lines = ["[suite]", f"name = {orjson.dumps(suite['name']).decode()}"]
    lines.append(f"version = {suite['version']}")
    if pin is not None:
        lines.append(f"gpu = {orjson.dumps(pin).decode()}")
    path = Path(folder) / "cases.toml"
    path.write_text("\n".join(lines) + "\n")
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    for document in documents:
        document["suite"]["sha256"] = sha
    return path
