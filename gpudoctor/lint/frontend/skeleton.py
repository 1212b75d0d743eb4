"""A module with function bodies left out, and one body on its own, at the original positions.

See the prescan: libcst parses a module with its functions' bodies elided, and each body
from its own lines when the analysis first needs it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from gpudoctor.lint.frontend.reading import NEWLINE

if TYPE_CHECKING:
    from gpudoctor.lint.frontend.prescan import Unit



def skeleton(text: str, units: Iterable[Unit]) -> tuple[str, list[tuple[int, int]]]:
    """``text`` with the bodies of ``units`` replaced by ``...``, and where its lines came from.

    The second value lists ``(row, shift)`` pairs, ascending: a skeleton row at or after
    ``row`` (up to the next pair) is original row ``row + shift``. Columns do not move.
    """
    lines = NEWLINE.split(text)
    ends = NEWLINE.findall(text) + [""]
    out: list[str] = []
    shifts: list[tuple[int, int]] = [(1, 0)]
    row = 1  # next original row to copy
    for unit in sorted(units, key=lambda u: u.body_row):
        for index in range(row - 1, unit.body_row - 1):
            out.append(lines[index] + ends[index])
        out.append(unit.indent + "..." + (ends[unit.end_row - 1] or "\n"))
        row = unit.end_row + 1
        next_row = len(out) + 1  # every chunk is one line
        shifts.append((next_row, row - next_row))
    for index in range(row - 1, len(lines)):
        out.append(lines[index] + ends[index])
    return "".join(out), shifts


class Lines:
    """A text's lines and their line breaks, split once: a long module's bodies are cut
    out of it one by one (splitting the whole text for each made that quadratic)."""

    __slots__ = ("ends", "lines")

    def __init__(self, text: str) -> None:
        self.lines = NEWLINE.split(text)
        self.ends = NEWLINE.findall(text) + [""]


def body_snippet(text: str | Lines, unit: Unit) -> tuple[str, int]:
    """Source that parses to just this function at its own columns, and its line offset.

    Line endings are the file's own: they are part of the values of multi-line strings.
    """
    split = text if isinstance(text, Lines) else Lines(text)
    lines, ends = split.lines, split.ends
    own = "".join(lines[i] + (ends[i] or "\n") for i in range(unit.def_row - 1, unit.end_row))
    if not unit.method:
        return own, unit.def_row - 1
    return "class _:" + (ends[0] or "\n") + own, unit.def_row - 2
