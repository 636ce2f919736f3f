"""Where the canonical history's trust comes from: the repository, never the document.

A trusted ingest writes the canonical history. What a document says about itself is only a
claim: an A100 run whose document says `suite.gpu: null` would otherwise enter an H200 history.
So the GPU pin comes from the repository: the suite manifest in the checkout (`[suite] gpu` of
benchmarks/cases.toml, or `--cases PATH`), and the document must be a run of that manifest as it
is there: the same suite name and version and the sha256 of the same bytes. A runner.bench
document (options.frontend "python") has no manifest; its pin is the model the repository's
workflow names on the command line (`--gpu MODEL`). Models compare through
harness.history.series.gpu_model, as series keys do.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from harness.errors import SuiteTomlError, TrustError
from harness.history.series import gpu_model
from harness.running import manifest_check

__all__ = ["DEFAULT_CASES", "Canon", "canon_for", "check"]

DEFAULT_CASES = Path("benchmarks/cases.toml")


@dataclass(frozen=True)
class Canon:
    """What the canonical history accepts, as the repository says it: the pinned model (None:
    the manifest pins none) and, for a manifest, its suite name, version and sha256."""

    source: str  # the manifest's path, or "--gpu"
    gpu: str | None
    name: str | None = None
    version: int | None = None
    sha256: str | None = None

    @classmethod
    def from_manifest(cls, path: Path) -> Canon:
        try:
            raw, doc = manifest_check.read(path)
        except SuiteTomlError as exc:
            raise TrustError(f"{exc} (a trusted ingest takes the GPU pin from it)") from None
        suite = doc.get("suite")
        name = suite.get("name") if isinstance(suite, dict) else None
        version = suite.get("version") if isinstance(suite, dict) else None
        gpu = suite.get("gpu") if isinstance(suite, dict) else None
        if (
            not isinstance(name, str)
            or isinstance(version, bool)
            or not isinstance(version, int)
            or not isinstance(gpu, str | None)
        ):
            raise TrustError(
                f"{path}: [suite] needs a string name, an integer version and, if any, a string "
                "gpu; is --cases the suite's manifest?"
            )
        return cls(str(path), gpu, name, version, hashlib.sha256(raw).hexdigest())


def _python_frontend(document: dict) -> bool:
    return (document.get("options") or {}).get("frontend") == "python"


def canon_for(
    document: dict,
    cases: Path | None,
    gpu: str | None,
    trusted: bool,
    read: dict[Path, Canon] | None = None,
) -> Canon | None:
    """The repository's word for `document`: from `--gpu` for a runner.bench document, else
    from the manifest (`cases`, or DEFAULT_CASES when trusted). None for an untrusted ingest
    given neither (it writes nothing, so it needs none). `read` keeps each manifest's Canon
    once it is read: one ingest call of thousands of files reads its manifest once."""
    if gpu is not None and cases is not None:
        raise TrustError("--gpu and --cases: give one (--gpu for runner.bench documents only)")
    python = _python_frontend(document)
    if gpu is not None:
        if not python:
            raise TrustError(
                "--gpu is for runner.bench documents, which have no manifest; a suite run's "
                "pin comes from its manifest (--cases, default benchmarks/cases.toml)"
            )
        return Canon("--gpu", gpu)
    if python and trusted:
        raise TrustError(
            "a runner.bench document has no suite manifest: a trusted ingest needs --gpu MODEL, "
            "the GPU model the canonical history pins"
        )
    if cases is None and not trusted:
        return None
    if cases is None and not DEFAULT_CASES.is_file():
        raise TrustError(_which_manifest(document))
    path = cases if cases is not None else DEFAULT_CASES
    if read is None:
        return Canon.from_manifest(path)
    if path not in read:
        read[path] = Canon.from_manifest(path)
    return read[path]


def _which_manifest(document: dict) -> str:
    """What to do when a trusted ingest runs outside the suite's checkout: name the manifest
    the document says it ran, and the flag that takes it."""
    suite = document.get("suite") or {}
    path = suite.get("path") or "cases.toml"
    commit = str(suite.get("commit") or "")[:12]
    ran = f"suite {suite.get('name')!r} version {suite.get('version')}, {path}" + (
        f" at commit {commit}" if commit else ""
    )
    return (
        f"a trusted ingest takes the GPU pin from the suite's manifest, and there is no "
        f"{DEFAULT_CASES} in {Path.cwd()}: the document is a run of {ran}; give that manifest "
        f"as it is in the checkout: `python -m harness ingest RESULT.json --trusted --cases "
        f"<checkout>/{path}` (or run the command from the checkout's root)"
    )


def check(document: dict, canon: Canon, what: str) -> None:
    """Refuse (TrustError) a document the canonical history described by `canon` must not hold."""
    suite, device = document["suite"], document["environment"]["device"]["name"]
    refused = "refused for the canonical history"
    shared = document["environment"].get("sharing") or {}
    if shared.get("shared"):
        raise TrustError(
            f"{what}: the GPU was shared while it ran ({shared.get('why')}); its times include "
            f"other work; {refused} (run it again on a GPU of its own)"
        )
    if canon.gpu is not None and gpu_model(device) != gpu_model(canon.gpu):
        raise TrustError(
            f"{what}: ran on {device!r} but {canon.source} pins the GPU model {canon.gpu!r}; "
            f"{refused}"
        )
    if canon.sha256 is not None:
        differ = [
            f"suite.{field} {suite[field]!r}, the manifest's {mine!r}"
            for field, mine in (("name", canon.name), ("version", canon.version))
            if suite[field] != mine
        ]
        if suite["sha256"] != canon.sha256:
            differ.append(
                f"suite.sha256 {suite['sha256'][:12]}, the manifest's {canon.sha256[:12]}"
            )
        if differ:
            raise TrustError(
                f"{what}: not a run of {canon.source} as it is in this checkout "
                f"({'; '.join(differ)}); {refused} (run it from this commit, or give --cases "
                "the manifest it ran)"
            )
        pinned = suite.get("gpu")
        if canon.gpu is not None and (pinned is None or gpu_model(pinned) != gpu_model(canon.gpu)):
            raise TrustError(
                f"{what}: the document's suite.gpu is {pinned!r} but {canon.source} pins "
                f"{canon.gpu!r}; {refused}"
            )
