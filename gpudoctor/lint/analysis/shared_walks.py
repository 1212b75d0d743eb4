"""Module walks shared by every analysis in one process.

Importing a module runs its top level. What that does (its events and the names it binds)
depends on the module, the files of the project, how many imports deep it was reached,
and on one thing more: an import cycle. Python hands a module that is still being imported
back half-run, and the analysis does the same: a module still being walked stands for
itself with no names and no effects. So a walk depends on which of the modules it looked
up were being walked at the time, and on nothing else (within the bounds of the meter:
see the end).

Each walk remembers the modules it looked up that were being walked (its hits) and those
that were not (its misses), its own sub-walks included. A walk made for one linted file
serves any later analysis in which its hits are again being walked and its misses are
not. On a large package most linted files import the same modules through the same
package ``__init__`` files; sharing their walks keeps a cold run from walking them again
for every linted file, and the findings of each linted file are the same whatever was
analysed before it.

Code nested past the bounds of the analysis's meter (see nesting.py) is unknown, so a walk
also depends on the room it was given to nest in: one that never ran out of it serves any
request that leaves it the room it used; one that ran out is not kept at all.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from gpudoctor.lint.frontend.reading import ParseFailure

if TYPE_CHECKING:
    from gpudoctor.lint.analysis.module_state import ModuleState
    from gpudoctor.lint.analysis.values import ClassRef
    from gpudoctor.lint.frontend.project_gate import Touched
    from gpudoctor.lint.limits import Limits


# Added to the import depth a walk is kept under when it is made for a module's dense import
# cycles (Analyzer.module): such a walk is another walk of the module, at the same depth.
IN_DENSE_CYCLE = 1_000


@dataclass(frozen=True)
class Walked:
    """One module's walk and what the analysis that uses it must take over from it."""

    state: ModuleState | ParseFailure
    closure: frozenset[Path] = frozenset()  # the modules this walk analysed, itself included
    touched: Touched | None = None  # the files and folder listings it read
    failures: tuple[ParseFailure, ...] = ()  # modules it needed and could not parse
    reached: frozenset[int] = frozenset()  # ids of the function nodes it called
    # The same for a walk read back from a summary: (module, place of the node) (summaries.py)
    reached_at: frozenset[tuple[str, tuple[int, ...]]] = frozenset()
    classes: dict[ClassRef, list[ClassRef]] = field(default_factory=dict)  # bases it resolved
    # How deep it nested, and how many walks deep; whether it was cut short by the meter,
    # and how many walks inside it were (see nesting.py). A walk cut short is not kept.
    peak: int = 0
    height: int = 0
    work: int = 0
    tripped: bool = False


@dataclass
class Active:
    """A walk under way, and what its lookups found outside itself so far."""

    path: Path
    state: ModuleState
    hits: set[Path] = field(default_factory=set)
    misses: set[Path] = field(default_factory=set)


# A walk kept from an earlier run (summaries.py): (path, import depth, modules being walked,
# room, walks that may be cut short) -> (its hits, its misses, the walk), or None.
Stored = Callable[[Path, int, "frozenset[Path]", int, int], "tuple[frozenset[Path], frozenset[Path], Walked] | None"]

# Walk a module in an analysis of its own: (path, import depth, room, walks that may be cut
# short) -> the walk, and the record of what it found outside itself (Analyzer.fresh_walk).
Walk = Callable[[Path, int, int, int], tuple[Walked, Active | None]]


@dataclass(frozen=True)
class _Memo:
    hits: frozenset[Path]
    misses: frozenset[Path]
    walked: Walked


class ModuleStore:
    """The walks of one Project's modules, keyed by (path, import depth) and their cycles.

    At most ``Limits.max_kept_walks`` are kept; past it the store starts afresh. A walk is
    a function of its key and its cycles, so one made again is the same walk: forgetting
    costs time, never findings. The store makes no walk itself: the analysis that asks
    for one hands it the way to make it."""

    def __init__(self, limits: Limits) -> None:
        self._limits = limits
        self._max_kept = limits.max_kept_walks
        self._done: dict[tuple[Path, int], list[_Memo]] = {}
        self._active: list[Active] = []
        self._kept = 0
        # Walks kept from earlier runs, when the run has a cache (summaries.py), and the walks
        # made in this run, in the order they ended (a walk after the walks inside it).
        self.stored: Stored | None = None
        self.made: list[tuple[Path, int, _Memo]] = []

    def get(self, path: Path, depth: int, walk: Walk, room: int | None = None, work: int | None = None) -> Walked:
        """The walk of ``path`` reached ``depth`` imports deep, with ``room`` to nest in and
        ``work`` walks that may be cut short (see nesting.py; by default, all the project's
        limits allow), from the store or made now by ``walk``."""
        if room is None:
            room = self._limits.max_nesting
        if work is None:
            work = self._limits.max_cut_walks
        walking = {entry.path: index for index, entry in enumerate(self._active)}
        if path in walking:  # a cycle: the module is still being walked
            self._note(frozenset({path}), frozenset(), walking)
            return Walked(self._active[walking[path]].state.half_run())
        self._note(frozenset(), frozenset({path}), walking)
        for memo in self._done.get((path, depth), ()):
            walked = memo.walked
            if memo.hits <= walking.keys() and not memo.misses & walking.keys() and \
                    walked.peak <= room and walked.height <= work:
                self._note(memo.hits, memo.misses, walking)
                return walked
        if self.stored is not None:
            found = self.stored(path, depth, frozenset(walking), room, work)
            if found is not None:
                self._note(found[0], found[1], walking)
                self._done.setdefault((path, depth), []).append(_Memo(*found))
                return found[2]
        walked, entry = walk(path, depth, room, work)
        hits = frozenset(entry.hits) if entry else frozenset()
        misses = frozenset(entry.misses) if entry else frozenset()
        self._note(hits, misses, walking)
        if walked.tripped:
            # Cut short by the room or the walks it was given: another request, given
            # other room, would get another walk.
            return walked
        self._kept += 1
        if self._kept > self._max_kept:
            self._done.clear()
            self._kept = 1
        memo = _Memo(hits, misses, walked)
        self._done.setdefault((path, depth), []).append(memo)
        if self.stored is not None:
            self.made.append((path, depth, memo))
        return walked

    @property
    def busy(self) -> bool:
        """Is a module's top level being walked (what its lookups find depends on which)?"""
        return bool(self._active)

    def begin(self, path: Path, state: ModuleState) -> Active:
        """A module's top level is being walked (a linted file's own walk too)."""
        entry = Active(path, state)
        self._active.append(entry)
        return entry

    def end(self, entry: Active) -> None:
        self._active.remove(entry)

    def _note(self, hits: frozenset[Path], misses: frozenset[Path], walking: dict[Path, int]) -> None:
        """Tell every walk under way what a lookup made inside it found."""
        for index, entry in enumerate(self._active):
            # A hit on a module walked inside this walk is the walk's own business.
            entry.hits.update(h for h in hits if walking.get(h, index) < index)
            entry.misses.update(misses)

