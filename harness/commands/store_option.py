"""The history database as the store's commands take it: the --db option, and the store opened
with every StoreError turned into bad input (exit 2). Its own module so that `harness ingest`
imports no analysis to get it."""

from __future__ import annotations

import contextlib
from pathlib import Path

import click

from harness.errors import BadInput
from harness.history.store import Store, StoreError

__all__ = ["DB_OPTION", "DEFAULT_DB", "opened"]

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
