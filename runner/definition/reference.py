"""A case's numpy reference: loaded from the suite's own files and called with what it names.

A reference is the suite's code, run by `runner check` and `runner bench`: importing it and
calling it are bounded by the case's timeout_s (where this runs on the main thread) and whatever
it raises becomes a ManifestError naming the case and the function, never a traceback.
"""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
import signal
import threading
import time

from runner.definition.spec import CaseSpec, Geometry, Suite, inside_suite
from runner.errors import ManifestError, ReferenceTimeout

__all__ = ["call_reference", "load_reference", "time_limit"]


@contextlib.contextmanager
def time_limit(seconds: float, what: str):
    """Inside: ReferenceTimeout(`what` ...) once `seconds` have passed (SIGALRM, so only on the
    main thread; elsewhere, such as a thread of `runner serve`, unbounded). Python code and
    sleeps are interrupted; a single long numpy call ends first."""
    if threading.current_thread() is not threading.main_thread() or seconds <= 0:
        yield
        return

    def expire(signum, frame):
        raise ReferenceTimeout(f"{what} did not return within {seconds:g} s (the case's timeout_s)")

    previous = signal.signal(signal.SIGALRM, expire)
    outer_s, _ = signal.setitimer(signal.ITIMER_REAL, seconds)
    started = time.monotonic()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer_s > 0:  # an enclosing timer (a test runner's, say) keeps its deadline
            left_s = outer_s - (time.monotonic() - started)
            signal.setitimer(signal.ITIMER_REAL, max(left_s, 1e-3))


def load_reference(suite: Suite, case: CaseSpec):
    """The case's numpy reference function, called with the keyword arguments it names."""
    file_part, func = case.reference.split(":", 1)
    file = inside_suite(suite.root, file_part, f"{case.where}: reference")
    spec = importlib.util.spec_from_file_location(f"kernelgap_reference_{file.stem}", file)
    module = importlib.util.module_from_spec(spec)
    try:
        with time_limit(case.settings.timeout_s, f"{case.where}: reference: importing {file_part}"):
            spec.loader.exec_module(module)
    except ReferenceTimeout:
        raise
    except (Exception, SystemExit) as exc:
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
    what = f"{case.where}: reference {case.reference}"
    try:
        with time_limit(case.settings.timeout_s, what):
            result = fn(**kwargs)
    except ReferenceTimeout:
        raise
    except (Exception, SystemExit) as exc:
        raise ManifestError(f"{what}: raised {type(exc).__name__}: {exc}") from None
    if not isinstance(result, dict):
        raise ManifestError(
            f"{case.where}: reference {case.reference}: must return a dict of output arrays"
        )
    return result
