"""The state of one linted file's analysis: module walks and function summaries (classes: classes.py).

Summaries are memoized per (function, abstract argument values), which makes the
analysis context-sensitive on arguments while computing each summary once. The Analyzer
is the Interpreter (interpreter.py) the executor and the evaluator run in: it makes their
frames, one per module walk and per function summary, and answers their calls and imports.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import libcst as cst

from gpudoctor.lint.analysis.classes import ClassModel
from gpudoctor.lint.analysis.events import Branch, Context, Event, Merge
from gpudoctor.lint.analysis.executor import Executor
from gpudoctor.lint.analysis.module_state import ModuleState, compress
from gpudoctor.lint.analysis.rings import RING_ROUNDS, RingSummary, call_graph
from gpudoctor.lint.analysis.shared_walks import IN_DENSE_CYCLE, Active, Walked
from gpudoctor.lint.analysis.summaries import place_of
from gpudoctor.lint.analysis.values import (
    DEFAULT_DEVICE,
    UNKNOWN,
    Atom,
    Bool,
    ClassRef,
    FuncRef,
    ModRef,
    ModuleObj,
    Value,
    container,
    literal_default,
    one,
    ordered,
)
from gpudoctor.lint.frontend.parsed import ParseFailure
from gpudoctor.lint.nesting import CALL, Meter

if TYPE_CHECKING:
    from gpudoctor.lint.analysis.project import Project
    from gpudoctor.lint.frontend.parsed import LazySite


NOT_ANALYSED = "not analysed"
HALF_IMPORTED = "imported half-run, in an import cycle"
# A module in import cycles of two with at least this many modules is walked, when one of
# them imports it, as a member of a dense cycle (see Analyzer.module).
DENSE_CYCLE = 3
# A module the code needs by name (a function it calls, a program's own import) is walked
# past the budget of modules followed, up to this many times that budget.
DIRECT_ROOM = 3


class Analyzer:
    """Walks modules and functions on demand and remembers every result.

    Following imports is what finds a pool built in a helper module, but on a large code
    base it would walk the whole import graph: import-time effects are followed
    ``max_import_depth`` imports deep, and once the modules analysed that were not asked
    for (counting the modules their walks analysed) hold ``max_extra_chars`` of source, or
    are ``max_extra_modules``, no new one is (the project's ``Limits``). The budget is in
    characters, what parsing costs: a package of many small modules does not use it up
    before the import after it. The linted file's own imports count too.
    """

    def __init__(self, project: Project, linted: frozenset[Path] = frozenset(), depth: int = 0,
                 limit: int | None = None, work: int | None = None,
                 half_imported: frozenset[Path] = frozenset()) -> None:
        self.project = project
        self._half_imported = half_imported  # modules this walk meets half-run (see ``module``)
        self.limits = limits = project.limits
        # How deep this analysis nests (see nesting.py); a module walk is given the room and
        # the walks cut short left to the analysis that asked for it.
        self.meter = Meter(limits.max_nesting if limit is None else limit,
                           limits.max_cut_walks if work is None else work)
        self.linted = frozenset(project.real(p) for p in linted)
        self._depth = depth  # how many imports deep this analysis starts
        self._import_depth = 0
        self._modules: dict[Path, ModuleState | ParseFailure] = {}
        # Per call: its events, its return value, and the default device it leaves.
        self._summaries: dict[tuple[object, ...], tuple[list[Event], Value, Value]] = {}
        self._stack: list[tuple[object, ...]] = []
        self.classes = ClassModel(self)  # the project classes this analysis met
        self.reached: set[int] = set()  # ids of function nodes some caller or pool reaches
        self.reached_at: set[tuple[str, tuple[int, ...]]] = set()  # the same, from summaries (shared_walks.py)
        self.failures: list[ParseFailure] = []  # modules the analysis needed and could not parse
        self.closure: set[Path] = set()  # the modules analysed for it, walked here or shared
        # The closure's characters: the sizes of the modules in ``_costed`` (a module's
        # size, once known, stays), and those whose size was not known yet (asked again).
        self._cost = 0
        self._costed: set[Path] = set()
        self._unsized: set[Path] = set()
        self.linted_paths = frozenset(str(p) for p in self.linted)
        self.failed_imports: dict[str, LazySite] = {}  # unparseable module -> import in a linted file
        self.calls: dict[int, set[int]] = {}  # function node -> the function nodes it called
        self.summaries_full = False  # a call was not followed: ``max_summaries`` calls were
        self.events_cut = False  # a call did more than ``max_events`` things (module_state.compress)
        # Event lists (a call's summary, handed to many callers) -> the marks of ``if`` chains in them.
        self._marks: dict[int, tuple[list[Event], list[Event]]] = {}
        # Functions a chain of calls reached past ``max_call_depth``, not followed there: by
        # node, the first such call's function and values (see FlowBuilder.cut_flows).
        self.depth_cuts: dict[int, tuple[FuncRef, tuple[Value, ...], Value, dict[str, Value], Value]] = {}
        self._defaults: dict[int, dict[str, Value]] = {}  # function node -> its evaluated defaults
        # Rings of modules (rings.py): the round this analysis makes (None: it is a linted
        # file's analysis, or a module walk), and whether a call between two modules is a ring call.
        self._round: int | None = None
        self._ring_pairs: dict[tuple[str, str], bool] = {}
        self._mates: dict[Path, frozenset[Path]] = {}
        self._taken: dict[int, RingSummary] = {}  # the rounds of ring calls it took in, by id
        self._merged: set[int] = set()  # those whose calls are in ``calls`` (see ``call_graph``)

    # -- modules -------------------------------------------------------------------------
    def module(self, path: Path, direct: bool = False, importer: Path | None = None,
               needed: bool = False) -> ModuleState | ParseFailure:
        """The module's walk (its top level run once in this analysis), or why there is
        none. ``direct``: the code calls a function of it, or a linted program imports it
        (_run_import), which the budget of modules followed refuses only at DIRECT_ROOM
        times its size. ``importer``: the module whose import statement runs it.

        A module in a dense import cycle (import cycles of two with DENSE_CYCLE modules or
        more), imported by one of them, is walked once for all of them: with every module of
        those cycles half-run, whichever are really being imported at the time. Walked as
        Python runs it, its walk would depend on which of them were (shared_walks.py), and a
        ring of n modules that all import one another has about n**3 such orders within the
        import depth followed: 60 of them took minutes and gigabytes. What is lost is the
        names such a module takes at import time from one of those it is in a cycle with.
        """
        key = self.project.real(path)
        if key in self._half_imported:
            return ParseFailure(str(key), HALF_IMPORTED, 1, 0)
        found = self._modules.get(key)
        if found is not None and not ((direct or needed) and isinstance(found, ParseFailure)
                                      and found.message == NOT_ANALYSED):
            return found
        if key in self.linted:
            return self.walk_own(key)[0]
        if self._spent(DIRECT_ROOM if direct or needed else 1) or \
                not (needed or self.project.gate.worth_following(key)):
            # Not analysed: names from it stay unknown (no effect assumed).
            failure = self._modules[key] = ParseFailure(str(key), NOT_ANALYSED, 1, 0)
            return failure
        meter = self.meter
        room = meter.walk_room()
        if room is None:
            # Walks nested or used past the meter: the module is unknown from here (not
            # kept as such: reached from less deep, it is walked).
            return ParseFailure(str(key), NOT_ANALYSED, 1, 0)
        depth = self._depth + self._import_depth
        dense = False
        if self._round is not None and importer is None:
            # A ring's module, in a round of a ring call: reached as its mates' imports reach it.
            dense = bool(self._ring_mates(key))
        if dense or (importer is not None and self.project.real(importer) in self.project.imported(key)):
            mates = self.project.cycle_mates(key)
            if len(mates) >= DENSE_CYCLE:
                depth += IN_DENSE_CYCLE
        walked = self.project.walks.get(key, depth, self.fresh_walk, *room)
        meter.walked(walked.peak, walked.height, walked.work, walked.tripped)
        self._modules[key] = walked.state
        self.closure |= walked.closure
        if walked.touched is not None:
            self.project.note_touched(walked.touched)
        self.failures.extend(f for f in walked.failures if f not in self.failures)
        self.reached |= walked.reached
        self.reached_at |= walked.reached_at
        for cls, bases in walked.classes.items():
            self.classes.class_bases.setdefault(cls, bases)
        return walked.state

    def fresh_walk(self, path: Path, depth: int, room: int, work: int) -> tuple[Walked, Active | None]:
        """Walk ``path`` in an analysis of its own, started ``depth`` imports deep with
        ``room`` to nest in and ``work`` walks that may be cut short: a walk any analysis of
        the project may reuse (walks.py)."""
        half: frozenset[Path] = frozenset()
        if depth >= IN_DENSE_CYCLE:  # walked for the dense cycles it is in (see ``module``)
            depth -= IN_DENSE_CYCLE
            half = self.project.cycle_mates(path)
        analyzer = Analyzer(self.project, depth=depth, limit=room, work=work, half_imported=half)
        with self.project.tracking() as touched:
            state, entry = analyzer.walk_own(path)
        failures = tuple(analyzer.failures)
        if isinstance(state, ParseFailure) and state not in failures:
            failures = (state, *failures)
        meter = analyzer.meter
        walked = Walked(state, frozenset(analyzer.closure | {path}), touched, failures,
                        frozenset(analyzer.reached), frozenset(analyzer.reached_at),
                        dict(analyzer.classes.class_bases), meter.peak, meter.height, meter.work, meter.tripped)
        return walked, entry

    def marks_in(self, events: list[Event]) -> list[Event]:
        """The marks of ``if`` chains among ``events`` (Branch, Merge), found once per list
        (a summary is taken in by every call of the function: Frame.take)."""
        found = self._marks.get(id(events))
        if found is None or found[0] is not events:
            ring = self.project.rings.marks_of(events)
            if ring is not None:
                return ring
            found = self._marks[id(events)] = (events, [e for e in events if isinstance(e.effect, (Branch, Merge))])
        return found[1]

    def class_site(self, cls: ClassRef) -> LazySite | None:
        """Where ``cls`` is defined (its ``class`` statement), or None if its module cannot
        be parsed: what stands for the threads of a Thread subclass (a start and a join of
        its instances, which the analysis knows by class only)."""
        state = self.module(self.project.path_of(cls.module), direct=True)
        if not isinstance(state, ModuleState):
            return None
        home = state.parsed.home_of(cls.node)
        return home.site(cls.node, state.parsed.anchor_of(cls.node) if home is state.parsed else None)

    def cut_events(self) -> bool:
        """Did a call, or the import of a module, do more than ``max_events`` things (some
        of them left out: module_state.compress)?"""
        return self.events_cut or any(isinstance(state, ModuleState) and state.events_cut
                                      for state in self._modules.values())

    def is_reached(self, func: FuncRef) -> bool:
        """Does some caller or pool of this analysis reach ``func``?"""
        if id(func.node) in self.reached:
            return True
        if not self.reached_at:
            return False
        place = place_of(self.project, func.module, func.node)
        return place is not None and (func.module, place) in self.reached_at

    def reached_of(self, deferred: dict[str, frozenset[str]]) -> dict[str, list[str]]:
        """Of the functions other files leave to their callers (``deferred``: path -> the
        names the project uses from it), those this analysis reached, by qualified name:
        each module's functions and its classes' methods, read from the modules walked."""
        out: dict[str, list[str]] = {}
        for key, state in self._modules.items():
            names = deferred.get(str(key))
            if not names or not isinstance(state, ModuleState):
                continue
            found = [func.qualname for func in state.functions
                     if func.qualname in names and self.is_reached(func)]
            for cls in state.classes:
                if cls.qualname.split(".", 1)[0] not in names:
                    continue
                for statement in cls.node.body.body:
                    if isinstance(statement, cst.FunctionDef) and self.is_reached(
                            FuncRef(cls.module, f"{cls.qualname}.{statement.name.value}", statement)):
                        found.append(f"{cls.qualname}.{statement.name.value}")
            if found:
                out[str(key)] = sorted(found)
        return out

    def _spent(self, times: int = 1) -> bool:
        """Is ``times`` the budget of modules followed used up (see the class docstring)?"""
        if len(self.closure) >= self.limits.max_extra_modules * times:
            return True
        if len(self.closure) != len(self._costed) or self._unsized:  # the closure only grows
            size = self.project.size
            for path in [*(self.closure - self._costed), *self._unsized]:
                self._costed.add(path)
                known = size(path)
                self._cost += known
                if known:
                    self._unsized.discard(path)
                else:
                    self._unsized.add(path)
        return self._cost >= self.limits.max_extra_chars * times

    def walk_own(self, key: Path) -> tuple[ModuleState | ParseFailure, Active | None]:
        """Walk a module's top level in this analysis (see walks.py for what it depends on)."""
        parsed = self.project.parsed(key)
        if isinstance(parsed, ParseFailure):
            self._modules[key] = parsed
            self.failures.append(parsed)
            return parsed, None
        if key in self.linted:
            entries = self.project.entry_points(key)
            if entries is not None:
                parsed.limit_entry_points(entries)
        state = ModuleState(str(key), parsed, self.limits)
        self._modules[key] = state
        executor = Executor(self, state, state.env, module_level=True, ctx=Context(import_time=True))
        active = self.project.walks.begin(key, state)
        try:
            executor.walk_block(parsed.module.body)
        finally:
            self.project.walks.end(active)
            state.events = executor.events
            state.walking = False
        return state, active

    def import_module(self, importer: str, dotted: str, level: int,
                      site: LazySite | None) -> tuple[Value, list[ModuleState]]:
        """What an import of ``dotted`` at ``site`` in module ``importer`` binds, and the
        project modules whose top level it ran, in order (see Interpreter.import_module)."""
        origin = self.project.path_of(importer)
        target = self.project.resolve(origin, dotted, level)
        if target is None:
            return (one(ModRef(dotted)) if dotted and not level else UNKNOWN), []
        ran: list[ModuleState] = []
        if site is not None:
            parts = dotted.split(".")
            for cut in range(1, len(parts)):  # parent packages run first
                parent = self.project.resolve(origin, ".".join(parts[:cut]), level)
                if parent is not None:
                    self._run_import(importer, parent, site, ran)
            self._run_import(importer, target, site, ran)
        return self.module_value(target), ran

    def module_value(self, path: Path) -> Value:
        """What a name bound to a project module holds: the module, and for a public module
        of a package named like a GPU framework also its qualified name (Project.framework_name),
        so that the knowledge tables apply to what it binds as they would to the installed
        framework, while the project's code is still followed for what it does besides."""
        qualname = self.project.framework_name(path)
        module = ModuleObj(str(path))
        return frozenset((module, ModRef(qualname))) if qualname else one(module)

    def import_submodule(self, importer: str, package: Value, full: str, level: int,
                         site: LazySite) -> tuple[Value, list[ModuleState]]:
        """``from package import name`` where the package binds no ``name``: Python imports
        the submodule ``package.name``, running its top level."""
        origin = self.project.path_of(importer)
        for atom in ordered(package):
            if isinstance(atom, ModuleObj) and atom.path.endswith("__init__.py"):
                init = self.project.path_of(atom.path)
                state = self.module(init)
                name = full.rsplit(".", 1)[-1]
                if isinstance(state, ModuleState) and name in state.env:
                    return UNKNOWN, []  # the package's own name wins
                if not isinstance(state, ModuleState):  # not walked: does its code bind it?
                    scan = self.project.prescan(init)
                    text = self.project.text(init)
                    if scan is None or name in scan.names or isinstance(text, ParseFailure) or \
                            re.search(rf"^\s*(?:async\s+)?(?:def|class)\s+{re.escape(name)}\b", text, re.M):
                        return UNKNOWN, []
                if self.project.resolve(origin, full, level) is not None:
                    return self.import_module(importer, full, level, site)
        if not any(isinstance(atom, ModuleObj) for atom in package) and \
                self.project.resolve(origin, full, level) is not None:
            return self.import_module(importer, full, level, site)  # a namespace package's module
        return UNKNOWN, []

    def _run_import(self, importer: str, path: Path, site: LazySite, ran: list[ModuleState]) -> None:
        """Run a project module's top level for an import in ``importer``; add it to ``ran``
        unless it cannot be run (unparseable, not analysed, or still being imported)."""
        if self._depth + self._import_depth >= self.limits.max_import_depth:
            return
        self._import_depth += 1
        known = len(self.failures)
        try:
            # A program's own imports (a linted script with a main guard, a notebook) are
            # what it runs: the budget of modules followed does not refuse them (a large
            # package imported first must not hide the helper imported next, whose
            # function the script calls). A library module's imports stay within it.
            state = self.module(path, direct=importer in self.linted_paths and self._program(importer),
                                importer=self.project.path_of(importer))
        finally:
            self._import_depth -= 1
        if importer in self.linted_paths:
            for failure in self.failures[known:]:  # reached through this import of a linted file
                self.failed_imports.setdefault(failure.path, site)
        if isinstance(state, ModuleState) and not state.walking:
            ran.append(state)

    def _program(self, path: str) -> bool:
        """Is the linted file ``path`` run as a program (the gate's fact)?"""
        return self.project.gate.facts(self.project.path_of(path)).program

    def import_effects(self, importer: str, dotted: str) -> list[Event]:
        """What importing the project module ``dotted`` runs in a process that has not
        imported it yet: its packages' top level, then its own (for a module named to the
        forkserver's preload list). Empty for a module outside the project."""
        origin = self.project.path_of(importer)
        parts = dotted.split(".")
        events: list[Event] = []
        for cut in range(1, len(parts) + 1):
            target = self.project.resolve(origin, ".".join(parts[:cut]), 0)
            if target is None or self._depth + self._import_depth >= self.limits.max_import_depth:
                continue
            self._import_depth += 1
            try:
                state = self.module(target)
            finally:
                self._import_depth -= 1
            if isinstance(state, ModuleState) and not state.walking:
                events.extend(state.import_events)
        return events

    def import_star(self, value: Value) -> list[tuple[str, Value]]:
        """The public names, with their values, of the project modules in ``value``."""
        names: list[tuple[str, Value]] = []
        for atom in ordered(value):
            if isinstance(atom, ModuleObj):
                state = self.module(self.project.path_of(atom.path))
                if not isinstance(state, ParseFailure):
                    names.extend((name, bound) for name, bound in list(state.env.items()) if not name.startswith("_"))
        return names

    def needed_member(self, atom: Atom, attr: str) -> Value:
        return self.module_member(atom, attr, needed=True)

    def module_member(self, atom: Atom, attr: str, needed: bool = False) -> Value:
        if not isinstance(atom, ModuleObj):
            return UNKNOWN
        path = self.project.path_of(atom.path)
        state = self.module(path, needed=needed)
        if not isinstance(state, ParseFailure) and attr in state.env:
            return state.env[attr]
        if path.name == "__init__.py":
            sub = self.project.resolve(path, attr, 1)
            if sub is not None:
                return self.module_value(sub)
        return UNKNOWN

    def note_method_tree(self, cls: ClassRef, node: cst.FunctionDef) -> None:
        parsed = self.project.parsed(self.project.path_of(cls.module))
        if not isinstance(parsed, ParseFailure):
            parsed.note_tree(node, parsed.tree_of(cls.node))

    # -- functions -----------------------------------------------------------------------
    def call(self, func: FuncRef, positional: tuple[Value, ...], rest: Value,
             keywords: dict[str, Value], entry: bool = False) -> tuple[list[Event], Value]:
        """Return the events and the return value of calling ``func`` with these values, in
        a thread (or process) of its own: no default device set.

        ``entry`` marks a call made only to analyse the function on its own; any other
        call means the function has a known caller.
        """
        events, result, _ = self.call_in_thread(func, positional, rest, keywords, UNKNOWN, entry)
        return events, result

    def call_in_thread(self, func: FuncRef, positional: tuple[Value, ...], rest: Value,
                       keywords: dict[str, Value], device: Value,
                       entry: bool = False) -> tuple[list[Event], Value, Value]:
        """``call`` made by code of the same thread, whose default device is ``device``
        (values.DEFAULT_DEVICE); also return the default device the call leaves."""
        caller = self._stack[-1][0] if self._stack else None
        if not entry:
            self.reached.add(id(func.node))
            if isinstance(caller, FuncRef):
                self.calls.setdefault(id(caller.node), set()).add(id(func.node))
        env = self._bind(func, (*func.bound, *positional), rest, keywords)
        for name, value in func.closure:
            env.setdefault(name, value)
        if device:
            env[DEFAULT_DEVICE] = device
        key = (func, tuple(sorted(env.items(), key=lambda kv: kv[0])))
        cached = self._summaries.get(key)
        if cached is not None:
            return cached
        limits = self.limits
        if key in self._stack:
            return [], UNKNOWN, device
        if len(self._summaries) > limits.max_summaries:
            self.summaries_full = True
            return [], UNKNOWN, device
        if len(self._stack) >= limits.max_call_depth:
            # Not followed from here; the flows may start again from it (FlowBuilder.cut_flows).
            self.depth_cuts.setdefault(id(func.node), (func, positional, rest, keywords, device))
            return [], UNKNOWN, device
        if isinstance(caller, FuncRef) and self.in_ring(caller, func):
            return self.ring_call(func, key, env, device)
        return self._summarise(func, key, env, device)

    def _summarise(self, func: FuncRef, key: tuple[object, ...], env: dict[str, Value],
                   device: Value) -> tuple[list[Event], Value, Value]:
        """Run ``func``'s body with the names ``env`` (its arguments) for the call ``key``;
        its events, its return value and the default device it leaves, kept for the call."""
        limits = self.limits
        # (a function the code calls is analysed wherever it is: the budget of modules
        # followed bounds what imports bring in, not the calls the code makes)
        state = self.module(self.project.path_of(func.module), direct=True)
        if isinstance(state, ParseFailure):
            return [], UNKNOWN, device
        meter = self.meter
        if not meter.room(CALL):  # calls nested past the meter: unknown, and not kept
            return [], UNKNOWN, device
        executor = Executor(self, state, dict(env), module_level=False, ctx=Context())
        executor.function = func
        executor.capped = True  # its events are compressed below
        self._stack.append(key)
        meter.depth += CALL
        try:
            node = func.node
            if isinstance(node, cst.Lambda):
                executor.tree = state.parsed.tree_of(node)
                executor.give_back(executor.eval(node.body))
            elif isinstance(node, cst.FunctionDef):
                body = state.parsed.body(node)
                if state.parsed.failures:
                    self.failures.extend(f for f in state.parsed.failures if f not in self.failures)
                executor.tree = state.parsed.tree_of(node)
                if executor.tree is state.parsed:  # its body is in the module's own tree
                    executor.anchor = state.parsed.anchor_of(node)
                executor.ctx = executor.rank_only(node)
                if not executor.walk_block(body):
                    executor.give_back(UNKNOWN)  # falling off the end returns None
        finally:
            self._stack.pop()
            meter.depth -= CALL
        events, cut = compress(executor.events, limits.max_events)
        self.events_cut = self.events_cut or cut
        result = (events, executor.result(), executor.env.get(DEFAULT_DEVICE, UNKNOWN))
        self._summaries[key] = result
        return result

    def call_graph(self) -> dict[int, set[int]]:
        """Function node -> the function nodes it called, in this analysis and in the rounds
        of ring calls it took in (rings.py)."""
        if len(self._merged) < len(self._taken):
            call_graph(list(self._taken.values()), self.calls, self._merged)
        return self.calls

    # -- rings of modules (rings.py) ------------------------------------------------------
    def in_ring(self, caller: FuncRef, func: FuncRef) -> bool:
        """Is a call from ``caller`` to ``func`` a call into a ring of modules (rings.py)?

        It is when the two functions' modules are each in import cycles of two with the
        other and with DENSE_CYCLE modules or more (package ``__init__`` files, which their
        own modules import back for the names they hand on, not counted), and no module's
        top level is being walked (the summary would depend on which are: shared_walks.py).
        """
        if caller.module == func.module or self.project.walks.busy:
            return False
        pair = (caller.module, func.module)
        found = self._ring_pairs.get(pair)
        if found is None:  # (asked once per analysis, answered once per project)
            known = self.project.rings.pairs.get(pair)
            if known is None:
                mine, theirs = self.project.path_of(caller.module), self.project.path_of(func.module)
                with self.project.tracking() as touched:
                    ring = theirs in self._ring_mates(mine) and mine in self._ring_mates(theirs)
                known = self.project.rings.pairs[pair] = (ring, touched)
            else:
                self.project.note_touched(known[1])
            found = self._ring_pairs[pair] = known[0]
        return found

    def _ring_mates(self, path: Path) -> frozenset[Path]:
        """The modules ``path`` is in a ring with (see ``in_ring``): none for most."""
        found = self._mates.get(path)
        if found is None:  # (asked once per analysis, answered once per project)
            known = self.project.rings.mates.get(path)
            if known is None:
                with self.project.tracking() as touched:
                    mates = frozenset() if path.name == "__init__.py" else \
                        frozenset(m for m in self.project.cycle_mates(path) if m.name != "__init__.py")
                known = self.project.rings.mates[path] = (mates if len(mates) >= DENSE_CYCLE else frozenset(), touched)
            else:
                self.project.note_touched(known[1])
            found = self._mates[path] = known[0]
        return found

    def ring_call(self, func: FuncRef, key: tuple[object, ...], env: dict[str, Value],
                  device: Value) -> tuple[list[Event], Value, Value]:
        """A call into a ring, answered by the round of it the call is owed (RING_ROUNDS
        from code outside the ring, one fewer than the round being made from inside one),
        made once in the project and shared (rings.py)."""
        rounds = RING_ROUNDS if self._round is None else self._round - 1
        if rounds <= 0:
            return [], UNKNOWN, device  # round 0: a call that does nothing
        state = self.module(self.project.path_of(func.module), direct=True)
        if isinstance(state, ParseFailure):
            return [], UNKNOWN, device
        meter = self.meter
        room = meter.walk_room()
        if room is None:  # nested past the meter: unknown, and not kept
            return [], UNKNOWN, device

        def make(room: int, work: int) -> RingSummary:
            return self._ring_round(func, key, env, device, rounds, room, work)

        found = self.project.rings.get(key, rounds, *room, make)
        meter.walked(found.peak, found.height, found.work, found.tripped)
        self.closure |= found.closure
        if found.touched is not None:
            self.project.note_touched(found.touched)
        self.failures.extend(f for f in found.failures if f not in self.failures)
        self.reached |= found.reached
        if id(found) not in self._taken:
            self._taken[id(found)] = found
        for node, cut in found.depth_cuts.items():
            self.depth_cuts.setdefault(node, cut)
        for cls, bases in found.classes.items():
            self.classes.class_bases.setdefault(cls, bases)
        self.events_cut = self.events_cut or found.events_cut
        self.summaries_full = self.summaries_full or found.summaries_full
        return found.events, found.result, found.device

    def _ring_round(self, func: FuncRef, key: tuple[object, ...], env: dict[str, Value], device: Value,
                    rounds: int, room: int, work: int) -> RingSummary:
        """Make round ``rounds`` of the ring call ``key``: ``func``'s body run in an
        analysis of its own, whose calls into the ring get round ``rounds - 1``."""
        analyzer = Analyzer(self.project, depth=1, limit=room, work=work)
        analyzer._round = rounds
        with self.project.tracking() as touched:
            events, result, left = analyzer._summarise(func, key, env, device)
        events = self.project.rings.interned(events)
        meter = analyzer.meter
        return RingSummary(
            events, result, left, [e for e in events if isinstance(e.effect, (Branch, Merge))],
            frozenset(analyzer.closure), touched, tuple(analyzer.failures), frozenset(analyzer.reached),
            {caller: frozenset(callees) for caller, callees in analyzer.calls.items()},
            tuple(analyzer._taken.values()), dict(analyzer.depth_cuts),
            dict(analyzer.classes.class_bases), analyzer.cut_events(), analyzer.summaries_full,
            meter.peak, meter.height, meter.work, meter.tripped)

    def _bind(self, func: FuncRef, positional: tuple[Value, ...], rest: Value,
              keywords: dict[str, Value]) -> dict[str, Value]:
        params = func.node.params
        ordered = [*params.posonly_params, *params.params]
        defaults = self.defaults(func)
        env: dict[str, Value] = {}
        for index, param in enumerate(ordered):
            name = param.name.value
            if index < len(positional):
                env[name] = positional[index]
            elif name in keywords:
                env[name] = keywords[name]
            else:
                env[name] = rest if rest else defaults.get(name, UNKNOWN)
        for param in params.kwonly_params:
            env[param.name.value] = keywords.get(param.name.value, defaults.get(param.name.value, UNKNOWN))
        if isinstance(params.star_arg, cst.Param):
            env[params.star_arg.name.value] = container(*positional[len(ordered):], rest)
        return env

    def defaults(self, func: FuncRef) -> dict[str, Value]:
        """The values of a function's defaults, by parameter. Python evaluates them once,
        when the ``def`` runs (that walk emitted their effects: Executor._s_FunctionDef);
        here they are evaluated again, quietly, in the scope of the function's module."""
        node = func.node
        found = self._defaults.get(id(node))
        if found is not None:
            return found
        found = self._defaults[id(node)] = {}
        params = node.params
        digits = self.limits.max_integer_chars
        frame: Executor | None = None
        for param in (*params.posonly_params, *params.params, *params.kwonly_params):
            if param.default is None:
                continue
            value = literal_default(param, digits)
            if not value and not isinstance(param.default, (cst.SimpleString, cst.Integer, cst.Name, cst.Float)):
                if frame is None:
                    frame = self._scope_frame(func.module, node)
                value = frame.eval_quiet(param.default) if frame is not None else UNKNOWN
            elif not value and isinstance(param.default, cst.Name) and param.default.value in ("True", "False"):
                value = one(Bool(param.default.value == "True"))
            found[param.name.value] = value
        return found

    def _scope_frame(self, module: str, node: cst.CSTNode) -> Executor | None:
        """A frame to evaluate, quietly, an expression of the statement ``node`` (a ``def``
        or ``class``) in its module's scope."""
        state = self.module(self.project.path_of(module), direct=True)
        if not isinstance(state, ModuleState):
            return None
        frame = Executor(self, state, {}, module_level=False, ctx=Context())
        frame.tree = state.parsed.home_of(node)
        if frame.tree is state.parsed:
            frame.anchor = node if any(s is node for s in state.parsed.module.body) else state.parsed.anchor_of(node)
        return frame

    def class_namespace(self, cls: ClassRef) -> dict[str, Value]:
        """What a class body binds, run again quietly in its module's scope (the walk that
        ran the ``class`` statement emitted its effects: Executor._s_ClassDef)."""
        frame = self._scope_frame(cls.module, cls.node)
        if frame is None:
            return {}
        return frame.class_body(cls, cls.node, [])
