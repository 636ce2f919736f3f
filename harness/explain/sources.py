"""What `harness explain` reads: a result document (runner bench) or a bundle (runner build), as
one shape: cases, each with its baseline and its implementations' `static` and `profile` blocks,
and the gaps where the source has timings (a bundle has none)."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace
from pathlib import Path

from harness.errors import SourceError
from protocol import validation
from protocol.codec import decode
from protocol.errors import DocumentError, InputFileError
from protocol.input_files import MAX_DOCUMENT_BYTES, read_bounded
from protocol.validation import _schema, jsonschema_validator, validate

HOW_TO_GET_STATIC = (
    "record it with `python -m runner bench` (it records `static` where ptxas and cuobjdump or "
    "nvdisasm are installed: pip install 'kernelgap[explain]'), or build a bundle of the same "
    "sources with `python -m runner build CASES.toml --out bundle/` and fill it in with "
    "`python -m harness explain RESULT.json --bundle bundle/`"
)
HOW_TO_GET_PROFILE = "run `python -m runner bench CASES.toml --profile` on the GPU box (Nsight Compute, ncu, on PATH)"


@dataclass
class Impl:
    name: str
    role: str
    static: dict | None = None
    profile: dict | None = None
    median_s: float | None = None
    gap: dict | None = None
    status: str | None = None  # "skipped" when it was not built
    skip_reason: str | None = None
    ptx_sha256: str | None = None


@dataclass
class Case:
    id: str
    baseline: str
    impls: dict[str, Impl] = field(default_factory=dict)
    status: str = "ok"
    error: str | None = None
    gap_line: str | None = None  # said in place of the gap (two sources compared: `across`)

    def candidates(self) -> list[str]:
        return [n for n, i in self.impls.items() if i.role == "candidate"]


@dataclass
class Source:
    kind: str  # "result" or "bundle"
    what: str
    cases: list[Case]
    primary: str | None = None
    arch: str | None = None
    device: str | None = None
    profiled: bool = False  # the run was asked for --profile
    suite: str | None = None  # the suite's name


def from_result(doc: dict, what: str) -> Source:
    from harness.reporting.table import primary_candidate

    cases = []
    for c in doc["cases"]:
        case = Case(c["id"], c.get("baseline") or "", status=c["status"])
        if c.get("error"):
            case.error = f"{c['error']['phase']}: {c['error']['message'].splitlines()[0]}"
        for name, i in c["implementations"].items():
            stats = (i.get("timing") or {}).get("stats") or {}
            case.impls[name] = Impl(
                name,
                i["role"],
                i.get("static"),
                i.get("profile"),
                stats.get("median_s"),
                i.get("gap"),
                i.get("status"),
                i.get("skip_reason"),
                (i.get("build") or {}).get("ptx_sha256"),
            )
            if not case.baseline and i["role"] == "baseline":
                case.baseline = name
        cases.append(case)
    options = doc.get("options") or {}
    device = (doc.get("environment") or {}).get("device") or {}
    return Source(
        "result",
        what,
        cases,
        primary_candidate(doc),
        options.get("arch") or device.get("arch"),
        device.get("name"),
        bool(options.get("profile")),
        doc["suite"]["name"],
    )


@functools.cache
def _static_checker():
    """A result document's `static` block as its schema holds it ($defs/static)."""
    result = _schema("result")
    return jsonschema_validator({"$ref": "#/$defs/static", "$defs": result["$defs"]})


def bundle_static(static: dict | None, where: str) -> dict | None:
    """A bundle's `static` block (its schema asks only for a status) as explain reads it: the
    block when it holds what a result document's must, else one saying what it lacks."""
    if not static or static.get("status") != "ok":
        return static
    error = next(iter(_static_checker().iter_errors(static)), None)
    if error is None:
        return static
    at = ".".join(map(str, error.absolute_path)) or "the block"
    return {"status": "unavailable", "reason": f"{where}: static: {at}: {error.message[:200]}"}


def from_bundle(doc: dict, what: str) -> Source:
    cases: dict[str, Case] = {}
    for e in doc["implementations"]:
        if e.get("option"):  # an option axis's build: the case's own is the one declared
            continue
        case = cases.setdefault(e["case"], Case(e["case"], ""))
        role = e.get("role") or ("baseline" if e["impl"] == "cuda" else "candidate")
        static = bundle_static(e.get("static"), f"{what}: {e['case']}/{e['impl']}")
        case.impls[e["impl"]] = Impl(e["impl"], role, static, ptx_sha256=e["build"]["ptx_sha256"])
        if role == "baseline":
            case.baseline = e["impl"]
    for s in doc.get("skipped") or ():
        case = cases.setdefault(s["case"], Case(s["case"], ""))
        case.impls.setdefault(
            s["impl"], Impl(s["impl"], "candidate", status="skipped", skip_reason=s["reason"])
        )
    primary = doc["suite"].get("primary")
    return Source(
        "bundle", what, list(cases.values()), primary, doc.get("arch"), suite=doc["suite"]["name"]
    )


def load(path: Path) -> Source:
    """A result document (a .json file), or a bundle: its folder or its bundle.json."""
    file = path / "bundle.json" if path.is_dir() else path
    what = str(file)
    try:
        data = read_bounded(file, MAX_DOCUMENT_BYTES, "result document or bundle")
    except InputFileError as exc:  # unreadable, a FIFO or device, past the size limit
        raise SourceError(str(exc)) from None
    try:
        doc = decode(data, what)
    except ValueError as exc:
        raise SourceError(str(exc)) from None
    kind = doc.get("kind") if isinstance(doc, dict) else None
    try:
        if kind == "kernelgap.bundle":
            validate(doc, "bundle", what)
            return from_bundle(doc, what)
        return from_result(validation.load_result(data, what), what)
    except (ValueError, DocumentError) as exc:
        raise SourceError(str(exc)) from None


def attach_bundle(source: Source, bundle: Source) -> int:
    """Give implementations of a result document that lack `static` the bundle's analysis of
    the very same PTX (same sha256) for the same target; returns how many it gave."""
    if source.arch and bundle.arch and source.arch != bundle.arch:
        raise SourceError(
            f"{bundle.what}: built for {bundle.arch}, the document's run targets {source.arch}"
        )
    theirs = {(c.id, n): i for c in bundle.cases for n, i in c.impls.items()}
    given = 0
    for case in source.cases:
        for name, impl in case.impls.items():
            other = theirs.get((case.id, name))
            if impl.static and impl.static.get("status") == "ok":
                continue
            if other and other.static and impl.ptx_sha256 and impl.ptx_sha256 == other.ptx_sha256:
                impl.static = other.static
                given += 1
    return given


SIDES = (
    "A",
    "B",
)  # `harness explain A B`: X@A is the baseline of the comparison, X@B the candidate


def _time_line(a: Impl, b: Impl) -> str:
    if a.median_s and b.median_s:
        return (
            f"B/A time {b.median_s / a.median_s:.3f}x (medians of two runs, two sessions: "
            "compare with `harness compare` for a verdict)"
        )
    return "no time on both sides (a bundle has no timings)"


def across(a: Source, b: Source) -> Source:
    """Two sources of the same suite (two compiler revisions) as one: per case and per
    implementation built in both, `X@A` (as the baseline) against `X@B`. SourceError when the
    suites differ or nothing is in both."""
    if a.suite and b.suite and a.suite != b.suite:
        raise SourceError(f"{b.what}: suite {b.suite!r}, but {a.what} is suite {a.suite!r}")
    if a.arch and b.arch and a.arch != b.arch:
        raise SourceError(f"{b.what}: built for {b.arch}, {a.what} for {a.arch}")
    theirs = {c.id: c for c in b.cases}
    cases = []
    for case in a.cases:
        other = theirs.get(case.id)
        for name, impl in case.impls.items() if other else ():
            mine = other.impls.get(name)
            if mine is None or "skipped" in (impl.status, mine.status):
                continue
            left, right = f"{name}@{SIDES[0]}", f"{name}@{SIDES[1]}"
            cases.append(
                Case(
                    case.id,
                    left,
                    {
                        left: replace(impl, name=left, role="baseline", gap=None),
                        right: replace(mine, name=right, role="candidate", gap=None),
                    },
                    gap_line=_time_line(impl, mine),
                )
            )
    if not cases:
        raise SourceError(f"{a.what} and {b.what} have no implementation of a case in common")
    kind = "result" if "result" in (a.kind, b.kind) else "bundle"
    what = f"A = {a.what}, B = {b.what}"
    return Source(kind, what, cases, None, a.arch or b.arch, a.device or b.device, suite=a.suite)
