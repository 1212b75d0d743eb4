"""How deep the analysis may nest: past a bound, the part of the code further in is unknown.

The analysis interprets code by recursion: an expression inside an expression, a block
inside a block, a call into a function, an import into a module. Valid Python nests all
of these deeper than Python's own recursion limit allows an interpreter written in Python
to follow (a conditional expression of a few hundred terms, an ``elif`` chain, a ring of
modules that read each other's names). A ``RecursionError`` is no answer: it would end
the whole file's analysis, or (inside libcst) pass for a file that cannot be parsed.

So each analysis carries a meter in units of about one Python frame. The executor and the
evaluator charge it on the way in and give it back on the way out; a step that would pass
the meter's limit is not taken, and what it would have computed is unknown (no value, no
effect), the analysis's answer to everything it cannot see. The analysis runs with Python's
recursion limit raised to cover the meter (see ``headroom``), so the limit the meter
enforces, not Python's, is the one reached, at the same place wherever the analysis was
started from.

A module walk is made with the rest of the meter of the analysis that asked for it, and
remembers how deep it went (and how many walks it nested): shared between linted files
(see analysis/shared_walks.py), it serves a later request that leaves it room for that. A walk that ran
out of room depends on the room it was given, so it is not shared at all but made again
for each request: in a ring of modules calling each other's functions, each walk would ask
for the next ones from less and less room, and each of those again, without end. So the
meter counts the walks cut short an analysis makes, nested ones included, and makes no
more past a bound; a walk hands the walks inside it one fewer than it has, so walks nest
at most that deep too. The meter's limit and that bound are the run's
``Limits.max_nesting`` and ``Limits.max_cut_walks``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

# What each step costs, in Python frames it may hold on the stack until the next step is
# charged (counted on the deepest paths between them, and rounded up).
EXPRESSION = 4  # eval -> handler -> (eval_children ->) eval
BLOCK = 6  # walk_block -> walk_statement -> _s_For -> _loop -> branch -> walk_block
CALL = 8  # _e_Call -> call_value -> inline -> Analyzer.call -> walk_block
# A module walk is charged more than its frames (about 12): walks nest through one
# another's names (``a.b`` reads module ``a``, whose walk reads module ``b``...), and the
# charge bounds how deep (with the default meter, at about 45).
WALK = 60

# Frames beyond the meter: libcst parsing a module and generating code to position a
# node, and the rules, at whatever depth they are reached.
SPARE = 2_500


class Meter:
    """The nesting of one analysis: how deep it is now, the deepest it went, the module
    walks it used, and whether a step was refused for lack of room or of walks."""

    __slots__ = ("depth", "height", "limit", "peak", "tripped", "work", "work_limit")

    def __init__(self, limit: int, work_limit: int) -> None:
        self.limit = limit
        self.depth = 0
        self.peak = 0
        self.work_limit = work_limit
        self.work = 0  # module walks cut short so far (at most work_limit)
        self.height = 0  # module walks nested in one another from here, at most
        self.tripped = False

    def room(self, cost: int) -> bool:
        """Can a step of ``cost`` be taken now? (Noted when it cannot.)"""
        depth = self.depth + cost
        if depth <= self.peak:
            return True
        if depth > self.limit:
            self.tripped = True
            return False
        self.peak = depth
        return True

    def walk_room(self) -> tuple[int, int] | None:
        """The room, and the walks cut short, that a module walk started here may use;
        None (noted) when there are none left."""
        room = self.limit - self.depth - WALK
        work = self.work_limit - self.work - 1
        if room <= 0 or work < 0:
            self.tripped = True
            return None
        return room, work

    def walked(self, peak: int, height: int, work: int, tripped: bool) -> None:
        """A module walk made (or reused) from here went ``peak`` deeper, with ``height``
        walks nested in it; if it was cut short, it and ``work`` walks inside it were."""
        self.peak = max(self.peak, self.depth + WALK + peak)
        self.height = max(self.height, 1 + height)
        if tripped:
            self.work += 1 + work
            self.tripped = True


def current_depth() -> int:
    """The frames on the stack now (counted once per analysis, not per step)."""
    depth = 0
    frame: FrameType | None = sys._getframe(1)  # noqa: SLF001 - the one cheap way to count them
    while frame is not None:
        depth += 1
        frame = frame.f_back
    return depth


@contextmanager
def headroom(meter_limit: int) -> Iterator[None]:
    """Let an analysis whose meter stops at ``meter_limit`` (and SPARE frames more) nest
    from here, whatever the caller's depth (a test runner's is deeper than the command
    line's): the analysis's meter, not Python's limit, then decides where it stops. The
    previous limit is restored after."""
    before = sys.getrecursionlimit()
    wanted = current_depth() + meter_limit + SPARE
    if wanted > before:
        sys.setrecursionlimit(wanted)
    try:
        yield
    finally:
        if wanted > before:
            sys.setrecursionlimit(before)


@contextmanager
def pinned(frames: int) -> Iterator[None]:
    """Give the code inside exactly ``frames`` more frames than the caller's depth, lower
    or higher than the limit in force. CPython's own parser sizes its recursion bound from
    it (before 3.12): pinned, a file is too deep for it or not wherever it is parsed from,
    and never deeper than libcst's parser (which can crash, not raise) takes."""
    before = sys.getrecursionlimit()
    sys.setrecursionlimit(current_depth() + frames)
    try:
        yield
    finally:
        sys.setrecursionlimit(before)
