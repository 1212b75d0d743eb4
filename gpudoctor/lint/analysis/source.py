"""Read and parse one file, once; a file that cannot be parsed becomes a value, not a crash."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider

from gpudoctor.lint.findings import Site


@dataclass(frozen=True)
class ParseFailure:
    """Why a file could not be analysed, and where."""

    path: str
    message: str
    row: int
    col: int


class ParsedModule:
    """A parsed file with the source positions of its nodes."""

    def __init__(self, path: str, module: cst.Module) -> None:
        self.path = path
        wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
        self.module = wrapper.module
        self._positions = wrapper.resolve(PositionProvider)

    def site(self, node: cst.CSTNode) -> Site:
        span: CodeRange | None = self._positions.get(node)
        if span is None:
            return Site(self.path, 1, 0, 1, 0)
        return Site(self.path, span.start.line, span.start.column, span.end.line, span.end.column)


def read_text(path: Path) -> str | ParseFailure:
    """Return the file's text, or a failure naming what is wrong with it."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        return ParseFailure(str(path), f"cannot read file: {exc.strerror or exc}", 1, 0)
    if b"\x00" in raw:
        return ParseFailure(str(path), "file contains a null byte", 1, 0)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        row = raw[: exc.start].count(b"\n") + 1
        return ParseFailure(str(path), f"file is not valid UTF-8 ({exc.reason})", row, 0)


def _explain(path: str, text: str, exc: cst.ParserSyntaxError) -> ParseFailure:
    """Locate the error with CPython's parser, whose positions and wording people know."""
    import ast

    try:
        ast.parse(text)
    except SyntaxError as error:
        return ParseFailure(path, f"cannot parse: {error.msg}", error.lineno or 1, max((error.offset or 1) - 1, 0))
    except (ValueError, RecursionError, MemoryError):
        pass
    reason = exc.message.rstrip(".") or "syntax error"
    return ParseFailure(path, f"cannot parse with libcst: {reason}", exc.raw_line, exc.raw_column)


def parse(path: str, text: str) -> ParsedModule | ParseFailure:
    """Parse ``text`` with libcst; syntax errors and parser limits become a ParseFailure."""
    try:
        return ParsedModule(path, cst.parse_module(text))
    except cst.ParserSyntaxError as exc:
        return _explain(path, text, exc)
    except RecursionError:
        return ParseFailure(path, "cannot parse: nesting is too deep for the parser", 1, 0)
