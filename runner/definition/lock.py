"""Case versions that cannot drift: the content hash of every published (case, version).

`benchmarks/cases.lock` (beside the manifest, same stem) is append-only. A case's content
is everything that decides what its numbers mean: dimensions, buffers and generator,
parameters, launch geometry, tolerance, the reference function's source, the roofline
expressions, and each implementation's toolchain, entry, flags and source bytes. Editing
any of it without bumping the case's `version` makes `verify()` fail, and a version once
recorded can never be re-recorded with other content.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
from dataclasses import asdict, dataclass
from pathlib import Path

import orjson

from protocol.errors import InputFileError
from protocol.input_files import read_toml
from runner.definition.manifest import CaseSpec, Suite
from runner.errors import LockError, ManifestError

HEADER = (
    "# Content hashes of every published (case, version) of the suite; append-only.\n"
    "# Written by `python -m runner lock <manifest>`; checked by `runner check` and the tests.\n"
    "# A case whose content changed needs a new version: never edit a recorded line.\n"
)


def lock_path(suite: Suite) -> Path:
    return suite.path.with_suffix(".lock")


def _function_source(file: Path, name: str) -> str:
    """The reference function's syntax tree, with the module-level definitions it uses (helper
    functions, constants), so reformatting is no change and any edit of code it runs is.
    (The generator is pinned by golden values in tests/runner/gpu/test_generator.py.)"""
    module = ast.parse(file.read_text())
    defined: dict[str, ast.AST] = {}
    for node in module.body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            defined[node.name] = node
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(target, ast.Name):
                    defined[target.id] = node
    if not isinstance(defined.get(name), ast.FunctionDef):
        raise ManifestError(f"{file}: no function {name!r} (the reference of a case)")
    parts, seen, todo = [], set(), [name]
    while todo:
        current = todo.pop()
        if current in seen or current not in defined:
            continue
        seen.add(current)
        node = defined[current]
        body = getattr(node, "body", None)
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            node.body = body[1:]  # a docstring is prose, not code
        parts.append(ast.dump(node))
        todo.extend(n.id for n in ast.walk(node) if isinstance(n, ast.Name))
    return "\n".join(sorted(parts))


def case_content(suite: Suite, case: CaseSpec) -> dict:
    """What a case's numbers depend on apart from its implementations (input of `content_sha256`)."""
    ref_file, ref_name = case.reference.split(":", 1)
    return {
        "id": case.id,
        "dims": case.dims,
        "check_dims": case.check_dims,
        # `valid` only widens what the gate checks (its second input set), not what is timed
        "buffers": [
            {
                **{k: v for k, v in asdict(b).items() if k != "valid"},
                "dist": asdict(b.dist) if b.dist else None,
            }
            for b in case.buffers
        ],
        "params": [asdict(p) for p in case.params],
        "grid": case.grid,
        "block": case.block,
        "shared_bytes": case.shared_bytes,
        "tolerance": {"rtol": case.rtol, "atol": case.atol, "exact": case.exact},
        "reference": _function_source(suite.root / ref_file, ref_name),
        "roofline": {"bytes": case.bytes, "flops": case.flops, "flop_dtype": case.flop_dtype},
        "baseline": case.baseline.name,
    }


def _sha(data) -> str:
    return hashlib.sha256(orjson.dumps(data, option=orjson.OPT_SORT_KEYS)).hexdigest()


def content_sha256(suite: Suite, case: CaseSpec) -> str:
    return _sha(case_content(suite, case))


def point_sha256(point) -> str:
    """What a sweep's point means beyond its case's content: its dims and where its gate runs,
    and for an option point how its implementation is built."""
    meaning = {"dims": point.dims, "check_dims": point.check_dims}
    if getattr(point, "build", None):
        meaning["build"] = point.build
    return _sha(meaning)


def point_hashes(case: CaseSpec) -> dict[str, str]:
    """{point id: point_sha256} of the case's sweep ({} without one)."""
    return {p.id: point_sha256(p) for p in case.sweep.points} if case.sweep else {}


def impl_sha256(impl) -> str:
    """An implementation's toolchain, entry, flags, template (and its variables) and source bytes."""
    return _sha(
        {
            "role": impl.role,
            "toolchain": impl.toolchain,
            "entry": impl.entry,
            "flags": list(impl.flags),
            "command": impl.command,
            "source_sha256": hashlib.sha256(impl.source.read_bytes()).hexdigest(),
            **({"variables": dict(impl.variables)} if impl.variables else {}),
        }
    )


@dataclass(frozen=True)
class Recorded:
    sha256: str
    impls: dict
    points: dict = dataclasses.field(default_factory=dict)  # {point id: point_sha256}


_ENTRY_KEYS = {"case", "version", "sha256", "impls", "points"}


def read_lock(path: Path) -> dict[tuple[str, int], Recorded]:
    if not path.exists():
        return {}
    try:
        doc = read_toml(path, "lock file")[1]
    except InputFileError as exc:
        raise LockError(str(exc)) from None
    recorded: dict[tuple[str, int], Recorded] = {}
    for i, entry in enumerate(doc.get("version", [])):
        if not {"case", "version", "sha256", "impls"} <= set(entry) <= _ENTRY_KEYS:
            raise LockError(
                f"{path}: version[{i}]: expected case, version, sha256, impls (and points, for "
                f"a sweep), got {', '.join(sorted(entry))}"
            )
        key = (entry["case"], entry["version"])
        if key in recorded:
            raise LockError(f"{path}: case {key[0]!r} version {key[1]} is recorded twice")
        recorded[key] = Recorded(
            entry["sha256"], dict(entry["impls"]), dict(entry.get("points", {}))
        )
    return recorded


def _changes(suite: Suite, case: CaseSpec, known: Recorded) -> list[str]:
    """What changed in `case` since `known` was recorded (new implementations are not changes)."""
    changed = []
    if known.sha256 != content_sha256(suite, case):
        changed.append(
            "its dimensions, buffers, parameters, geometry, tolerance, reference or roofline"
        )
    for impl in case.impls:
        if impl.name in known.impls and known.impls[impl.name] != impl_sha256(impl):
            changed.append(
                f"implementation {impl.name!r} (source {impl.source_rel}, toolchain, entry or flags)"
            )
    for pid, sha in point_hashes(case).items():
        if pid in known.points and known.points[pid] != sha:
            changed.append(f"point {pid} (its dims or where its gate runs)")
    return changed


def verify(suite: Suite) -> list[str]:
    """Problems (empty when every case's current content matches its recorded version)."""
    path = lock_path(suite)
    recorded = read_lock(path)
    problems = []
    for case in suite.cases:
        known = recorded.get((case.id, case.version))
        if known is None:
            problems.append(
                f"{path}: case {case.id!r} version {case.version} is not recorded; "
                f"run `python -m runner lock {suite.path}`"
            )
            continue
        changed = _changes(suite, case, known)
        if changed:
            problems.append(
                f"{suite.path}: case {case.id!r}: changed since version {case.version} was recorded "
                f"({'; '.join(changed)}): bump its version, then run `python -m runner lock {suite.path}`"
            )
        added = [i.name for i in case.impls if i.name not in known.impls]
        if added:
            problems.append(
                f"{path}: case {case.id!r} version {case.version}: implementations {added} are not "
                f"recorded; run `python -m runner lock {suite.path}`"
            )
        points = [p for p in point_hashes(case) if p not in known.points]
        if points:
            problems.append(
                f"{path}: case {case.id!r} version {case.version}: points {', '.join(points)} are "
                f"not recorded (no new version needed); run `python -m runner lock {suite.path}`"
            )
    return problems


def _inline(table: dict, order=sorted) -> str:
    return ", ".join(f'"{name}" = "{digest}"' for name, digest in order(table.items()))


def _entry(case_id: str, version: int, r: Recorded) -> str:
    text = (
        f'[[version]]\ncase = "{case_id}"\nversion = {version}\nsha256 = "{r.sha256}"\n'
        f"impls = {{ {_inline(r.impls)} }}\n"
    )
    if r.points:  # in the order they were recorded (the sweep's order)
        text += f"points = {{ {_inline(r.points, list)} }}\n"
    return text


def record(suite: Suite) -> list[tuple[str, int]]:
    """Record new (case, version)s and new implementations of recorded versions; refuse changes."""
    path = lock_path(suite)
    recorded = read_lock(path)
    touched = []
    for case in suite.cases:
        key = (case.id, case.version)
        known = recorded.get(key)
        if known is not None:
            changed = _changes(suite, case, known)
            if changed:
                raise LockError(
                    f"{suite.path}: case {case.id!r}: version {case.version} is already recorded and "
                    f"{'; '.join(changed)} changed since: bump the case's version"
                )
        impls = dict(known.impls) if known else {}
        points = dict(known.points) if known else {}
        new = {i.name: impl_sha256(i) for i in case.impls if i.name not in impls}
        new_points = {p: sha for p, sha in point_hashes(case).items() if p not in points}
        if known is None or new or new_points:
            impls.update(new)
            points.update(new_points)
            sha = known.sha256 if known else content_sha256(suite, case)
            recorded[key] = Recorded(sha, impls, points)
            touched.append(key)
    if touched:
        entries = "".join(f"\n{_entry(cid, ver, r)}" for (cid, ver), r in recorded.items())
        path.write_text(HEADER + entries)
    return touched
