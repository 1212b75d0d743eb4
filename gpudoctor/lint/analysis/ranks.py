"""Which ranks of a distributed job take a branch: a test evaluated for sample ranks.

``samples(test)`` evaluates an ``if`` test once per sample rank (knowledge/distributed.py:
ranks 0 and 1 of a job of two) and returns its truth on each, or None when the test does
not depend on the rank. A part it cannot evaluate is undecided (None) on that rank; a test
that reads the rank but is undecided on every sample is treated as not telling ranks apart:
no finding rests on a test gpudoctor cannot read.
"""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

from gpudoctor.knowledge import distributed as D
from gpudoctor.lint.analysis.values import distinguishes
from gpudoctor.lint.frontend.literals import string_value

# What a sub-expression is worth on one sample rank: a number, a truth value, a tuple of
# numbers (``in [-1, 0]``), or None (unknown).
_Value = int | bool | tuple[int, ...] | None
RankSamples = tuple[bool | None, ...]
__all__ = ["distinguishes", "rank_expression", "samples"]


def samples(test: cst.BaseExpression, constant: Callable[[str], int | bool | None] | None = None) -> RankSamples | None:
    """The truth of ``test`` on each sample rank, or None if it does not read the rank or
    is undecided on every sample. ``constant`` gives the value a plain name is known to
    hold where the test runs (``rank=-1`` passed to the function): it is that value on
    every rank. A test that reads the rank may still be the same on every sample
    (``local_rank == -1``: false in any distributed job): see ``distinguishes``."""
    if not _mentions_rank(test):
        return None
    values = tuple(_truth(_eval(test, rank, constant)) for rank in D.SAMPLE_RANKS)
    return None if all(v is None for v in values) else values



def rank_expression(node: cst.BaseExpression) -> bool:
    """Is ``node`` the rank itself (an assignment from it makes a rank name)?"""
    return _quantity(node) == "rank"


def _truth(value: _Value) -> bool | None:
    if value is None or isinstance(value, tuple):
        return None
    return bool(value)


def _last_name(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return node.attr.value
    return None


def _environ_key(node: cst.BaseExpression) -> str | None:
    """``os.environ["RANK"]``, ``os.environ.get("RANK", ...)``, ``os.getenv("RANK")``."""
    key: cst.BaseExpression | None = None
    if isinstance(node, cst.Subscript) and _last_name(node.value) == "environ" and len(node.slice) == 1:
        index = node.slice[0].slice
        key = index.value if isinstance(index, cst.Index) else None
    elif isinstance(node, cst.Call) and node.args and isinstance(node.func, cst.Attribute):
        owner, name = node.func.value, node.func.attr.value
        if (name == "get" and _last_name(owner) == "environ") or (name == "getenv" and _last_name(owner) == "os"):
            key = node.args[0].value
    if isinstance(key, cst.SimpleString):
        text = string_value(key)
        return text if isinstance(text, str) else None
    return None


def _quantity(node: cst.BaseExpression) -> str | None:
    """"rank", "main" (true on rank 0), "world" (the number of ranks) or None."""
    if isinstance(node, cst.Call):
        func = node.func
        name = _last_name(func)
        if isinstance(func, cst.Name) and func.value == "int" and len(node.args) == 1:
            inner = node.args[0].value
            return "rank" if _environ_key(inner) in D.RANK_VARIABLES else _quantity(inner)
        if _environ_key(node) in D.RANK_VARIABLES:
            return None  # a string: compared as one below only through int()
        if name is not None and (name in D.GROUP_RANK_CALLS or name.endswith(D.RANK_SUFFIX)):
            return "rank"  # (given a group too: the rank within it)
        if name is None or node.args:
            return None
        if name in D.RANK_CALLS:
            return "rank"
        if name in D.MAIN_FLAGS:
            return "main"
        if name in D.WORLD_CALLS:
            return "world"
        return None
    name = _last_name(node)
    if name in D.RANK_NAMES or (name is not None and name.endswith(D.RANK_SUFFIX)):
        return "rank"
    if name in D.MAIN_FLAGS:
        return "main"
    if name in D.WORLD_NAMES:
        return "world"
    return None


def _mentions_rank(node: cst.BaseExpression) -> bool:
    """Does the test read the rank? Only the expressions a test of it is made of are
    looked into (libcst's generic ``children`` is slow, and tests are many)."""
    todo: list[cst.BaseExpression] = [node]
    while todo:
        current = todo.pop()
        if _quantity(current) in ("rank", "main"):
            return True
        if isinstance(current, cst.Comparison):
            todo.append(current.left)
            todo.extend(target.comparator for target in current.comparisons)
        elif isinstance(current, (cst.BooleanOperation, cst.BinaryOperation)):
            todo.extend((current.left, current.right))
        elif isinstance(current, cst.UnaryOperation):
            todo.append(current.expression)
        elif isinstance(current, cst.Call) and isinstance(current.func, cst.Name) and current.func.value == "int":
            todo.extend(a.value for a in current.args)
    return False


def _eval(node: cst.BaseExpression, rank: int, constant: Callable[[str], int | bool | None] | None) -> _Value:
    if isinstance(node, cst.Name) and constant is not None:
        known = constant(node.value)
        if known is not None:
            return known
    quantity = _quantity(node)
    if quantity == "rank":
        return rank
    if quantity == "main":
        return rank == 0
    if quantity == "world":
        return D.SAMPLE_WORLD_SIZE
    if isinstance(node, cst.Name):
        return {"True": True, "False": False}.get(node.value)
    if isinstance(node, cst.Integer):
        try:
            return int(node.value, 0)
        except ValueError:
            return None
    if isinstance(node, (cst.List, cst.Tuple, cst.Set)):
        items = [_eval(e.value, rank, constant) for e in node.elements if isinstance(e, cst.Element)]
        if len(items) != len(node.elements) or any(type(i) is not int for i in items):
            return None
        return tuple(i for i in items if type(i) is int)
    if isinstance(node, cst.UnaryOperation):
        value = _eval(node.expression, rank, constant)
        if isinstance(node.operator, cst.Not):
            truth = _truth(value)
            return None if truth is None else not truth
        if isinstance(node.operator, cst.Minus) and type(value) is int:
            return -value
        return None
    if isinstance(node, cst.BooleanOperation):
        left = _truth(_eval(node.left, rank, constant))
        right = _truth(_eval(node.right, rank, constant))
        if isinstance(node.operator, cst.And):
            if left is False or right is False:
                return False
            return True if left and right else None
        if left is True or right is True:
            return True
        return False if left is False and right is False else None
    if isinstance(node, cst.BinaryOperation):
        a, b = _eval(node.left, rank, constant), _eval(node.right, rank, constant)
        if type(a) is not int or type(b) is not int:
            return None
        op = node.operator
        if isinstance(op, cst.Add):
            return a + b
        if isinstance(op, cst.Subtract):
            return a - b
        if isinstance(op, cst.Modulo) and b:
            return a % b
        if isinstance(op, cst.FloorDivide) and b:
            return a // b
        return None
    if isinstance(node, cst.Comparison):
        return _compare(node, rank, constant)
    return None


def _compare(node: cst.Comparison, rank: int, constant: Callable[[str], int | bool | None] | None) -> _Value:
    left = _eval(node.left, rank, constant)
    result: bool | None = True
    for target in node.comparisons:
        right = _eval(target.comparator, rank, constant)
        op = target.operator
        outcome: bool | None = None
        if isinstance(op, (cst.In, cst.NotIn)):
            if type(left) is int and isinstance(right, tuple):
                outcome = (left in right) == isinstance(op, cst.In)
        elif type(left) in (int, bool) and type(right) in (int, bool):
            assert isinstance(left, int) and isinstance(right, int)
            if isinstance(op, (cst.Equal, cst.Is)):
                outcome = left == right
            elif isinstance(op, (cst.NotEqual, cst.IsNot)):
                outcome = left != right
            elif isinstance(op, cst.LessThan):
                outcome = left < right
            elif isinstance(op, cst.LessThanEqual):
                outcome = left <= right
            elif isinstance(op, cst.GreaterThan):
                outcome = left > right
            elif isinstance(op, cst.GreaterThanEqual):
                outcome = left >= right
        if outcome is False:
            return False
        if outcome is None:
            result = None
        left = right
    return result
