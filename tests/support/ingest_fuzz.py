"""A fuzzer for `harness ingest`: result documents mutated from a valid one (values of the wrong
type, numbers past what SQLite or JSON hold, fields dropped or unknown, hostile text, values
nested past the store's writer) or as bytes (cut short, a byte changed), each a distinct run.

Each comes with what it is, so a test can check that every one is either stored intact or
refused naming its file, and that the store is sound after all of them.
"""

from __future__ import annotations

import copy
import json
import random
from dataclasses import dataclass

import orjson

from tests.support.serve_fuzz import _paths  # every field path of a document, the root's first

HUGE = [2**53, 2**63 - 1, 2**63, 2**64 - 1, -(2**63) - 1, 1e308, -1e308, 5e-324, 0, -1]
WRONG = [None, True, False, "", "x", "\x1b[2J\u202e", "<img src=x>", "=1+1", [], {}, [1], {"a": 1}]
DEEP = "fuzz: nested here"  # replaced, as text, by containers past the store writer's depth


@dataclass(frozen=True)
class Mutant:
    data: bytes
    kind: str


def _mutate(document: dict, rng: random.Random) -> str:
    """One change at a random field of `document` (in place); its kind."""
    path = rng.choice([p for p in _paths(document) if p])
    parent = document
    for part in path[:-1]:
        parent = parent[part]
    key = path[-1]
    kind = rng.choice(["huge", "wrong", "drop", "unknown", "text", "deep", "empty"])
    if kind == "huge":
        parent[key] = rng.choice(HUGE)
    elif kind == "wrong":
        parent[key] = copy.deepcopy(rng.choice(WRONG))
    elif kind == "drop":
        del parent[key]
    elif kind == "unknown" and isinstance(parent[key], dict):
        parent[key][f"fuzz_{rng.randrange(100)}"] = rng.choice(HUGE + WRONG[:6])
    elif kind == "text" and isinstance(parent[key], str):
        parent[key] += rng.choice(WRONG[4:8]) * rng.choice([1, 1000])
    elif kind == "deep":
        parent[key] = DEEP
    elif kind == "empty" and isinstance(parent[key], dict | list):
        parent[key].clear()
    else:
        parent[key] = copy.deepcopy(rng.choice(HUGE + WRONG))
        kind = "wrong"
    return kind


def mutants(document: dict, seed: int, count: int):
    """`count` Mutants of `document`, reproducibly: each one to three changes, a distinct run
    (its start time moved), one in ten changed as bytes instead."""
    rng = random.Random(seed)
    for index in range(count):
        doc = copy.deepcopy(document)
        doc["started_utc"] = (
            f"2026-12-01T{index // 3600 % 24:02d}:{index // 60 % 60:02d}:{index % 60:02d}Z"
        )
        kinds = [_mutate(doc, rng) for _ in range(rng.randint(1, 3))]
        levels = rng.choice([200, 260, 1000])
        deep = b'{"x":[' * (levels // 2) + b"1" + b"]}" * (levels // 2)
        text = json.dumps(doc, ensure_ascii=False).encode()  # orjson refuses -2**63 - 1
        data = text.replace(orjson.dumps(DEEP), deep)
        if rng.random() < 0.1:
            at = rng.randrange(len(data))
            data = (
                data[:at]
                if rng.random() < 0.5
                else data[:at] + bytes([rng.randrange(256)]) + data[at + 1 :]
            )
            kinds.append("bytes")
        yield Mutant(data, "+".join(kinds))
