"""Shapes of Python statements and expressions that the rules of runner.bench_lint look for."""

from __future__ import annotations

import ast
from collections.abc import Iterator

__all__ = [
    "assigned_pairs",
    "is_docstring",
    "is_test_function",
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
