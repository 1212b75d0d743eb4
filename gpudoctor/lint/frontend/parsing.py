"""Parse a file with libcst, whole or with its function bodies left out (see prescan.py);
a file that cannot be parsed becomes a value, not a crash."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import libcst as cst

from gpudoctor.lint.analysis.reading import ParseFailure
from gpudoctor.lint.analysis.skeleton import skeleton
from gpudoctor.lint.analysis.source import ParsedModule

if TYPE_CHECKING:
    from gpudoctor.lint.analysis.prescan import Unit

__all__ = ["parse"]


def _explain(path: str, text: str, exc: cst.ParserSyntaxError) -> ParseFailure:
    """Locate the error with CPython's parser, whose positions and wording people know."""
    import ast
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(text)
    except SyntaxError as error:
        return ParseFailure(path, f"cannot parse: {error.msg}", error.lineno or 1, max((error.offset or 1) - 1, 0))
    except (ValueError, RecursionError, MemoryError):
        pass
    reason = exc.message.rstrip(".") or "syntax error"
    return ParseFailure(path, f"cannot parse with libcst: {reason}", exc.raw_line, exc.raw_column)


def parse(path: str, text: str, units: Sequence[Unit] = (), elide: Sequence[Unit] = (),
          top_rows: Sequence[int] = ()) -> ParsedModule | ParseFailure:
    """Parse ``text`` with libcst; syntax errors and parser limits become a ParseFailure.

    ``units`` are every function the prescan found, in order; the bodies of ``elide``
    (some of them) are left out and parsed when first needed.
    """
    try:
        if elide:
            source, shifts = skeleton(text, elide)
            module = cst.parse_module(source)
            pairs = _pair(module, units, elide)
            if pairs is not None:
                parsed = ParsedModule(path, module, text, pairs, shifts)
                parsed._top_rows = list(top_rows) if top_rows else None
                return parsed
        parsed = ParsedModule(path, cst.parse_module(text), text)
        parsed._top_rows = list(top_rows) if top_rows else None
        return parsed
    except cst.ParserSyntaxError as exc:
        return _explain(path, text, exc)
    except RecursionError:
        return ParseFailure(path, "cannot parse: nesting is too deep for the parser", 1, 0)


def _pair(module: cst.Module, units: Sequence[Unit],
          elide: Sequence[Unit]) -> list[tuple[cst.FunctionDef, Unit]] | None:
    """Match the elided units to their libcst nodes; None if the two parsers disagree.

    Both list top-level functions and the methods of top-level classes in source order.
    """
    defs: list[cst.FunctionDef] = []
    for statement in module.body:
        if isinstance(statement, cst.FunctionDef):
            defs.append(statement)
        elif isinstance(statement, cst.ClassDef) and isinstance(statement.body, cst.IndentedBlock):
            defs.extend(m for m in statement.body.body if isinstance(m, cst.FunctionDef))
    if len(defs) != len(units) or any(d.name.value != u.name for d, u in zip(defs, units, strict=True)):
        return None
    chosen = {id(u) for u in elide}
    return [(d, u) for d, u in zip(defs, units, strict=True) if id(u) in chosen]
