"""Tests for runner.definition.spec: the safe evaluator of manifest expressions."""

from __future__ import annotations

import math

import numpy as np
import pytest

from runner.definition.spec import MAX_EXPR_CHARS, evaluate, evaluate_int, names_used
from runner.errors import ExprError

WHERE = "benchmarks/cases.toml: case axpy_f64: buffers[0].length"
DIMS = {"n": 1000, "k": 3, "m": 0, "alpha": 2.5}


def ev(text: str, names: dict | None = None):
    return evaluate(text, DIMS if names is None else names, where=WHERE)


def rejected(text: str, names: dict | None = None) -> str:
    """Message of the ExprError raised for `text`; every message names `where` and the text."""
    with pytest.raises(ExprError) as info:
        ev(text, names)
    message = str(info.value)
    assert message.startswith(WHERE + ": ")
    assert repr(text) in message or len(repr(text)) > 120
    assert info.value.where == WHERE and info.value.expression == text
    return message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1 + 2 * 3", 7),
        ("(1 + 2) * 3", 9),
        ("2 ** 3 ** 2", 512),  # right associative
        ("-2 ** 2", -4),  # ** binds tighter than unary minus
        ("+n - -k", 1003),
        ("n // 7", 142),
        ("-7 // 2", -4),  # floor, not truncation
        ("n % 7", 6),
        ("-7 % 3", 2),
        ("2 * n * 8", 16000),
        ("  n + 1", 1001),  # leading blanks are fine (TOML strings are often padded)
        ("0x10 + 1_000", 1016),
        ("alpha * 2", 5.0),
        ("(\n n\n + 1)", 1001),
    ],
)
def test_arithmetic_and_precedence(text, expected):
    value = ev(text)
    assert value == expected
    assert type(value) is type(expected)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ceil_div(n, 256)", 4),
        ("ceil_div(1024, 256)", 4),
        ("ceil_div(1025, 256)", 5),
        ("ceil_div(0, 256)", 0),
        ("ceil_div(-5, 2)", -2),  # ceil(-2.5)
        ("min(n, 512)", 512),
        ("max(n, 512, k)", 1000),
        ("min(k, 2.5)", 2.5),
        ("max(ceil_div(n, 128), 1) * 128", 1024),
        ("abs(m - n)", 1000),
        ("int(alpha)", 2),
        ("int(-2.7)", -2),  # toward zero
        ("int(n)", 1000),
        ("sqrt(16)", 4.0),
        ("log2(1024)", 10.0),
        ("2.0 ** 0.5", math.sqrt(2.0)),
    ],
)
def test_functions(text, expected):
    value = ev(text)
    assert value == expected
    assert type(value) is type(expected)


def test_int_exactness_for_big_values():
    assert ev("2**40 * 3") == 3298534883328
    assert ev("2**40 * 3 + 1") == 3 * 2**40 + 1
    big = 2**60 + 1  # not representable as a float: a float path would lose the +1
    assert ev("x * 3", {"x": big}) == 3 * big
    assert ev("ceil_div(x, 2)", {"x": big}) == 2**59 + 1
    assert ev("2 ** 256") == 2**256


def test_true_division_gives_float():
    assert ev("n / 4") == 250.0 and type(ev("n / 4")) is float
    assert ev("7 / 2") == 3.5


def test_numbers_pass_through_and_bool_or_other_types_rejected():
    assert evaluate(7, {}, where=WHERE) == 7 and type(evaluate(7, {}, where=WHERE)) is int
    assert evaluate(2.5, {}, where=WHERE) == 2.5
    for bad in (True, None, [1]):
        with pytest.raises(ExprError, match="expected a number or an expression string") as info:
            evaluate(bad, {}, where=WHERE)
        assert str(info.value).startswith(WHERE)


def test_name_values_must_be_numbers():
    assert ev("x + 1", {"x": np.int64(4)}) == 5  # numpy scalars are converted
    assert type(ev("x + 1", {"x": np.int64(4)})) is int
    message = rejected("x + 1", {"x": True})
    assert "name 'x' is bound to True (bool)" in message
    assert "expected an int or a float" in rejected("x", {"x": "4"})


def test_evaluate_int():
    assert evaluate_int("n / 250", DIMS, where=WHERE) == 4  # 4.0 is accepted
    assert type(evaluate_int("n / 250", DIMS, where=WHERE)) is int
    assert evaluate_int(8, DIMS, where=WHERE, minimum=1) == 8
    assert evaluate_int("n", DIMS, where=WHERE, minimum=1000) == 1000
    with pytest.raises(ExprError, match=r"expected an integer, got 4\.5") as info:
        evaluate_int("9 / 2", DIMS, where=WHERE)
    assert str(info.value).startswith(WHERE + ": expression '9 / 2'")
    with pytest.raises(ExprError, match="must be >= 1, got 0"):
        evaluate_int("m", DIMS, where=WHERE, minimum=1)
    with pytest.raises(ExprError, match="must be >= 1, got -1"):
        evaluate_int(-1, DIMS, where=WHERE, minimum=1)
    with pytest.raises(ExprError, match=r"expected an integer, got 2\.5"):
        evaluate_int(2.5, DIMS, where=WHERE)


def test_unknown_name_lists_known_names():
    message = rejected("ceil_div(nn, 256)")
    assert "unknown name 'nn'; known names: alpha, k, m, n" in message
    assert "known names: (none)" in rejected("n", {})
    assert "min is a function: call it as min(...)" in rejected("min + 1")


@pytest.mark.parametrize(
    ("text", "construct"),
    [
        ("__import__('os')", "unknown function '__import__'; known functions: abs, ceil_div"),
        ("__import__('os').system('true')", "attribute access"),
        ("n.real", "attribute access ('n.real') is not allowed"),
        ("(lambda: 1)()", "lambda"),
        ("lambda: 1", "lambda"),
        ("[x for x in (1, 2)]", "comprehension"),
        ("{x for x in (1, 2)}", "comprehension"),
        ("sum(x for x in (1, 2))", "unknown function 'sum'"),
        ("max(x for x in (1, 2))", "generator expression"),
        ("'abc'", "string literal"),
        ("n * 'a'", "string literal"),
        ("b'abc'", "bytes literal"),
        ("f'{n}'", "f-string"),
        ("n < 3", "comparison"),
        ("n == 3", "comparison"),
        ("True", "bool literal"),
        ("n + False", "bool literal"),
        ("None", "None literal"),
        ("1j", "complex literal"),
        ("n[0]", "subscript"),
        ("n and k", "boolean operator (and/or)"),
        ("not n", "'not' operator"),
        ("~n", "bitwise operator '~'"),
        ("n << 2", "bitwise operator '<<'"),
        ("n & 1", "bitwise operator '&'"),
        ("n if k else 2", "conditional expression"),
        ("(m := 3)", "assignment expression (:=)"),
        ("(n, k)", "tuple"),
        ("[n]", "list display"),
        ("{'a': 1}", "dict display"),
        ("min(n, key=k)", "keyword argument in call to min"),
        ("min(*n)", "starred expression"),
        ("n(2)", "unknown function 'n'"),
        ("(1)(2)", "call of something other than a named function"),
    ],
)
def test_disallowed_constructs(text, construct):
    message = rejected(text)
    assert construct in message


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("min(n)", "min() takes at least 2 argument(s), got 1"),
        ("max()", "max() takes at least 2 argument(s), got 0"),
        ("ceil_div(n)", "ceil_div() takes 2 argument(s), got 1"),
        ("ceil_div(n, 2, 3)", "ceil_div() takes 2 argument(s), got 3"),
        ("sqrt()", "sqrt() takes 1 argument(s), got 0"),
        ("abs(n, k)", "abs() takes 1 argument(s), got 2"),
    ],
)
def test_wrong_arity(text, problem):
    assert problem in rejected(text)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("n / m", "division by zero in 'n / m' ('m' is 0)"),
        ("n // (k - 3)", "division by zero in 'n // (k - 3)' ('k - 3' is 0)"),
        ("n % 0", "division by zero"),
        ("alpha / 0.0", "division by zero"),
        ("0.0 ** -1", "division by zero"),
        ("ceil_div(n, m)", "ceil_div divisor must be > 0, got ceil_div(1000, 0)"),
        ("ceil_div(n, -2)", "ceil_div divisor must be > 0"),
        ("ceil_div(n, 2.0)", "ceil_div expects integers"),
        ("sqrt(-1)", "sqrt of a negative number"),
        ("log2(0)", "log2 of a number that is not positive"),
    ],
)
def test_value_errors(text, problem):
    assert problem in rejected(text)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("2 ** 257", "exponent of an int base must be an int in [0, 256], got 257"),
        ("2 ** 10 ** 10", "got 10000000000"),  # refused before 10**10 digits are computed
        ("n ** -1", "got -1"),
        ("2 ** 0.5", "got 0.5"),
        ("(2 ** 200) ** 6", "integer result has more than 1000 bits"),  # refused before computing
        ("2**256 * 2**256 * 2**256 * 2**256", "integer result has more than 1000 bits"),
        ("x * x", "integer result has more than 1000 bits"),
        ("1" * 400, "integer literal has more than 1000 bits"),
        ("1e999", "float literal '1e999' overflows to inf"),
        ("1e308 * 10", "result is not a finite number (inf)"),
        ("1.5 ** 10000", "overflows a float"),
        ("(-8.0) ** 0.5", "result is not a real number"),
    ],
)
def test_resource_guards(text, problem):
    assert problem in rejected(text, {**DIMS, "x": 2**999})


def test_long_and_deep_expressions_rejected():
    long_text = "1+" * 500 + "1"
    assert len(long_text) > MAX_EXPR_CHARS
    message = rejected(long_text)
    assert f"is {len(long_text)} characters long; the limit is 1000" in message
    assert "(1001 characters)" in message  # the text itself is shortened in the message
    assert len(message) < 400
    assert "nested more than 200 levels deep" in rejected("-" * 999 + "1")
    assert "syntax error" in rejected("(" * 300 + "1" + ")" * 300)  # parser's own limit
    assert ev("1+" * 150 + "1") == 151  # moderately long sums are fine


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("n +", "syntax error at column 4"),
        ("  n +", "syntax error at column 6"),  # column counts the blanks we strip
        ("1 2", "syntax error at column 3"),
        ("n := 3", "syntax error at column 3"),
        ("ceil_div(n, ", "syntax error"),
        ("", "empty expression"),
        ("   ", "empty expression"),
        ("n\x00", "syntax error"),
    ],
)
def test_syntax_errors_name_the_expression(text, problem):
    message = rejected(text)
    assert problem in message
    assert f"expression {text!r}" in message


def test_names_used():
    assert names_used("ceil_div(n, block) * block + min(k, 4)") == {"n", "block", "k"}
    assert names_used("2 * 8") == set()
    assert names_used(42) == set()
    assert names_used("min + max(a, b)") == {"min", "a", "b"}  # a bare function name is a name
    with pytest.raises(ExprError, match="attribute access"):
        names_used("n.real")
    with pytest.raises(ExprError, match="syntax error at column 4") as info:
        names_used("n +* 2", where=WHERE)
    assert str(info.value).startswith(WHERE)
    with pytest.raises(ExprError, match="expected a number"):
        names_used(True)
