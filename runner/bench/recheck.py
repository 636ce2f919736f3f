"""recheck: every timed sample on fresh inputs, every output verified, outside the measurement.

A callable that returns what it computed before (a cache keyed by pointer, an output buffer it
skips writing when it already looks right) passes a check made once. With `recheck`, before
each timed sample (and calibration batch) the workload's `gen_inputs` makes new data from a new
seed, which is written into the case's input arrays in place (so captured graphs, private
arguments restored from them in `reset`, and the pointers stay the same), and the reference is
run on it; after the sample, the outputs of its last call are verified against that reference.
All of it runs outside the timed windows. At the end the case's inputs get back the data of its
own seed, so the case stays as the check saw it. In hot mode the outputs verified are those the
graph replay itself wrote, so a call that behaves differently while it is captured is caught.

recheck "auto" (the default) is on where it is cheap: the first fresh inputs and the first
verification are timed, and when they (gen_inputs, the reference, one comparison) cost at most
CHEAP_SHARE of a sample's share of the budget (budget_s / (min_samples x implementations)),
every sample is rechecked; otherwise only spot samples: fresh inputs before the 1st, 2nd, 4th, 8th, ... reset, and the sample after each
verified. A workload whose gen_inputs cannot make other data (or whose reference fails on it)
turns auto off, with the reason; so does a row whose outputs cannot follow fresh inputs by
design (private arguments not refilled from case.inputs, copies disabled in its graph): that
row is not verified and says why. recheck=True checks every sample and raises instead.
"""

from __future__ import annotations

import time

import numpy as np

from runner.errors import DeclarationError, RecheckFailed
from runner.measurement.gate import arrays

__all__ = ["Recheck", "sample_seed", "write_inputs"]

GOLDEN = 0x9E3779B9  # a new seed per sample: seed + k * golden ratio, mod 2^32
CHEAP_SHARE = 0.25  # auto: every sample is rechecked when fresh inputs cost at most this share


def sample_seed(seed: int, k: int) -> int:
    return (seed + k * GOLDEN) & 0xFFFFFFFF


def _assign(destination, source, what: str) -> None:
    """Write `source` into `destination` in place (same shape and dtype), or raise naming both."""
    if not arrays.is_array(destination):
        if not (source is destination or source == destination):
            raise DeclarationError(
                f"recheck: {what} is {destination!r} for the case's seed but {source!r} for "
                "another; gen_inputs may change only the data of arrays from seed to seed"
            )
        return
    same = arrays.is_array(source) and tuple(source.shape) == tuple(destination.shape)
    if not same or arrays.dtype_name(source) != arrays.dtype_name(destination):
        shape = getattr(source, "shape", None)
        raise DeclarationError(
            f"recheck: gen_inputs made {what} as {type(source).__name__} {shape} "
            f"{arrays.dtype_name(source) if arrays.is_array(source) else ''} for another seed, "
            f"where the case's is {tuple(destination.shape)} {arrays.dtype_name(destination)}; "
            "recheck writes fresh data into the same arrays, so only the data may change"
        )
    if arrays.is_tensor(destination):
        destination.copy_(source)
    else:
        np.copyto(destination, source)


def write_inputs(case, seed: int) -> None:
    """gen_inputs of `seed` written into `case.inputs` in place (same shapes and dtypes)."""
    try:
        made = case.workload.gen_inputs(dict(case.row.params), case.dtype, seed)
    except Exception as exc:
        raise RecheckFailed(
            f"case {case.id}: recheck: gen_inputs raised {type(exc).__name__} for seed {seed}: {exc}"
        ) from exc
    made = tuple(made) if isinstance(made, tuple | list) else (made,)
    if len(made) != len(case.inputs):
        raise DeclarationError(
            f"recheck: gen_inputs made {len(made)} inputs for seed {seed}, "
            f"{len(case.inputs)} for the case's seed"
        )
    for i, (destination, source) in enumerate(zip(case.inputs, made, strict=True)):
        _assign(destination, source, f"input {i}")


class Recheck:
    """Fresh inputs before each timed sample (`fresh()`), the sample's outputs verified after
    it (`verify()`), the case's own data back at the end (`restore()`)."""

    def __init__(
        self,
        case,
        verify: list[str],
        call,
        hints: dict[str, str] | None = None,
        auto_budget_s: float | None = None,
    ):
        """`verify`: the implementations whose outputs are compared (the others still see fresh
        inputs); `call(fn)` runs fn on the device; `hints[name]`: said when `name` fails;
        `auto_budget_s`: recheck "auto" with this budget per sample (None: every sample, and a
        failure raises)."""
        self.case, self.verify_names, self.call = case, set(verify), call
        self.hints = hints or {}
        self.auto_budget_s = auto_budget_s
        self.samples = 0  # fresh inputs made
        self.resets = 0  # fresh() calls
        self.mode = "every"  # or "spot", or "off" (auto only)
        self.reason: str | None = None  # why auto chose spot or off
        self.fresh_s: float | None = None  # what the first fresh inputs cost
        self.verify_s: float | None = None  # and the first verification (auto decides on both)
        self.pending: set[str] = set()  # rows whose next sample follows fresh inputs
        self.skipped: dict[str, str] = {}  # auto: rows not verified, and why
        self.verified: dict[str, int] = {}
        self.seed: int | None = None
        self.expected: tuple | None = None

    def _write(self, seed: int) -> None:
        write_inputs(self.case, seed)

    def fresh(self) -> None:
        """Before a sample: new data in the case's inputs and the reference's outputs on it
        (spot mode: only before the 1st, 2nd, 4th, ... reset)."""
        self.resets += 1
        if self.mode == "off" or (self.mode == "spot" and self.resets & (self.resets - 1)):
            return
        if self.auto_budget_s is None or self.fresh_s is not None:
            self._fresh()
            return
        t0 = time.perf_counter()
        try:
            self._fresh()
        except (RecheckFailed, DeclarationError) as exc:
            self.mode, self.reason = "off", f"recheck auto turned off: {exc}"
            self.pending.clear()
            return
        self.fresh_s = time.perf_counter() - t0

    def _decide(self, verify_s: float) -> None:
        """auto, after the first verification: every sample, or spot samples when fresh inputs
        and one verification cost more than CHEAP_SHARE of a sample's share of the budget."""
        self.verify_s = verify_s
        cost_s = (self.fresh_s or 0.0) + verify_s
        if cost_s > CHEAP_SHARE * self.auto_budget_s:
            self.mode = "spot"
            self.reason = (
                f"fresh inputs and a verification cost {cost_s * 1e3:.2f} ms, above "
                f"{CHEAP_SHARE:.0%} of a sample's share of the budget "
                f"({self.auto_budget_s * 1e3:.2f} ms): spot samples"
            )

    def _fresh(self) -> None:
        self.samples += 1
        self.seed = sample_seed(self.case.seed, self.samples)

        def make():
            self._write(self.seed)
            return self.case.reference(*self.case.inputs)

        try:
            expected = self.call(make)
        except (RecheckFailed, DeclarationError):
            raise
        except Exception as exc:
            raise RecheckFailed(
                f"case {self.case.id}: recheck: the reference raised {type(exc).__name__} on the "
                f"inputs of seed {self.seed}: {exc}"
            ) from exc
        self.expected = arrays.as_outputs(expected, f"the reference of case {self.case.id}")
        self.pending = set(self.verify_names)

    def verify(self, name: str, outputs) -> None:
        """Raise RecheckFailed unless `outputs` (of the sample just timed) match the reference."""
        if name not in self.verify_names or self.mode == "off":
            return
        if self.mode == "spot" and name not in self.pending:
            return
        self.pending.discard(name)
        if self.expected is None:
            raise RecheckFailed(
                f"case {self.case.id}: recheck: {name!r} was timed before fresh inputs"
            )
        verification = self.case.verification
        where = f"implementation {name!r}"
        t0 = time.perf_counter()
        got = arrays.as_outputs(outputs, where)
        outcome = verification.check(got, self.expected)
        if self.auto_budget_s is not None and self.verify_s is None:
            self._decide(time.perf_counter() - t0)
        if not outcome.passed:
            hint = self.hints.get(name)
            if hint and self.auto_budget_s is not None:  # its outputs cannot follow by design
                self.verify_names.discard(name)
                self.skipped[name] = f"not verified by recheck auto: {hint}"
                return
            raise RecheckFailed(
                f"case {self.case.id}: recheck: {where} after a timed sample on fresh inputs "
                f"(seed {self.seed}, sample {self.samples}) does not match the reference "
                f"({verification.describe(arrays.dtype_names(self.expected))}): "
                + "; ".join(outcome.problems)
                + ". The outputs of a timed call must be computed from its inputs"
                + (f"; {hint}" if hint else "")
            )
        self.verified[name] = self.verified.get(name, 0) + 1

    def restore(self) -> None:
        """The case's inputs hold the data of its own seed again (what the check saw)."""
        if self.samples:
            self.call(lambda: self._write(self.case.seed))

    def summary(self, name: str) -> dict:
        block = {
            "fresh_inputs": self.samples,
            "verified_samples": self.verified.get(name, 0),
            "verified": name in self.verify_names and self.mode != "off",
            "mode": "auto" if self.auto_budget_s is not None else "on",
            "schedule": self.mode,
        }
        reason = self.skipped.get(name) or self.reason
        if reason:
            block["reason"] = reason
        return block
