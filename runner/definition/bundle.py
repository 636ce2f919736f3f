"""PTX bundles: build where each compiler lives, time where the GPU is.

`python -m runner build CASES.toml --out DIR` writes DIR/<case>/<impl>.ptx and DIR/bundle.json
(toolchain versions, commands, flags, source and PTX hashes; schemas/bundle.schema.json).
`python -m runner bench CASES.toml --bundle DIR` takes each implementation's PTX from the
bundle, after checking that its source and case version are the ones on this machine.

`variants()`: two (or more) revisions of a compiler timed in one run, `bench --bundle base=DIR
--bundle head=DIR`.

Each labelled bundle is the output of `runner build` at one revision of the compiler under test.
Every candidate implementation X that a labelled bundle holds becomes one implementation per
label, `X@base` and `X@head`, with "variant_of": "X" and "revision": the label; all of them and
the baseline are loaded into the one context of the case and timed in the same interleaved,
paired rounds. So each variant gets its gap against the baseline as any candidate does, and the
case gets a `pairs` block (runner.document.pair_blocks): each later revision against the first
(head against base) as the ratio of medians with the same paired bootstrap interval as a gap
(protocol.statistics.gap, with the first revision in the baseline's place). The baseline comes from the first labelled bundle that
holds it, else it is built here; a candidate no labelled bundle holds is built here under its
own name.

`utc_now()`: when a document was made (the bundle's, and the result document's `provenance`,
beside protocol.input_files.checkout_commit's checkout), with no GPU."""

from __future__ import annotations

import hashlib
import re
import socket
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from protocol.codec import decode, encode
from protocol.errors import DocumentError
from protocol.validation import validate
from runner.definition import toolchains
from runner.definition.manifest import CaseSpec, ImplSpec, Suite
from runner.errors import BuildError, BundleError, ToolchainMissing
from runner.explain.static import analyze, block_threads


def utc_now() -> str:
    """Now in UTC as ISO 8601 with microseconds and a Z: 2025-01-31T12:34:56.123456Z."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


BUNDLE_VERSION = "1.3.0"  # 1.2.0: `static` per implementation; 1.3.0: option axes' builds


def write_bundle(
    suite: Suite, arch: str, out: Path, say=lambda text: None, static: bool = True
) -> dict:
    """Build every implementation it can into `out`; returns the bundle manifest. With `static`,
    each implementation carries its static analysis for `arch` at the case's timed geometry
    (runner.explain.static; `harness explain BUNDLE` reads it)."""
    out.mkdir(parents=True, exist_ok=True)
    suite_block = {"name": suite.name, "version": suite.version, "sha256": suite.sha256}
    if suite.primary:
        suite_block["primary"] = suite.primary
    manifest = {
        "schema_version": BUNDLE_VERSION,
        "kind": "kernelgap.bundle",
        "suite": suite_block,
        "arch": arch,
        "created_utc": utc_now(),
        "host": socket.gethostname(),
        "implementations": [],
        "skipped": [],
    }
    failures = 0
    for case, impl in _builds(suite):
        try:
            b = toolchains.build_impl(impl, arch)
        except ToolchainMissing as exc:
            manifest["skipped"].append({"case": case.id, "impl": impl.name, "reason": str(exc)})
            say(f"skip  {case.id}/{impl.name}: {exc}")
            continue
        except BuildError as exc:
            failures += 1
            manifest["skipped"].append(
                {"case": case.id, "impl": impl.name, "reason": f"build failed: {exc}"}
            )
            say(f"FAIL  {case.id}/{impl.name}: {exc}")
            continue
        rel = f"{case.id}/{impl.name}{'' if impl.option is None else '+' + impl.option}.ptx"
        (out / case.id).mkdir(exist_ok=True)
        (out / rel).write_text(b.ptx)
        entry = {
            "case": case.id,
            "case_version": case.version,
            "impl": impl.name,
            "file": rel,
            "build": b.provenance(),
        }
        if impl.option is not None:
            entry["option"] = impl.option
        if static:
            entry["role"] = impl.role
            entry["static"] = static_analysis(case, impl, b.ptx, arch)
        manifest["implementations"].append(entry)
        say(f"ok    {case.id}/{impl.name}: {b.toolchain} ({b.version}) -> {rel}")
    validate(manifest, "bundle", f"{out}/bundle.json")
    (out / "bundle.json").write_bytes(encode(manifest, pretty=True))
    manifest["failures"] = failures
    return manifest


def _builds(suite: Suite):
    """(case, implementation) for every build of the suite: each implementation as declared,
    then each option point's implementation built its way (at the point: runner.definition.sweep)."""
    from runner.definition.sweep import at_point

    for case in suite.cases:
        yield from ((case, impl) for impl in case.impls)
        options = case.sweep.options if case.sweep is not None else None
        for point in case.sweep.points if options is not None else ():
            if point.option is not None:
                built_as = at_point(case, point.id)
                yield built_as, built_as.impl(options.impl)


def static_analysis(case: CaseSpec, impl: ImplSpec, ptx_text: str, arch: str) -> dict:
    geometry = case.geometry(case.dims)
    return analyze(ptx_text, impl.entry, arch, block_threads(geometry.block), geometry.shared_bytes)


@dataclass(frozen=True)
class Bundle:
    root: Path
    manifest: dict

    @classmethod
    def load(cls, root: Path) -> Bundle:
        path = root / "bundle.json"
        try:
            doc = decode(path.read_bytes(), str(path))
            validate(doc, "bundle", str(path))
        except OSError as exc:
            raise BundleError(f"{path}: cannot read the bundle manifest: {exc.strerror}") from None
        except (ValueError, DocumentError) as exc:
            raise BundleError(str(exc)) from None
        missing = [e["file"] for e in doc["implementations"] if not (root / e["file"]).is_file()]
        if missing:
            raise BundleError(f"{path}: files listed but missing: {', '.join(missing)}")
        return cls(root, doc)

    def static(self, case: CaseSpec, impl: ImplSpec, ptx_sha256: str, arch: str) -> dict | None:
        """The static analysis `runner build` recorded for exactly this PTX and target, if any."""
        for e in self.manifest["implementations"]:
            if (e["case"], e["impl"], e.get("option")) == (case.id, impl.name, impl.option):
                found = e.get("static")
                same = e["build"]["ptx_sha256"] == ptx_sha256 and self.manifest["arch"] == arch
                return found if same and found and found.get("status") == "ok" else None
        return None

    def lookup(self, case: CaseSpec, impl: ImplSpec) -> tuple[str, dict] | None:
        """(PTX, provenance) of `impl` if the bundle has it; BundleError if it is stale."""
        entry = next(
            (
                e
                for e in self.manifest["implementations"]
                if (e["case"], e["impl"], e.get("option")) == (case.id, impl.name, impl.option)
            ),
            None,
        )
        if entry is None:
            return None
        where = f"{self.root}/bundle.json: {case.id}/{impl.name}" + (
            f" ({impl.option})" if impl.option else ""
        )
        if entry["case_version"] != case.version:
            raise BundleError(
                f"{where}: built for case version {entry['case_version']}, the suite has {case.version}"
            )
        if entry["build"]["flags"] != list(impl.flags):
            raise BundleError(
                f"{where}: built with flags {entry['build']['flags']}, the suite gives "
                f"{list(impl.flags)}; rebuild the bundle"
            )
        source_sha = hashlib.sha256(impl.source.read_bytes()).hexdigest()
        if entry["build"]["source_sha256"] != source_sha:
            raise BundleError(
                f"{where}: built from another source ({impl.source_rel} changed since); rebuild the bundle"
            )
        try:
            ptx = (self.root / entry["file"]).read_text()
        except OSError as exc:
            raise BundleError(f"{where}: cannot read {entry['file']}: {exc.strerror}") from None
        if hashlib.sha256(ptx.encode()).hexdigest() != entry["build"]["ptx_sha256"]:
            raise BundleError(f"{where}: {entry['file']} does not match its recorded sha256")
        return ptx, {
            **entry["build"],
            "bundle": str(self.root),
            "bundle_arch": self.manifest["arch"],
        }


LABEL = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*$")


SEPARATOR = "@"  # never in an implementation name (cases.schema.json: [A-Za-z0-9_.+-]+)


def parse_bundle_options(
    values: tuple[str, ...],
) -> tuple[Path | None, tuple[tuple[str, Path], ...]]:
    """`--bundle` values: one plain DIR, or LABEL=DIR pairs (two or more, labels unique).

    Returns (plain bundle or None, ((label, dir), ...)); BundleError for a mix, a repeated or a
    malformed label, or a single labelled bundle (there is nothing to pair it with).
    """
    plain = [v for v in values if "=" not in v]
    labelled = [tuple(v.split("=", 1)) for v in values if "=" in v]
    if (plain and labelled) or len(plain) > 1:
        raise BundleError(
            f"--bundle {' --bundle '.join(values)}: give one bundle folder, or two or more as "
            "LABEL=DIR (base=bundle-base head=bundle-head), not both"
        )
    labels = [label for label, _ in labelled]
    for label in labels:
        if not LABEL.match(label):
            raise BundleError(
                f"--bundle {label}=...: a label is a letter then letters, digits, '_', '.' or '-'"
            )
    if len(set(labels)) != len(labels):
        raise BundleError(f"--bundle: label given twice ({', '.join(labels)})")
    if len(labelled) == 1:
        raise BundleError(
            f"--bundle {labels[0]}=...: a labelled bundle is one revision of a pair; give at "
            f"least two (base=DIR head=DIR), or a plain --bundle DIR"
        )
    return (Path(plain[0]) if plain else None), tuple((k, Path(v)) for k, v in labelled)


def variants(
    case: CaseSpec, impl: ImplSpec, revisions: dict[str, Bundle]
) -> list[tuple[str, str, str, dict]]:
    """(name, label, PTX, provenance) of each revision of `impl` that a labelled bundle holds.

    A candidate gives one entry per bundle holding it (`X@label`); the baseline gives at most
    one, under its own name, from the first bundle holding it. Empty: build it here as usual.
    BundleError when a bundle is stale for this case (bundle.Bundle.lookup).
    """
    out = []
    for label, bundle in revisions.items():
        found = bundle.lookup(case, impl)
        if found is None:
            continue
        ptx, provenance = found
        if impl.role == "baseline":
            return [(impl.name, label, ptx, provenance)]
        out.append((f"{impl.name}{SEPARATOR}{label}", label, ptx, provenance))
    return out
