"""Validation of documents against the JSON Schemas (draft 2020-12) in `schemas/`."""

from __future__ import annotations

import functools
from pathlib import Path

import orjson
from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

SCHEMA_DIR = Path(__file__).resolve().parent.parent / "schemas"


class DocumentError(ValueError):
    """A document does not match its schema. The message names the document, field and rule."""


@functools.cache
def validator(schema_name: str) -> Draft202012Validator:
    path = SCHEMA_DIR / f"{schema_name}.schema.json"
    schema = orjson.loads(path.read_bytes())
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def _where(error) -> str:
    path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    return path.lstrip(".") or "(top level)"


def errors(document, schema_name: str) -> list[str]:
    """Every violation as 'field: what was expected', deepest first."""
    found = sorted(
        validator(schema_name).iter_errors(document), key=lambda e: -len(e.absolute_path)
    )
    return [f"{_where(e)}: {e.message}" for e in found]


def validate(document, schema_name: str, what: str = "document") -> None:
    """Raise DocumentError naming `what`, the field and the expectation of the most relevant error."""
    error = best_match(validator(schema_name).iter_errors(document))
    if error is not None:
        count = sum(1 for _ in validator(schema_name).iter_errors(document))
        more = f" (and {count - 1} more)" if count > 1 else ""
        raise DocumentError(
            f"{what}: does not match schemas/{schema_name}.schema.json at {_where(error)}: "
            f"{error.message}{more}"
        )
