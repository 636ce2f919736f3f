"""Strict integers for jsonschema-rs: 30.0 is refused wherever a schema asks for an integer, as
protocol.validation's jsonschema validator refuses it (JSON Schema itself counts 30.0 as one).

jsonschema-rs takes the rule as custom keywords, each a Python call per instance it applies to.
A result document holds thousands of integers (the static counters' opcode and class maps), so
a call per integer cost more than the rest of the validation. The rule sits instead on the
schemas that apply to an instance on their own, the roots: the document's schema and every
subschema under a keyword that decides whether or where it applies (anyOf, not, if,
patternProperties, prefixItems, ...). A root's one call walks its instance along what applies
without condition below it (properties, additionalProperties where no other keyword shares the
object, items where there are no prefixItems, and `$ref` to the root's `$defs`) and looks at the
types of every integer-only member it reaches, a map's or an array's all at once. Either way a
float or a Decimal where the schema admits integers and not numbers fails the root that holds it.
"""

from __future__ import annotations

import decimal
import itertools
from dataclasses import dataclass, field

from protocol.errors import SchemaCycle

__all__ = ["STRICT_INTEGER", "STRICT_MEMBERS", "StrictInteger", "StrictMembers", "strict_integers"]

STRICT_INTEGER = "x-kernelgap-strict-integer"  # on a root schema: the instance is no float
STRICT_MEMBERS = "x-kernelgap-strict-integer-members"  # on a root: the walk (a _Walk as JSON)
NOT_SCHEMAS = frozenset({"enum", "const", "examples", "default"})  # values there are data
SCHEMA_MAPS = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
)
_NOT_INTEGERS = (float, decimal.Decimal)
_PLAIN = frozenset({int, bool, str, type(None), dict, list})  # JSON's types but numbers
_LOCAL_DEF = "#/$defs/"


def _has_non_integer(values) -> bool:
    """Whether any of `values` is a float or a Decimal (or of a subclass); the finder asks only
    where a type is not a plain JSON type other than a number (_PLAIN), which it sees in C."""
    return any(issubclass(kind, _NOT_INTEGERS) for kind in set(map(type, values)))


class StrictInteger:
    """STRICT_INTEGER: a root schema's instance is no float or Decimal."""

    def __init__(self, parent_schema, value, schema_path):
        pass

    def validate(self, instance) -> None:
        if isinstance(instance, _NOT_INTEGERS):
            raise ValueError(f"{instance!r} is not an int")


class StrictMembers:
    """STRICT_MEMBERS: no float or Decimal among the integer-only members a root's walk reaches."""

    def __init__(self, parent_schema, value, schema_path):
        self._found = _finder(value)

    def validate(self, instance) -> None:
        if self._found(instance):
            raise ValueError("an integer written as a float")


def _finder(walk: dict):
    """A function of an instance: whether `walk` (a _Walk's JSON) finds a non-integer in it.
    The walk is compiled to Python source once per root (as fastjsonschema compiles schemas)
    that gathers every member it reaches into one list, whose types are then read in C: walked
    node by node, asking at each, it cost about 3.5 ms of a 30-case document's 7 ms validation."""
    functions: list[str] = []
    lines = _block(walk, "x0", functions, itertools.count(1), 0)
    done = "return not _PLAIN.issuperset(map(type, c)) and _has_non_integer(c)"
    functions.append(_function("found(x0)", ["c = []", *lines, done]))
    namespace = {"_PLAIN": _PLAIN, "_has_non_integer": _has_non_integer}
    exec(compile("\n\n".join(functions), "<strict-integer walk>", "exec"), namespace)
    return namespace["found"]


_INLINE_DEPTH = 24  # deeper members get a function of their own (Python caps indentation at 100)


def _compiled(walk: dict, functions: list[str]) -> str:
    """The name of a function (its source appended to `functions`) of an instance `x0` and a
    list `c`, to which it adds the instance's members the walk reaches."""
    lines = _block(walk, "x0", functions, itertools.count(1), 0)
    name = f"_gather{len(functions)}"
    functions.append(_function(f"{name}(x0, c)", lines or ["pass"]))
    return name


def _function(signature: str, lines: list[str]) -> str:
    return f"def {signature}:\n" + "\n".join("    " + line for line in lines)


def _block(walk: dict, var: str, functions: list[str], numbers, depth: int) -> list[str]:
    """Lines that add to `c` the members of `var` that `walk` reaches; a value of another type
    than the walk's adds nothing (other rules judge it)."""
    in_dict, in_list = [], []
    names = walk.get("names", ())
    if names:
        in_dict.append(f"c += ({''.join(f'{var}.get({name!r}), ' for name in names)})")
    if walk.get("values"):
        in_dict.append(f"c += {var}.values()")
    for member, sub in walk.get("properties", {}).items():
        if depth >= _INLINE_DEPTH:
            in_dict.append(f"{_compiled(sub, functions)}({var}.get({member!r}), c)")
            continue
        inner = f"x{next(numbers)}"
        in_dict += [f"{inner} = {var}.get({member!r})"]
        in_dict += _block(sub, inner, functions, numbers, depth + 1)
    if "each_value" in walk:
        each = _compiled(walk["each_value"], functions)
        in_dict.append(f"for y in {var}.values(): {each}(y, c)")
    if walk.get("items"):
        in_list.append(f"c += {var}")
    if "each_item" in walk:
        each = _compiled(walk["each_item"], functions)
        in_list.append(f"for y in {var}: {each}(y, c)")
    lines = []
    for test, body in (
        (f"isinstance({var}, dict)", in_dict),
        (f"isinstance({var}, list | tuple)", in_list),
    ):
        if body:
            lines.append(f"{'elif' if lines else 'if'} {test}:")
            lines += ["    " + line for line in body]
    return lines


@dataclass
class _Walk:
    """What a root checks below it: `names` its integer-only properties, `values` whether every
    value (an integer map), `items` whether every item; then the walks of its properties, its
    values and its items."""

    names: list[str] = field(default_factory=list)
    values: bool = False
    items: bool = False
    properties: dict[str, _Walk] = field(default_factory=dict)
    each_value: _Walk | None = None
    each_item: _Walk | None = None

    def merge(self, other: _Walk) -> None:
        self.names += [name for name in other.names if name not in self.names]
        self.values |= other.values
        self.items |= other.items
        for name, sub in other.properties.items():
            self.properties.setdefault(name, _Walk()).merge(sub)
        if other.each_value is not None:
            self.each_value = self.each_value or _Walk()
            self.each_value.merge(other.each_value)
        if other.each_item is not None:
            self.each_item = self.each_item or _Walk()
            self.each_item.merge(other.each_item)

    def as_json(self) -> dict:
        """The walk as the schema holds it (jsonschema-rs reads schemas as JSON); {} if empty."""
        out = {key: value for key, value in self.__dict__.items() if value and key in _FLAT}
        properties = {name: w.as_json() for name, w in self.properties.items()}
        if any(properties.values()):
            out["properties"] = {name: walk for name, walk in properties.items() if walk}
        for key in ("each_value", "each_item"):
            walk = getattr(self, key)
            if walk is not None and walk.as_json():
                out[key] = walk.as_json()
        return out


_FLAT = ("names", "values", "items")


def _def_name(ref) -> str | None:
    if isinstance(ref, str) and ref.startswith(_LOCAL_DEF) and "/" not in ref[len(_LOCAL_DEF) :]:
        return ref[len(_LOCAL_DEF) :]
    return None


def _unconditional(schema: dict) -> frozenset:
    """The keywords of `schema` whose subschemas apply below it without condition; the root's
    walk goes through them (and through its `$ref`)."""
    keys = {"properties"}
    if "properties" not in schema and "patternProperties" not in schema:
        keys.add("additionalProperties")  # then it applies to every value
    if "prefixItems" not in schema:
        keys.add("items")  # then it applies to every item
    return frozenset(keys)


class _Marker:
    """The marks of one schema document: `defs` its `$defs`, where only `#/$defs/NAME` refers
    to them; None where a reference of another form may apply any subschema anywhere: then
    every schema is a root and none walks (each integer-only one checks its own instance)."""

    def __init__(self, defs: dict | None):
        self.walks = defs is not None
        self.defs = defs or {}
        self.roots: set[str] = set()  # entries that reach themselves: roots of their own
        self._walks: dict[str, _Walk] = {}

    def integer_only(self, schema, seen: frozenset = frozenset()) -> bool:
        """Its type, or that of the entry its `$ref` names, admits integers and not numbers."""
        if not isinstance(schema, dict):
            return False
        kinds = schema.get("type")
        kinds = [kinds] if isinstance(kinds, str) else kinds
        if isinstance(kinds, list) and "integer" in kinds and "number" not in kinds:
            return True
        name = _def_name(schema.get("$ref"))
        return (
            name in self.defs
            and name not in seen
            and self.integer_only(self.defs[name], seen | {name})
        )

    def walk(self, schema, stack: frozenset = frozenset()) -> _Walk:
        """What a root at `schema` checks; SchemaCycle where an entry on `stack` is reached again."""
        found = _Walk()
        if not isinstance(schema, dict):
            return found
        through = _unconditional(schema)
        properties = schema.get("properties")
        for name, sub in properties.items() if isinstance(properties, dict) else ():
            if self.integer_only(sub):
                found.names.append(name)
            below = self.walk(sub, stack)
            if below.as_json():
                found.properties[name] = below
        for key, flag, each in (
            ("additionalProperties", "values", "each_value"),
            ("items", "items", "each_item"),
        ):
            if key in through and isinstance(schema.get(key), dict):
                setattr(found, flag, self.integer_only(schema[key]))
                below = self.walk(schema[key], stack)
                setattr(found, each, below if below.as_json() else None)
        name = _def_name(schema.get("$ref"))
        if name in self.defs and name not in self.roots:
            found.merge(self._entry_walk(name, stack))
        return found

    def _entry_walk(self, name: str, stack: frozenset) -> _Walk:
        if name in stack:
            raise SchemaCycle(name)
        if name not in self._walks:
            self._walks[name] = self.walk(self.defs[name], stack | {name})
        return self._walks[name]

    def marked(self, schema, root: bool, top: bool = False):
        """A copy of `schema` with a root's marks on every root in it."""
        if isinstance(schema, list):
            return [self.marked(item, True) for item in schema]
        if not isinstance(schema, dict):
            return schema
        through = _unconditional(schema)
        copy = {}
        for key, value in schema.items():
            if key in NOT_SCHEMAS:
                copy[key] = value
            elif key in SCHEMA_MAPS and isinstance(value, dict):  # names to schemas
                copy[key] = {
                    name: self.marked(sub, self._root_in(key, name, top))
                    for name, sub in value.items()
                }
            else:
                copy[key] = self.marked(value, key not in through)
        if root or not self.walks:
            if self.integer_only(schema):
                copy[STRICT_INTEGER] = True
            walk = self.walk(schema).as_json() if self.walks else None
            if walk:
                copy[STRICT_MEMBERS] = walk
        return copy

    def _root_in(self, key: str, name: str, top: bool) -> bool:
        """Whether the schema at `key`/`name` of a schema map is a root."""
        if key == "properties":
            return False
        if key == "$defs" and top and self.defs:
            return name in self.roots
        return True


def strict_integers(schema):
    """A copy of `schema` with STRICT_INTEGER on every integer-only root and STRICT_MEMBERS
    (its walk) on every root whose walk finds integer-only members. A schema with a reference
    other than `#/$defs/NAME` gets STRICT_INTEGER on every integer-only schema instead."""
    if not isinstance(schema, dict):
        return _Marker(None).marked(schema, True)
    defs = schema.get("$defs") if isinstance(schema.get("$defs"), dict) else {}
    marker = _Marker(defs if _local_refs_only(schema, defs) else None)
    while True:
        try:
            for name in marker.defs:
                marker.walk({"$ref": _LOCAL_DEF + name})  # every entry's walk, cycles found
            return marker.marked(schema, True, top=True)
        except SchemaCycle as cycle:
            marker.roots.add(cycle.name)
            marker._walks.clear()


def _local_refs_only(schema, defs: dict) -> bool:
    """Whether every reference in `schema` is a `#/$defs/NAME` of an entry it has."""
    if isinstance(schema, list):
        return all(_local_refs_only(item, defs) for item in schema)
    if not isinstance(schema, dict):
        return True
    for key, value in schema.items():
        if key in ("$dynamicRef", "$recursiveRef") or (
            key == "$ref" and _def_name(value) not in defs
        ):
            return False
        if key not in NOT_SCHEMAS and not _local_refs_only(value, defs):
            return False
    return True
