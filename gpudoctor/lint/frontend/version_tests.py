"""Tests on a library's version, and whether tests on one version can all hold at once.

Code that supports several releases of a framework branches on its version
(``if version.parse(tf.__version__) < version.parse("2.1.0"):``) and stops early on the
ones it no longer supports (``if ... >= "2.0.0": raise Exception("DEPRECATED")``). A
path the analysis follows can take one side of such a test in one function and the
other side of another in the next: it needs two versions at once, and no run takes it.
A finding that joins an event on such a path to another (an initialization on one side,
an environment write on the other) is one no program can meet.

Only what is sure is read: a comparison of one version expression (an attribute chain
ending in ``__version__`` or ``VERSION``, as written, inside one of the usual parse calls)
with a literal release number. Anything else is not a version test, and tests
whose subjects are written differently are never compared: a contradiction is reported
only where the code spells it out.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass

import libcst as cst

from gpudoctor.lint.frontend.literals import string_value

# Calls that turn a version string into something compared release by release
# (packaging, distutils, pkg_resources): what they wrap is what is compared. A version
# string compared as it is, is compared character by character ("2.10" < "2.9"), which
# is not read.
PARSERS = frozenset({"parse", "Version", "LooseVersion", "StrictVersion", "parse_version"})
_ATTRIBUTES = ("__version__", "VERSION")
_RELEASE = re.compile(r"\s*v?(\d+(?:\.\d+)*)")
# The operator as written, and what holds when the test is false.
_NEGATED = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}
_OPERATORS: dict[type[cst.BaseCompOp], str] = {
    cst.LessThan: "<", cst.LessThanEqual: "<=", cst.GreaterThan: ">", cst.GreaterThanEqual: ">=",
    cst.Equal: "==", cst.NotEqual: "!=",
}
_MIRRORED = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}


@dataclass(frozen=True)
class VersionTest:
    """``subject op release``: the version expression as written (``tf.__version__``),
    the operator, and the release number, padded with zeros when compared."""

    subject: str
    op: str
    release: tuple[int, ...]

    def negated(self) -> VersionTest:
        return VersionTest(self.subject, _NEGATED[self.op], self.release)


def version_test(test: object) -> VersionTest | None:
    """The version test ``test`` is (a node, or its source), or None (for anything else too)."""
    if isinstance(test, str):
        return _from_text(test)
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        target = test.comparisons[0]
        op = _OPERATORS.get(type(target.operator))
        if op is None:
            return None
        left, right = _subject(test.left), _subject(target.comparator)
        left_release, right_release = _release(test.left), _release(target.comparator)
        if left is not None and right_release is not None:
            return VersionTest(left, op, right_release)
        if right is not None and left_release is not None:
            return VersionTest(right, _MIRRORED[op], left_release)
    return None


@functools.lru_cache(maxsize=1024)
def _from_text(text: str) -> VersionTest | None:
    """A test given by its source (read back from a summary, or an early exit's name,
    "if test: raise"): only one that mentions a version is parsed."""
    text = text.strip()
    if not any(word in text for word in _ATTRIBUTES):
        return None
    if text.startswith("if ") and ":" in text:
        text = text[3:].rpartition(":")[0]
    try:
        node = cst.parse_expression(text)
    except (cst.ParserSyntaxError, RecursionError, ValueError):
        return None
    return version_test(node)


def _unwrapped(expr: cst.BaseExpression) -> cst.BaseExpression:
    while isinstance(expr, cst.Call) and len(expr.args) == 1 and expr.args[0].keyword is None:
        func = expr.func
        name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
        if name not in PARSERS:
            break
        expr = expr.args[0].value
    return expr


def _subject(expr: cst.BaseExpression) -> str | None:
    inner = _unwrapped(expr)
    if inner is expr:
        return None  # not parsed: compared as a string
    expr = inner
    if not isinstance(expr, cst.Attribute) or expr.attr.value not in _ATTRIBUTES:
        return None
    parts = []
    current: cst.BaseExpression = expr
    while isinstance(current, cst.Attribute):
        parts.append(current.attr.value)
        current = current.value
    if not isinstance(current, cst.Name):
        return None
    parts.append(current.value)
    return ".".join(reversed(parts))


def _release(expr: cst.BaseExpression) -> tuple[int, ...] | None:
    expr = _unwrapped(expr)
    text = string_value(expr) if isinstance(expr, cst.SimpleString) else None
    if not isinstance(text, str):
        return None
    found = _RELEASE.fullmatch(text)
    if found is None:  # pre-releases and local parts ("2.1.0rc1") are not read
        return None
    return tuple(int(part) for part in found.group(1).split("."))


def _padded(release: tuple[int, ...], width: int) -> tuple[int, ...]:
    return release + (0,) * (width - len(release))


def can_all_hold(tests: Iterable[VersionTest]) -> bool:
    """Is there a release for which every test holds (on each subject alone; releases
    are dense: between 2.0 and 2.1 there is always another)?"""
    by_subject: dict[str, list[VersionTest]] = {}
    for test in tests:
        by_subject.setdefault(test.subject, []).append(test)
    return all(_satisfiable(group) for group in by_subject.values())


def _satisfiable(tests: list[VersionTest]) -> bool:
    width = max(len(t.release) for t in tests)
    low: tuple[tuple[int, ...], bool] | None = None  # (bound, included)
    high: tuple[tuple[int, ...], bool] | None = None
    excluded: set[tuple[int, ...]] = set()
    for test in tests:
        release = _padded(test.release, width)
        if test.op in (">", ">=", "=="):
            bound = (release, test.op != ">")
            if low is None or bound[0] > low[0] or (bound[0] == low[0] and not bound[1]):
                low = bound
        if test.op in ("<", "<=", "=="):
            bound = (release, test.op != "<")
            if high is None or bound[0] < high[0] or (bound[0] == high[0] and not bound[1]):
                high = bound
        if test.op == "!=":
            excluded.add(release)
    if low is None or high is None:
        return True
    if low[0] < high[0]:
        return True
    return low[0] == high[0] and low[1] and high[1] and low[0] not in excluded
