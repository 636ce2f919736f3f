"""Schema-valid result documents at the edges of what the schema allows, for the tests that feed
them to every harness command (tests/harness/test_faults_documents.py).

`full_document()` holds every kind of block a current run writes (a plain case and a swept one,
`static` and `profile` on every implementation); `optional_fields()` lists every field whose
absence still validates (a field path, list positions as `*`, taken out of every instance at
once); `without()` takes one out, `minimal()` all of them (first the deepest, then the blocks
holding them); `hostile()` puts a string into every string field that may hold it.
"""

from __future__ import annotations

import copy
import functools

import orjson

from protocol.validation import _schema, is_valid, summary, validate, validator
from tests.conftest import ROOT
from tests.support.sweep_documents import falling, swept_document

STATIC = orjson.loads((ROOT / "tests/fixtures/static-axpy-forth.json").read_bytes())
PROFILE = {
    "status": "ok",
    "profiled": True,
    "tool": "ncu",
    "version": "NVIDIA (R) Nsight Compute Command Line Profiler 2025.3",
    "command": ["ncu", "--csv", "--metrics", "dram__bytes_read.sum"],
    "size": "timed",
    "launches": 1,
    "wall_s": 2.5,
    "kernel": "axpy",
    "launch_id": "0",
    "dropped_metrics": ["sm__cycles_active.avg"],
    "metrics": {
        "dram__bytes_read.sum": {"value": 1.6e7, "unit": "byte"},
        "dram__bytes_write.sum": {"value": 8.0e6, "unit": "byte"},
        "lts__t_sector_hit_rate.pct": {"value": 12.5, "unit": "%"},
        "smsp__inst_executed.sum": {"value": 4.2e6, "unit": "inst"},
        "sm__warps_active.avg.pct_of_peak_sustained_active": {"value": 71.0, "unit": "%"},
        "gpu__time_duration.sum": {"value": 9100, "unit": "ns"},
    },
    "stalls": [
        {
            "reason": "long scoreboard",
            "metric": "smsp__pcsamp_warps_issue_stalled_long_scoreboard",
            "value": 120.0,
            "share": 0.6,
        },
    ],
}


def valid(document: dict) -> bool:
    """Valid against its schema: a bundle's (its `kind` says so) or a result document's."""
    kind = document.get("kind") if isinstance(document, dict) else None
    return is_valid(document, "bundle" if kind == "kernelgap.bundle" else "result")


def _maps(schema: dict) -> frozenset[str]:
    """Names of the schema's properties that are maps (any key, each value one schema: a
    case's implementations, a profile's metrics, ...): their keys are data, not fields."""
    found = set()

    def walk(node):
        if isinstance(node, dict):
            for name, sub in (node.get("properties") or {}).items():
                sub = _resolved(schema, sub)
                if isinstance(sub.get("additionalProperties"), dict) and not sub.get("properties"):
                    found.add(name)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    return frozenset(found)


def _resolved(schema: dict, node: dict) -> dict:
    ref = node.get("$ref", "") if isinstance(node, dict) else ""
    return schema["$defs"][ref.rsplit("/", 1)[1]] if ref.startswith("#/$defs/") else node


MAPS = _maps(_schema("result"))
NAMED = ("implementations", "geomean_gap")  # maps keyed by implementation names


@functools.cache
def _full() -> bytes:
    doc = swept_document(falling)
    doc["cases"] = [c for c in doc["cases"] if c["id"] in ("scale_i64", "axpy_f64")]
    swept = doc["cases"][1]
    swept["points"] = [p for p in swept["points"] if p["point"] == swept["point"]] + [
        p for p in swept["points"] if p["point"] != swept["point"]
    ][:2]
    for impl in _implementations(doc):
        impl["static"] = copy.deepcopy(STATIC["head" if impl["role"] == "candidate" else "base"])
        impl["profile"] = copy.deepcopy(PROFILE)
    doc["summary"] = summary(doc["cases"])
    validate(doc, "result", "full_document")
    return orjson.dumps(doc)


def revisions_document() -> dict:
    """full_document() as a base/head run (`runner bench --bundle base=... --bundle head=...`):
    in each case warpforth timed as two compiler revisions, warpforth@base and @head, paired."""
    doc = full_document()
    for case in doc["cases"]:
        impls = case["implementations"]
        timed = impls.pop("warpforth")
        for label in ("base", "head"):
            impls[f"warpforth@{label}"] = {**copy.deepcopy(timed), "variant_of": "warpforth",
                                           "revision": label}  # fmt: skip
        gap = timed["gap"]
        case["pairs"] = [
            {
                "of": "warpforth",
                "base": "warpforth@base",
                "head": "warpforth@head",
                **{
                    k: gap[k]
                    for k in (
                        "ratio_of_medians",
                        "median_of_round_ratios",
                        "ci_low",
                        "ci_high",
                        "confidence",
                        "resamples",
                        "rounds",
                        "stable",
                    )
                },
            }
        ]
    doc["summary"] = summary(doc["cases"])
    validate(doc, "result", "revisions_document")
    return doc


def full_bundle() -> dict:
    """A bundle manifest (runner build) of full_document()'s implementations, every optional
    field present: roles, static blocks, the compiler's sha256, the suite's primary, a skip."""
    doc = full_document()
    entries = []
    for case in doc["cases"]:
        for name, impl in case["implementations"].items():
            build = {k: impl["build"][k] for k in ("toolchain", "version", "command", "flags",
                                                   "source_sha256", "ptx_sha256", "build_s")}  # fmt: skip
            build["compiler_sha256"] = "c" * 64
            entries.append(
                {
                    "case": case["id"],
                    "case_version": case["version"],
                    "impl": name,
                    "file": f"{case['id']}/{name}.ptx",
                    "role": impl["role"],
                    "static": impl["static"],
                    "build": build,
                }
            )
    bundle = {
        "schema_version": "1.3.0",
        "kind": "kernelgap.bundle",
        "suite": {
            **{k: doc["suite"][k] for k in ("name", "version", "sha256")},
            "primary": "warpforth",
        },
        "arch": "sm_90",
        "created_utc": doc["started_utc"],
        "host": "build-box",
        "implementations": entries,
        "skipped": [{"case": "scale_i64", "impl": "handptx", "reason": "no such source here"}],
    }
    validate(bundle, "bundle", "full_bundle")
    return bundle


def _implementations(doc: dict):
    for case in doc["cases"]:
        for block in [case, *(case.get("points") or ())]:
            yield from (block.get("implementations") or {}).values()


def full_document() -> dict:
    """A fresh copy of the document holding every block (validated)."""
    return orjson.loads(_full())


def _instances(node, path: tuple):
    """(parent, key) of every field at `path` (`*`: every list item, or every map entry)."""
    if not path:
        return
    head, rest = path[0], path[1:]
    if head == "*":
        items = node.items() if isinstance(node, dict) else enumerate(node)
        children = list(items) if isinstance(node, dict | list) else []
    else:
        children = [(head, node[head])] if isinstance(node, dict) and head in node else []
    for key, child in children:
        if rest:
            yield from _instances(child, rest)
        else:
            yield node, key


def _paths(node, path: tuple = (), is_map: bool = False) -> list[tuple]:
    """Every field path of `node`, parents before children; list items and map entries as `*`
    (a map's keys are data: implementation names, metric names)."""
    out: dict[tuple, None] = {}
    if isinstance(node, dict) and not is_map:
        for key, child in node.items():
            out[(*path, key)] = None
            out.update(dict.fromkeys(_paths(child, (*path, key), key in MAPS)))
    elif isinstance(node, dict | list):
        for key, child in node.items() if isinstance(node, dict) else enumerate(node):
            if isinstance(node, dict):  # a map: every entry, and each one on its own
                out[(*path, "*")] = out[(*path, key)] = None
            out.update(dict.fromkeys(_paths(child, (*path, "*"))))
    return list(out)


def without(document: dict, path: tuple) -> dict:
    """`document` with the field at `path` taken out of every instance."""
    return _without(orjson.dumps(document), path)


@functools.cache
def _optional(data: bytes) -> tuple[tuple, ...]:
    document = orjson.loads(data)
    return tuple(p for p in _paths(document) if valid(_without(data, p)))


def _without(data: bytes, path: tuple) -> dict:
    doc = orjson.loads(data)  # a copy, faster than copy.deepcopy
    for parent, key in list(_instances(doc, path)):
        del parent[key]
    return doc


def optional_fields(document: dict) -> tuple[tuple, ...]:
    """Every field path whose absence (everywhere) keeps `document` schema-valid."""
    return _optional(orjson.dumps(document))


def block_fields(document: dict) -> tuple[tuple, ...]:
    """The optional fields that hold an object or a list (a map's entries that are objects
    one by one): what hollow() keeps, each to be taken out on its own."""
    return tuple(
        path
        for path in optional_fields(document)
        if any(
            isinstance(v[k], dict) or (isinstance(v[k], list) and path[-2] not in MAPS)
            for v, k in _instances(document, path)
        )
    )


def minimal(document: dict) -> dict:
    """`document` with every optional field absent: the deepest first, so a block the schema
    lets stay keeps only what it requires, then every optional block too."""
    doc = copy.deepcopy(document)
    for path in sorted(optional_fields(document), key=len, reverse=True):
        trial = without(doc, path)
        if valid(trial):
            doc = trial
    return doc


def hollow(document: dict) -> dict:
    """`document` with every optional field absent but the optional objects: each block there
    holds only what the schema requires (a `static` block of `status` alone, and so on)."""
    doc = copy.deepcopy(document)
    for path in sorted(optional_fields(document), key=len, reverse=True):
        if any(isinstance(v[k], dict) for v, k in _instances(doc, path)):
            continue
        trial = without(doc, path)
        if valid(trial):
            doc = trial
    return doc


def hostile(document: dict, text: str) -> tuple[dict, int]:
    """`document` with `text` appended to every string value the schema lets hold it (ids,
    names, messages, tool versions, point ids, ...; not enums, hashes or dates) and to every
    implementation name, and how many strings."""
    doc = copy.deepcopy(document)
    strings = {}  # id of its holder and position -> (holder, position, original)

    def walk(node):
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, value in list(items):
            if key in NAMED and isinstance(value, dict):  # keys are names: `baseline` names one
                node[key] = value = {k + text: v for k, v in value.items()}
            if isinstance(value, str):
                strings[(id(node), key)] = (node, key, value)
                node[key] = value + text
            elif isinstance(value, dict | list):
                walk(value)

    walk(doc)
    check = validator("result")
    while errors := list(check.iter_errors(doc)):
        before = len(strings)
        blocks = []
        for error in errors:  # put back the strings the schema constrains (enums, patterns)
            node, path = doc, list(error.absolute_path)
            for part in path[:-1]:
                node = node[part]
            held = strings.pop((id(node), path[-1]), None) if path else None
            if held is not None:
                held[0][held[1]] = held[2]
            else:
                blocks.append(node[path[-1]] if path else node)
        if len(strings) == before:  # only a oneOf's block is left: every string in it put back
            for block in blocks:
                _put_back(block, strings)
        if len(strings) == before:
            raise AssertionError(f"hostile: {errors[0].message[:200]}")
    return doc, len(strings)


def _put_back(node, strings: dict) -> int:
    """Put back every changed string under `node`; how many."""
    count = 0
    if isinstance(node, dict | list):
        for key, value in list(node.items() if isinstance(node, dict) else enumerate(node)):
            held = strings.pop((id(node), key), None)
            if held is not None:
                node[key] = held[2]
                count += 1
            count += _put_back(value, strings)
    return count
