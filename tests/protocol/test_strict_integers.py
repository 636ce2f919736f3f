"""protocol.validation: jsonschema-rs refuses 30.0 where a schema asks for an integer, as
jsonschema (protocol.validation.jsonschema_validator) does, with the rule checked by the roots'
walks instead of a call per integer.

Every integer of a real result document with static counters, written as a float, is refused by
both; and on small schemas built for it, each place a walk must not reach (anyOf, not,
patternProperties, prefixItems, additionalProperties beside properties, a recursive `$defs`
entry, a reference of another form) gets the same verdict from both validators.
"""

from __future__ import annotations

import copy
import decimal
import random

import orjson
import pytest

from protocol import decode
from protocol.errors import DocumentError
from protocol.validation import (
    STRICT_INTEGER,
    STRICT_MEMBERS,
    StrictMembers,
    errors,
    is_valid,
    jsonschema_validator,
    rs_validator,
    strict_integers,
    validate,
    validator,
)
from tests.conftest import ROOT

FIXTURES = ROOT / "tests" / "fixtures"
STATIC = orjson.loads((FIXTURES / "static-axpy-forth.json").read_bytes())


def with_static(cases: int | None = None) -> dict:
    """The H200 WarpForth fixture (its first `cases`) with every implementation's static counters."""
    doc = decode((FIXTURES / "result-1.2.0-h200-warpforth.json").read_bytes(), "fixture")
    doc["cases"] = doc["cases"][:cases]
    for case in doc["cases"]:
        for impl in case["implementations"].values():
            impl["static"] = copy.deepcopy(STATIC["base"])
    return doc


def integer_paths(document, prefix=()):
    if isinstance(document, dict):
        for key, value in document.items():
            yield from integer_paths(value, (*prefix, key))
    elif isinstance(document, list):
        for index, value in enumerate(document):
            yield from integer_paths(value, (*prefix, index))
    elif isinstance(document, int) and not isinstance(document, bool):
        yield prefix


def as_float(document, path):
    mutant = copy.deepcopy(document)
    parent = mutant
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = float(parent[path[-1]])
    return mutant


def test_every_integer_of_a_document_with_static_counters_as_a_float_gets_one_verdict():
    doc = with_static(cases=1)
    assert is_valid(doc, "result") and errors(doc, "result") == []
    paths = list(integer_paths(doc))
    assert len(paths) > 150  # the opcode and class maps are in
    refused = 0
    for path in paths:
        parent = doc
        for step in path[:-1]:
            parent = parent[step]
        value = parent[path[-1]]
        parent[path[-1]] = float(value)  # in place: a copy of the document per path is slow
        slow = validator("result").is_valid(doc)
        assert is_valid(doc, "result") == slow, path
        refused += not slow
        parent[path[-1]] = value
    assert refused > 150  # most are integers to the schema (a few are numbers: 2.0 is fine)


@pytest.mark.parametrize(
    ("path", "field"),
    [
        (("instructions", "opcodes", "IADD3"), r"static\.instructions\.opcodes\.IADD3"),
        (
            ("instructions", "loops", 0, "classes", "integer"),
            r"static\.instructions\.loops\[0\]\.classes\.integer",
        ),
        (
            ("instructions", "memory", "generic_load", 0, "count"),
            r"static\.instructions\.memory\.generic_load\[0\]\.count",
        ),
        (("resources", "registers"), r"static\.resources\.registers"),
        (("instructions", "classes", "total"), r"static\.instructions\.classes\.total"),
    ],
)
def test_a_float_counter_is_refused_with_a_message_naming_the_field(path, field):
    doc = with_static()
    static = doc["cases"][0]["implementations"]["cuda"]["static"]
    mutant = as_float(static, path)
    doc["cases"][0]["implementations"]["cuda"]["static"] = mutant
    with pytest.raises(
        DocumentError, match=rf"at cases\[0\]\.implementations\.cuda\.{field}: \d+\.0 is not"
    ):
        validate(doc, "result", "run.json")


def test_a_float_in_an_integer_array_item_is_refused_naming_the_item():
    doc = with_static()
    doc["cases"][0]["launch"]["grid"][1] = 1.0
    assert not is_valid(doc, "result")
    with pytest.raises(DocumentError, match=r"at cases\[0\]\.launch\.grid\[1\]: 1\.0 is not"):
        validate(doc, "result", "run.json")


INT = {"type": "integer"}
SCHEMAS = {  # schema: instances judged by both validators
    "anyOf": (
        {"properties": {"n": {"anyOf": [INT, {"type": "string"}]}}},
        [{"n": 3}, {"n": 3.0}, {"n": "x"}, {"n": 2.5}],
    ),
    "not": ({"properties": {"n": {"not": INT}}}, [{"n": 3}, {"n": 3.0}, {"n": "x"}]),
    "patternProperties": (
        {"patternProperties": {"^c_": INT}, "additionalProperties": {"type": "string"}},
        [{"c_a": 1, "d": "x"}, {"c_a": 1.0}, {"d": 1.0}, {"d": "x", "c_b": 2}],
    ),
    "prefixItems": (
        {"prefixItems": [{"type": "string"}, INT], "items": INT},
        [["a", 1, 2], ["a", 1.0], ["a", 1, 2.0], ["a"]],
    ),
    "additionalProperties beside properties": (
        {"properties": {"s": {"type": "string"}}, "additionalProperties": INT},
        [{"s": "x", "n": 1}, {"s": "x", "n": 1.0}, {"n": 2}],
    ),
    "a recursive $defs entry": (
        {
            "$defs": {
                "tree": {
                    "type": "object",
                    "properties": {
                        "n": INT,
                        "kids": {"type": "array", "items": {"$ref": "#/$defs/tree"}},
                    },
                }
            },
            "$ref": "#/$defs/tree",
        },
        [
            {"n": 1, "kids": [{"n": 2, "kids": [{"n": 3}]}]},
            {"n": 1, "kids": [{"kids": [{"n": 3.0}]}]},
        ],
    ),
    "a reference into properties": (
        {"properties": {"a": INT, "b": {"$ref": "#/properties/a"}}},
        [{"a": 1, "b": 2}, {"b": 2.0}, {"a": 1.0}],
    ),
    "an integer map in an array in a map": (
        {
            "additionalProperties": {
                "type": "array",
                "items": {"additionalProperties": {"$ref": "#/$defs/n"}},
            },
            "$defs": {"n": {"type": ["integer", "null"], "minimum": 0}},
        },
        [{"a": [{"x": 1, "y": None}]}, {"a": [{"x": 1}, {"y": 2.0}]}, {"a": [{"x": -1}]}],
    ),
    "a property named like a data keyword": (
        {"properties": {"default": INT, "enum": {"enum": [INT]}}},
        [{"default": 1}, {"default": 1.0}, {"enum": {"type": "integer"}}],
    ),
}


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_both_validators_agree_where_a_walk_must_not_reach(name):
    schema, instances = SCHEMAS[name]
    fast, slow = rs_validator(schema), jsonschema_validator(schema)
    verdicts = [fast.is_valid(x) for x in instances]
    assert verdicts == [slow.is_valid(x) for x in instances]
    assert True in verdicts and False in verdicts  # the cases reach the rule both ways


def test_a_walk_takes_an_integer_map_in_one_call_and_leaves_defs_unmarked():
    schema = {
        "properties": {"counts": {"$ref": "#/$defs/counts"}, "n": {"$ref": "#/$defs/count"}},
        "$defs": {
            "count": {"type": "integer", "minimum": 0},
            "counts": {"type": "object", "additionalProperties": {"$ref": "#/$defs/count"}},
        },
    }
    marked = strict_integers(schema)
    assert marked[STRICT_MEMBERS] == {"names": ["n"], "properties": {"counts": {"values": True}}}
    assert STRICT_INTEGER not in marked["$defs"]["count"]
    assert STRICT_MEMBERS not in marked["$defs"]["counts"]
    assert marked["$defs"]["count"] == schema["$defs"]["count"]  # the input is left as it was


class Count(int):
    """An int of another type: not plain, not a float, so the walk looks closer."""


@pytest.mark.parametrize(
    "instance",
    [
        {"a": Count(1), "b": [1.0]},
        {"a": 1, "b": [Count(2), 2.0]},
        {"m": {"x": Count(1), "y": 1.0}},
        {"a": decimal.Decimal("1")},
    ],
)
def test_a_member_of_another_type_does_not_hide_a_float_after_it(instance):
    walk = {"names": ["a"], "properties": {"b": {"items": True}, "m": {"values": True}}}
    with pytest.raises(ValueError, match="written as a float"):
        StrictMembers(None, walk, []).validate(instance)
    StrictMembers(None, walk, []).validate({"a": Count(1), "b": [Count(2)], "m": {"x": 3}})


def reference_found(walk: dict, instance) -> bool:
    """The walk's meaning, read node by node: what the compiled finder must answer."""
    floats = (float, decimal.Decimal)
    if isinstance(instance, dict):
        members = [instance.get(name) for name in walk.get("names", ())]
        if walk.get("values"):
            members += instance.values()
        return (
            any(isinstance(m, floats) for m in members)
            or any(
                reference_found(sub, instance.get(name))
                for name, sub in walk.get("properties", {}).items()
            )
            or (
                "each_value" in walk
                and any(reference_found(walk["each_value"], v) for v in instance.values())
            )
        )
    if isinstance(instance, list | tuple):
        return (walk.get("items") and any(isinstance(m, floats) for m in instance)) or (
            "each_item" in walk and any(reference_found(walk["each_item"], m) for m in instance)
        )
    return False


ODD_NAMES = ["a", "b", "it's", 'say "x"', "back\\slash", "new\nline", "{}", "x0", "v"]


def random_walk(rng, depth: int) -> dict:
    walk = {}
    if rng.random() < 0.5:
        walk["names"] = rng.sample(ODD_NAMES, rng.randint(1, 3))
    for flag in ("values", "items"):
        if rng.random() < 0.3:
            walk[flag] = True
    if depth > 0:
        for name in rng.sample(ODD_NAMES, rng.randint(0, 2)):
            walk.setdefault("properties", {})[name] = random_walk(rng, depth - 1)
        for each in ("each_value", "each_item"):
            if rng.random() < 0.3:
                walk[each] = random_walk(rng, depth - 1)
    return walk


def random_instance(rng, depth: int):
    leaves = [1, 2.0, "s", None, True, Count(3), decimal.Decimal("4"), 0.5]
    if depth == 0 or rng.random() < 0.25:
        return rng.choice(leaves)
    if rng.random() < 0.6:
        names = rng.sample(ODD_NAMES, rng.randint(0, 5))
        return {name: random_instance(rng, depth - 1) for name in names}
    items = [random_instance(rng, depth - 1) for _ in range(rng.randint(0, 4))]
    return tuple(items) if rng.random() < 0.2 else items


def test_the_compiled_walk_answers_as_the_walk_read_node_by_node():
    """Random walks (property names that need quoting included) on random instances, and one
    deeper than the compiler inlines, whose members get functions of their own."""
    rng = random.Random(37)
    answers = set()
    for _ in range(300):
        walk = random_walk(rng, 4)
        finder = StrictMembers(None, walk, [])
        for _ in range(20):
            instance = random_instance(rng, 5)
            expected = reference_found(walk, instance)
            answers.add(expected)
            try:
                finder.validate(instance)
                found = False
            except ValueError:
                found = True
            assert found == expected, (walk, instance)
    assert answers == {True, False}
    deep, instance = {"names": ["n"]}, {"n": 1.5}
    for _ in range(150):  # past Python's 100 levels of indentation, were it inlined
        deep, instance = {"properties": {"in": deep}}, {"in": instance}
    with pytest.raises(ValueError, match="written as a float"):
        StrictMembers(None, deep, []).validate(instance)
    StrictMembers(None, deep, []).validate(
        orjson.loads(orjson.dumps(instance).replace(b"1.5", b"1"))
    )
