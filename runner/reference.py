"""A case's numpy reference: loaded from the suite's own files and called with what it names."""

from __future__ import annotations

import importlib.util
import inspect

from runner.spec import CaseSpec, Geometry, ManifestError, Suite, inside_suite

__all__ = ["call_reference", "load_reference"]


def load_reference(suite: Suite, case: CaseSpec):
    """The case's numpy reference function, called with the keyword arguments it names."""
    file_part, func = case.reference.split(":", 1)
    file = inside_suite(suite.root, file_part, f"{case.where}: reference")
    spec = importlib.util.spec_from_file_location(f"kernelgap_reference_{file.stem}", file)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise ManifestError(
            f"{case.where}: reference: importing {file_part} failed: {exc!r}"
        ) from None
    fn = getattr(module, func, None)
    if not callable(fn):
        raise ManifestError(f"{case.where}: reference: {file_part} has no function {func!r}")
    return fn


def call_reference(fn, case: CaseSpec, geometry: Geometry, inputs: dict) -> dict:
    """Call `fn` with the dims, scalar params and input arrays it names; returns {buffer: array}."""
    available = {**geometry.dims, **geometry.scalars, **inputs}
    sig = inspect.signature(fn)
    takes_all = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values())
    kwargs = available if takes_all else {k: v for k, v in available.items() if k in sig.parameters}
    missing = [
        k
        for k, p in sig.parameters.items()
        if k not in kwargs
        and p.default is inspect.Parameter.empty
        and p.kind is not inspect.Parameter.VAR_KEYWORD
    ]
    if missing:
        raise ManifestError(
            f"{case.where}: reference {case.reference}: parameters {missing} are neither dims, params nor buffers"
        )
    result = fn(**kwargs)
    if not isinstance(result, dict):
        raise ManifestError(
            f"{case.where}: reference {case.reference}: must return a dict of output arrays"
        )
    return result
