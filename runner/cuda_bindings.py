"""Importing cuda-python's bindings (cuda.bindings.driver, .nvrtc), with a message that says what
to do when they are missing: install cuda-python, or upgrade one too old to have them."""

from __future__ import annotations

from importlib import metadata

__all__ = ["missing"]

FLOOR = "12.6.2.post1"  # the first cuda-python with cuda.bindings (12.6.0 has none)


def missing(module: str, exc: ImportError) -> str:
    """Why `cuda.bindings.<module>` cannot be imported, and what to do about it."""
    try:
        installed = metadata.version("cuda-python")
    except metadata.PackageNotFoundError:
        return (
            f"cuda-python (cuda.bindings.{module}) is not installed: {exc}; install it with "
            f"`pip install 'cuda-python>={FLOOR}'`"
        )
    return (
        f"cuda-python {installed} is installed but cuda.bindings.{module} is not importable "
        f"({exc}); cuda.bindings came with {FLOOR}: upgrade with "
        f"`pip install -U 'cuda-python>={FLOOR}'`"
    )
