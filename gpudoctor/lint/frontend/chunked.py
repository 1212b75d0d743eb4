"""A long module parsed by libcst in pieces, and the pieces joined into one tree.

libcst's parser costs more per line the longer the module: a top level of 40,000
statements (1.3 MB) took 27 s where the same statements in pieces of 100 kB take about 8.
So a long module is cut between top-level statements into pieces of about ``PIECE_CHARS``,
each piece parsed alone, and the statements joined into one ``Module`` whose code is the
module's, byte for byte (checked: where it is not, the module is parsed whole). Blank and
comment lines at a cut belong, as libcst reads a whole module, to the statement after them.
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from gpudoctor.lint.frontend.reading import NEWLINE

PIECE_CHARS = 100_000
# A module shorter than this is parsed whole (the pieces would gain nothing).
CUT_FROM_CHARS = 2 * PIECE_CHARS


def parse_module(source: str, starts: Sequence[int] = ()) -> cst.Module:
    """``cst.parse_module(source)``, in pieces cut at rows of ``starts`` (1-based rows of
    ``source`` where a top-level statement begins, its decorators included) when the
    source is long. Raises what libcst raises."""
    if len(source) >= CUT_FROM_CHARS and len(starts) > 1:
        joined = in_pieces(source, starts, PIECE_CHARS)
        if joined is not None:
            return joined
    return cst.parse_module(source)


def in_pieces(source: str, starts: Sequence[int], piece_chars: int) -> cst.Module | None:
    """``source`` parsed in pieces of about ``piece_chars`` cut at rows of ``starts``, and
    joined; None where that would not be one piece, or the join is not ``source``."""
    line_starts = [0] + [match.end() for match in NEWLINE.finditer(source)]
    cuts = [0]
    for row in starts:
        if 1 < row <= len(line_starts):
            offset = line_starts[row - 1]
            if offset - cuts[-1] >= piece_chars and len(source) - offset >= piece_chars // 2:
                cuts.append(offset)
    if len(cuts) < 2:
        return None
    cuts.append(len(source))
    pieces = [cst.parse_module(source[start:end]) for start, end in zip(cuts, cuts[1:], strict=False)]
    joined = _join(pieces)
    if joined is None:
        return None
    # A block indented as its piece's first block is written with the piece's default
    # indent, which libcst reads from that first block: the module's is the one of the
    # pieces that writes the whole module back (all of them, when the file indents alike).
    for indent in dict.fromkeys(piece.default_indent for piece in pieces):
        candidate = joined.with_changes(default_indent=indent)
        if candidate.code == source:
            return candidate
    return None


def _join(pieces: list[cst.Module]) -> cst.Module | None:
    first, last = pieces[0], pieces[-1]
    body: list[cst.BaseStatement] = list(first.body)
    before: list[cst.EmptyLine] = list(first.footer)
    for piece in pieces[1:]:
        if not piece.body or piece.default_newline != first.default_newline:
            return None
        head = piece.body[0]
        lines = [*before, *piece.header, *head.leading_lines]
        body.append(head.with_changes(leading_lines=lines))
        body.extend(piece.body[1:])
        before = list(piece.footer)
    return first.with_changes(body=body, footer=last.footer, has_trailing_newline=last.has_trailing_newline)
