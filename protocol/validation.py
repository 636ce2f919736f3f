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
cases run apart, harness.running.model_documents)."""

from __future__ import annotations

import datetime
import functools
import re
from importlib import resources
from pathlib import Path

import orjson

from protocol.codec import decode
from protocol.errors import DocumentError
from protocol.headline import candidate_headlines
from protocol.points import as_rows
from protocol.strict_integers import (
    STRICT_INTEGER,
    STRICT_MEMBERS,
    StrictInteger,
    StrictMembers,
    strict_integers,
)
from protocol.version import RESULT_SCHEMA_VERSION, check_version

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
    """jsonschema-rs's validator for `schema`, with the same strict integers and date-times
    (protocol.strict_integers)."""
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
