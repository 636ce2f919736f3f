"""`python -m runner.bench_lint PATH...`: check runner.bench benchmark files from their source.

A benchmark file is a pytest module named bench_*.py or test_*.py (conftest.py and helper
modules such as workloads.py are not benchmark files; a directory is searched recursively,
skipping hidden folders and __pycache__). Its tests take their cases from `bench.cases(W)` or
`bench.params(W)` and time only through `bench.Runner(op, case).compare(...)`, so every number
is checked against the reference first and lands in the result document:

    @pytest.mark.parametrize("case", bench.cases(Matmul()), ids=lambda c: c.id)
    def test_bmm(case):
        bench.Runner(torch.bmm, case).compare({"torch.matmul": torch.matmul})

Rules:

- BL001 the file has at least one test parametrized over bench cases: the argvalues of
  `@pytest.mark.parametrize(...)` (on the function or its Test class) contain a
  `bench.cases(...)` or `bench.params(...)` call, or a module-level name assigned from one.
- BL002 every such test compares: it calls `bench.Runner(...)` and `.compare(...)` on that
  Runner (chained, or through a variable, in the test or in a module-level function it calls),
  or it is a correctness test that calls `bench.check(...)` or `<workload>.check(...)`.
- BL003 nothing is timed outside bench.Runner: time.perf_counter, time.time, time.monotonic,
  time.process_time, time.thread_time (and their _ns variants), anything from timeit,
  triton.testing.do_bench and do_bench_cudagraph, torch.utils.benchmark.Timer,
  cupyx.profiler.benchmark, cupy.cuda.get_elapsed_time, CUDA events made with timing on
  (torch.cuda.Event(enable_timing=True), torch.Event(enable_timing=True), cupy.cuda.Event()) and
  every `.elapsed_time(...)` call. Uses are found however they were imported
  (`from time import perf_counter as pc` too).
- BL004 cases are not built by hand: no `bench.Case(...)` (or `Case(...)` imported from
  runner.bench).
- BL005 a parametrize over `bench.cases(...)` gives the case ids: `ids=lambda c: c.id` (any
  one-argument lambda returning `<arg>.id` or `getattr(<arg>, "id", ...)`), a module-level
  function that returns `<arg>.id`, or `operator.attrgetter("id")`. `bench.params(...)` and
  `pytest.param(c, id=c.id, ...)` set the ids themselves and need no `ids=`.

runner.bench is recognised under whatever name the file binds it to (`from runner import bench`,
`from runner import bench as kb`, `import runner.bench as bench`, `import runner.bench`,
`from runner.bench import Runner, cases`, module-level `Runner = bench.Runner`). The files are
parsed with the standard library's ast, never imported: no torch, no GPU needed. Not seen:
cases that reach a test through a fixture, `pytest_generate_tests` or `pytestmark`.

Output: one `path:line: RULE message` per finding on stdout, `bench_lint: N files, M findings` on
stderr. Exit status: 0 clean, 1 findings, 2 bad input (a path that does not exist, no benchmark
file under the paths given, a file that cannot be read or parsed).
"""

from __future__ import annotations

import ast
import fnmatch
import os
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import click

__all__ = [
    "BENCHMARK_FILE_PATTERNS",
    "Finding",
    "InputError",
    "benchmark_files",
    "is_benchmark_file",
    "lint_file",
    "lint_files",
    "lint_paths",
    "lint_source",
    "main",
]

BENCHMARK_FILE_PATTERNS = ("bench_*.py", "test_*.py")
_SKIPPED_FOLDERS = ("__pycache__",)  # and every folder whose name starts with "."

_BENCH = "runner.bench"
# runner.bench re-exports these from its submodules; one spelling per object
_BENCH_SUBMODULES = ("workload", "runner", "checking")
_BENCH_NAMES = {f"{_BENCH}.{name}" for name in ("cases", "params", "Runner", "Case", "check")}

_TIMING_FUNCTIONS = frozenset(
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
_TIMING_MODULES = ("timeit",)  # every name in these modules times

# event type -> (the keyword that switches timing, its position among the arguments or None
# when keyword-only); "enable_*" is off by default, "disable_*" leaves timing on by default
_EVENT_TIMING_ARGUMENT = {
    "torch.cuda.Event": ("enable_timing", 0),
    "torch.cuda.streams.Event": ("enable_timing", 0),
    "torch.Event": ("enable_timing", None),
    "cupy.cuda.Event": ("disable_timing", 1),
    "cupy.cuda.stream.Event": ("disable_timing", 1),
}


@dataclass(frozen=True)
class Finding:
    """One broken rule: where, which rule, and what to do about it."""

    path: str
    line: int
    rule: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.rule} {self.message}"


class InputError(Exception):
    """The paths or files given cannot be linted; `problems` names each one (file, line)."""

    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = problems


# -- files ------------------------------------------------------------------------------------


def is_benchmark_file(path: Path) -> bool:
    """bench_*.py or test_*.py: what the linter checks (conftest.py and helpers are not)."""
    return any(fnmatch.fnmatchcase(path.name, pattern) for pattern in BENCHMARK_FILE_PATTERNS)


def _walk(folder: Path) -> Iterator[Path]:
    for root, folders, files in os.walk(folder):
        folders[:] = sorted(
            f for f in folders if not f.startswith(".") and f not in _SKIPPED_FOLDERS
        )
        for name in sorted(files):
            path = Path(root, name)
            if is_benchmark_file(path):
                yield path


def benchmark_files(paths: Iterable[str | Path]) -> list[Path]:
    """The benchmark files named by `paths` (files, or folders searched recursively), in order,
    each once. A file whose name is not a benchmark file's is left out.

    Raises InputError for a path that does not exist, or when no benchmark file was found."""
    paths = [Path(p) for p in paths]
    missing = [f"{p}: no such file or directory" for p in paths if not p.exists()]
    if missing:
        raise InputError(missing)
    found: list[Path] = []
    seen: set[Path] = set()
    for path in paths:
        for file in _walk(path) if path.is_dir() else [path] if is_benchmark_file(path) else []:
            if file.resolve() not in seen:
                seen.add(file.resolve())
                found.append(file)
    if not found:
        names = ", ".join(str(p) for p in paths)
        raise InputError(
            [f"{names}: no benchmark file ({' or '.join(BENCHMARK_FILE_PATTERNS)}) to check"]
        )
    return found


def lint_file(path: str | Path) -> list[Finding]:
    """The findings of one benchmark file. Raises InputError when it cannot be read or parsed."""
    try:
        source = Path(path).read_bytes()
    except OSError as exc:
        raise InputError([f"{path}: cannot be read: {exc.strerror or exc}"]) from exc
    return lint_source(source, str(path))


def lint_files(files: Iterable[str | Path]) -> list[Finding]:
    """The findings of every file, in order. Raises one InputError naming every file that could
    not be read or parsed."""
    findings: list[Finding] = []
    problems: list[str] = []
    for file in files:
        try:
            findings.extend(lint_file(file))
        except InputError as exc:
            problems.extend(exc.problems)
    if problems:
        raise InputError(problems)
    return findings


def lint_paths(paths: Iterable[str | Path]) -> list[Finding]:
    """Lint every benchmark file under `paths` (what `python -m runner.bench_lint` runs)."""
    return lint_files(benchmark_files(paths))


def lint_source(source: str | bytes, path: str) -> list[Finding]:
    """The findings of one benchmark file's source; `path` is only used to name it."""
    try:
        tree = ast.parse(source, filename=path)
    except SyntaxError as exc:
        where = f"{path}:{exc.lineno}" if exc.lineno else path
        raise InputError([f"{where}: does not parse: {exc.msg}"]) from exc
    except ValueError as exc:  # null bytes (Python 3.11 raises ValueError, not SyntaxError)
        raise InputError([f"{path}: does not parse: {exc}"]) from exc
    return _FileLinter(path, tree).lint()


# -- names ------------------------------------------------------------------------------------


def _canonical(name: str) -> str:
    for submodule in _BENCH_SUBMODULES:
        prefix = f"{_BENCH}.{submodule}."
        rest = name[len(prefix) :]
        if name.startswith(prefix) and rest and "." not in rest:
            return f"{_BENCH}.{rest}"
    return name


def _is_timing(name: str | None) -> bool:
    if name is None:
        return False
    return name in _TIMING_FUNCTIONS or any(name.startswith(f"{m}.") for m in _TIMING_MODULES)


class _Names:
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
        return _canonical(".".join([root, *reversed(attributes)]))

    def _from_star_import(self, name: str) -> str | None:
        for module in self.star_modules:
            candidate = _canonical(f"{module}.{name}")
            if (
                candidate in _BENCH_NAMES
                or _is_timing(candidate)
                or candidate in _EVENT_TIMING_ARGUMENT
            ):
                return candidate
        return None

    def bench_alias(self) -> str:
        """How the file spells runner.bench, for messages ("bench" when it imports names only)."""
        for local, target in self.bound.items():
            if target == _BENCH:
                return local
        if self.bound.get("runner") == "runner":
            return _BENCH
        return "bench"

    def imports_bench(self) -> bool:
        return any(
            target == _BENCH or target.startswith(f"{_BENCH}.") for target in self.bound.values()
        ) or any(m == _BENCH or m.startswith(f"{_BENCH}.") for m in self.star_modules)


def _module_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Module-level statements in order, including those inside if/try/with blocks."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, ast.If | ast.Try | ast.TryStar | ast.With):
            for block in ("body", "orelse", "finalbody"):
                yield from _module_statements(getattr(stmt, block, []))
            for handler in getattr(stmt, "handlers", []):
                yield from _module_statements(handler.body)


def _assigned_pairs(target: ast.expr, value: ast.expr) -> Iterator[tuple[str, ast.expr]]:
    """(name, the expression it gets) for `A = ...` and `A, B = x, y`; `A, B = f()` gives each
    name the whole right-hand side."""
    if isinstance(target, ast.Name):
        yield target.id, value
    elif isinstance(target, ast.Tuple | ast.List):
        if isinstance(value, ast.Tuple | ast.List) and len(value.elts) == len(target.elts):
            for t, v in zip(target.elts, value.elts, strict=True):
                yield from _assigned_pairs(t, v)
        else:
            for t in target.elts:
                yield from _assigned_pairs(t, value)
    elif isinstance(target, ast.Starred):
        yield from _assigned_pairs(target.value, value)


def _keyword(call: ast.Call, name: str, position: int | None = None) -> ast.expr | None:
    for keyword in call.keywords:
        if keyword.arg == name:
            return keyword.value
    if position is not None and len(call.args) > position:
        argument = call.args[position]
        return None if isinstance(argument, ast.Starred) else argument
    return None


def _returns_id_of(arguments: ast.arguments, body: ast.expr) -> bool:
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


def _short(node: ast.expr, limit: int = 60) -> str:
    text = ast.unparse(node)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# -- rules ------------------------------------------------------------------------------------


@dataclass
class _CaseSource:
    """Which bench functions an expression's cases come from."""

    kinds: frozenset[str]  # "cases", "params"
    ids_set: bool  # built from pytest.param(..., id=<case>.id): the ids are there already


class _FileLinter:
    def __init__(self, path: str, tree: ast.Module):
        self.path = path
        self.tree = tree
        self.names = _Names(tree)
        self.alias = self.names.bench_alias()
        self.findings: list[Finding] = []
        self.functions = {
            stmt.name: stmt
            for stmt in _module_statements(tree.body)
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
        _CallChecker(self).visit(self.tree)
        return sorted(self.findings, key=lambda f: (f.line, f.rule, f.message))

    # -- which tests take bench cases (BL001, BL005) ----------------------------------------

    def _case_source(self, expr: ast.expr, named: dict[str, _CaseSource]) -> _CaseSource | None:
        kinds: set[str] = set()
        ids_set = False
        for node in ast.walk(expr):
            if isinstance(node, ast.Call):
                called = self.names.qualified(node.func)
                if called == f"{_BENCH}.cases":
                    kinds.add("cases")
                elif called == f"{_BENCH}.params":
                    kinds.add("params")
                elif called == "pytest.param":
                    given = _keyword(node, "id")
                    ids_set = ids_set or (isinstance(given, ast.Attribute) and given.attr == "id")
            elif isinstance(node, ast.Name) and node.id in named:
                kinds |= named[node.id].kinds
                ids_set = ids_set or named[node.id].ids_set
        return _CaseSource(frozenset(kinds), ids_set) if kinds else None

    def _bench_tests(self) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
        """(label, test) for every test parametrized over bench cases; BL005 on the way."""
        named: dict[str, _CaseSource] = {}  # module-level names holding bench cases so far
        tests = []
        for stmt in _module_statements(self.tree.body):
            if isinstance(stmt, ast.Assign | ast.AnnAssign) and stmt.value is not None:
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                for target in targets:
                    for name, value in _assigned_pairs(target, stmt.value):
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
            elif _is_test_function(stmt):
                if self._parametrized_over_cases(stmt.name, stmt.decorator_list, named):
                    tests.append((stmt.name, stmt))
            elif isinstance(stmt, ast.ClassDef) and stmt.name.startswith("Test"):
                whole_class = self._parametrized_over_cases(stmt.name, stmt.decorator_list, named)
                for item in stmt.body:
                    if not _is_test_function(item):
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
            argvalues = _keyword(decorator, "argvalues", 1)
            source = None if argvalues is None else self._case_source(argvalues, named)
            if source is None:
                continue
            over_cases = True
            if "cases" in source.kinds and not source.ids_set:
                self._check_ids(label, decorator, _keyword(decorator, "ids", 3))
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
                f"{label}: ids={_short(ids)} does not give the case ids; {why}",
            )

    def _gives_case_ids(self, ids: ast.expr) -> bool:
        if isinstance(ids, ast.Lambda):
            return _returns_id_of(ids.args, ids.body)
        if isinstance(ids, ast.Name) and ids.id in self.functions:
            function = self.functions[ids.id]
            return (
                len(function.body) >= 1
                and isinstance(function.body[-1], ast.Return)
                and function.body[-1].value is not None
                and _returns_id_of(function.args, function.body[-1].value)
                and len([s for s in function.body if not _is_docstring(s)]) == 1
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
            and self.names.qualified(node.func) in (f"{_BENCH}.cases", f"{_BENCH}.params")
        ]
        if calls:
            first = min(calls, key=lambda node: node.lineno)
            self.report(
                first,
                "BL001",
                f"{_short(first.func)}(...) is called but no test is parametrized over its "
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
        runner = f"{_BENCH}.Runner"
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
            elif self.names.qualified(func) == f"{_BENCH}.check" or (
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


def _is_test_function(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef) and stmt.name.startswith("test")


def _is_docstring(stmt: ast.stmt) -> bool:
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Constant)
        and isinstance(stmt.value.value, str)
    )


class _CallChecker(ast.NodeVisitor):
    """BL003 (timing outside bench.Runner) and BL004 (cases built by hand), anywhere in the file."""

    def __init__(self, linter: _FileLinter):
        self.linter = linter
        self.names = linter.names
        self.scope: list[str] = []
        self.advice = (
            f"time through {linter.alias}.Runner(op, case).compare(...) so the result is "
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
        if called == f"{_BENCH}.Case":
            self.linter.report(
                node,
                "BL004",
                f"{self.where()}: builds a case by hand with {_short(node.func)}(...); take "
                f"cases from {self.linter.alias}.cases(W) or {self.linter.alias}.params(W) so "
                "ids, seeds and tiers come from the workload",
            )
        elif called in _EVENT_TIMING_ARGUMENT and _event_times(called, node):
            self.linter.report(
                node,
                "BL003",
                f"{self.where()}: creates a timing event with {_short(node)}; {self.advice}",
            )
        elif isinstance(node.func, ast.Attribute) and node.func.attr == "elapsed_time":
            self.linter.report(
                node,
                "BL003",
                f"{self.where()}: reads event times with {_short(node.func)}(...); {self.advice}",
            )
        self.generic_visit(node)

    def _reference(self, node: ast.Name | ast.Attribute) -> None:
        resolved = self.names.qualified(node)
        if isinstance(node.ctx, ast.Load) and _is_timing(resolved):
            written = ast.unparse(node)
            shown = resolved if written == resolved else f"{written} ({resolved})"
            self.linter.report(node, "BL003", f"{self.where()}: times with {shown}; {self.advice}")
            return  # `timeit.Timer.timeit` is one finding, not one per attribute
        self.generic_visit(node)

    visit_Name = visit_Attribute = _reference


def _event_times(event_type: str, call: ast.Call) -> bool:
    """Whether the event is made with timing on; unknown (a variable, **kwargs) counts as on."""
    keyword, position = _EVENT_TIMING_ARGUMENT[event_type]
    value = _keyword(call, keyword, position)
    unpacked = any(k.arg is None for k in call.keywords) or any(
        isinstance(a, ast.Starred) for a in call.args
    )
    if value is None:
        return unpacked or keyword.startswith("disable")
    if not isinstance(value, ast.Constant):
        return True
    return bool(value.value) == keyword.startswith("enable")


# -- command line -----------------------------------------------------------------------------


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument(
    "paths", nargs=-1, required=True, type=click.Path(path_type=Path), metavar="PATH..."
)
def main(paths: tuple[Path, ...]) -> None:
    """Check runner.bench benchmark files from their source (nothing is imported: no torch or
    GPU needed).

    Each PATH is a benchmark file or a directory searched recursively for bench_*.py and
    test_*.py (conftest.py and helper modules such as workloads.py are not benchmark files).

    \b
    Rules:
      BL001  the file has a test parametrized over bench.cases(W) or bench.params(W):
             @pytest.mark.parametrize("case", bench.cases(W), ids=lambda c: c.id)
      BL002  every such test calls bench.Runner(op, case).compare({...}), or is a
             correctness test calling bench.check(...) or workload.check(...)
      BL003  nothing is timed outside bench.Runner: no time.perf_counter/time/monotonic/
             process_time, timeit, CUDA timing events or .elapsed_time(), triton's do_bench,
             torch.utils.benchmark.Timer, cupyx.profiler.benchmark
      BL004  no case built by hand with bench.Case(...)
      BL005  a parametrize over bench.cases(...) sets ids=lambda c: c.id
             (bench.params(W) sets the ids itself)

    \b
    Findings go to stdout, one per line: path:line: RULE message
    A summary goes to stderr: bench_lint: N files, M findings
    Exit status: 0 clean, 1 findings, 2 bad input (a path that does not exist, no
    benchmark file found, a file that does not parse).

    \b
    Example:
      python -m runner.bench_lint benchmarks/ops
    """
    try:
        files = benchmark_files(paths)
        findings = lint_files(files)
    except InputError as exc:
        for problem in exc.problems:
            click.echo(f"error: {problem}", err=True)
        sys.exit(2)
    for path in paths:
        if path.is_file() and not is_benchmark_file(path):
            click.echo(
                f"bench_lint: skipped {path}: not a benchmark file "
                f"({' or '.join(BENCHMARK_FILE_PATTERNS)})",
                err=True,
            )
    for finding in findings:
        click.echo(str(finding))
    click.echo(f"bench_lint: {len(files)} files, {len(findings)} findings", err=True)
    sys.exit(1 if findings else 0)


if __name__ == "__main__":
    main(prog_name="python -m runner.bench_lint")
