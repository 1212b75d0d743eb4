"""Where a node is: its source range, from a code generation that measures only that node.

libcst's PositionProvider generates the tree's code and records a range for every node.
A finding needs the range of one node (and of what is inside it, for a fix or a related
site). Here the code is generated the same way, but rows and columns are counted only
inside the wanted node, and the generation stops once it is done.

The ranges are libcst's own (the provider's code does the counting), so they are
identical to the provider's. If a libcst release moves the internals used here, the
public provider is used instead. That public route (``MetadataWrapper(...).resolve``)
would multiply a position's cost by about a hundred, which is why this module reaches
into libcst's codegen state at all (measurements: docs/performance.md, "Positions").
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import cast

import libcst as cst
from libcst.metadata import BaseMetadataProvider, CodeRange, MetadataWrapper, PositionProvider

try:
    from libcst.metadata.position_provider import NEWLINE_RE, PositionProvidingCodegenState
    _INTERNALS = True
except ImportError:  # pragma: no cover - a libcst without these internals
    _INTERNALS = False

__all__ = ["every_position", "locate", "locate_in_statement"]

_NOTHING: AbstractContextManager[None] = nullcontext()


class _Done(Exception):
    """The wanted node has been generated: the rest of the tree is not needed."""


if _INTERNALS:

    class _Measuring(PositionProvidingCodegenState):
        """The provider's state, counting positions only inside ``wanted``."""

        __slots__ = ("anchor", "depth", "head", "wanted")
        anchor: cst.CSTNode | None
        depth: int
        head: int | None
        wanted: cst.CSTNode

        def add_token(self, value: str) -> None:
            self.tokens.append(value)
            if self.depth:
                self._update_position(value)

        def add_indent_tokens(self) -> None:
            self.tokens.extend(self.indent_tokens)
            if self.depth:
                for token in self.indent_tokens:
                    self._update_position(token)

        def before_codegen(self, node: cst.CSTNode) -> None:
            if not self.depth:
                if node is not self.wanted:
                    return
                rows = NEWLINE_RE.split("".join(self.tokens))
                self.line, self.column = len(rows), len(rows[-1])
            self.depth += 1
            super().before_codegen(node)

        def after_codegen(self, node: cst.CSTNode) -> None:
            if self.depth:
                super().after_codegen(node)
                self.depth -= 1
                if not self.depth:
                    raise _Done

        # libcst annotates the method with the generator context manager its decorator
        # makes; its callers only enter what it returns, which is all this one promises.
        def record_syntactic_position(  # type: ignore[override]
                self, node: cst.CSTNode, *, start_node: cst.CSTNode | None = None,
                end_node: cst.CSTNode | None = None) -> AbstractContextManager[None]:
            if self.depth:
                return super().record_syntactic_position(node, start_node=start_node, end_node=end_node)
            if node is self.anchor and start_node is None:  # where the statement's own range starts
                self.head = len(NEWLINE_RE.split("".join(self.tokens)))
            return _NOTHING


def _measure(module: cst.Module, root: cst.CSTNode, node: cst.CSTNode,
             anchor: cst.CSTNode | None = None) -> _Measuring | None:
    """Generate ``root``'s code as ``module`` would, measuring ``node``; the state once
    ``node`` is done, None if it never came (it is not in ``root``)."""
    state = _Measuring(default_indent=module.default_indent, default_newline=module.default_newline,
                       provider=PositionProvider())
    state.wanted, state.depth, state.anchor, state.head = node, 0, anchor, None
    try:
        root._codegen(state)  # noqa: SLF001
    except _Done:
        return state
    except RecursionError:
        # Code nested deeper than Python lets libcst generate it: no range measured (the
        # node is placed at its statement, or at the top of the file: see parsed.py).
        return None
    return None


def locate(module: cst.Module, node: cst.CSTNode) -> Mapping[cst.CSTNode, CodeRange]:
    """The ranges of ``node`` and of every node inside it (perhaps of others too); empty if
    ``node`` is not in ``module``."""
    if not _INTERNALS:
        return every_position(module)
    try:
        state = _measure(module, module, node)
    except (AttributeError, TypeError):  # pragma: no cover - the internals changed shape
        return every_position(module)
    return {} if state is None else _ranges(state.provider)


def locate_in_statement(module: cst.Module, statement: cst.CSTNode,
                        node: cst.CSTNode) -> tuple[int, Mapping[cst.CSTNode, CodeRange]] | None:
    """The ranges of ``node`` and of every node inside it, with rows counted from the first
    row of the code of ``statement`` (a top-level statement of ``module``) alone, leading
    comment lines included; and the row, in the same count, on which the statement's own
    range starts. None if ``node`` is not in ``statement``, or comes before that start
    (a comment line above it).

    Only the statement's code up to the end of ``node`` is generated, as the module would
    generate it: the cheap way to position a node in a large module."""
    if not _INTERNALS:
        return None
    try:
        state = _measure(module, statement, node, anchor=statement)
    except (AttributeError, TypeError):  # pragma: no cover - the internals changed shape
        return None
    if state is None:
        return None
    computed = _ranges(state.provider)
    head = state.head if state.head is not None else \
        (computed[statement].start.line if statement in computed else None)
    return None if head is None else (head, computed)


def every_position(module: cst.Module) -> Mapping[cst.CSTNode, CodeRange]:
    """Every node's range, as libcst's PositionProvider computes it.

    The provider's own code generation is run directly: a MetadataWrapper would add a
    visit of the whole tree, for nothing here (docs/performance.md, "Positions").
    """
    try:
        provider = PositionProvider()
        provider._gen_impl(module)  # noqa: SLF001
        return _ranges(provider)
    except RecursionError:  # nested deeper than libcst can generate (see _measure)
        return {}
    except AttributeError:  # pragma: no cover - the internals changed shape
        return MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)



def _ranges(provider: BaseMetadataProvider[CodeRange]) -> Mapping[cst.CSTNode, CodeRange]:
    """The ranges a provider computed. libcst types its table for any provider, whose
    values may be computed lazily; the position provider stores each range itself."""
    return cast("Mapping[cst.CSTNode, CodeRange]", provider._computed)  # noqa: SLF001
