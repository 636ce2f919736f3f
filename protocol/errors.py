"""The errors of the wire contract, and the hierarchy both sides' errors modules follow.

Every class a command can end on is one of: bad input (exit 2: a file, field or case named
with what was expected), no GPU (exit 2), a case failed in a phase (a record in the document:
runner.errors.PhaseError), a tool missing, a document, the store, a transport. runner.errors
and harness.errors hold each side's; the CLIs map bad input to exit 2 in one place each
(runner.cli.Commands, harness.cli)."""

from __future__ import annotations

__all__ = ["DocumentError", "InputFileError", "SchemaCycle", "VersionError"]


# bad input


class InputFileError(ValueError):
    """The file cannot be read, is not a regular file, or is over its size limit; the message
    names the file."""


class VersionError(ValueError):
    """A document or protocol version this code does not understand."""


# documents


class DocumentError(ValueError):
    """A document does not match its schema. The message names the document, field and rule."""


class SchemaCycle(Exception):
    """A `$defs` entry reaches itself through unconditional keywords: it becomes a root."""

    def __init__(self, name: str):
        self.name = name
