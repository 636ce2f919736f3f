"""Safe arithmetic expressions over a case's problem dimensions.

The benchmark manifest (cases.toml) writes buffer lengths, grid and block sizes, scalar
values, shared memory bytes and roofline bytes/FLOPs as expressions such as
``"ceil_div(n, 256)"`` or ``"2 * n * 8"``. Text is parsed with ``ast.parse(mode="eval")``
and the tree is walked by hand; nothing is ever passed to eval, exec or compile.

Allowed: int and float literals, names from the caller's mapping, unary ``+ -``, binary
``+ - * / // % **``, parentheses and calls to ``min max ceil_div abs sqrt log2 int``.
Integer arithmetic stays exact (Python ints); ``/`` is true division and gives a float.
Resource guards: text of at most 1000 characters, nesting of at most 200 levels, ``**``
with an int base needs an int exponent in [0, 256], int results of at most 1000 bits,
and float results must be finite.
"""

from __future__ import annotations

import ast
import math
import numbers
from collections.abc import Callable, Mapping

from runner.errors import ExprError, ExprProblem

__all__ = [
    "MAX_DEPTH",
    "MAX_EXPONENT",
    "MAX_EXPR_CHARS",
    "MAX_INT_BITS",
    "ExprError",
    "evaluate",
    "evaluate_int",
    "names_used",
]

MAX_EXPR_CHARS = 1000
MAX_INT_BITS = 1000
MAX_EXPONENT = 256
MAX_DEPTH = 200

Number = int | float


def _ceil_div(a: Number, b: Number) -> int:
    """Integer ceiling division: ceil(a / b) = -((-a) // b), exact for ints; b must be > 0."""
    if type(a) is not int or type(b) is not int:
        raise ExprProblem(
            f"ceil_div expects integers, got ceil_div({a!r}, {b!r}); use int(x) first"
        )
    if b <= 0:
        raise ExprProblem(f"ceil_div divisor must be > 0, got ceil_div({a}, {b})")
    return -(-a // b)


def _sqrt(x: Number) -> float:
    if x < 0:
        raise ExprProblem(f"sqrt of a negative number ({x!r})")
    return math.sqrt(x)


def _log2(x: Number) -> float:
    if x <= 0:
        raise ExprProblem(f"log2 of a number that is not positive ({x!r})")
    return math.log2(x)


def _int(x: Number) -> int:
    """Truncate toward zero (like C's cast): int(-2.7) == -2; an int is returned unchanged."""
    return x if type(x) is int else math.trunc(x)


# name -> (function, minimum arity, maximum arity or None for no limit)
_FUNCTIONS: dict[str, tuple[Callable[..., Number], int, int | None]] = {
    "abs": (abs, 1, 1),
    "ceil_div": (_ceil_div, 2, 2),
    "int": (_int, 1, 1),
    "log2": (_log2, 1, 1),
    "max": (max, 2, None),
    "min": (min, 2, None),
    "sqrt": (_sqrt, 1, 1),
}

_BINARY: dict[type[ast.operator], tuple[str, Callable[[Number, Number], Number]]] = {
    ast.Add: ("+", lambda a, b: a + b),
    ast.Sub: ("-", lambda a, b: a - b),
    ast.Mult: ("*", lambda a, b: a * b),
    ast.Div: ("/", lambda a, b: a / b),
    ast.FloorDiv: ("//", lambda a, b: a // b),
    ast.Mod: ("%", lambda a, b: a % b),
    ast.Pow: ("**", lambda a, b: a**b),
}

_ALLOWED = (
    "allowed: int/float literals, names, + - * / // % **, parentheses and calls to "
    + ", ".join(sorted(_FUNCTIONS))
)

# Descriptions for constructs Python parses but expressions may not use.
_CONSTRUCTS: dict[type[ast.AST], str] = {
    ast.Attribute: "attribute access",
    ast.Subscript: "subscript",
    ast.Lambda: "lambda",
    ast.ListComp: "comprehension",
    ast.SetComp: "comprehension",
    ast.DictComp: "comprehension",
    ast.GeneratorExp: "generator expression",
    ast.Compare: "comparison",
    ast.BoolOp: "boolean operator (and/or)",
    ast.IfExp: "conditional expression",
    ast.NamedExpr: "assignment expression (:=)",
    ast.List: "list display",
    ast.Tuple: "tuple",
    ast.Set: "set display",
    ast.Dict: "dict display",
    ast.JoinedStr: "f-string",
    ast.Starred: "starred expression",
    ast.Await: "await",
    ast.Yield: "yield",
    ast.YieldFrom: "yield",
    ast.Slice: "slice",
}

_OPERATOR_NAMES: dict[type[ast.AST], str] = {
    ast.Not: "'not' operator",
    ast.Invert: "bitwise operator '~'",
    ast.LShift: "bitwise operator '<<'",
    ast.RShift: "bitwise operator '>>'",
    ast.BitAnd: "bitwise operator '&'",
    ast.BitOr: "bitwise operator '|'",
    ast.BitXor: "bitwise operator '^'",
    ast.MatMult: "matrix multiplication operator '@'",
}


def _literal_kind(value: object) -> str:
    if isinstance(value, bool):
        return "bool literal"
    if isinstance(value, str):
        return "string literal"
    if isinstance(value, bytes):
        return "bytes literal"
    if value is None:
        return "None literal"
    if value is Ellipsis:
        return "Ellipsis literal"
    return f"{type(value).__name__} literal"


def _checked(value: Number) -> Number:
    """Enforce the size guards on every intermediate result."""
    if type(value) is int:
        if value.bit_length() > MAX_INT_BITS:
            raise ExprProblem(f"integer result has more than {MAX_INT_BITS} bits")
    elif type(value) is float:
        if not math.isfinite(value):
            raise ExprProblem(f"result is not a finite number ({value!r})")
    else:  # e.g. complex from (-8.0) ** 0.5
        raise ExprProblem(f"result is not a real number ({value!r})")
    return value


def _parse(text: str) -> ast.Expression:
    """Parse and check structure (allowed nodes, known functions, arity); names are not resolved."""
    if len(text) > MAX_EXPR_CHARS:
        raise ExprProblem(
            f"expression is {len(text)} characters long; the limit is {MAX_EXPR_CHARS}"
        )
    body = text.lstrip(" \t")  # ast.parse, unlike eval, rejects leading indentation
    if not body.strip():
        raise ExprProblem("empty expression")
    try:
        tree = ast.parse(body, mode="eval")
    except SyntaxError as e:
        # Python reports offset 0 when the text ends too early (e.g. "n +").
        column = (e.offset or len(body) + 1) + len(text) - len(body)
        raise ExprProblem(f"syntax error at column {column}: {e.msg}") from None
    except (ValueError, RecursionError, MemoryError) as e:
        raise ExprProblem(f"syntax error: {e}") from None
    _check_node(tree.body, body, 0)
    return tree


def _segment(node: ast.AST, source: str) -> str:
    return ast.get_source_segment(source, node) or ast.unparse(node)


def _not_allowed(what: str, node: ast.AST, source: str) -> ExprProblem:
    return ExprProblem(f"{what} ({_segment(node, source)!r}) is not allowed; {_ALLOWED}")


def _check_node(node: ast.AST, source: str, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise ExprProblem(f"expression is nested more than {MAX_DEPTH} levels deep")
    if isinstance(node, ast.Constant):
        if type(node.value) not in (int, float):
            raise _not_allowed(_literal_kind(node.value), node, source)
        if type(node.value) is int and node.value.bit_length() > MAX_INT_BITS:
            raise ExprProblem(f"integer literal has more than {MAX_INT_BITS} bits")
        if type(node.value) is float and not math.isfinite(node.value):
            raise ExprProblem(
                f"float literal {_segment(node, source)!r} overflows to {node.value!r}"
            )
    elif isinstance(node, ast.Name):
        pass  # resolved against the caller's names at evaluation time
    elif isinstance(node, ast.UnaryOp):
        if not isinstance(node.op, ast.UAdd | ast.USub):
            raise _not_allowed(_OPERATOR_NAMES.get(type(node.op), "operator"), node, source)
        _check_node(node.operand, source, depth + 1)
    elif isinstance(node, ast.BinOp):
        if type(node.op) not in _BINARY:
            raise _not_allowed(_OPERATOR_NAMES.get(type(node.op), "operator"), node, source)
        _check_node(node.left, source, depth + 1)
        _check_node(node.right, source, depth + 1)
    elif isinstance(node, ast.Call):
        _check_call(node, source, depth)
    else:
        what = _CONSTRUCTS.get(type(node), f"{type(node).__name__} construct")
        raise _not_allowed(what, node, source)


def _check_call(node: ast.Call, source: str, depth: int) -> None:
    if not isinstance(node.func, ast.Name):
        _check_node(node.func, source, depth + 1)  # reports lambda, attribute access, ...
        raise _not_allowed("call of something other than a named function", node, source)
    name = node.func.id
    if name not in _FUNCTIONS:
        known = ", ".join(sorted(_FUNCTIONS))
        raise ExprProblem(f"unknown function {name!r}; known functions: {known}")
    if node.keywords:
        raise _not_allowed(f"keyword argument in call to {name}", node, source)
    for arg in node.args:  # first, so `min(*n)` reports the starred argument, not the arity
        _check_node(arg, source, depth + 1)
    _, least, most = _FUNCTIONS[name]
    count = len(node.args)
    if count < least or (most is not None and count > most):
        wanted = str(least) if least == most else f"at least {least}"
        raise ExprProblem(f"{name}() takes {wanted} argument(s), got {count}")


class _Evaluator:
    """Walks a tree that `_parse` has already checked; only values can still go wrong."""

    def __init__(self, source: str, names: Mapping[str, Number]):
        self.source = source
        self.names = names

    def value(self, node: ast.AST) -> Number:
        if isinstance(node, ast.Constant):
            return _checked(node.value)
        if isinstance(node, ast.Name):
            return self.name(node.id)
        if isinstance(node, ast.UnaryOp):
            operand = self.value(node.operand)
            return _checked(-operand if isinstance(node.op, ast.USub) else +operand)
        if isinstance(node, ast.BinOp):
            return self.binary(node)
        if isinstance(node, ast.Call):
            function = _FUNCTIONS[node.func.id][0]
            args = [self.value(arg) for arg in node.args]
            try:
                return _checked(function(*args))
            except (OverflowError, ValueError) as e:
                raise ExprProblem(f"{_segment(node, self.source)!r}: {e}") from None
        raise ExprProblem(f"internal: unchecked node {type(node).__name__}")  # _parse rejects these

    def name(self, name: str) -> Number:
        if name not in self.names:
            known = ", ".join(sorted(self.names)) or "(none)"
            hint = f" ({name} is a function: call it as {name}(...))" if name in _FUNCTIONS else ""
            raise ExprProblem(f"unknown name {name!r}{hint}; known names: {known}")
        value = self.names[name]
        # numbers.Integral/Real also admit numpy scalars; bool is Integral but never a dimension.
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise ExprProblem(
                f"name {name!r} is bound to {value!r} ({type(value).__name__}); "
                "expected an int or a float"
            )
        return _checked(int(value) if isinstance(value, numbers.Integral) else float(value))

    def binary(self, node: ast.BinOp) -> Number:
        left, right = self.value(node.left), self.value(node.right)
        symbol, operation = _BINARY[type(node.op)]
        if symbol == "**" and type(left) is int:
            self.check_int_power(left, right, node)
        try:
            result = operation(left, right)
        except ZeroDivisionError:
            divisor = _segment(node.right, self.source)
            raise ExprProblem(
                f"division by zero in {_segment(node, self.source)!r} ({divisor!r} is {right!r})"
            ) from None
        except OverflowError:
            raise ExprProblem(f"{_segment(node, self.source)!r} overflows a float") from None
        try:
            return _checked(result)
        except ExprProblem as e:
            raise ExprProblem(f"{_segment(node, self.source)!r}: {e}") from None

    def check_int_power(self, base: int, exponent: Number, node: ast.BinOp) -> None:
        where = _segment(node, self.source)
        if type(exponent) is not int or not 0 <= exponent <= MAX_EXPONENT:
            raise ExprProblem(
                f"{where!r}: the exponent of an int base must be an int in [0, {MAX_EXPONENT}], "
                f"got {exponent!r} (write a float base such as 2.0 for float powers)"
            )
        # |base| ** e has at least (bits - 1) * e + 1 bits: refuse before computing a huge number.
        if (abs(base).bit_length() - 1) * exponent >= MAX_INT_BITS:
            raise ExprProblem(f"{where!r}: integer result has more than {MAX_INT_BITS} bits")


def evaluate(expr: str | int | float, names: Mapping[str, Number], *, where: str) -> Number:
    """Value of `expr` with `names` bound; an int or float is returned as is (bool is rejected).

    Raises ExprError naming `where`, the expression and what is wrong.
    """
    if isinstance(expr, bool) or not isinstance(expr, str | int | float):
        raise ExprError(
            where, expr, f"expected a number or an expression string, got {type(expr).__name__}"
        )
    if not isinstance(expr, str):
        return expr
    try:
        tree = _parse(expr)
        return _Evaluator(expr.lstrip(" \t"), names).value(tree.body)
    except ExprProblem as e:
        raise ExprError(where, expr, str(e)) from None


def evaluate_int(
    expr: str | int | float,
    names: Mapping[str, Number],
    *,
    where: str,
    minimum: int | None = None,
) -> int:
    """Like `evaluate`, but the value must be an integer (4.0 becomes 4; 4.5 is an error) >= minimum."""
    value = evaluate(expr, names, where=where)
    if type(value) is float:
        if not value.is_integer():
            raise ExprError(where, expr, f"expected an integer, got {value!r}")
        value = int(value)
    if minimum is not None and value < minimum:
        raise ExprError(where, expr, f"must be >= {minimum}, got {value}")
    return value


def names_used(expr: str | int | float, *, where: str = "expression") -> set[str]:
    """Names that `expr` reads (function names excluded); a number uses none.

    The text is parsed and its structure checked, so a bad expression raises ExprError here.
    """
    if not isinstance(expr, str):
        evaluate(expr, {}, where=where)  # rejects bool and non-numbers with the usual message
        return set()
    try:
        tree = _parse(expr)
    except ExprProblem as e:
        raise ExprError(where, expr, str(e)) from None
    called = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    return {
        node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and id(node) not in called
    }
