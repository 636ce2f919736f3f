"""`reset` is inspected: a reset that makes the outputs is refused before anything is timed.

A reset runs outside every timed window (it restores what a call overwrites), so work done
there is free: a reset that computes the result into the buffer the call returns, or into a
buffer the call then copies out, makes the call look fast. Once per implementation that has a
reset, after its check, the probe runs (all of it untimed, on the runner's stream):
- for a call without private arguments: reset, THEN fresh inputs from another seed written into
  case.inputs in place (so a reset that read the inputs computed on stale data), the reference
  on them; with private arguments (Implementation(args=...), which reset must refill from
  case.inputs): fresh inputs first, then reset;
- every output of the checked call that is not one of the inputs or arguments is poisoned (NaN,
  or all ones for integers), so whatever reset wrote there is gone;
- the call; its outputs must match the reference on the fresh inputs.
The case's own inputs are written back and reset run again at the end. It does not catch a
reset of a call with private arguments that computes into a hidden buffer from the refilled
inputs and a call that copies it out with copies counted (left out, the copy into an output is
refused by runner.bench.graph_capture).
"""

from __future__ import annotations

import numpy as np

from runner.bench.recheck import sample_seed, write_inputs
from runner.errors import DeclarationError, RecheckFailed, ResetRefused
from runner.measurement.gate import arrays

__all__ = ["probe_reset"]

PROBE_SAMPLE = 0xBEEF  # the probe's inputs: sample_seed(case seed, PROBE_SAMPLE), no sample's


def poison(outputs, keep) -> int:
    """Fill each output array that does not share memory with `keep` with NaN (all ones for
    integers and bools); returns how many were poisoned."""
    items = () if outputs is None else outputs if isinstance(outputs, tuple | list) else (outputs,)
    done = 0
    for x in items:
        if not arrays.is_array(x) or arrays.address_range(x) is None:
            continue  # nothing to poison
        if arrays.shares_memory(x, keep):
            continue
        if isinstance(x, np.ndarray) and not x.flags.writeable:
            continue
        floating = arrays.dtype_name(x).startswith(("float", "bfloat", "complex"))
        value = float("nan") if floating else 1
        if arrays.is_tensor(x):
            x.fill_(value)
        else:
            x.fill(value)
        done += 1
    return done


def probe_reset(case, name: str, impl, outputs, call) -> None:
    """Raise ResetRefused when `impl`'s reset makes its outputs (see the module docstring).
    `outputs` are those of its checked call; `call(fn)` runs fn on the device. A workload whose
    gen_inputs cannot make other data, or an unchecked declaration, is not probed."""
    if impl.reset is None or not case.verification.checks:
        return
    seed = sample_seed(case.seed, PROBE_SAMPLE)
    private = [x for x in (impl.args or ()) if arrays.is_array(x)]
    keep = [*case.inputs, *private]

    def prepare():
        if private:
            write_inputs(case, seed)
            impl.do_reset()
        else:
            impl.do_reset()
            write_inputs(case, seed)
        expected = case.reference(*case.inputs)
        poison(outputs, keep)
        return expected

    try:
        try:
            expected = call(prepare)
        except (RecheckFailed, DeclarationError):
            return  # no other data to probe with (recheck says so where it applies)
        got = arrays.as_outputs(call(lambda: impl.call(case.inputs)), f"implementation {name!r}")
        expected = arrays.as_outputs(expected, f"the reference of case {case.id}")
        outcome = case.verification.check(got, expected)
    finally:
        call(lambda: write_inputs(case, case.seed))
        call(impl.do_reset)
    if not outcome.passed:
        order = "fresh inputs, then its reset" if private else "its reset, then fresh inputs"
        what = "its reset makes outputs the call does not"
        if private:
            what += " (or does not refill its private arguments from case.inputs)"
        raise ResetRefused(
            f"case {case.id}: implementation {name!r}: {what}: after {order} (seed {seed}) and "
            "its earlier outputs poisoned, the call does not match the reference: "
            + "; ".join(outcome.problems)
            + ". reset runs outside the timing and may only restore what the call overwrites, "
            "from case.inputs; the op's work must be done in the call"
        )
