"""The rules about a benchmark file's tests: BL001 (a test takes bench cases), BL002 (it compares
or checks them) and BL005 (a parametrize over bench.cases gives the case ids); `FileLinter` runs
them and the call rules (runner.bench_lint.calls) over one parsed file."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from runner.bench_lint.calls import CallChecker
from runner.bench_lint.names import BENCH, Names
from runner.bench_lint.syntax import (
    assigned_pairs,
    is_docstring,
    is_test_function,
    keyword_argument,
    module_statements,
    returns_id_of,
    short,
)

__all__ = ["FileLinter", "Finding"]


@dataclass(frozen=True)
class Finding:
    """One broken rule: where, which rule, and what to do about it."""

    path: str
    line: int
    rule: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.rule} {self.message}"


@dataclass
class _CaseSource:
    """Which bench functions an expression's cases come from."""

    kinds: frozenset[str]  # "cases", "params"
    ids_set: bool  # built from pytest.param(..., id=<case>.id): the ids are there already


class FileLinter:
    def __init__(self, path: str, tree: ast.Module):
        self.path = path
        self.tree = tree
        self.names = Names(tree)
        self.alias = self.names.bench_alias()
        self.findings: list[Finding] = []
        self.functions = {
            stmt.name: stmt
            for stmt in module_statements(tree.body)
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef)
        }

    def report(self, node_or_line: ast.AST | int, rule: str, message: str) -> None:
        line = node_or_line if isinstance(node_or_line, int) else node_or_line.lineno
        self.findings.append(Finding(self.path, line, rule, message))

    def lint(self) -> list[Finding]:
        tests = self._bench_tests()
        if not tests:
            self._no_bench_test()
        for label, function in tests:
            self._check_compares(label, function)
        CallChecker(self.names, self.alias, self.report).visit(self.tree)
        return sorted(self.findings, key=lambda f: (f.line, f.rule, f.message))

    # -- which tests take bench cases (BL001, BL005) ----------------------------------------

    def _case_source(self, expr: ast.expr, named: dict[str, _CaseSource]) -> _CaseSource | None:
        kinds: set[str] = set()
        ids_set = False
        for node in ast.walk(expr):
            if isinstance(node, ast.Call):
                called = self.names.qualified(node.func)
                if called == f"{BENCH}.cases":
                    kinds.add("cases")
                elif called == f"{BENCH}.params":
                    kinds.add("params")
                elif called == "pytest.param":
                    given = keyword_argument(node, "id")
                    ids_set = ids_set or (isinstance(given, ast.Attribute) and given.attr == "id")
            elif isinstance(node, ast.Name) and node.id in named:
                kinds |= named[node.id].kinds
                ids_set = ids_set or named[node.id].ids_set
        return _CaseSource(frozenset(kinds), ids_set) if kinds else None

    def _bench_tests(self) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
        """(label, test) for every test parametrized over bench cases; BL005 on the way."""
        named: dict[str, _CaseSource] = {}  # module-level names holding bench cases so far
        tests = []
        for stmt in module_statements(self.tree.body):
            if isinstance(stmt, ast.Assign | ast.AnnAssign) and stmt.value is not None:
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                for target in targets:
                    for name, value in assigned_pairs(target, stmt.value):
                        source = self._case_source(value, named)
                        if source is None:
                            named.pop(name, None)
                        else:
                            named[name] = source
            elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
                source = self._case_source(stmt.value, named)
                if source is not None:
                    before = named.get(stmt.target.id, _CaseSource(frozenset(), True))
                    named[stmt.target.id] = _CaseSource(
                        before.kinds | source.kinds, before.ids_set and source.ids_set
                    )
            elif is_test_function(stmt):
                if self._parametrized_over_cases(stmt.name, stmt.decorator_list, named):
                    tests.append((stmt.name, stmt))
            elif isinstance(stmt, ast.ClassDef) and stmt.name.startswith("Test"):
                whole_class = self._parametrized_over_cases(stmt.name, stmt.decorator_list, named)
                for item in stmt.body:
                    if not is_test_function(item):
                        continue
                    label = f"{stmt.name}.{item.name}"
                    if (
                        self._parametrized_over_cases(label, item.decorator_list, named)
                        or whole_class
                    ):
                        tests.append((label, item))
        return tests

    def _parametrized_over_cases(
        self, label: str, decorators: list[ast.expr], named: dict[str, _CaseSource]
    ) -> bool:
        over_cases = False
        for decorator in decorators:
            if not (
                isinstance(decorator, ast.Call)
                and self.names.qualified(decorator.func) == "pytest.mark.parametrize"
            ):
                continue
            argvalues = keyword_argument(decorator, "argvalues", 1)
            source = None if argvalues is None else self._case_source(argvalues, named)
            if source is None:
                continue
            over_cases = True
            if "cases" in source.kinds and not source.ids_set:
                self._check_ids(label, decorator, keyword_argument(decorator, "ids", 3))
        return over_cases

    def _check_ids(self, label: str, decorator: ast.Call, ids: ast.expr | None) -> None:
        why = (
            f"add ids=lambda c: c.id (or use {self.alias}.params(W), which sets them) so the "
            "test ids are the case ids of the result document"
        )
        if ids is None:
            self.report(
                decorator,
                "BL005",
                f"{label}: parametrizes over {self.alias}.cases(...) without ids; {why}",
            )
        elif not self._gives_case_ids(ids):
            self.report(
                decorator,
                "BL005",
                f"{label}: ids={short(ids)} does not give the case ids; {why}",
            )

    def _gives_case_ids(self, ids: ast.expr) -> bool:
        if isinstance(ids, ast.Lambda):
            return returns_id_of(ids.args, ids.body)
        if isinstance(ids, ast.Name) and ids.id in self.functions:
            function = self.functions[ids.id]
            return (
                len(function.body) >= 1
                and isinstance(function.body[-1], ast.Return)
                and function.body[-1].value is not None
                and returns_id_of(function.args, function.body[-1].value)
                and len([s for s in function.body if not is_docstring(s)]) == 1
            )
        return (
            isinstance(ids, ast.Call)
            and self.names.qualified(ids.func) == "operator.attrgetter"
            and len(ids.args) == 1
            and isinstance(ids.args[0], ast.Constant)
            and ids.args[0].value == "id"
        )

    def _no_bench_test(self) -> None:
        alias = self.alias
        example = f'@pytest.mark.parametrize("case", {alias}.cases(W), ids=lambda c: c.id)'
        if not self.names.imports_bench():
            self.report(
                1,
                "BL001",
                "no test takes its cases from runner.bench: import it (from runner import "
                f"bench) and parametrize a test with {example}",
            )
            return
        calls = [
            node
            for node in ast.walk(self.tree)
            if isinstance(node, ast.Call)
            and self.names.qualified(node.func) in (f"{BENCH}.cases", f"{BENCH}.params")
        ]
        if calls:
            first = min(calls, key=lambda node: node.lineno)
            self.report(
                first,
                "BL001",
                f"{short(first.func)}(...) is called but no test is parametrized over its "
                f"cases; give them to a test with {example} so each case is its own test",
            )
            return
        self.report(
            1,
            "BL001",
            f"no test takes its cases from {alias}.cases(W) or {alias}.params(W); parametrize "
            f"a test with {example}",
        )

    # -- what a bench test does with its cases (BL002) --------------------------------------

    def _reachable(self, function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.AST]:
        """Every node of the test's body and of the module-level functions it calls by name."""
        nodes: list[ast.AST] = []
        seen = {function.name}
        pending = [function]
        while pending:
            current = pending.pop()
            for stmt in current.body:
                for node in ast.walk(stmt):
                    nodes.append(node)
                    if (
                        isinstance(node, ast.Call)
                        and isinstance(node.func, ast.Name)
                        and node.func.id in self.functions
                        and node.func.id not in seen
                    ):
                        seen.add(node.func.id)
                        pending.append(self.functions[node.func.id])
        return nodes

    def _check_compares(self, label: str, function: ast.FunctionDef | ast.AsyncFunctionDef):
        nodes = self._reachable(function)
        runner = f"{BENCH}.Runner"
        runner_calls = [
            n for n in nodes if isinstance(n, ast.Call) and self.names.qualified(n.func) == runner
        ]
        runner_variables = set()
        for node in nodes:
            if isinstance(node, ast.Assign | ast.AnnAssign | ast.NamedExpr):
                if node.value is None or node.value not in runner_calls:
                    continue
                targets = (
                    node.targets
                    if isinstance(node, ast.Assign)
                    else [node.target]  # AnnAssign, NamedExpr
                )
                runner_variables |= {t.id for t in targets if isinstance(t, ast.Name)}

        def is_runner(expr: ast.expr) -> bool:
            return expr in runner_calls or (
                isinstance(expr, ast.Name) and expr.id in runner_variables
            )

        compared = checked = False
        for node in nodes:
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr == "compare" and is_runner(func.value):
                compared = True
            elif self.names.qualified(func) == f"{BENCH}.check" or (
                isinstance(func, ast.Attribute)
                and func.attr == "check"
                and not is_runner(func.value)
            ):
                checked = True
        if compared or checked:
            return
        alias = self.alias
        if runner_calls:
            self.report(
                function,
                "BL002",
                f"{label}: creates {alias}.Runner(...) but never calls .compare(...) on it, so "
                "nothing is checked against the reference, timed or recorded; call "
                f"{alias}.Runner(op, case).compare({{...}})",
            )
        else:
            self.report(
                function,
                "BL002",
                f"{label}: takes bench cases but neither compares them "
                f"({alias}.Runner(op, case).compare(...)) nor checks them ({alias}.check(...) "
                "or workload.check(...)); time it through Runner or make it a correctness test",
            )
