"""A parsed file: parsed with libcst whole or with its function bodies left out (see
prescan.py), those bodies parsed when needed, and where its nodes are. A file that cannot
be parsed becomes a value, not a crash."""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

import libcst as cst
from libcst.metadata import CodeRange

from gpudoctor.knowledge.distributed import TEXT_PATTERN
from gpudoctor.lint.findings import Site
from gpudoctor.lint.frontend import chunked
from gpudoctor.lint.frontend.positions import every_position, locate, locate_in_statement
from gpudoctor.lint.frontend.reading import ParseFailure
from gpudoctor.lint.frontend.skeleton import Lines, body_snippet, skeleton

if TYPE_CHECKING:
    from gpudoctor.lint.frontend.prescan import Unit

__all__ = ["LazySite", "ParseFailure", "ParsedModule", "StoredSite", "concrete", "parse"]


# After this many nodes measured one by one in a tree, the whole tree is measured once.
_SEARCHES_BEFORE_ALL = 8
RANK_WORDS = re.compile(TEXT_PATTERN)


class ParsedModule:
    """A parsed file; a node's source position is computed only if a finding needs it.

    Computing every position costs more than the parse itself (docs/performance.md,
    "Positions"), and most modules the analysis reads (imported helpers) never get a
    finding; a module that does usually gets one or two (see positions.py).
    """

    def __init__(self, path: str, module: cst.Module, text: str = "",
                 elided: Sequence[tuple[cst.FunctionDef, Unit]] = (),
                 shifts: Sequence[tuple[int, int]] = ((1, 0),)) -> None:
        self.path = path
        self._shifts = list(shifts)  # (first row, rows to add), ascending: see prescan.skeleton
        self.module = module
        self._located: dict[cst.CSTNode, CodeRange] = {}
        self._every = False  # every node's position is in _located
        self._searches = 0
        self._resolved: dict[int, Site] = {}  # id(node) -> where it is (see resolve)
        self._top_rows: list[int] | None = None  # original first row of each top-level statement
        self._anchors: dict[int, cst.CSTNode] | None = None  # see anchor_of
        self._tops: dict[int, int] | None = None
        # top-level statement index -> (the row its range starts on, the ranges measured in
        # it), rows counted from the statement's own code (see locate_in_statement)
        self._statement_cache: dict[int, tuple[int, dict[cst.CSTNode, CodeRange]]] = {}
        self._statement_searches: dict[int, int] = {}  # statement index -> nodes measured in it one by one
        self._text = text
        self._lines: Lines | None = None  # the text split into lines, once a body is cut from it
        self._elided = {id(node): unit for node, unit in elided}
        self._bodies: dict[int, Sequence[cst.BaseStatement]] = {}
        self._body_trees: dict[int, ParsedModule] = {}
        self._snippets: list[ParsedModule] = []
        self._not_entries: set[int] = set()
        self._trees: dict[int, ParsedModule] = {}  # function or class node -> the tree it is in
        self._parent: ParsedModule | None = None  # for the tree of one body: the module's
        self.failures: list[ParseFailure] = []  # bodies libcst could not parse (left unanalysed)
        self._ranks: bool | None = None

    @property
    def text(self) -> str:
        """The file's whole source (function bodies left out of the parse included)."""
        return self._text or self.module.code

    @property
    def mentions_ranks(self) -> bool:
        """May a test in this file read the rank of a distributed job (its text names one)?
        Tests are evaluated for sample ranks only in files that do (analysis/ranks.py)."""
        if self._parent is not None:
            return self._parent.mentions_ranks
        if self._ranks is None:
            self._ranks = RANK_WORDS.search(self.text) is not None
        return self._ranks

    def is_elided(self, node: cst.CSTNode) -> bool:
        """Was this function's body left out of the parse, and not needed since?"""
        return id(node) in self._elided and id(node) not in self._bodies

    def tree_of(self, node: cst.CSTNode) -> ParsedModule:
        """The tree holding a function's body (or a class's): this one, or the one parsed
        for that body alone. Its positions are the cheap ones to compute for that code."""
        return self._body_trees.get(id(node)) or self._trees.get(id(node)) or self

    def home_of(self, node: cst.CSTNode) -> ParsedModule:
        """The tree a function or class statement itself is in (its header: decorators,
        defaults): this one, or the tree of the body it is nested in."""
        return self._trees.get(id(node)) or self

    def anchor_of(self, node: cst.CSTNode) -> cst.CSTNode | None:
        """The top-level statement a top-level function or a method of a top-level class is
        in (None for other nodes): a finding in the function is positioned from that
        statement's code alone (see _resolve_in_statement)."""
        if self._anchors is None:
            self._anchors = {}
            for statement in self.module.body:
                if isinstance(statement, cst.FunctionDef):
                    self._anchors[id(statement)] = statement
                elif isinstance(statement, cst.ClassDef) and isinstance(statement.body, cst.IndentedBlock):
                    for member in statement.body.body:
                        if isinstance(member, cst.FunctionDef):
                            self._anchors[id(member)] = statement
        return self._anchors.get(id(node))

    def note_tree(self, node: cst.CSTNode, tree: ParsedModule) -> None:
        """Remember that ``node`` (a nested function, lambda or class) is in ``tree``."""
        if tree is not self:
            self._trees[id(node)] = tree

    def entry_point(self, node: cst.CSTNode) -> bool:
        """Is this function of a linted file worth analysing on its own (see the prescan)?"""
        return id(node) not in self._not_entries

    def limit_entry_points(self, entries: Sequence[Unit]) -> None:
        """Of the elided functions, only ``entries`` are entry points from now on."""
        chosen = {id(u) for u in entries}
        self._not_entries = {node for node, unit in self._elided.items() if id(unit) not in chosen}

    def body(self, node: cst.FunctionDef) -> Sequence[cst.BaseStatement]:
        """The statements of a function's body, parsing an elided body now."""
        unit = self._elided.get(id(node))
        if unit is None:
            return getattr(node.body, "body", ())
        if id(node) not in self._bodies:
            if self._lines is None:
                self._lines = Lines(self._text)
            source, offset = body_snippet(self._lines, unit)
            try:
                tree = cst.parse_module(source)
            except cst.ParserSyntaxError as exc:  # CPython read it, libcst cannot (a form feed in an indent)
                reason = exc.message.rstrip(".") or "syntax error"
                self.failures.append(ParseFailure(self.path, f"cannot parse the body of {unit.name}() with libcst: "
                                                  f"{reason}", unit.body_row, 0))
                self._bodies[id(node)] = ()
                return ()
            snippet = ParsedModule(self.path, tree, shifts=[(1, offset)])
            snippet._parent = self
            # The snippet is the function, or a class holding the method (see body_snippet).
            first = snippet.module.body[0]
            full = cast(cst.FunctionDef, cast(cst.ClassDef, first).body.body[0] if unit.method else first)
            self._snippets.append(snippet)
            self._bodies[id(node)] = getattr(full.body, "body", ())
            self._body_trees[id(node)] = snippet
        return self._bodies[id(node)]

    def site(self, node: cst.CSTNode, anchor: cst.CSTNode | None = None) -> LazySite:
        return LazySite(self, node, anchor)

    def _span(self, node: cst.CSTNode) -> tuple[CodeRange, int, int] | None:
        span = self._located.get(node)
        if span is None and not self._every:
            self._searches += 1
            if self._searches > _SEARCHES_BEFORE_ALL:  # many findings here: measure all once
                self._located.update(every_position(self.module))
                self._every = True
            else:
                self._located.update(locate(self.module, node))
            span = self._located.get(node)
        if span is None:
            return None
        return span, self._shift(span.start.line), self._shift(span.end.line)

    def _top_index(self) -> dict[int, int]:
        if self._tops is None:
            self._tops = {id(statement): i for i, statement in enumerate(self.module.body)}
        return self._tops

    def _resolve_in_statement(self, node: cst.CSTNode, anchor: cst.CSTNode) -> Site | None:
        """Position ``node`` from the code of its top-level statement alone.

        Measuring a node costs a code generation of the tree up to it; for one finding in
        a large module, generating its statement is enough: the statement's first row is
        known from CPython's parse, and the rows inside it follow.
        """
        index = self._top_index().get(id(anchor))
        if index is None or self._top_rows is None or len(self._top_rows) != len(self.module.body):
            return None
        cached = self._statement_cache.get(index)
        span = cached[1].get(node) if cached is not None else None
        if span is None:  # measured alone; what else was measured with it is kept
            searches = self._statement_searches[index] = self._statement_searches.get(index, 0) + 1
            # Many findings in one statement (a pool started in each term of a long
            # expression): the whole statement is measured once, not up to each of them.
            found = locate_in_statement(self.module, anchor, anchor if searches > _SEARCHES_BEFORE_ALL else node)
            if found is None:
                return None
            if cached is None:
                cached = self._statement_cache[index] = (found[0], {})
            cached[1].update(found[1])
            span = cached[1].get(node)
            if span is None:
                return None
        assert cached is not None  # the span came from it
        head = cached[0]
        # Rows of the skeleton (elided bodies removed), then of the file.
        original = self._top_rows[index]
        skeleton_top = original - self._unshift(original)
        start = span.start.line - head + skeleton_top
        end = span.end.line - head + skeleton_top
        return Site(self.path, start + self._shift(start), span.start.column, end + self._shift(end), span.end.column)

    def _unshift(self, original_row: int) -> int:
        """The shift of the skeleton segment an original row (not in an elided body) is in."""
        shift = 0
        for start, rows in self._shifts:
            if start + rows > original_row:
                break
            shift = rows
        return shift

    def _shift(self, row: int) -> int:
        index = bisect.bisect_right(self._shifts, (row, float("inf"))) - 1
        return self._shifts[max(index, 0)][1]

    def resolve(self, node: cst.CSTNode, anchor: cst.CSTNode | None = None) -> Site:
        # One node is named by many sites (every analysis of a ring of modules makes its
        # own): its place is found once. The tree holds the node, so its id stays its own.
        found = self._resolved.get(id(node))
        if found is None:
            found = self._resolve(node, anchor)
            if found is None:  # (not kept: a snippet parsed later may hold it)
                return Site(self.path, 1, 0, 1, 0)
            self._resolved[id(node)] = found
        return found

    def _resolve(self, node: cst.CSTNode, anchor: cst.CSTNode | None) -> Site | None:
        # The walk created sites from the tree each node is in (see tree_of), so the first
        # try is nearly always right; the others are a safety net.
        if anchor is None and id(node) in self._top_index():
            anchor = node
        if anchor is not None and not self._every:
            site = self._resolve_in_statement(node, anchor)
            if site is not None:
                return site
        found = self._span(node)
        for other in (self._parent, *(self._parent or self)._snippets):
            if found is not None:
                break
            if other is not None and other is not self:
                found = other._span(node)
        if found is None:
            return None
        span, start, end = found
        return Site(self.path, span.start.line + start, span.start.column, span.end.line + end, span.end.column)


class LazySite:
    """Where a node is: compared by identity now, turned into rows and columns on demand."""

    __slots__ = ("_anchor", "_module", "_node", "_site")

    def __init__(self, module: ParsedModule, node: cst.CSTNode, anchor: cst.CSTNode | None = None) -> None:
        self._module = module
        self._node = node
        self._anchor = anchor  # the top-level statement the node is in, when known
        self._site: Site | None = None

    @property
    def path(self) -> str:
        return self._module.path

    @property
    def node(self) -> cst.CSTNode:
        """The node itself (what a fix rewrites, what a message names)."""
        return self._node

    @property
    def tree(self) -> ParsedModule:
        """The parsed tree the node is in."""
        return self._module

    @property
    def kind(self) -> str:
        """The class name of the node (``"ImportFrom"``), known without the node for a
        site read back from a module summary."""
        return type(self._node).__name__

    def concrete(self) -> Site:
        if self._site is None:
            self._site = self._module.resolve(self._node, self._anchor)
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


class StoredSite(LazySite):
    """A site read back from a module summary (summaries.py): its rows and columns and its
    node's kind, without the tree. Equal to the same place read back, never to a site of a
    tree (a summary is used in place of walking its module, never beside that walk)."""

    __slots__ = ("_kind",)

    def __init__(self, site: Site, kind: str) -> None:
        super().__init__(None, None)  # type: ignore[arg-type]
        self._site = site
        self._kind = kind

    @property
    def path(self) -> str:
        assert self._site is not None
        return self._site.path

    @property
    def kind(self) -> str:
        return self._kind

    def concrete(self) -> Site:
        assert self._site is not None
        return self._site

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StoredSite) and self._site == other._site and self._kind == other._kind

    def __hash__(self) -> int:
        return hash(self._site)

    def __repr__(self) -> str:
        return f"StoredSite({self._site}, {self._kind})"


def concrete(site: Site | LazySite) -> Site:
    """Return a plain Site for reporting."""
    return site.concrete() if isinstance(site, LazySite) else site


def _skeleton_rows(rows: Sequence[int], shifts: Sequence[tuple[int, int]]) -> list[int]:
    """The rows of a skeleton (skeleton.py) where the original ``rows`` are: each is the
    first row of a top-level statement, never inside a body left out."""
    out = []
    index = 0
    for row in rows:
        while index + 1 < len(shifts) and shifts[index + 1][0] + shifts[index + 1][1] <= row:
            index += 1
        out.append(row - shifts[index][1])
    return out


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
          top_rows: Sequence[int] = (), cut_rows: Sequence[int] = ()) -> ParsedModule | ParseFailure:
    """Parse ``text`` with libcst; syntax errors and parser limits become a ParseFailure.

    ``units`` are every function the prescan found, in order; the bodies of ``elide``
    (some of them) are left out and parsed when first needed. ``cut_rows``: where a long
    module may be cut to be parsed in pieces (chunked.py).
    """
    try:
        if elide:
            source, shifts = skeleton(text, elide)
            module = chunked.parse_module(source, _skeleton_rows(cut_rows, shifts))
            pairs = _pair(module, units, elide)
            if pairs is not None:
                parsed = ParsedModule(path, module, text, pairs, shifts)
                parsed._top_rows = list(top_rows) if top_rows else None
                return parsed
        parsed = ParsedModule(path, chunked.parse_module(text, cut_rows), text)
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
