"""Validation of documents against the JSON Schemas (draft 2020-12) in `schemas/`.

Two validators read the same schemas. jsonschema-rs (compiled) answers whether a document is
valid, which is all a valid document needs: about 11 us for a run request against about 1.7 ms
in jsonschema, which was most of a `runner serve` answer. Only a document it rejects goes
through jsonschema, whose best match names the field and the rule in the messages the tests and
users read; its verdict is final, so where the two dialects differ (Python's `$` before a
trailing newline, a NaN, numpy scalars) a document is rejected only if jsonschema rejects it.
tests/protocol/test_validation.py checks on mutated documents that jsonschema-rs never passes what
jsonschema fails; the one loosening is a tuple standing for an array, which orjson writes as one.
Without jsonschema-rs installed (a platform with no wheel), every document goes through jsonschema.

The schemas live in the repository's top-level `schemas/`; a built wheel carries them as package
data of `protocol` (`protocol/schemas/`, mapped by pyproject.toml), found with importlib.resources.
A plain checkout run through PYTHONPATH (as the GPU box does) has no such folder and reads the
source tree's `schemas/` instead.

`load_result()`: a result document from bytes (decode, version check, schema validation, in that order),
and its summary of the cases (the runner writes it; the harness recomputes it when it merges
cases run apart, harness.running.model_documents).

`strict_integers()`: strict integers for jsonschema-rs: 30.0 is refused wherever a schema asks for
an integer, as the jsonschema validator refuses it (JSON Schema itself counts 30.0 as one).

jsonschema-rs takes the rule as custom keywords, each a Python call per instance it applies to.
A result document holds thousands of integers (the static counters' opcode and class maps), so
a call per integer cost more than the rest of the validation. The rule sits instead on the
schemas that apply to an instance on their own, the roots: the document's schema and every
subschema under a keyword that decides whether or where it applies (anyOf, not, if,
patternProperties, prefixItems, ...). A root's one call walks its instance along what applies
without condition below it (properties, additionalProperties where no other keyword shares the
object, items where there are no prefixItems, and `$ref` to the root's `$defs`) and looks at the
types of every integer-only member it reaches, a map's or an array's all at once. Either way a
float or a Decimal where the schema admits integers and not numbers fails the root that holds it."""

from __future__ import annotations

import datetime
import decimal
import functools
import itertools
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import orjson

from protocol.codec import decode
from protocol.errors import DocumentError, SchemaCycle
from protocol.headline import candidate_headlines
from protocol.points import as_rows
from protocol.version import RESULT_SCHEMA_VERSION, check_version

STRICT_INTEGER = "x-kernelgap-strict-integer"  # on a root schema: the instance is no float
STRICT_MEMBERS = "x-kernelgap-strict-integer-members"  # on a root: the walk (a _Walk as JSON)
NOT_SCHEMAS = frozenset({"enum", "const", "examples", "default"})  # values there are data
SCHEMA_MAPS = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
)
_NOT_INTEGERS = (float, decimal.Decimal)
_PLAIN = frozenset({int, bool, str, type(None), dict, list})  # JSON's types but numbers
_ARRAY = (list, tuple)  # a name, not `list | tuple`: that builds a union at every test
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
    namespace = {"_PLAIN": _PLAIN, "_ARRAY": _ARRAY, "_has_non_integer": _has_non_integer}
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
        (f"isinstance({var}, _ARRAY)", in_list),
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


__all__ = ["load_result", "point_counts", "summary"]


try:
    import jsonschema_rs
except ImportError:  # no wheel for this platform: every document goes through jsonschema
    jsonschema_rs = None


def schema_dir() -> Path:
    """The folder of the JSON Schemas: the installed package's data, else the source tree's."""
    packaged = resources.files("protocol") / "schemas"
    if packaged.is_dir():  # a wheel installs plain files: the Traversable is a real path
        return Path(str(packaged))
    return Path(__file__).resolve().parent.parent / "schemas"


SCHEMA_DIR = schema_dir()


# `format: date-time` is checked (JSON Schema only annotates it by default): a timestamp that
# matches the pattern but names no moment (2026-13-45T99:99:99Z) is refused where it enters,
# instead of crashing whoever parses it later. Both validators use this one definition.
_DATE_TIME = re.compile(
    r"(\d{4}-\d{2}-\d{2})[Tt](\d{2}:\d{2}:\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}:\d{2})"
)


def is_date_time(value) -> bool:
    """RFC 3339 date-time naming a real moment (no leap second: Python's datetime has none)."""
    if not isinstance(value, str):
        return True  # `format` constrains strings only
    found = _DATE_TIME.fullmatch(value)
    if found is None:
        return False
    day, clock, fraction, zone = found.groups()
    zone = "+00:00" if zone in "Zz" else zone
    try:
        datetime.datetime.fromisoformat(f"{day}T{clock}.{(fraction or '0')[:6]:0<6}{zone}")
    except ValueError:
        return False
    return True


MESSAGE_CHARS = 300


@functools.cache
def _schema(schema_name: str) -> dict:
    """The schema, read once for both validators (neither changes it)."""
    return orjson.loads((SCHEMA_DIR / f"{schema_name}.schema.json").read_bytes())


@functools.cache
def validator(schema_name: str):
    """jsonschema's Draft202012Validator for the named schema (jsonschema_validator)."""
    return jsonschema_validator(_schema(schema_name))


def jsonschema_validator(schema: dict):
    """jsonschema's Draft202012Validator for `schema`, with strict integers and date-times.
    jsonschema is imported here, not with this module: a valid document never needs it."""
    from jsonschema import Draft202012Validator, FormatChecker, validators

    # JSON Schema's "integer" admits 30.0; a sample count or a version must be a real integer.
    strict = validators.extend(
        Draft202012Validator,
        type_checker=Draft202012Validator.TYPE_CHECKER.redefine(
            "integer", lambda _, value: isinstance(value, int) and not isinstance(value, bool)
        ),
    )
    formats = FormatChecker(formats=())
    formats.checks("date-time")(is_date_time)
    Draft202012Validator.check_schema(schema)
    return strict(schema, format_checker=formats)


@functools.cache
def fast_validator(schema_name: str):
    """jsonschema-rs's validator for the named schema (rs_validator)."""
    return rs_validator(_schema(schema_name))


def rs_validator(schema: dict):
    """jsonschema-rs's validator for `schema`, with the same strict integers (strict_integers)
    and date-times."""
    return jsonschema_rs.validator_for(
        strict_integers(schema),
        keywords={STRICT_INTEGER: StrictInteger, STRICT_MEMBERS: StrictMembers},
        formats={"date-time": is_date_time},
        validate_formats=True,
    )


def is_valid(document, schema_name: str) -> bool:
    """jsonschema-rs's verdict; False where it cannot read the document (numpy scalars) or is
    not installed."""
    if jsonschema_rs is None:
        return False
    try:
        return fast_validator(schema_name).is_valid(document)
    except ValueError:
        return False


def message(error) -> str:
    """The error's message, with a long instance dump (not/oneOf rules print it whole) cut short."""
    text = error.message
    if len(text) > MESSAGE_CHARS:
        text = f"{text[: MESSAGE_CHARS // 2]} ... {text[-MESSAGE_CHARS // 2 :]}"
    return text


def _where(error) -> str:
    path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    return path.lstrip(".") or "(top level)"


def errors(document, schema_name: str) -> list[str]:
    """Every violation as 'field: what was expected', deepest first."""
    found = sorted(
        validator(schema_name).iter_errors(document), key=lambda e: -len(e.absolute_path)
    )
    return [f"{_where(e)}: {message(e)}" for e in found]


def _deepest(document) -> str:
    """The path of the most deeply nested value of `document` (one walk, no recursion)."""
    deepest, stack = (), [(document, ())]
    while stack:
        node, path = stack.pop()
        deepest = max(deepest, path, key=len)
        items = node.items() if isinstance(node, dict) else enumerate(node)
        stack.extend((v, (*path, k)) for k, v in items if isinstance(v, dict | list))
    text = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in deepest[:8])
    return f"{text.lstrip('.')}... ({len(deepest)} levels)"


def validate(document, schema_name: str, what: str = "document") -> None:
    """Raise DocumentError naming `what`, the field and the expectation of the most relevant error."""
    if is_valid(document, schema_name):
        return
    from jsonschema.exceptions import best_match

    try:
        found = list(validator(schema_name).iter_errors(document))  # walked once, not twice
    except RecursionError:  # an error's message quotes a value nested a thousand levels deep
        raise DocumentError(
            f"{what}: does not match schemas/{schema_name}.schema.json at {_deepest(document)}: "
            "a value nested too deeply to check"
        ) from None
    error = best_match(found)
    if error is not None:
        count = len(found)
        more = f" (and {count - 1} more)" if count > 1 else ""
        raise DocumentError(
            f"{what}: does not match schemas/{schema_name}.schema.json at {_where(error)}: "
            f"{message(error)}{more}"
        )


def load_result(data: bytes, what: str) -> dict:
    """The result document in `data`; ValueError naming `what` (a file, 'stdin', a host) if it is
    malformed JSON, of a major version this tool does not read, or not valid against the schema.
    A swept case's points come as rows of their own (protocol.points.as_rows)."""
    document = decode(data, what)
    if isinstance(document, dict) and "schema_version" in document:
        check_version(document["schema_version"], RESULT_SCHEMA_VERSION, what)
    validate(document, "result", what)
    return as_rows(document)


def summary(cases: list[dict]) -> dict:
    """Counts, and per candidate the headline: its geometric-mean gap over the fixed set of
    cases it is in, with an interval, the cases missing from it and the unstable ones in it
    (protocol.headline)."""
    ok = [c for c in cases if c["status"] == "ok"]
    return {
        "cases": len(cases),
        "ok": len(ok),
        "failed": sum(c["status"] == "failed" for c in cases),
        "skipped": sum(c["status"] == "skipped" for c in cases),
        "unstable": sum(
            any(i.get("gap") and not i["gap"]["stable"] for i in c["implementations"].values())
            for c in ok
        ),
        "geomean_gap": candidate_headlines(cases),
        **({"points": counts} if (counts := point_counts(cases)) else {}),
    }


def point_counts(cases: list[dict]) -> dict | None:
    """With swept cases: how many, their points and how each ended (the headline, a reference
    in `points`, with its case's status); None without."""
    swept = [c for c in cases if c.get("points")]
    if not swept:
        return None
    statuses = [
        c["status"] if p.get("headline") else p["status"] for c in swept for p in c["points"]
    ]
    return {
        "cases": len(swept),
        "points": len(statuses),
        **{s: statuses.count(s) for s in ("ok", "failed", "skipped")},
    }
