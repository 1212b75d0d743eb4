"""Module walks shared by every analysis in one process.

Importing a module runs its top level. What that does (its events and the names it binds)
depends on the module, the files of the project, how many imports deep it was reached,
and on one thing more: an import cycle. Python hands a module that is still being imported
back half-run, and the analysis does the same: a module still being walked stands for
itself with no names and no effects. So a walk depends on which of the modules it looked
up were being walked at the time, and on nothing else.

Each walk remembers the modules it looked up that were being walked (its hits) and those
that were not (its misses), its own sub-walks included. A walk made for one linted file
serves any later analysis in which its hits are again being walked and its misses are
not. On a large package most linted files import the same modules through the same
package ``__init__`` files; sharing their walks keeps a cold run from walking them again
for every linted file, and the findings of each linted file are the same whatever was
analysed before it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from gpudoctor.lint.analysis.reading import ParseFailure

if TYPE_CHECKING:
    from gpudoctor.lint.analysis.module_state import ModuleState
    from gpudoctor.lint.analysis.project import Project, Touched
    from gpudoctor.lint.analysis.values import ClassRef


@dataclass(frozen=True)
class Walked:
    """One module's walk and what the analysis that uses it must take over from it."""

    state: ModuleState | ParseFailure
    closure: frozenset[Path] = frozenset()  # the modules this walk analysed, itself included
    touched: Touched | None = None  # the files and folder listings it read
    failures: tuple[ParseFailure, ...] = ()  # modules it needed and could not parse
    reached: frozenset[int] = frozenset()  # ids of the function nodes it called
    classes: dict[ClassRef, list[ClassRef]] = field(default_factory=dict)  # bases it resolved


@dataclass
class Active:
    """A walk under way, and what its lookups found outside itself so far."""

    path: Path
    state: ModuleState
    hits: set[Path] = field(default_factory=set)
    misses: set[Path] = field(default_factory=set)


@dataclass(frozen=True)
class _Memo:
    hits: frozenset[Path]
    misses: frozenset[Path]
    walked: Walked


# Walks kept at most; past it the store starts afresh. A walk is a function of its key and
# its cycles, so one made again is the same walk: forgetting costs time, never findings.
MAX_KEPT = 2_000


class ModuleStore:
    """The walks of one Project's modules, keyed by (path, import depth) and their cycles."""

    def __init__(self, project: Project) -> None:
        self.project = project
        self._done: dict[tuple[Path, int], list[_Memo]] = {}
        self._active: list[Active] = []
        self._kept = 0

    def get(self, path: Path, depth: int) -> Walked:
        """The walk of ``path`` reached ``depth`` imports deep, from the store or made now."""
        walking = {entry.path: index for index, entry in enumerate(self._active)}
        if path in walking:  # a cycle: the module is still being walked
            self._note(frozenset({path}), frozenset(), walking)
            return Walked(_half_run(self._active[walking[path]].state))
        self._note(frozenset(), frozenset({path}), walking)
        for memo in self._done.get((path, depth), ()):
            if memo.hits <= walking.keys() and not memo.misses & walking.keys():
                self._note(memo.hits, memo.misses, walking)
                return memo.walked
        walked, entry = self._walk(path, depth)
        self._kept += 1
        if self._kept > MAX_KEPT:
            self._done.clear()
            self._kept = 1
        hits = frozenset(entry.hits) if entry else frozenset()
        misses = frozenset(entry.misses) if entry else frozenset()
        self._done.setdefault((path, depth), []).append(_Memo(hits, misses, walked))
        self._note(hits, misses, walking)
        return walked

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

    def _walk(self, path: Path, depth: int) -> tuple[Walked, Active | None]:
        from gpudoctor.lint.analysis.analyzer import Analyzer

        analyzer = Analyzer(self.project, depth=depth)
        with self.project.tracking() as touched:
            state, entry = analyzer.walk_own(path)
        failures = tuple(analyzer.failures)
        if isinstance(state, ParseFailure) and state not in failures:
            failures = (state, *failures)
        walked = Walked(state, frozenset(analyzer.closure | {path}), touched, failures,
                        frozenset(analyzer.reached), dict(analyzer.class_bases))
        return walked, entry


def _half_run(state: ModuleState) -> ModuleState:
    """What an import of a module still being imported gives: no names, no effects yet."""
    from gpudoctor.lint.analysis.module_state import ModuleState

    return ModuleState(state.path, state.parsed)
