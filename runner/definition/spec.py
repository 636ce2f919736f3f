"""The suite's data model with no file and no GPU behind it: cases, buffers, params, settings,
and the geometry a case resolves to at given dims (lengths, grid, scalars, bytes, FLOPs), with
the limits a resolved case must keep. runner.definition.manifest builds these from the TOML.

`check_launch()`: what a kernel launch may ask of a GPU, grid and block extents, threads per block
and dynamic shared memory per block.

Numbers from the CUDA C++ Programming Guide, "Technical Specifications per Compute
Capability": the same for every architecture since 3.0 except the shared memory a block may
opt in to. `check_launch(..., arch=None)` holds a launch to what any GPU allows (the manifest
loader: `runner check --manifest-only`, `harness run` before a target is reached);
with an arch (`runner check --arch`) to what that architecture allows. A launch past these
limits fails on every GPU with CUDA_ERROR_INVALID_VALUE; refused at check time it names the case
and the field instead.

The inputs a suite declares (`DTYPES`, `Distribution`): the dtypes a buffer may have and the
distribution its values are drawn from, validated against the dtype (ValueError naming where).
The generator that draws them (runner.gpu.generator, on the device and its CPU twin) reads these
descriptions; the suite definition needs only this module.

`evaluate()`: safe arithmetic expressions over a case's problem dimensions. The benchmark manifest (cases.toml) writes buffer lengths, grid and block sizes, scalar
values, shared memory bytes and roofline bytes/FLOPs as expressions such as
``"ceil_div(n, 256)"`` or ``"2 * n * 8"``. Text is parsed with ``ast.parse(mode="eval")``
and the tree is walked by hand; nothing is ever passed to eval, exec or compile.

Allowed: int and float literals, names from the caller's mapping, unary ``+ -``, binary
``+ - * / // % **``, parentheses and calls to ``min max ceil_div abs sqrt log2 int``.
Integer arithmetic stays exact (Python ints); ``/`` is true division and gives a float.
Resource guards: text of at most 1000 characters, nesting of at most 200 levels, ``**``
with an int base needs an int exponent in [0, 256], int results of at most 1000 bits,
and float results must be finite."""

from __future__ import annotations

import ast
import math
import numbers
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from runner.errors import ExprError, ExprProblem, LaunchLimitError, ManifestError

DTYPES = {
    "f32": np.float32,
    "f64": np.float64,
    "i32": np.int32,
    "u32": np.uint32,
    "i64": np.int64,
    "u64": np.uint64,
}
DISTRIBUTION_KINDS = ("uniform", "integers", "edges")
F32_MAX = float(np.finfo(np.float32).max)


def check_dtype(dtype: str, where: str) -> None:
    if dtype not in DTYPES:
        raise ValueError(f"{where}: unknown dtype {dtype!r}; expected one of {', '.join(DTYPES)}")


def is_float(dtype: str) -> bool:
    """True for f32 and f64, False for the integer dtypes; ValueError for an unknown name."""
    check_dtype(dtype, "is_float")
    return dtype in ("f32", "f64")


def _is_number(value: object) -> bool:
    return isinstance(value, int | float | np.integer | np.floating) and not isinstance(
        value, bool | np.bool_
    )


@dataclass(frozen=True)
class Distribution:
    """Values of one input buffer: "uniform" floats in [low, high), or "integers" in [low, high]."""

    kind: str
    low: float | int
    high: float | int

    def validate(self, dtype: str, where: str) -> None:
        """Raise ValueError, naming `where`, unless this distribution fits `dtype`."""
        check_dtype(dtype, where)
        if self.kind not in DISTRIBUTION_KINDS:
            raise ValueError(
                f"{where}: unknown distribution {self.kind!r}; expected 'uniform' (f32, f64) "
                "or 'integers' (i32, u32, i64, u64)"
            )
        expected = "uniform" if is_float(dtype) else "integers"
        if self.kind not in (expected, "edges"):
            raise ValueError(
                f"{where}: a {dtype} buffer takes an {expected!r} distribution, got {self.kind!r}"
            )
        if self.kind == "edges" and is_float(dtype):
            self._validate_edges(dtype, where)
        elif expected == "uniform":
            self._validate_uniform(dtype, where)
        else:
            self._validate_integers(dtype, where)

    def _validate_edges(self, dtype: str, where: str) -> None:
        for name, value in (("low", self.low), ("high", self.high)):
            if not _is_number(value) or not math.isfinite(value):
                raise ValueError(f"{where}: edges {name} must be a finite number, got {value!r}")
        low, high = float(self.low), float(self.high)
        if not low <= high:
            raise ValueError(f"{where}: edges needs low <= high, got low={low!r} high={high!r}")
        if dtype == "f32":
            if max(abs(low), abs(high)) > F32_MAX:
                raise ValueError(
                    f"{where}: f32 bounds must lie within +-{F32_MAX!r}, "
                    f"got low={low!r} high={high!r}"
                )
            if f32_at_least(low) > f32_at_most(high):
                raise ValueError(f"{where}: no f32 value lies in [{low!r}, {high!r}]")

    def _validate_uniform(self, dtype: str, where: str) -> None:
        for name, value in (("low", self.low), ("high", self.high)):
            if not _is_number(value) or not math.isfinite(value):
                raise ValueError(f"{where}: uniform {name} must be a finite number, got {value!r}")
        low, high = float(self.low), float(self.high)
        if not low < high:
            raise ValueError(f"{where}: uniform needs low < high, got low={low!r} high={high!r}")
        if not math.isfinite(high - low):
            raise ValueError(
                f"{where}: uniform high - low overflows float64 (low={low!r} high={high!r})"
            )
        if dtype == "f32":
            if max(abs(low), abs(high)) > F32_MAX:
                raise ValueError(
                    f"{where}: f32 uniform bounds must lie within +-{F32_MAX!r}, "
                    f"got low={low!r} high={high!r}"
                )
            first = np.float32(low)  # the smallest f32 >= low must still be below high
            if float(first) < low:
                first = np.nextafter(first, np.float32(np.inf))
            if not float(first) < high:
                raise ValueError(
                    f"{where}: no f32 value lies in [{low!r}, {high!r}); widen the range"
                )

    def _validate_integers(self, dtype: str, where: str) -> None:
        for name, value in (("low", self.low), ("high", self.high)):
            if not isinstance(value, int | np.integer) or isinstance(value, bool | np.bool_):
                raise ValueError(f"{where}: integers {name} must be an integer, got {value!r}")
        info = np.iinfo(DTYPES[dtype])
        low, high = int(self.low), int(self.high)
        if not low <= high:
            raise ValueError(f"{where}: integers needs low <= high, got low={low} high={high}")
        if low < info.min or high > info.max:
            raise ValueError(
                f"{where}: integers [{low}, {high}] do not fit {dtype} "
                f"([{int(info.min)}, {int(info.max)}])"
            )


def full_range(dtype: str) -> tuple[float, float] | tuple[int, int]:
    """The finite values of `dtype` as (lowest, highest)."""
    check_dtype(dtype, "full_range")
    if is_float(dtype):
        top = float(np.finfo(DTYPES[dtype]).max)
        return -top, top
    info = np.iinfo(DTYPES[dtype])
    return int(info.min), int(info.max)


def f32_at_least(low: float) -> np.float32:
    """The smallest f32 at or above `low`."""
    f = np.float32(low)
    return np.nextafter(f, np.float32(np.inf)) if float(f) < low else f


def f32_at_most(high: float) -> np.float32:
    """The largest f32 at or below `high`."""
    f = np.float32(high)
    return np.nextafter(f, np.float32(-np.inf)) if float(f) > high else f


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


MAX_GRID = (2**31 - 1, 65535, 65535)


MAX_BLOCK = (1024, 1024, 64)


MAX_THREADS_PER_BLOCK = 1024


# compute capability -> the most dynamic shared memory one block may opt in to (bytes)
SHARED_BYTES_PER_BLOCK = {
    "7.0": 96 * 1024,
    "7.2": 48 * 1024,
    "7.5": 64 * 1024,
    "8.0": 163 * 1024,
    "8.6": 99 * 1024,
    "8.7": 163 * 1024,
    "8.9": 99 * 1024,
    "9.0": 227 * 1024,
    "10.0": 227 * 1024,
    "10.3": 227 * 1024,
    "12.0": 99 * 1024,
}


ANY_GPU_SHARED_BYTES = max(SHARED_BYTES_PER_BLOCK.values())


def _capability(arch: str) -> str | None:
    found = re.fullmatch(r"(?:sm|compute)_(\d+)(\d)[a-z]?", arch)
    return f"{int(found.group(1))}.{found.group(2)}" if found else None


def shared_limit(arch: str | None) -> tuple[int, str]:
    """(bytes of dynamic shared memory one block may use, what that limit is) for `arch`; the
    largest of any GPU when `arch` is None or not in the table."""
    cc = _capability(arch) if arch else None
    if cc in SHARED_BYTES_PER_BLOCK:
        return SHARED_BYTES_PER_BLOCK[cc], f"the most a block may use on {arch}"
    return ANY_GPU_SHARED_BYTES, "the most a block may use on any GPU"


def check_launch(
    grid: tuple[int, int, int],
    block: tuple[int, int, int],
    shared_bytes: int,
    *,
    where: str,
    arch: str | None = None,
) -> None:
    """LaunchLimitError naming `where` and the field when the launch exceeds the limits."""
    for name, dims, limits in (("grid", grid, MAX_GRID), ("block", block, MAX_BLOCK)):
        for axis, value, limit in zip("xyz", dims, limits, strict=True):
            if value > limit:
                raise LaunchLimitError(
                    f"{where}: {name}.{axis} = {value} is past the limit of {limit} "
                    f"(CUDA: {name} dimensions at most {list(limits)})"
                )
    threads = block[0] * block[1] * block[2]
    if threads > MAX_THREADS_PER_BLOCK:
        raise LaunchLimitError(
            f"{where}: block {list(block)} has {threads} threads, past the limit of "
            f"{MAX_THREADS_PER_BLOCK} per block"
        )
    limit, what = shared_limit(arch)
    if shared_bytes > limit:
        raise LaunchLimitError(
            f"{where}: shared_bytes = {shared_bytes} is past {limit} bytes, {what}"
        )


PARAM_KINDS = ("i32", "u32", "i64", "u64", "f32", "f64")


# The tolerance a float output is checked with where none is declared (docs/python-api.md,
# "Default tolerances"): rtol by dtype, tight enough to refuse the next lower precision; atol
# ATOL_EPS of the dtype's resolution (machine epsilon, its spacing at 1), no more than rtol:
# the cancellation error of honest arithmetic on unit-scale values (a dot product's partial sums
# rounded, an FMA contracted) with room for sums of ~1000 terms. It was atol = rtol, which for
# f64 (1e-12, 4500 ulps at 1) accepted any error up to 1e-12 at every value below 1.
ATOL_EPS = 32
_EPS = {
    "f64": float(np.finfo(np.float64).eps),
    "f32": float(np.finfo(np.float32).eps),
    "f16": float(np.finfo(np.float16).eps),
    "bf16": 2.0**-7,  # 8 significand bits (numpy has no bfloat16)
}
_DEFAULT_RTOL = {"f64": 1e-12, "f32": 1e-5, "f16": 1e-3, "bf16": 1.6e-2}
DEFAULT_TOLERANCES = {
    name: (rtol, min(rtol, ATOL_EPS * _EPS[name])) for name, rtol in _DEFAULT_RTOL.items()
}
"""{float dtype: (rtol, atol)} where a tolerance is not declared; integers and bools are exact."""

# numpy and torch names of the float dtypes; a complex dtype's parts are of its float's
FLOAT_NAMES = {
    "float64": "f64",
    "float32": "f32",
    "float16": "f16",
    "bfloat16": "bf16",
    "half": "f16",
}
_COMPLEX_PARTS = {"complex128": "f64", "complex64": "f32"}


def default_tolerance(dtype: str) -> tuple[float, float]:
    """(rtol, atol) of DEFAULT_TOLERANCES for a suite ('f32'), numpy or torch ('float32',
    'complex64': its parts') dtype name; (0.0, 0.0), exact, for any other."""
    name = FLOAT_NAMES.get(dtype) or _COMPLEX_PARTS.get(dtype) or dtype
    return DEFAULT_TOLERANCES.get(name, (0.0, 0.0))


def loosest_default_tolerance(dtypes) -> tuple[float, float]:
    """The largest default rtol and atol among `dtypes` (a case's written buffers share one
    tolerance, so each output's default must hold)."""
    found = [default_tolerance(d) for d in dtypes]
    return max((r for r, _ in found), default=0.0), max((a for _, a in found), default=0.0)


# The input sets the correctness gate checks: the buffers' declared init at both poisons, then
# the edges of each buffer's valid range (zeros, signed zeros, both ends, every magnitude).
INPUT_SETS = ("declared", "edges")


DEFAULT_SETTINGS = {
    "block": 256,
    "warmup": 10,
    "samples": 30,
    "target_sample_ms": 50.0,
    "mode": "hot",
    "timeout_s": 60.0,
    "seed": 0,
}


@dataclass(frozen=True)
class Settings:
    block: object
    warmup: int
    samples: int
    target_sample_ms: float
    mode: str
    timeout_s: float
    seed: int


@dataclass(frozen=True)
class BufferSpec:
    name: str
    dtype: str
    length: object
    role: str  # input | output | inout
    dist: Distribution | None
    seed: int
    # [min, max] the reference holds for (manifest `valid`); None: the dtype's whole range
    valid: tuple[float, float] | tuple[int, int] | None = None

    @property
    def written(self) -> bool:
        return self.role in ("output", "inout")

    @property
    def valid_range(self) -> tuple[float, float] | tuple[int, int]:
        """The declared valid range, or the dtype's whole finite range."""
        return self.valid if self.valid is not None else full_range(self.dtype)

    def inputs(self, name: str) -> Distribution | None:
        """The distribution of input set `name` (INPUT_SETS): the declared init, or the edges of
        the valid range; None for a buffer that is not generated (an output)."""
        if self.dist is None:
            return None
        if name == "declared":
            return self.dist
        if name == "edges":
            return Distribution("edges", *self.valid_range)
        raise ValueError(f"unknown input set {name!r}; expected one of {', '.join(INPUT_SETS)}")


@dataclass(frozen=True)
class ParamSpec:
    name: str
    kind: str  # "ptr" for a buffer, else a scalar type
    buffer: str | None = None
    value: object = None


@dataclass(frozen=True)
class ImplSpec:
    name: str
    role: str
    toolchain: str
    source: Path
    source_rel: str
    entry: str
    flags: tuple[str, ...] = ()
    command: str | None = None  # toolchain = "command": the compiler's command template
    # toolchain = "command": values of the variables its template declares ({name}), as pairs
    variables: tuple[tuple[str, str], ...] = ()
    arch: str | None = None  # built for this arch, not the run's (an option axis's value)
    option: str | None = None  # the option axis's point it is built for (sweep.OptionAxis)


@dataclass(frozen=True)
class Geometry:
    """A case's launch and buffers at one set of dimensions (canonical or correctness)."""

    dims: dict
    lengths: dict
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int
    scalars: dict
    bytes: float | None
    flops: float | None


@dataclass(frozen=True)
class CaseSpec:
    id: str
    version: int
    description: str
    dims: dict
    check_dims: dict
    buffers: tuple[BufferSpec, ...]
    params: tuple[ParamSpec, ...]
    grid: object
    block: object
    shared_bytes: object
    reference: str
    rtol: float
    atol: float
    exact: bool
    bytes: object
    flops: object
    flop_dtype: str | None
    settings: Settings
    impls: tuple[ImplSpec, ...]
    where: str = field(repr=False, default="")
    # the points it is measured at (runner.definition.sweep.Sweep); None: at dims alone
    sweep: object = None

    @property
    def baseline(self) -> ImplSpec:
        return next(i for i in self.impls if i.role == "baseline")

    def impl(self, name: str) -> ImplSpec:
        return next(i for i in self.impls if i.name == name)

    def buffer(self, name: str) -> BufferSpec:
        return next(b for b in self.buffers if b.name == name)

    def signature(self) -> list[tuple[str, str]]:
        """The kernel parameters in order as (name, kind), kind "ptr" for buffers."""
        return [(p.name, p.kind) for p in self.params]

    def geometry(self, dims: dict) -> Geometry:
        return resolve(self, dims)


@dataclass(frozen=True)
class Suite:
    path: Path
    root: Path
    name: str
    version: int
    gpu: str | None
    cases: tuple[CaseSpec, ...]
    sha256: str
    primary: str | None = None  # the headline candidate's implementation name

    def case(self, case_id: str) -> CaseSpec:
        for case in self.cases:
            if case.id == case_id:
                return case
        raise ManifestError(
            f"{self.path}: no case with id {case_id!r} (cases: {', '.join(c.id for c in self.cases)})"
        )

    def headline_selectors(self) -> tuple[str, ...]:
        """`runner bench --case` selectors of the headline suite: every case once, a swept one
        at its headline point (what the headline and the tools' before/after runs measure)."""
        return tuple(f"{c.id}[{c.sweep.headline}]" if c.sweep else c.id for c in self.cases)


def _dim3(value, where: str, names: dict, minimum: int = 1) -> tuple[int, int, int]:
    items = list(value) if isinstance(value, list | tuple) else [value]
    dims = [
        evaluate_int(v, names, where=f"{where}[{i}]", minimum=minimum) for i, v in enumerate(items)
    ]
    return tuple(dims + [1] * (3 - len(dims)))


def resolve(case: CaseSpec, dims: dict) -> Geometry:
    """Evaluate every expression of `case` over `dims` (raises ManifestError naming the field)."""
    w = case.where
    try:
        lengths = {
            b.name: evaluate_int(b.length, dims, where=f"{w}: buffers.{b.name}.length", minimum=0)
            for b in case.buffers
        }
        scalars = {}
        for p in case.params:
            if p.kind == "ptr":
                continue
            value = evaluate(p.value, dims, where=f"{w}: params.{p.name}.value")
            if p.kind.startswith("f"):
                scalars[p.name] = float(value)
            else:
                scalars[p.name] = evaluate_int(value, dims, where=f"{w}: params.{p.name}.value")
        grid = _dim3(case.grid, f"{w}: grid", dims)
        block = _dim3(case.block, f"{w}: block", dims)
        shared = evaluate_int(case.shared_bytes, dims, where=f"{w}: shared_bytes", minimum=0)
        nbytes = (
            None if case.bytes is None else float(evaluate(case.bytes, dims, where=f"{w}: bytes"))
        )
        flops = (
            None if case.flops is None else float(evaluate(case.flops, dims, where=f"{w}: flops"))
        )
    except ExprError as exc:
        raise ManifestError(str(exc)) from None
    _check_scalar_ranges(case, scalars)
    _check_buffer_sizes(case, lengths)
    try:  # what no GPU can launch; runner check holds it to its --arch as well
        check_launch(grid, block, shared, where=w)
    except LaunchLimitError as exc:
        raise ManifestError(str(exc)) from None
    return Geometry(dict(dims), lengths, grid, block, shared, scalars, nbytes, flops)


# No GPU has this much memory for one buffer: a length past it is a mistake in the manifest
# (the GPU box refuses sizes past the device's own memory before allocating anything).
MAX_BUFFER_BYTES = 1 << 40


def buffer_bytes(case: CaseSpec, lengths: dict[str, int]) -> dict[str, int]:
    """Each buffer's size in bytes for the given lengths (Geometry.lengths)."""
    return {b.name: lengths[b.name] * np.dtype(DTYPES[b.dtype]).itemsize for b in case.buffers}


def _check_buffer_sizes(case: CaseSpec, lengths: dict[str, int]) -> None:
    sizes = buffer_bytes(case, lengths)
    for b in case.buffers:
        nbytes = sizes[b.name]
        if nbytes > MAX_BUFFER_BYTES:
            raise ManifestError(
                f"{case.where}: buffers.{b.name}.length: {b.length!r} = {lengths[b.name]} "
                f"{b.dtype} values ({nbytes:.3g} bytes) is past the limit of "
                f"{MAX_BUFFER_BYTES:.3g} bytes for one buffer"
            )


def _check_scalar_ranges(case: CaseSpec, scalars: dict) -> None:
    for p in case.params:
        if p.kind in ("i32", "u32", "i64", "u64"):
            info = np.iinfo(DTYPES[p.kind])
            lo, hi = int(info.min), int(info.max)
            if not lo <= scalars[p.name] <= hi:
                raise ManifestError(
                    f"{case.where}: params.{p.name}.value: {scalars[p.name]} does not fit {p.kind} ([{lo}, {hi}])"
                )


def inside_suite(root: Path, relative: str, where: str) -> Path:
    """`relative` resolved under the suite's folder `root`; ManifestError when it is absolute or
    leads outside it (`..`, or a symbolic link out): a suite reads and runs only its own files."""
    if Path(relative).is_absolute():
        raise ManifestError(
            f"{where}: {relative!r} is an absolute path; give a path relative to the suite's "
            f"folder ({root})"
        )
    path = (root / relative).resolve()
    if not path.is_relative_to(root):
        raise ManifestError(
            f"{where}: {relative!r} leads outside the suite's folder ({root}, resolved to {path}); "
            "keep a suite's files under its folder"
        )
    return path
