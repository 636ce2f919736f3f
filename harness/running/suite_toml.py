"""A suite manifest's TOML as the host reads it: its bytes and its tables, or an error naming
the file.

The harness never imports the runner (its manifest loader needs the suite's references and
toolchains); it reads only what it needs: the files a suite names (harness.running.shipping) and its
`[suite]` table (harness.running.trust). Malformed input is refused here as the runner refuses it,
nesting too deep for the parser included (a RecursionError, not a traceback).
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from harness.errors import SuiteTomlError
from protocol.input_files import MAX_MANIFEST_BYTES, InputFileError, read_bounded

__all__ = ["SuiteTomlError", "read"]


def read(path: Path) -> tuple[bytes, dict]:
    """The manifest's bytes (what its sha256 is taken of) and its parsed TOML."""
    try:
        raw = read_bounded(path, MAX_MANIFEST_BYTES, "suite manifest")
    except InputFileError as exc:
        raise SuiteTomlError(str(exc)) from None
    try:
        return raw, tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise SuiteTomlError(f"{path}: malformed TOML: {exc}") from None
    except RecursionError:
        raise SuiteTomlError(
            f"{path}: malformed TOML: arrays or tables nested too deeply to parse"
        ) from None
