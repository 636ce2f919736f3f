"""recheck: every timed sample on fresh inputs, every output verified, outside the measurement.

A callable that returns what it computed before (a cache keyed by pointer, an output buffer it
skips writing when it already looks right) passes a check made once. With `recheck`, before
each timed sample (and calibration batch) the workload's `gen_inputs` makes new data from a new
seed, which is written into the case's input arrays in place (so captured graphs, private
arguments restored from them in `reset`, and the pointers stay the same), and the reference is
run on it; after the sample, the outputs of its last call are verified against that reference.
All of it runs outside the timed windows. At the end the case's inputs get back the data of its
own seed, so the case stays as the check saw it.
"""

from __future__ import annotations

import numpy as np

from runner.bench import arrays
from runner.bench.verification import DeclarationError

__all__ = ["Recheck", "RecheckFailed", "sample_seed"]

GOLDEN = 0x9E3779B9  # a new seed per sample: seed + k * golden ratio, mod 2^32


class RecheckFailed(AssertionError):
    """Outputs of a timed sample did not match the reference on that sample's fresh inputs."""


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


class Recheck:
    """Fresh inputs before each timed sample (`fresh()`), the sample's outputs verified after
    it (`verify()`), the case's own data back at the end (`restore()`)."""

    def __init__(self, case, verify: list[str], call, hints: dict[str, str] | None = None):
        """`verify`: the implementations whose outputs are compared (the others still see fresh
        inputs); `call(fn)` runs fn on the device; `hints[name]`: said when `name` fails."""
        self.case, self.verify_names, self.call = case, set(verify), call
        self.hints = hints or {}
        self.samples = 0
        self.verified: dict[str, int] = {}
        self.seed: int | None = None
        self.expected: tuple | None = None

    def _write(self, seed: int) -> None:
        case = self.case
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

    def fresh(self) -> None:
        """New data in the case's inputs and the reference's outputs on it."""
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

    def verify(self, name: str, outputs) -> None:
        """Raise RecheckFailed unless `outputs` (of the sample just timed) match the reference."""
        if name not in self.verify_names:
            return
        if self.expected is None:
            raise RecheckFailed(
                f"case {self.case.id}: recheck: {name!r} was timed before fresh inputs"
            )
        verification = self.case.verification
        where = f"implementation {name!r}"
        got = arrays.as_outputs(outputs, where)
        outcome = verification.check(got, self.expected)
        if not outcome.passed:
            hint = self.hints.get(name)
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
        return {
            "fresh_inputs": self.samples,
            "verified_samples": self.verified.get(name, 0),
            "verified": name in self.verify_names,
        }
