"""A schema-driven fuzzer for `runner serve`: valid run requests built from what
schemas/run-request.schema.json allows (its type enum, dim3 bounds, timeout bounds, encodings,
id types), then mutated as a document (wrong types, huge numbers, dropped and unknown keys, deep
nesting) or as bytes (cut short, invalid UTF-8, NUL bytes, random bytes, overlong, blank).

Each generated line comes with what its answer's id may be, so a test can check one answer per
non-blank line, in order, each matched to its line.
"""

from __future__ import annotations

import base64
import copy
import json
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import orjson

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = orjson.loads((ROOT / "schemas" / "run-request.schema.json").read_bytes())
# A module with no .entry: a request that passes every check ends in a signature error on a GPU
# (no kernel is ever launched by the fuzzer) and in an environment error without one.
PTX = ".version 7.0\n.target sm_90\n.address_size 64\n"
HUGE = [
    2**31,
    2**32 - 1,
    2**53 + 1,
    2**63 - 1,
    2**64 - 1,
    -(2**63),
    1e9,
    1e12,
    1e308,
    -1e308,
    5e-324,
]
WRONG = [None, True, False, 0, -1, 2.5, "", "x", "nan", [], {}, [1], {"unknown": 1}]
REQUEST_DEPTH = 4  # request, params, a param, its values


@dataclass(frozen=True)
class FuzzLine:
    """One line (no newline) and the ids its answer may carry (None: refused before its id)."""

    data: bytes
    ids: frozenset
    kind: str

    @property
    def blank(self) -> bool:
        return not self.data.strip()


def _defs(name: str) -> dict:
    return SCHEMA["$defs"][name]


def _bounds(rng: random.Random, low: int, high: int) -> int:
    """A value in [low, high], often at an edge."""
    return rng.choice([low, high, rng.randint(low, min(high, low + 64))])


def _dim3(rng: random.Random) -> list[int]:
    spec = _defs("dim3")
    items = spec["items"]
    length = rng.randint(spec["minItems"], spec["maxItems"])
    return [_bounds(rng, items["minimum"], items["maximum"]) for _ in range(length)]


def _scalar(rng: random.Random, kind: str):
    if kind[0] in "iu":
        info = np.iinfo(np.dtype({"i": "int", "u": "uint"}[kind[0]] + kind[1:]))
        return rng.choice(
            [int(info.min), int(info.max), rng.randint(-5, 5) if kind[0] == "i" else 7]
        )
    return rng.choice([0.1, -0.0, 1e300 if kind == "f64" else 3.5, "nan", "inf", "-inf", 5e-324])


def _param(rng: random.Random) -> dict:
    type_name = rng.choice(_defs("param")["properties"]["type"]["enum"])
    kind = type_name.removesuffix("[]")
    if not type_name.endswith("[]"):
        return {"type": type_name, "value": _scalar(rng, kind)}
    form = rng.randrange(3)
    if form == 0:
        return {"type": type_name, "values": [_scalar(rng, kind) for _ in range(rng.randint(0, 6))]}
    if form == 1:
        itemsize = int(kind[1:]) // 8
        raw = rng.randbytes(itemsize * rng.randint(0, 6))
        return {"type": type_name, "data_base64": base64.b64encode(raw).decode()}
    return {"type": type_name, "count": rng.randint(0, 64)}


def _ident(rng: random.Random, index: int):
    kinds = SCHEMA["properties"]["id"]["type"]
    kind = rng.choice(kinds)
    return {"string": f"line-{index}", "integer": index, "null": None}[kind]


def valid_request(rng: random.Random, index: int) -> dict:
    """A request the schema accepts, every optional field present or not at random."""
    props = SCHEMA["properties"]
    request = {"kernel": rng.choice(["k", "axpy_f64", "main"]), "grid": _dim3(rng)}
    request["block"] = _dim3(rng)
    if rng.random() < 0.5:
        request["ptx"] = PTX
    else:
        request["ptx_base64"] = base64.b64encode(PTX.encode()).decode()
    if rng.random() < 0.5:
        request["shared_bytes"] = _bounds(rng, props["shared_bytes"]["minimum"], 4096)
    if rng.random() < 0.5:
        request["timeout_s"] = rng.choice([0.5, 5, props["timeout_s"]["maximum"]])
    params = [_param(rng) for _ in range(rng.randint(0, 4))]
    if params or rng.random() < 0.5:
        request["params"] = params
    arrays = [i for i, p in enumerate(params) if p["type"].endswith("[]")]
    if arrays:
        encodings = _defs("output")["properties"]["encoding"]["enum"]
        request["outputs"] = [
            {"param": i, "encoding": rng.choice(encodings)} for i in arrays if rng.random() < 0.7
        ]
    request["id"] = _ident(rng, index)
    return request


def _paths(document, prefix=()):
    yield prefix
    if isinstance(document, dict):
        for key, value in document.items():
            yield from _paths(value, (*prefix, key))
    elif isinstance(document, list):
        for index, value in enumerate(document):
            yield from _paths(value, (*prefix, index))


def mutate(document: dict, rng: random.Random) -> dict:
    """One change somewhere in the document: a wrong type, a huge number, a key dropped or
    added, a list emptied or grown."""
    mutant = orjson.loads(orjson.dumps(document))  # a deep copy, fast
    path = rng.choice(list(_paths(mutant))[1:])
    parent = mutant
    for step in path[:-1]:
        parent = parent[step]
    key, value = path[-1], parent[path[-1]]
    choice = rng.randrange(6)
    if choice == 0:
        parent[key] = rng.choice(HUGE)
    elif choice == 1 and isinstance(parent, dict):
        del parent[key]
    elif choice == 2 and isinstance(value, dict):
        value[rng.choice(["unknown", "values", "count", "value", "data_base64"])] = rng.choice(
            WRONG + HUGE
        )
    elif choice == 3 and isinstance(value, list):
        if value and rng.random() < 0.5:
            value.extend(copy.deepcopy(value) * rng.randint(1, 3))
        else:
            value.clear()
    elif choice == 4 and isinstance(value, int | float) and not isinstance(value, bool):
        parent[key] = rng.choice([-value, value * 2**40, float(value), str(value)])
    else:
        parent[key] = copy.deepcopy(rng.choice(WRONG))
    return mutant


def _nested(rng: random.Random, depth: int) -> bytes:
    opener = rng.choice([b"[", b'{"a":'])
    closer = b"]" if opener == b"[" else b"}"
    return opener * depth + b"1" + closer * depth


def depth_of(document) -> int:
    """Nesting of dicts and lists (1 for a flat dict), without recursion."""
    deepest, stack = 0, [(document, 1)]
    while stack:
        value, depth = stack.pop()
        deepest = max(deepest, depth)
        items = value.values() if isinstance(value, dict) else value
        stack.extend((item, depth + 1) for item in items if isinstance(item, dict | list))
    return deepest


def expected_ids(data: bytes, max_line_bytes: int) -> frozenset:
    """The ids an answer to `data` may carry: the line's own id once the service can read it;
    null where it cannot (too long, not JSON, not an object, a bad id) or may refuse it first
    (nested deeper than a request)."""
    if len(data) > max_line_bytes:
        return frozenset([None])
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError:
        return frozenset([None])
    if not isinstance(document, dict):
        return frozenset([None])
    ident = document.get("id")
    if isinstance(ident, bool) or not isinstance(ident, str | int | None):
        return frozenset([None])
    if depth_of(document) > REQUEST_DEPTH:
        return frozenset([ident, None])
    return frozenset([ident])


def _bytes_mutant(rng: random.Random, text: bytes, max_line_bytes: int) -> tuple[bytes, str]:
    choice = rng.randrange(9)
    if choice == 0:
        return text[: rng.randrange(len(text))], "cut short"
    if choice == 1:
        at = rng.randrange(len(text))
        return text[:at] + rng.choice([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x80"]) + text[at:], (
            "invalid utf-8"
        )
    if choice == 2:
        at = rng.randrange(len(text))
        return text[:at] + b"\x00" + text[at:], "nul byte"
    if choice == 3:
        return rng.randbytes(rng.randint(1, 300)).replace(b"\n", b" "), "random bytes"
    if choice == 4:
        return rng.choice([b"", b" ", b"\t \r", b"\r"]), "blank"
    if choice == 5:
        size = max_line_bytes + rng.choice([1, 2, 4096, 3 * max_line_bytes])
        return b'{"id": 1, "ptx": "' + b"x" * size + b'"}', "overlong"
    if choice == 6:
        depth = rng.choice([REQUEST_DEPTH + 1, 20, 255, 256, 600, 1023, 1024, 1025, 5000])
        head = text[:-1] + b',"unknown":'
        return head + _nested(rng, depth) + b"}", "deep nesting"
    if choice == 7:
        return rng.choice([b"[]", b"1", b'"x"', b"null", b"{}", b"true", b"1e400", b"-"]), (
            "not a request"
        )
    at = rng.randrange(len(text))
    return text[:at] + bytes([rng.randrange(256)]) + text[at + 1 :], "one byte changed"


def _dumps(document) -> bytes:
    """orjson's text, or the standard library's for what orjson refuses (an integer past 64
    bits, a float that overflowed to inf, which then is not JSON: input all the same)."""
    try:
        return orjson.dumps(document)
    except TypeError:
        return json.dumps(document, separators=(",", ":")).encode()


def lines(seed: int, count: int, max_line_bytes: int) -> list[FuzzLine]:
    """`count` lines, a third each: valid requests, document mutants, byte mutants; the last is
    a valid request with id "final"."""
    rng = random.Random(seed)
    made = []
    for index in range(count - 1):
        request = valid_request(rng, index)
        which = rng.randrange(3)
        if which == 0:
            data, kind = orjson.dumps(request), "valid"
        elif which == 1:
            data, kind = _dumps(mutate(request, rng)), "document mutant"
        else:
            data, kind = _bytes_mutant(rng, orjson.dumps(request), max_line_bytes)
        data = data.replace(b"\n", b" ")  # one line each
        made.append(FuzzLine(data, expected_ids(data, max_line_bytes), kind))
    final = orjson.dumps({**valid_request(rng, count), "id": "final"})
    made.append(FuzzLine(final, frozenset(["final"]), "final"))
    return made
