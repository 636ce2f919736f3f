"""Validation of documents against the JSON Schemas (draft 2020-12) in `schemas/`.

The schemas live in the repository's top-level `schemas/`; a built wheel carries them as package
data of `protocol` (`protocol/schemas/`, mapped by pyproject.toml), found with importlib.resources.
A plain checkout run through PYTHONPATH (as the GPU box does) has no such folder and reads the
source tree's `schemas/` instead.
"""

from __future__ import annotations

import functools
from importlib import resources
from pathlib import Path

import orjson
from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import best_match


def schema_dir() -> Path:
    """The folder of the JSON Schemas: the installed package's data, else the source tree's."""
    packaged = resources.files("protocol") / "schemas"
    if packaged.is_dir():  # a wheel installs plain files: the Traversable is a real path
        return Path(str(packaged))
    return Path(__file__).resolve().parent.parent / "schemas"


SCHEMA_DIR = schema_dir()


# JSON Schema's "integer" admits 30.0; a sample count or a version must be a real integer.
StrictValidator = validators.extend(
    Draft202012Validator,
    type_checker=Draft202012Validator.TYPE_CHECKER.redefine(
        "integer", lambda _, value: isinstance(value, int) and not isinstance(value, bool)
    ),
)
MESSAGE_CHARS = 300


class DocumentError(ValueError):
    """A document does not match its schema. The message names the document, field and rule."""


@functools.cache
def validator(schema_name: str) -> Draft202012Validator:
    path = SCHEMA_DIR / f"{schema_name}.schema.json"
    schema = orjson.loads(path.read_bytes())
    Draft202012Validator.check_schema(schema)
    return StrictValidator(schema)


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


def validate(document, schema_name: str, what: str = "document") -> None:
    """Raise DocumentError naming `what`, the field and the expectation of the most relevant error."""
    error = best_match(validator(schema_name).iter_errors(document))
    if error is not None:
        count = sum(1 for _ in validator(schema_name).iter_errors(document))
        more = f" (and {count - 1} more)" if count > 1 else ""
        raise DocumentError(
            f"{what}: does not match schemas/{schema_name}.schema.json at {_where(error)}: "
            f"{message(error)}{more}"
        )
