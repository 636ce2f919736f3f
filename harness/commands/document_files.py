"""The files the history commands read and the bytes they write: a result document (or stdin),
a bundle manifest, each within the size limit and validated, BadInput naming the file if not;
an --out folder checked before any work.
A module of its own so that `harness ingest` imports no comparison to get them.

The history database as the store's commands take it: the --db option, and the store opened
with every StoreError turned into bad input (exit 2). Its own module so that `harness ingest`
imports no analysis to get it."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import click

from harness.errors import BadInput, StoreError
from harness.history.store import Store
from protocol import validation
from protocol.codec import decode
from protocol.errors import InputFileError
from protocol.input_files import MAX_DOCUMENT_BYTES, output_problem, read_bounded
from protocol.validation import validate

__all__ = [
    "DB_OPTION",
    "DEFAULT_DB",
    "RESULT",
    "format_option",
    "load_bundle",
    "load_result",
    "opened",
    "out_folder",
    "write_stdout",
]


DEFAULT_DB = "history.sqlite"


DB_OPTION = click.option(
    "--db",
    type=click.Path(dir_okay=False, path_type=Path),
    default=DEFAULT_DB,
    show_default=True,
    help="The history database (one SQLite file).",
)


@contextlib.contextmanager
def opened(db: Path, readonly: bool = True):
    """The store at `db`; any StoreError (missing, corrupt, foreign, newer) becomes exit 2."""
    try:
        with Store(db, readonly=readonly) as store:
            yield store
    except StoreError as exc:
        raise BadInput(str(exc)) from None


RESULT = click.Path(dir_okay=False, allow_dash=True, path_type=Path)


def format_option(*choices: str, help: str):
    """A command's --format (its `output_format` argument): one of `choices`, the first by
    default."""
    return click.option(
        "--format",
        "output_format",
        type=click.Choice(list(choices)),
        default=choices[0],
        show_default=True,
        help=help,
    )


def out_folder(ctx, param, value: Path | None) -> Path | None:
    """click callback of an --out folder: BadInput (one line, exit 2) when it cannot be made."""
    problem = None if value is None else output_problem(value, folder=True)
    if problem is not None:
        raise BadInput(f"{param.opts[-1]} {problem}")
    return value


def load_result(path: Path) -> dict:
    """Read, version-check and validate a result document ('-' reads stdin); BadInput if not."""
    what = "stdin" if str(path) == "-" else str(path)
    try:
        data = (
            sys.stdin.buffer.read()
            if what == "stdin"
            else read_bounded(path, MAX_DOCUMENT_BYTES, "result document")
        )
    except OSError as exc:
        raise BadInput(f"{what}: cannot read the result document: {exc.strerror}") from None
    except InputFileError as exc:  # a FIFO, a device, past the size limit
        raise BadInput(str(exc)) from None
    try:
        return validation.load_result(data, what)
    except ValueError as exc:  # malformed JSON, DocumentError, VersionError
        raise BadInput(str(exc)) from None


def load_bundle(path: Path) -> dict:
    """A bundle's manifest (runner build; its folder or its bundle.json), read within the size
    limit and validated; BadInput naming the file if not."""
    file = path / "bundle.json" if path.is_dir() else path
    try:
        doc = decode(read_bounded(file, MAX_DOCUMENT_BYTES, "bundle manifest"), str(file))
        validate(doc, "bundle", str(file))
    except OSError as exc:
        raise BadInput(f"{file}: cannot read the bundle manifest: {exc.strerror}") from None
    except (ValueError, InputFileError) as exc:  # malformed JSON, DocumentError, a FIFO, too big
        raise BadInput(str(exc)) from None
    return doc


def write_stdout(data: bytes) -> None:
    sys.stdout.flush()
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()
