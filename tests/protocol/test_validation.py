"""protocol.validation's two validators agree: jsonschema-rs answers valid documents, jsonschema
every rejected one, so jsonschema-rs must never pass a document that jsonschema fails.

Real documents (the frozen H200 result fixtures, the suite's cases.toml, run requests and
responses) are mutated at random, seeded: a value swapped for another type, an integer written
as a float, a key dropped or added, an array emptied or an item doubled. Both validators judge
each mutant and must give the same verdict.
"""

from __future__ import annotations

import copy
import random
import tomllib
from pathlib import Path

import numpy as np
import pytest

from protocol import decode
from protocol.errors import DocumentError
from protocol.validation import errors, is_valid, validate
from runner.launch.oneshot import error_document

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
AXPY = (ROOT / "benchmarks" / "kernels" / "axpy_f64.handwritten.ptx").read_text()


def run_request() -> dict:
    return {
        "ptx": AXPY,
        "kernel": "axpy_f64",
        "grid": [4, 1, 1],
        "block": [256],
        "params": [
            {"type": "f64[]", "values": [1.0, 2.0, 3.0]},
            {"type": "f64[]", "data_base64": "AAAAAAAA8D8="},
            {"type": "f64", "value": 2.5},
            {"type": "u64", "value": 3},
        ],
        "outputs": [{"param": 1, "encoding": "base64"}, {"param": 0, "count": 2}],
        "timeout_s": 5,
    }


DOCUMENTS = {
    "result": [
        decode((FIXTURES / "result-1.0.0-h200-axpy.json").read_bytes(), "fixture"),
        decode((FIXTURES / "result-1.2.0-h200-warpforth.json").read_bytes(), "fixture"),
    ],
    "cases": [tomllib.loads((ROOT / "benchmarks" / "cases.toml").read_text())],
    "run-request": [run_request()],
    "run-response": [error_document("launch", "line 3: an illegal address")],
}
MUTANTS = {"result": 40, "cases": 150, "run-request": 400, "run-response": 100}
REPLACEMENTS = [None, True, 0, -1, 3.0, 2.5, 1 << 70, "", "x", [], {}, [1], {"unknown": 1}]


def paths(document, prefix=()):
    yield prefix
    if isinstance(document, dict):
        for key, value in document.items():
            yield from paths(value, (*prefix, key))
    elif isinstance(document, list):
        for index, value in enumerate(document):
            yield from paths(value, (*prefix, index))


def mutate(document, rng: random.Random):
    mutant = copy.deepcopy(document)
    path = rng.choice(list(paths(mutant))[1:])
    parent = mutant
    for step in path[:-1]:
        parent = parent[step]
    key, value = path[-1], parent[path[-1]]
    choice = rng.randrange(6)
    if choice == 0 and isinstance(value, int) and not isinstance(value, bool):
        parent[key] = float(value)  # StrictValidator refuses 30.0 for an integer
    elif choice == 1 and isinstance(parent, dict):
        del parent[key]
    elif choice == 2 and isinstance(value, dict):
        value[rng.choice(["unknown_field", "x-extra", "kind"])] = rng.choice(REPLACEMENTS)
    elif choice == 3 and isinstance(value, list):
        if value and rng.random() < 0.5:
            value.append(copy.deepcopy(value[0]))
        else:
            value.clear()
    else:
        parent[key] = copy.deepcopy(rng.choice(REPLACEMENTS))
    return mutant


@pytest.mark.parametrize("schema_name", sorted(DOCUMENTS))
def test_the_real_documents_are_valid_to_both(schema_name):
    for document in DOCUMENTS[schema_name]:
        assert errors(document, schema_name) == []
        assert is_valid(document, schema_name)


@pytest.mark.parametrize("schema_name", sorted(DOCUMENTS))
def test_mutants_get_the_same_verdict_from_both(schema_name):
    rng = random.Random(f"kernelgap-{schema_name}")
    verdicts = {True: 0, False: 0}
    for index in range(MUTANTS[schema_name]):
        original = DOCUMENTS[schema_name][index % len(DOCUMENTS[schema_name])]
        mutant = mutate(original, rng)
        slow = errors(mutant, schema_name) == []
        assert is_valid(mutant, schema_name) == slow, (
            schema_name,
            index,
            errors(mutant, schema_name),
        )
        verdicts[slow] += 1
    # the mutations reach the schema's rules: many mutants are refused, and some still pass
    assert verdicts[False] >= MUTANTS[schema_name] // 4, verdicts
    assert verdicts[True] >= 1, verdicts


def test_an_integer_written_as_a_float_is_refused_by_both():
    request = run_request()
    request["grid"] = [4.0, 1, 1]
    assert not is_valid(request, "run-request")
    with pytest.raises(DocumentError, match=r"at grid\[0\]"):
        validate(request, "run-request", "line 1")


def test_what_jsonschema_rs_cannot_read_is_judged_by_jsonschema():
    request = run_request()
    request["timeout_s"] = np.float64(5.0)  # a float subclass: jsonschema reads it, rs cannot
    assert not is_valid(request, "run-request")
    validate(request, "run-request", "line 1")  # jsonschema's verdict: valid
    request["grid"] = [np.int64(4)]  # not an int to jsonschema either
    with pytest.raises(DocumentError, match=r"grid\[0\]"):
        validate(request, "run-request", "line 1")


def test_without_jsonschema_rs_every_document_goes_through_jsonschema(monkeypatch):
    from protocol import validation

    monkeypatch.setattr(validation, "jsonschema_rs", None)
    request = run_request()
    assert not is_valid(request, "run-request")
    validate(request, "run-request", "line 1")
    request["grid"] = [4.0]
    with pytest.raises(DocumentError, match=r"line 1: does not match .* at grid\[0\]"):
        validate(request, "run-request", "line 1")


def test_an_integral_decimal_is_not_an_integer_to_either():
    import decimal

    request = run_request()
    request["shared_bytes"] = decimal.Decimal("3")
    with pytest.raises(DocumentError, match="shared_bytes"):
        validate(request, "run-request", "line 1")
