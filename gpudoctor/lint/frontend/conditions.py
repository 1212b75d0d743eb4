"""Conditions the executor recognises by shape: the main guard, handlers that only report."""

from __future__ import annotations

import libcst as cst

from gpudoctor.lint.frontend.literals import string_value

SWALLOWED = frozenset({"RuntimeError", "Exception", "BaseException"})
LOGGING_CALLS = ("print", "log", "logger", "logging", "warnings", "warn", "LOG", "_log")


def is_main_guard(test: cst.BaseExpression) -> bool:
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    target = test.comparisons[0]
    if not isinstance(target.operator, cst.Equal):
        return False
    sides = (test.left, target.comparator)
    names = [s for s in sides if isinstance(s, cst.Name) and s.value == "__name__"]
    mains = [s for s in sides if isinstance(s, cst.SimpleString) and string_value(s) == "__main__"]
    return bool(names and mains)


# Exceptions a statement that only touches names every target has cannot raise (see
# Executor.dead_handler): a missing attribute, a missing module or name to import.
MISSING_NAME_ERRORS = frozenset({"AttributeError", "ImportError", "ModuleNotFoundError"})


def caught_names(handler: cst.ExceptHandler | cst.ExceptStarHandler) -> list[str] | None:
    """The exception classes a handler names (None: a bare ``except``, or a class given
    by an expression other than a name)."""
    caught = handler.type
    if caught is None:
        return None
    names: list[str] = []
    parts = caught.elements if isinstance(caught, cst.Tuple) else [caught]
    for part in parts:
        expr = part.value if isinstance(part, cst.Element) else part
        if isinstance(expr, cst.Name):
            names.append(expr.value)
        elif isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "builtins":
            names.append(expr.attr.value)
        else:
            return None
    return names


def handler_swallows(handler: cst.ExceptHandler | cst.ExceptStarHandler) -> bool:
    """True if the handler catches RuntimeError and only logs, prints or passes."""
    caught = handler.type
    names: list[str] = []
    if caught is None:
        names = ["BaseException"]
    else:
        parts = caught.elements if isinstance(caught, cst.Tuple) else [caught]
        for part in parts:
            expr = part.value if isinstance(part, cst.Element) else part
            if isinstance(expr, (cst.Name, cst.Attribute)):
                names.append(expr.value if isinstance(expr, cst.Name) else expr.attr.value)
    if not SWALLOWED.intersection(names):
        return False
    return all(_only_reports(stmt) for stmt in handler.body.body)

def _only_reports(stmt: cst.CSTNode) -> bool:
    if not isinstance(stmt, cst.SimpleStatementLine):
        return False
    for small in stmt.body:
        if isinstance(small, cst.Pass):
            continue
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.Ellipsis):
            continue
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
            head = cst.helpers.get_full_name_for_node(small.value.func) or ""
            if head.split(".")[0] in LOGGING_CALLS or head.startswith("self.log"):
                continue
        return False
    return True


def condition_text(test: cst.BaseExpression, limit: int = 60) -> str:
    """A test's source on one line, shortened to ``limit`` characters (for a message)."""
    text = " ".join(cst.Module([]).code_for_node(test).split())
    return text if len(text) <= limit else text[:limit - 1] + "\u2026"
