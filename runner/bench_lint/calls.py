"""BL003 (nothing is timed outside bench.Runner) and BL004 (no case built by hand): calls and
references anywhere in a benchmark file."""

from __future__ import annotations

import ast
from collections.abc import Callable

from runner.bench_lint.names import BENCH, EVENT_TIMING_ARGUMENT, Names, is_timing
from runner.bench_lint.syntax import keyword_argument, short

__all__ = ["CallChecker"]

Report = Callable[[ast.AST | int, str, str], None]  # (node or line, rule, message)


class CallChecker(ast.NodeVisitor):
    """BL003 (timing outside bench.Runner) and BL004 (cases built by hand), anywhere in the file."""

    def __init__(self, names: Names, alias: str, report: Report):
        self.names = names
        self.alias = alias
        self.report = report
        self.scope: list[str] = []
        self.advice = (
            f"time through {alias}.Runner(op, case).compare(...) so the result is "
            "checked and recorded"
        )

    def where(self) -> str:
        return ".".join(self.scope) if self.scope else "module level"

    def _enter(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _enter

    def visit_Call(self, node: ast.Call) -> None:
        called = self.names.qualified(node.func)
        if called == f"{BENCH}.Case":
            self.report(
                node,
                "BL004",
                f"{self.where()}: builds a case by hand with {short(node.func)}(...); take "
                f"cases from {self.alias}.cases(W) or {self.alias}.params(W) so "
                "ids, seeds and tiers come from the workload",
            )
        elif called in EVENT_TIMING_ARGUMENT and _event_times(called, node):
            self.report(
                node,
                "BL003",
                f"{self.where()}: creates a timing event with {short(node)}; {self.advice}",
            )
        elif isinstance(node.func, ast.Attribute) and node.func.attr == "elapsed_time":
            self.report(
                node,
                "BL003",
                f"{self.where()}: reads event times with {short(node.func)}(...); {self.advice}",
            )
        self.generic_visit(node)

    def _reference(self, node: ast.Name | ast.Attribute) -> None:
        resolved = self.names.qualified(node)
        if isinstance(node.ctx, ast.Load) and is_timing(resolved):
            written = ast.unparse(node)
            shown = resolved if written == resolved else f"{written} ({resolved})"
            self.report(node, "BL003", f"{self.where()}: times with {shown}; {self.advice}")
            return  # `timeit.Timer.timeit` is one finding, not one per attribute
        self.generic_visit(node)

    visit_Name = visit_Attribute = _reference


def _event_times(event_type: str, call: ast.Call) -> bool:
    """Whether the event is made with timing on; unknown (a variable, **kwargs) counts as on."""
    keyword, position = EVENT_TIMING_ARGUMENT[event_type]
    value = keyword_argument(call, keyword, position)
    unpacked = any(k.arg is None for k in call.keywords) or any(
        isinstance(a, ast.Starred) for a in call.args
    )
    if value is None:
        return unpacked or keyword.startswith("disable")
    if not isinstance(value, ast.Constant):
        return True
    return bool(value.value) == keyword.startswith("enable")
