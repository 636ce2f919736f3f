"""The null models' rules, one for both front ends: outputs that did not do the work must fail a
check, or the check cannot tell a kernel that skipped the work from one that did it.

A front end builds its catalogue (runner.execution.null_models for suite cases: named buffers,
numpy; runner.bench.null_models for Python cases: tuples of numpy arrays or torch tensors) from
the same models, in the same order: all zeros, a constant, copies of the inputs, then the
rounding models for every precision below an output's (runner.measurement.precision), where a
model that gives exactly the expected outputs is left out. What passes the case's check is an
error in the case.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

__all__ = ["ZEROS", "distinguishable", "lower_precisions", "passing"]

Model = TypeVar("Model")

ZEROS = "all zeros"


def lower_precisions(below_each_output: Iterable[Iterable[str]]) -> list[str]:
    """Every precision below any output's, once, in the order the outputs first name them."""
    lower: list[str] = []
    for precisions in below_each_output:
        lower += [p for p in precisions if p not in lower]
    return lower


def distinguishable(
    models: dict[str, Model], same_as_expected: Callable[[Model], bool]
) -> dict[str, Model]:
    """The models minus those that give exactly the expected outputs: a shortcut that does
    cannot be told apart on these inputs, so it says nothing against the tolerance."""
    return {what: model for what, model in models.items() if not same_as_expected(model)}


def passing(models: dict[str, Model], passes: Callable[[Model], bool]) -> list[str]:
    """The descriptions of the models that the case's check accepts (empty is good)."""
    return [what for what, model in models.items() if passes(model)]
