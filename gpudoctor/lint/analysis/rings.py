"""Summaries of the functions of a ring of modules, shared by every analysis in one process.

In a ring, modules import one another and their functions call one another's (each module's
``run()`` calls every other module's ``run()``). A call's summary is made once per analysis
(analyzer.py), and a recursive call is cut where its function is already on the stack, so
what a ring function's summary holds depends on which of the others were being summarised
when it was made: on the order the analysis met them. Each linted file's analysis made
them all again from its own order, every function of the ring summarised in every
analysis: for n modules of n lines, n analyses of n summaries of n calls.

A ring function's summary is therefore made apart from any analysis, the same whatever
asks for it, in rounds (a Jacobi iteration): round ``r`` of a call is the function's body
run with each call it makes into the ring answered by round ``r - 1`` of that call, and
round 0 is a call that does nothing. Round ``r`` of a call depends on the call alone and on
nothing else: not on the stack, not on what was summarised before. A call into the ring
from any other code is answered by round ``RING_ROUNDS``: it sees the ring's calls that many
deep (a recursion unrolled that far), which the summary's cap on events (``max_events``)
bounds anyway. Each round is made once per process and shared by every analysis in it;
workers make their own, the same ones.

Which calls are ring calls is the analyzer's word (Analyzer.in_ring); when a module is
being walked (import time) a ring summary would depend on which modules are, so a call
made then is summarised as any other (shared_walks.py). A round is made with the room its
first asker had (see nesting.py) and serves any later ask that leaves it the room it used;
one that ran out of room is not kept, as a module walk is not.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpudoctor.lint.analysis.events import Effect, Event
    from gpudoctor.lint.analysis.values import ClassRef, FuncRef, Value
    from gpudoctor.lint.frontend.project_gate import Touched
    from gpudoctor.lint.frontend.reading import ParseFailure
    from gpudoctor.lint.limits import Limits

# How many rounds a call into a ring from outside it is answered by: calls into the ring
# followed that many deep (docs/performance.md, "Rings of functions across modules").
RING_ROUNDS = 4


@dataclass(frozen=True)
class RingSummary:
    """One round of one call into a ring, and what the analysis that takes it in must take
    over from the analysis that made it (as from a module walk: shared_walks.Walked)."""

    events: list[Event]
    result: Value
    device: Value  # the default device the call leaves
    marks: list[Event]  # its marks of ``if`` chains (Analyzer.marks_in)
    closure: frozenset[Path] = frozenset()  # the modules analysed for it
    touched: Touched | None = None  # the files and folder listings it read
    failures: tuple[ParseFailure, ...] = ()  # modules it needed and could not parse
    reached: frozenset[int] = frozenset()  # ids of the function nodes it called
    # Function node -> those it called, in its own analysis; the calls of the rounds it took
    # in are theirs (``taken``): in a ring of n functions each round of each would
    # otherwise carry the n * n calls of the whole ring (see ``call_graph``).
    calls: dict[int, frozenset[int]] = field(default_factory=dict)
    taken: tuple[RingSummary, ...] = ()
    # Functions it reached past ``max_call_depth`` (Analyzer.depth_cuts), in the order met.
    depth_cuts: dict[int, tuple[FuncRef, tuple[Value, ...], Value, dict[str, Value], Value]] = \
        field(default_factory=dict)
    classes: dict[ClassRef, list[ClassRef]] = field(default_factory=dict)  # bases it resolved
    events_cut: bool = False  # a call in it did more than ``max_events`` things
    summaries_full: bool = False  # it made more than ``max_summaries`` summaries
    # How deep it nested and how many walks deep; whether it, and how many walks inside it,
    # were cut short by the meter (see nesting.py). One cut short is not kept.
    peak: int = 0
    height: int = 0
    work: int = 0
    tripped: bool = False


# Make one round of a call with this room and these walks that may be cut short.
Make = Callable[[int, int], RingSummary]


class RingStore:
    """The rounds of the ring calls of one Project, by (call, round).

    At most ``Limits.max_kept_walks`` are kept; past it the store starts afresh: a round
    made again is the same round. The store makes none itself: the analysis that asks
    hands it the way to make it (Analyzer.ring_call)."""

    def __init__(self, limits: Limits) -> None:
        self._max_kept = limits.max_kept_walks
        self._done: dict[tuple[object, int], list[RingSummary]] = {}
        self._kept = 0
        self._marks: dict[int, RingSummary] = {}  # id(events) -> the round they are
        self._effects: dict[Effect, Effect] = {}  # the effects of the rounds kept, one object per value
        self._effect_ids: set[int] = set()  # (their ids)
        # (caller's module, callee's module) -> is a call between them a ring call, and the
        # files and listings that says so was read from (Analyzer.in_ring)
        self.pairs: dict[tuple[str, str], tuple[bool, Touched]] = {}
        self.mates: dict[Path, tuple[frozenset[Path], Touched]] = {}  # module -> those it is in a ring with

    def get(self, call: object, rounds: int, room: int, work: int, make: Make) -> RingSummary:
        """Round ``rounds`` of ``call`` (a summary key: the function and its values) for an
        ask that leaves it ``room`` to nest in and ``work`` walks that may be cut short."""
        for found in self._done.get((call, rounds), ()):
            if found.peak <= room and found.height <= work:
                return found
        made = make(room, work)
        if made.tripped:
            return made  # made with less room than it needed: another ask gets another
        self._kept += 1
        if self._kept > self._max_kept:
            self._done.clear()
            self._marks.clear()
            self._effects.clear()
            self._effect_ids.clear()
            self._kept = 1
        self._done.setdefault((call, rounds), []).append(made)
        self._marks[id(made.events)] = made
        return made

    def interned(self, events: list[Event]) -> list[Event]:
        """``events`` with each effect the one object of its value in this store: each round
        runs the function's body again, and its pool start (say) would otherwise be another
        object each round, which the rules check (and the fix rewrites) once per object."""
        known, ids = self._effects, self._effect_ids
        out = events
        for index, event in enumerate(events):
            effect = event.effect
            if id(effect) in ids:
                continue
            same = known.setdefault(effect, effect)
            if same is effect:
                ids.add(id(effect))
                continue
            if out is events:
                out = list(events)
            out[index] = replace(event, effect=same)
        return out

    def marks_of(self, events: list[Event]) -> list[Event] | None:
        """The marks of ``if`` chains in ``events`` if they are a kept round's (else None)."""
        found = self._marks.get(id(events))
        return found.marks if found is not None and found.events is events else None


def call_graph(taken: list[RingSummary], into: dict[int, set[int]], seen: set[int]) -> None:
    """Add to ``into`` the calls made in the rounds ``taken`` and in those they took in,
    each round once: those whose ids are in ``seen`` are there already (and their ids
    are added to it)."""
    todo = list(taken)
    while todo:
        summary = todo.pop()
        if id(summary) in seen:
            continue
        seen.add(id(summary))
        for caller, callees in summary.calls.items():
            into.setdefault(caller, set()).update(callees)
        todo.extend(summary.taken)
