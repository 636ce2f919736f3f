"""An implementation to compare: what to call, with which arguments, and how to undo its writes."""

from __future__ import annotations

import functools
import hashlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from runner.errors import DeclarationError
from runner.measurement.aa_control import control_name
from runner.measurement.environment import package_version

__all__ = ["Implementation", "callable_identity", "normalize"]


@dataclass(frozen=True)
class Implementation:
    """`run(*args)` is one call of the implementation.

    - `args=None` calls `run(*case.inputs)`; `args=()` calls `run()`; a tuple calls `run(*args)`.
      An implementation that writes one of its arguments must take a private copy here and
      restore it in `reset`: one that writes the shared `case.inputs` is refused before timing.
    - `reset()` runs before each checked call and before each timed sample's L2 flush, outside
      every measurement.
    - `noncomparable_reason`: the implementation computes something else; it is timed without a
      check and without a ratio.
    """

    run: Callable
    args: tuple | None = None
    reset: Callable | None = None
    noncomparable_reason: str | None = None

    def __post_init__(self):
        if not callable(self.run):
            raise DeclarationError(
                f"Implementation.run must be callable (got {type(self.run).__name__})"
            )
        if self.args is not None and not isinstance(self.args, tuple):
            raise DeclarationError(
                f"Implementation.args must be None (use case.inputs) or a tuple (got {type(self.args).__name__})"
            )
        if self.reset is not None and not callable(self.reset):
            raise DeclarationError(
                f"Implementation.reset must be callable or None (got {type(self.reset).__name__})"
            )
        reason = self.noncomparable_reason
        if reason is not None and (not isinstance(reason, str) or not reason.strip()):
            raise DeclarationError(
                "Implementation.noncomparable_reason must be a non-empty string saying why the "
                "results differ (or None)"
            )

    def call_args(self, inputs: tuple) -> tuple:
        return tuple(inputs) if self.args is None else self.args

    def call(self, inputs: tuple):
        return self.run(*self.call_args(inputs))

    def do_reset(self) -> None:
        if self.reset is not None:
            self.reset()


def callable_name(fn) -> str:
    inner = getattr(fn, "func", fn)  # functools.partial
    module = getattr(inner, "__module__", None) or type(inner).__module__
    qual = getattr(inner, "__qualname__", None) or type(inner).__qualname__
    return f"{module}.{qual}" if module and module != "builtins" else qual


def callable_identity(fn) -> tuple[str, str]:
    """(qualified name, sha256) for the history key. The hash covers the whole file that
    defines the callable (so an edit to a kernel it calls, such as a Triton kernel beside it,
    starts a new series) plus its qualified name; a callable without a Python file (a builtin
    such as torch.matmul) hashes its qualified name and its package's version."""
    name = callable_name(fn)
    inner = getattr(fn, "func", fn)
    inner = getattr(inner, "__func__", inner)  # a bound method: its function
    try:
        path = inspect.getsourcefile(inner)
        defined_in = _file_sha256(path) if path else None
    except (TypeError, OSError):
        defined_in = None
    if defined_in is None:
        top = name.split(".", 1)[0]
        defined_in = f"{top} {package_version(top) or 'unknown'}"
    return name, hashlib.sha256(f"{name}\n{defined_in}".encode()).hexdigest()


@functools.lru_cache(maxsize=256)  # every comparison of a session names the same few files
def _file_sha256(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def normalize(op_name: str, implementations) -> dict[str, Implementation]:
    """The implementations mapping as {name: Implementation}; a single one becomes 'baseline'."""
    if implementations is None:
        return {}
    if isinstance(implementations, Implementation) or callable(implementations):
        implementations = {"baseline": implementations}
    if not isinstance(implementations, Mapping):
        raise DeclarationError(
            "compare() takes a mapping of report names to implementations, or a single one "
            f"(got {type(implementations).__name__})"
        )
    out = {}
    for name, impl in implementations.items():
        if not isinstance(name, str) or not name.strip():
            raise DeclarationError(f"implementation names must be non-empty strings (got {name!r})")
        if name == op_name:
            raise DeclarationError(
                f"implementation name {name!r} is reserved for the op under test; report it under another name"
            )
        if name == control_name(op_name):
            raise DeclarationError(
                f"implementation name {name!r} is reserved for the op's hidden A/A control; "
                "report it under another name"
            )
        if not isinstance(impl, Implementation):
            if not callable(impl):
                raise DeclarationError(
                    f"implementation {name!r} must be callable or a bench.Implementation (got {type(impl).__name__})"
                )
            impl = Implementation(run=impl)
        out[name] = impl
    return out
