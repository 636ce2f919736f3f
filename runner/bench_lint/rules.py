"""The rules of a benchmark file: BL001 (a test takes bench cases), BL002 (it compares or checks
them), BL005 (a parametrize over bench.cases gives the case ids), and BL003 (nothing is timed
outside bench.Runner) and BL004 (no case built by hand) over calls anywhere in the file;
`FileLinter` runs them over one parsed file. By section: the shapes of statements the rules look
for; what the file's names refer to, from its imports, without importing anything (runner.bench
and the timers BL003 refuses, under whatever name they were bound); the call rules; the test rules."""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from dataclasses import dataclass

__all__ = [
    "BENCH",
    "BENCH_NAMES",
    "EVENT_TIMING_ARGUMENT",
    "TIMING_FUNCTIONS",
    "CallChecker",
    "FileLinter",
    "Finding",
    "Names",
    "assigned_pairs",
    "canonical",
    "is_docstring",
    "is_test_function",
    "is_timing",
    "keyword_argument",
    "module_statements",
    "returns_id_of",
    "short",
]


def module_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Module-level statements in order, including those inside if/try/with blocks."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, ast.If | ast.Try | ast.TryStar | ast.With):
            for block in ("body", "orelse", "finalbody"):
                yield from module_statements(getattr(stmt, block, []))
            for handler in getattr(stmt, "handlers", []):
                yield from module_statements(handler.body)


def assigned_pairs(target: ast.expr, value: ast.expr) -> Iterator[tuple[str, ast.expr]]:
    """(name, the expression it gets) for `A = ...` and `A, B = x, y`; `A, B = f()` gives each
    name the whole right-hand side."""
    if isinstance(target, ast.Name):
        yield target.id, value
    elif isinstance(target, ast.Tuple | ast.List):
        if isinstance(value, ast.Tuple | ast.List) and len(value.elts) == len(target.elts):
            for t, v in zip(target.elts, value.elts, strict=True):
                yield from assigned_pairs(t, v)
        else:
            for t in target.elts:
                yield from assigned_pairs(t, value)
    elif isinstance(target, ast.Starred):
        yield from assigned_pairs(target.value, value)


def keyword_argument(call: ast.Call, name: str, position: int | None = None) -> ast.expr | None:
    for keyword in call.keywords:
        if keyword.arg == name:
            return keyword.value
    if position is not None and len(call.args) > position:
        argument = call.args[position]
        return None if isinstance(argument, ast.Starred) else argument
    return None


def returns_id_of(arguments: ast.arguments, body: ast.expr) -> bool:
    """The body returns `<arg>.id` or `getattr(<arg>, "id", ...)` of the only argument."""
    names = [a.arg for a in (*arguments.posonlyargs, *arguments.args)]
    if len(names) != 1:
        return False
    if isinstance(body, ast.Attribute):
        return body.attr == "id" and isinstance(body.value, ast.Name) and body.value.id == names[0]
    return (
        isinstance(body, ast.Call)
        and isinstance(body.func, ast.Name)
        and body.func.id == "getattr"
        and len(body.args) >= 2
        and isinstance(body.args[0], ast.Name)
        and body.args[0].id == names[0]
        and isinstance(body.args[1], ast.Constant)
        and body.args[1].value == "id"
    )


def short(node: ast.expr, limit: int = 60) -> str:
    text = ast.unparse(node)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def is_test_function(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef) and stmt.name.startswith("test")


def is_docstring(stmt: ast.stmt) -> bool:
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Constant)
        and isinstance(stmt.value.value, str)
    )


BENCH = "runner.bench"


# runner.bench re-exports these from its submodules; one spelling per object
BENCH_SUBMODULES = ("workload", "comparison", "checking")


BENCH_NAMES = {f"{BENCH}.{name}" for name in ("cases", "params", "Runner", "Case", "check")}


TIMING_FUNCTIONS = frozenset(
    [
        *(
            f"time.{clock}{suffix}"
            for clock in ("perf_counter", "time", "monotonic", "process_time", "thread_time")
            for suffix in ("", "_ns")
        ),
        "triton.testing.do_bench",
        "triton.testing.do_bench_cudagraph",
        "torch.utils.benchmark.Timer",
        "torch.utils.benchmark.utils.timer.Timer",
        "cupyx.profiler.benchmark",
        "cupy.cuda.get_elapsed_time",
    ]
)


TIMING_MODULES = ("timeit",)  # every name in these modules times


# event type -> (the keyword that switches timing, its position among the arguments or None
# when keyword-only); "enable_*" is off by default, "disable_*" leaves timing on by default
EVENT_TIMING_ARGUMENT = {
    "torch.cuda.Event": ("enable_timing", 0),
    "torch.cuda.streams.Event": ("enable_timing", 0),
    "torch.Event": ("enable_timing", None),
    "cupy.cuda.Event": ("disable_timing", 1),
    "cupy.cuda.stream.Event": ("disable_timing", 1),
}


def canonical(name: str) -> str:
    for submodule in BENCH_SUBMODULES:
        prefix = f"{BENCH}.{submodule}."
        rest = name[len(prefix) :]
        if name.startswith(prefix) and rest and "." not in rest:
            return f"{BENCH}.{rest}"
    return name


def is_timing(name: str | None) -> bool:
    if name is None:
        return False
    return name in TIMING_FUNCTIONS or any(name.startswith(f"{m}.") for m in TIMING_MODULES)


class Names:
    """What the names of one module refer to, from its imports, without importing anything.

    Imports anywhere in the file count (a test that imports time inside its body still times);
    a name bound at module level wins over the same name bound inside a function."""

    def __init__(self, tree: ast.Module):
        self.bound: dict[str, str] = {}
        self.star_modules: list[str] = []
        for node in ast.walk(tree):  # breadth first: module-level imports come first
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self.bound.setdefault(alias.asname, alias.name)
                    else:  # `import runner.bench` binds `runner`
                        root = alias.name.split(".")[0]
                        self.bound.setdefault(root, root)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                for alias in node.names:
                    if alias.name == "*":
                        self.star_modules.append(node.module)
                    else:
                        local = alias.asname or alias.name
                        self.bound.setdefault(local, f"{node.module}.{alias.name}")
        for stmt in tree.body:  # module-level aliases: `Runner = bench.Runner`
            if (
                isinstance(stmt, ast.Assign)
                and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)
                and isinstance(stmt.value, ast.Name | ast.Attribute)
            ):
                resolved = self.qualified(stmt.value)
                if resolved is not None:
                    self.bound.setdefault(stmt.targets[0].id, resolved)

    def qualified(self, node: ast.expr) -> str | None:
        """`bench.Runner` -> "runner.bench.Runner"; None when the root name was not imported."""
        attributes = []
        while isinstance(node, ast.Attribute):
            attributes.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        root = self.bound.get(node.id) or self._from_star_import(node.id)
        if root is None:
            return None
        return canonical(".".join([root, *reversed(attributes)]))

    def _from_star_import(self, name: str) -> str | None:
        for module in self.star_modules:
            candidate = canonical(f"{module}.{name}")
            if (
                candidate in BENCH_NAMES
                or is_timing(candidate)
                or candidate in EVENT_TIMING_ARGUMENT
            ):
                return candidate
        return None

    def bench_alias(self) -> str:
        """How the file spells runner.bench, for messages ("bench" when it imports names only)."""
        for local, target in self.bound.items():
            if target == BENCH:
                return local
        if self.bound.get("runner") == "runner":
            return BENCH
        return "bench"

    def imports_bench(self) -> bool:
        return any(
            target == BENCH or target.startswith(f"{BENCH}.") for target in self.bound.values()
        ) or any(m == BENCH or m.startswith(f"{BENCH}.") for m in self.star_modules)


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
