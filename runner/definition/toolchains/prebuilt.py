"""ptx: a prebuilt PTX file (from any compiler), loaded as it comes."""

from __future__ import annotations

from pathlib import Path


def version(template: str | None = None) -> str:
    return "prebuilt"


def build(
    source: Path, arch: str, flags: list[str], template: str | None = None
) -> tuple[str, list[str]]:
    from runner.errors import BuildError

    data = source.read_bytes().rstrip(b"\0")  # a trailing NUL or none: both load
    try:
        return data.decode("utf-8"), []
    except UnicodeDecodeError as exc:
        raise BuildError(f"{source}: not UTF-8 PTX text ({exc})") from None
