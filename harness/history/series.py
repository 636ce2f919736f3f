"""Series keys: which results may sit on one history line.

A series is keyed by GPU model, timing mode, suite version, case id and version, implementation
name, and the sha256 of the implementation's source and of the baseline's source (DESIGN.md,
"Series that must never mix"). Two results with different keys are never compared as points of
one series; a changed key starts a new series.

The GPU model in a key is `gpu_model()` of the device's name: one spelling per model, so
"nvidia  h200 " and "NVIDIA H200" are one series, and the pin checks (harness.history.store, harness.running.trust)
compare through the same function.

The compiler that built an implementation (its toolchain, what its `--version` printed, the
sha256 of its program) is NOT part of the key: a new compiler build continues the series, and
`compiler_identity()` gives what each point records about it, so readers can say where it
changed.
"""

from __future__ import annotations

import functools
import hashlib

import orjson

from protocol.modes import series_mode
from protocol.version import version_tuple

__all__ = [
    "COMPILER_FIELDS",
    "KEY_FIELDS",
    "compiler_identity",
    "describe_compiler",
    "gpu_model",
    "run_mode",
    "series_id",
    "series_key",
    "series_label",
]

KEY_FIELDS = (
    "gpu",
    "mode",
    "suite_version",
    "case_id",
    "case_version",
    "impl",
    "source_sha256",
    "baseline_source_sha256",
)
ID_HEX_DIGITS = 16
COMPILER_FIELDS = ("toolchain", "toolchain_version", "compiler_sha256")
COMPILER_SHA_DIGITS = 12  # as shown; the store keeps all 64


def gpu_model(name: str) -> str:
    """The one spelling of a GPU model that keys series and that pins are compared in: runs of
    whitespace made one space, none at either end, upper case. CUDA's own names for data-centre
    parts ("NVIDIA H200", "NVIDIA A100-SXM4-80GB") are already in this form, so their keys are
    what they always were; others ("NVIDIA GeForce RTX 4090") are moved by store migration 3."""
    return " ".join(str(name).split()).upper()


def _source_sha256(case: dict, impl_name: str | None) -> str | None:
    impl = case["implementations"].get(impl_name) if impl_name else None
    return ((impl or {}).get("build") or {}).get("source_sha256")


COLD_MEAN_SINCE = (1, 7)  # result schema from which a cold sample is the mean of its batch


def _cold_mean(document: dict) -> bool:
    """Whether the document's cold samples are means of `timing.batch` launches (result schema
    1.7.0 on); before, each was one launch, whose median is a different figure for a short
    kernel (the mean of a launch's skewed spread sits above its median)."""
    return _cold_mean_since(str(document.get("schema_version")))


@functools.lru_cache(maxsize=16)
def _cold_mean_since(version: str) -> bool:
    """_cold_mean by the version's text: asked for every point of a run, parsed once."""
    try:
        return version_tuple(version)[:2] >= COLD_MEAN_SINCE
    except ValueError:
        return False


def _bench_span(document: dict, timing: dict) -> bool:
    """A runner.bench row timed by CUPTI's span (first start to last end, result schema 1.8.0
    on): before, runner.bench's CUPTI time was the union of a sample's kernels, a different
    figure for a call of several kernels, so its points start a series of their own. The PTX
    runner's CUPTI time was the span already and keeps its series."""
    python = (document.get("options") or {}).get("frontend") == "python"
    return python and timing.get("cupti_span") == "first-start-to-last-end"


def _mode(document: dict, case: dict, impl: dict) -> str | None:
    """The timing mode: the implementation's timing block, else the case's settings, else
    options; qualified by the timer when it is not CUDA events ("cold/cupti"), so numbers read
    by different timers are never one series nor compared (a document before result schema
    1.5.0 names no timer: events). Events keep the bare mode, so older series continue. Cold
    samples that are means of their batch (schema 1.7.0 on) are "cold-mean": a new series, not
    the single launches' one continued; runner.bench rows timed by CUPTI's span are
    ".../cupti-span" (`_bench_span`)."""
    for block in (impl.get("timing"), case.get("settings"), document.get("options")):
        if isinstance(block, dict) and block.get("mode"):
            timer = block.get("timer") or "events"
            if timer == "cupti" and _bench_span(document, block):
                timer = "cupti-span"  # runner.bench's CUPTI figure was a union of kernels before
            return series_mode(block["mode"], _cold_mean(document), timer)
    return None


def run_mode(document: dict) -> str | None:
    """A run's timing mode: options.mode (runners since 0.1 record the effective one), else, for
    older documents that wrote null for a run on the manifest's defaults, the one mode its cases
    ran in (their settings or timing blocks); None when nothing says."""
    mode = (document.get("options") or {}).get("mode")
    if mode:
        return mode
    modes = set()
    for case in document.get("cases", []):
        for impl in case.get("implementations", {}).values():
            found = _mode(document, case, impl)
            if found:
                modes.add(found)
    return "+".join(sorted(modes)) or None


def series_key(document: dict, case: dict, impl_name: str) -> dict:
    """The series key of implementation `impl_name` of `case` (an entry of document["cases"]).

    Fields (KEY_FIELDS): gpu (gpu_model() of environment.device.name), mode (hot or cold, with
    "/cupti" when CUPTI's timestamps read the samples), suite_version,
    case_id, case_version, impl, source_sha256 (its build's source hash; None when the build
    never ran) and baseline_source_sha256 (the same for the case's baseline).
    """
    impl = case["implementations"].get(impl_name)
    if impl is None:
        raise KeyError(f"case {case.get('id')!r}: no implementation {impl_name!r}")
    return {
        "gpu": gpu_model(document["environment"]["device"]["name"]),
        "mode": _mode(document, case, impl),
        "suite_version": document["suite"]["version"],
        "case_id": case["id"],
        "case_version": case["version"],
        "impl": impl_name,
        "source_sha256": _source_sha256(case, impl_name),
        "baseline_source_sha256": _source_sha256(case, case.get("baseline")),
    }


def compiler_identity(impl: dict) -> tuple[str | None, str | None, str | None]:
    """(toolchain, toolchain_version, compiler_sha256) of one implementation of a document:
    its toolchain name, its build's `version` and `compiler_sha256` (None where absent: a build
    that never ran, a document older than result schema 1.2.0). Metadata, never a key field."""
    build = impl.get("build") or {}
    return (
        impl.get("toolchain") or build.get("toolchain"),
        build.get("version"),
        build.get("compiler_sha256"),
    )


def describe_compiler(toolchain, version, compiler_sha256) -> str:
    """'command, <version>, compiler sha256 <12 hex>' ('' when nothing is known)."""
    words = [w for w in (toolchain, version) if w]
    if compiler_sha256:
        words.append(f"compiler sha256 {compiler_sha256[:COMPILER_SHA_DIGITS]}")
    return ", ".join(words)


def series_id(key: dict) -> str:
    """First 16 hex digits of sha256 over the key's canonical JSON (sorted keys, no spaces)."""
    return _series_id(tuple(key[field] for field in KEY_FIELDS))


@functools.lru_cache(maxsize=65536)  # an ingest meets the same few hundred keys again and again
def _series_id(values: tuple) -> str:
    canonical = orjson.dumps(
        dict(zip(KEY_FIELDS, values, strict=True)), option=orjson.OPT_SORT_KEYS
    )
    return hashlib.sha256(canonical).hexdigest()[:ID_HEX_DIGITS]


def series_label(key: dict) -> str:
    """A one-line human name: 'case v1 / impl @source8 (base @source8) | GPU | mode | suite v1'."""
    source = (key["source_sha256"] or "unbuilt")[:8]
    base = (key["baseline_source_sha256"] or "unbuilt")[:8]
    return (
        f"{key['case_id']} v{key['case_version']} / {key['impl']} @{source} (base @{base}) | "
        f"{key['gpu']} | {key['mode']} | suite v{key['suite_version']}"
    )
