"""Workloads and their cases: what is computed, on which data, checked how.

A workload declares rows (a label and the problem's parameters) and dtype cases, generates the
inputs of one case (seeded per workload, case and process run: every implementation sees the
same data, and KERNELGAP_INPUT_SEED replays a run's), names its reference and its verification, and gives FLOPs and bytes for the
roofline. `cases(workload)` expands rows x dtypes into `Case` objects whose data is created on
first access and released after use, so collecting tests needs no GPU.
"""

from __future__ import annotations

import os
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

from runner.bench.verification import Exact, Verification
from runner.errors import DeclarationError

__all__ = ["Case", "ReferenceUnavailable", "Row", "Workload", "cases", "params"]

_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")
TIERS = ("smoke", "full")


@dataclass(frozen=True)
class Row:
    """One problem size: `Row("square-1k", b=8, m=1024, n=1024, k=1024, tier="smoke")`."""

    label: str
    params: dict = field(default_factory=dict)
    tier: str = "full"

    def __init__(self, label: str, *, tier: str = "full", **params):
        if not isinstance(label, str) or not _LABEL.match(label):
            raise DeclarationError(
                f"Row label {label!r} must be letters, digits and _ . + - (it is part of case ids)"
            )
        if tier not in TIERS:
            raise DeclarationError(f"Row {label!r}: tier must be one of {TIERS} (got {tier!r})")
        reserved = sorted({"row", "dtype"} & set(params))
        if reserved:
            raise DeclarationError(
                f"Row {label!r}: parameter name(s) {reserved} are reserved (the case's params carry "
                "the row label as 'row' and the dtype case as 'dtype'); rename them"
            )
        object.__setattr__(self, "label", label)
        object.__setattr__(self, "params", dict(params))
        object.__setattr__(self, "tier", tier)


class Workload:
    """Subclass and set `name`, `rows`, `dtypes`; define `gen_inputs` and `reference`.

    - `gen_inputs(self, params, dtype, seed) -> tuple` creates the inputs of one case; `seed` is
      derived from the workload's `seed` and the case id, so reruns see the same data.
    - `reference(self, *inputs)` returns the expected outputs (an array or a tuple).
    - `verification(self, params, dtype) -> Verification` (default `Exact()`), or a class
      attribute holding one declaration for every case.
    - `arguments(self, params, dtype) -> dict`: keyword arguments to construct the op.
    - `flops(self, params, dtype)` and `bytes(self, params, dtype)`: per call, for the roofline;
      None when they do not apply.
    - `version` (int): bump it when the meaning of a case changes; it keys the history series.
    - `sweep = True`: the rows are the points of one case per op and dtype
      (`<workload>/<dtype>/<op>`, point ids `row=<label>`), as a suite's swept case is written;
      `headline` names the row whose numbers are the case's own (default: the last row).
      Off by default: each row is a case of its own (`<workload>/<row>-<dtype>/<op>`).
    """

    name: str = ""
    version: int = 1
    rows: tuple[Row, ...] | list[Row] = ()
    dtypes: tuple[str, ...] | list[str] = ("float32",)
    seed: int = 0
    verification: Verification | Callable = Exact()
    sweep: bool = False
    headline: str | None = None

    def gen_inputs(self, params: dict, dtype: str, seed: int) -> tuple:
        raise NotImplementedError(f"{type(self).__name__} must define gen_inputs()")

    def reference(self, *inputs):
        raise NotImplementedError(f"{type(self).__name__} must define reference()")

    def arguments(self, params: dict, dtype: str) -> dict:
        return {}

    def flops(self, params: dict, dtype: str) -> float | None:
        return None

    def bytes(self, params: dict, dtype: str) -> float | None:
        return None

    def check(self, op, *inputs, verification: Verification | None = None):
        """`bench.check` against this workload's reference."""
        from runner.bench.verification import check

        return check(op, *inputs, reference=self.reference, verification=verification)

    def verification_for(self, params: dict, dtype: str) -> Verification:
        declared = self.verification
        if callable(declared) and not isinstance(declared, Verification):
            declared = declared(params, dtype)
        if not isinstance(declared, Verification):
            raise DeclarationError(
                f"workload {self.name!r}: verification must be a bench verification declaration "
                f"(Exact, Partial, Custom, Unestablished, ReferenceInfeasible, Noncomparable); got "
                f"{type(declared).__name__}"
            )
        return declared


class ReferenceUnavailable:
    """The reference could not be computed (it ran out of memory): nothing can be verified."""

    def __init__(self, reason: str):
        self.reason = reason

    def __repr__(self) -> str:
        return f"ReferenceUnavailable({self.reason!r})"


def is_out_of_memory(exc: BaseException) -> bool:
    if isinstance(exc, MemoryError):
        return True
    return type(exc).__name__ == "OutOfMemoryError" or "out of memory" in str(exc).lower()


def _input_seed() -> int:
    """This process's input seed: KERNELGAP_INPUT_SEED (a run's settings.input_seed, to replay its
    inputs) or 32 random bits, so no run's inputs are known before it starts (issue 50 class 2)."""
    given = os.environ.get("KERNELGAP_INPUT_SEED", "").strip()
    if not given:
        return int.from_bytes(os.urandom(4), "little")
    try:
        return int(given) & 0xFFFFFFFF
    except ValueError:
        raise DeclarationError(
            f"KERNELGAP_INPUT_SEED must be an integer (a document's settings.input_seed), got {given!r}"
        ) from None


INPUT_SEED = _input_seed()


class Case:
    """One row and dtype of a workload. Data (`inputs`, `expected`) is made on first access."""

    def __init__(self, workload: Workload, row: Row, dtype: str, count_copies: bool):
        self.workload = workload
        self.row = row
        self.dtype = dtype
        self.count_copies = count_copies
        self.id = f"{row.label}-{dtype}"
        self.params = {"row": row.label, **row.params, "dtype": dtype}
        self.arguments = workload.arguments(dict(row.params), dtype)
        self.verification = workload.verification_for(dict(row.params), dtype)
        self.seed = (
            zlib.crc32(f"{workload.name}/{self.id}".encode()) ^ workload.seed ^ INPUT_SEED
        ) & 0xFFFFFFFF
        self._inputs: tuple | None = None
        self._expected = None

    @property
    def reference(self):
        """The workload's reference callable."""
        return self.workload.reference

    @property
    def inputs(self) -> tuple:
        if self._inputs is None:
            made = self.workload.gen_inputs(dict(self.row.params), self.dtype, self.seed)
            self._inputs = tuple(made) if isinstance(made, tuple | list) else (made,)
        return self._inputs

    @property
    def expected(self):
        """The reference's outputs on `inputs`, or a ReferenceUnavailable when it ran out of memory."""
        if self._expected is None:
            try:
                self._expected = self.reference(*self.inputs)
            except Exception as exc:
                if not is_out_of_memory(exc):
                    raise
                first = (str(exc).splitlines() or [""])[0][:200]
                self._expected = ReferenceUnavailable(
                    f"the reference ran out of memory ({type(exc).__name__}{': ' + first if first else ''})"
                )
        return self._expected

    @property
    def has_data(self) -> bool:
        return self._inputs is not None or self._expected is not None

    @property
    def flops(self) -> float | None:
        return self.workload.flops(dict(self.row.params), self.dtype)

    @property
    def bytes(self) -> float | None:
        return self.workload.bytes(dict(self.row.params), self.dtype)

    def release(self) -> None:
        """Drop the case's data (the next access makes it again, identically)."""
        self._inputs = None
        self._expected = None

    def __repr__(self) -> str:
        return f"Case({self.workload.name}/{self.id})"


def _check_workload(workload: Workload) -> None:
    where = f"workload {type(workload).__name__}"
    if not isinstance(workload, Workload):
        raise DeclarationError(
            f"bench.cases takes a Workload instance (got {type(workload).__name__})"
        )
    if not isinstance(workload.name, str) or not _LABEL.match(workload.name or ""):
        raise DeclarationError(f"{where}: name must be set (letters, digits, _ . + -)")
    if (
        isinstance(workload.version, bool)
        or not isinstance(workload.version, int)
        or workload.version < 1
    ):
        raise DeclarationError(f"{where}: version must be an int >= 1 (got {workload.version!r})")
    if not workload.rows:
        raise DeclarationError(f"{where}: rows is empty; declare at least one bench.Row")
    labels = [r.label for r in workload.rows]
    if len(set(labels)) != len(labels):
        raise DeclarationError(f"{where}: row labels repeat: {labels}")
    if not workload.dtypes or not all(
        isinstance(d, str) and _LABEL.match(d) for d in workload.dtypes
    ):
        raise DeclarationError(
            f"{where}: dtypes must be a non-empty list of names (got {workload.dtypes!r})"
        )


def cases(workload: Workload, *, count_copies: bool = False, tier: str | None = None) -> list[Case]:
    """One Case per row and dtype. `count_copies` is the case's copy policy: whether
    device-to-device copies made inside an implementation's call are part of its time.
    `tier` ("smoke" or "full") keeps only rows of that tier."""
    _check_workload(workload)
    if not isinstance(count_copies, bool):
        raise DeclarationError(
            f"cases(count_copies=...) takes True or False (got {count_copies!r})"
        )
    if tier is not None and tier not in TIERS:
        raise DeclarationError(f"cases(tier=...) takes one of {TIERS} (got {tier!r})")
    return [
        Case(workload, row, dtype, count_copies)
        for row in workload.rows
        if tier is None or row.tier == tier
        for dtype in workload.dtypes
    ]


def params(workload: Workload, *, count_copies: bool = False) -> list:
    """`cases()` as pytest parameters with the case id and a `smoke` or `full` mark per row."""
    import pytest

    return [
        pytest.param(c, id=c.id, marks=getattr(pytest.mark, c.row.tier))
        for c in cases(workload, count_copies=count_copies)
    ]
