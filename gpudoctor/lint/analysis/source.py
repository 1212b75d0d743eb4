"""Read and parse one file, once; a file that cannot be parsed becomes a value, not a crash."""

from __future__ import annotations

from collections.abc import Mapping
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
    """A parsed file; source positions are computed only if a finding needs one.

    Computing positions costs several times the parse itself, and most modules the
    analysis reads (imported helpers) never get a finding.
    """

    def __init__(self, path: str, module: cst.Module) -> None:
        self.path = path
        self._wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
        self.module = self._wrapper.module
        self._positions: Mapping[cst.CSTNode, CodeRange] | None = None

    def site(self, node: cst.CSTNode) -> LazySite:
        return LazySite(self, node)

    def resolve(self, node: cst.CSTNode) -> Site:
        if self._positions is None:
            self._positions = self._wrapper.resolve(PositionProvider)
        span = self._positions.get(node)
        if span is None:
            return Site(self.path, 1, 0, 1, 0)
        return Site(self.path, span.start.line, span.start.column, span.end.line, span.end.column)


class LazySite:
    """Where a node is: compared by identity now, turned into rows and columns on demand."""

    __slots__ = ("_module", "_node", "_site")

    def __init__(self, module: ParsedModule, node: cst.CSTNode) -> None:
        self._module = module
        self._node = node
        self._site: Site | None = None

    @property
    def path(self) -> str:
        return self._module.path

    def concrete(self) -> Site:
        if self._site is None:
            self._site = self._module.resolve(self._node)
        return self._site

    @property
    def row(self) -> int:
        return self.concrete().row

    @property
    def col(self) -> int:
        return self.concrete().col

    @property
    def end_row(self) -> int:
        return self.concrete().end_row

    @property
    def end_col(self) -> int:
        return self.concrete().end_col

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LazySite) and self._node is other._node

    def __hash__(self) -> int:
        return id(self._node)

    def __repr__(self) -> str:
        return f"LazySite({self.path}, {type(self._node).__name__})"


def concrete(site: Site | LazySite) -> Site:
    """Return a plain Site for reporting."""
    return site.concrete() if isinstance(site, LazySite) else site


def read_text(path: Path) -> str | ParseFailure:
    """Return the file's text (PEP 263 encoding declarations honoured), or why it has none."""
    import io
    import tokenize

    try:
        raw = path.read_bytes()
    except OSError as exc:
        return ParseFailure(str(path), f"cannot read file: {exc.strerror or exc}", 1, 0)
    if b"\x00" in raw:
        return ParseFailure(str(path), "file contains a null byte", 1, 0)
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
    except SyntaxError as exc:
        return ParseFailure(str(path), f"cannot read file: {exc.msg}", 1, 0)
    try:
        return raw.decode(encoding)
    except UnicodeDecodeError as exc:
        row = raw[: exc.start].count(b"\n") + 1
        return ParseFailure(str(path), f"file is not valid {encoding.upper()} ({exc.reason})", row, 0)
    except LookupError:
        return ParseFailure(str(path), f"unknown source encoding {encoding!r}", 1, 0)


def syntax_failure(path: str, text: str) -> ParseFailure | None:
    """Check syntax with CPython's parser only (several times faster than libcst)."""
    import ast

    try:
        ast.parse(text)
    except SyntaxError as error:
        return ParseFailure(path, f"cannot parse: {error.msg}", error.lineno or 1, max((error.offset or 1) - 1, 0))
    except (ValueError, RecursionError, MemoryError) as error:
        return ParseFailure(path, f"cannot parse: {error}", 1, 0)
    return None


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
