"""One module's walk (its names and events), and the compression of an event list."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import libcst as cst

from gpudoctor.knowledge.processes import OS_FORK
from gpudoctor.lint.analysis.events import Branch, Callback, Event, Imported, Init, Merge, Start
from gpudoctor.lint.analysis.values import ClassRef, FuncRef, Value
from gpudoctor.lint.frontend.conditions import is_main_guard

if TYPE_CHECKING:
    from gpudoctor.lint.frontend.parsed import ParsedModule
    from gpudoctor.lint.limits import Limits


@dataclass
class ModuleState:
    """One module's walk: its global names, its events, what it defines and imports."""

    path: str
    # The module's tree; for a state read back from a summary (summaries.py), a function
    # that parses the module, called when a body must be analysed (see ``parsed``).
    source: ParsedModule | Callable[[], ParsedModule]
    limits: Limits  # the run's (its import events are capped: ``max_events``)
    env: dict[str, Value] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    frameworks: set[str] = field(default_factory=set)
    # Environment variables that choose a framework's backend, set at module level to a
    # literal (``KERAS_BACKEND``): variable -> value.
    backends: dict[str, str] = field(default_factory=dict)
    functions: list[FuncRef] = field(default_factory=list)
    classes: list[ClassRef] = field(default_factory=list)
    walking: bool = True
    events_cut: bool = False  # its import events were more than ``max_events`` (see compress)

    _import_events: list[Event] | None = None
    _main_guard: bool | None = None

    @property
    def parsed(self) -> ParsedModule:
        source = self.source
        if callable(source):
            source = self.source = source()
        return source

    def half_run(self) -> ModuleState:
        """What an import of this module while it is still being imported gives (an import
        cycle): no names, no effects yet."""
        return ModuleState(self.path, self.source, self.limits)

    @property
    def has_main_guard(self) -> bool:
        """Does the module's top level have an ``if __name__ == "__main__":`` block (is it
        written to be run as a script)?"""
        if self._main_guard is None:
            self._main_guard = any(isinstance(s, cst.If) and is_main_guard(s.test)
                                   for s in self.parsed.module.body)
        return self._main_guard

    @property
    def import_events(self) -> list[Event]:
        """What importing the module does: its top level, without the ``__main__`` block.

        Python runs a module once per process, so an effect reached through several
        imports counts once.
        """
        if self._import_events is None or self.walking:
            seen: set[int] = set()
            events = []
            for event in self.events:
                if event.ctx.import_time and id(event.effect) not in seen:
                    seen.add(id(event.effect))
                    events.append(event)
            self._import_events, cut = compress(events, self.limits.max_events)
            self.events_cut = self.events_cut or cut
        return self._import_events



def compress(events: list[Event], most: int) -> tuple[list[Event], bool]:
    """Keep the first init of each framework and level per fork side (of those that happen
    whatever the environment), the first import of each package per fork side, the first
    hand-over of each callback (a flow runs each once, where it was first handed over:
    FlowBuilder._with_callbacks), and at most ``most`` events; say whether some were left out.

    Past ``most``, the body's own events are kept before what its calls did (a function
    that calls many others still has its own pool start after them), then its calls' in
    order, and the marks of ``if`` chains (which pair up)."""
    seen: set[tuple[object, ...]] = set()
    callbacks: set[FuncRef] = set()
    out: list[Event] = []
    for event in events:
        effect = event.effect
        if isinstance(effect, Callback):
            if callbacks.issuperset(effect.funcs):
                continue
            callbacks.update(effect.funcs)
        if isinstance(effect, Start) and effect.kind == OS_FORK and event.ctx.via is None:
            # A fork in this body: what follows (unless on the parent side, a context of its
            # own) also runs in the child, whose first init is its own. A fork inside a
            # callee is not this: the callee's child may have ended there.
            seen.clear()
        if isinstance(effect, Init) and effect.unless is None:
            # (An init that depends on the environment at its call is kept each time: an
            # earlier one may not have happened.)
            key = (effect.framework, effect.level, event.ctx.fork_child, event.ctx.fork_parent)
            if key in seen:
                continue
            seen.add(key)
        elif isinstance(effect, Imported):
            # A process state keeps the first import of each package (flows.State.apply):
            # a package imported again (each of fifty modules a function imports importing
            # torch) changes nothing.
            imported = ("import", effect.module.split(".", 1)[0], event.ctx.fork_child, event.ctx.fork_parent)
            if imported in seen:
                continue
            seen.add(imported)
        out.append(event)
    if len(out) <= most:
        return out, False
    room = most - sum(1 for event in out if _own(event))
    kept = []
    for event in out:
        if _own(event):
            kept.append(event)
        elif room > 0:
            kept.append(event)
            room -= 1
    return kept[:most], True


def _own(event: Event) -> bool:
    """Is ``event`` the body's own (not inside a call it makes), or a mark of an ``if`` chain?"""
    return event.ctx.via is None or isinstance(event.effect, (Branch, Merge))
