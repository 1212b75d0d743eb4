"""Flows: ordered events of one process, replayed into the state before each event.

A module's top level (with its ``__main__`` block) is a parent flow; so is every
function on its own (for library code no caller reaches). Each process start opens
child flows: under fork a child starts from the parent's state at the start; under
spawn it starts clean and re-runs the main module's top level. Under forkserver it is
a fork of the server, a fresh interpreter that imported the modules of its preload
list: on targets where the server preloads the main script (3.13, 3.14: see
knowledge/processes.py) the main module's top level ran there, once, and the child
starts from the state it left; elsewhere the child re-runs it, as a spawned one does.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from gpudoctor.knowledge import processes as P
from gpudoctor.knowledge import runners as R
from gpudoctor.knowledge.names import StrEnum
from gpudoctor.knowledge.table import InitLevel
from gpudoctor.lint.analysis.events import (
    Branch,
    Callback,
    Child,
    Context,
    DataLoaderStart,
    DefaultDevice,
    EnvWrite,
    Event,
    Imported,
    Init,
    Join,
    Merge,
    ProcessGroupInit,
    Send,
    SetMethod,
    SetPreload,
    Start,
    Task,
    ThreadStart,
    splice,
)
from gpudoctor.lint.analysis.values import (
    UNKNOWN,
    Atom,
    ClassRef,
    FuncRef,
    GpuObj,
    Instance,
    PoolObj,
    Str,
    Value,
    gpu_objects,
    ordered,
)
from gpudoctor.lint.frontend.reading import ParseFailure
from gpudoctor.lint.notebook import is_notebook

if TYPE_CHECKING:
    from gpudoctor.lint.analysis.analyzer import Analyzer
    from gpudoctor.lint.analysis.module_state import ModuleState
    from gpudoctor.lint.frontend.parsed import LazySite


T = TypeVar("T")
E = TypeVar("E")

# Marks, among the names other files use from a module (FlowBuilder.function_flows), the
# qualified name of a function of one that none of their analyses reached (engine.py).
UNREACHED = "?"


def _effects(events: Iterable[Event], kind: type[E]) -> Iterator[E]:
    """The effects of ``events``, each of which is known to be a ``kind``."""
    for event in events:
        effect = event.effect
        assert isinstance(effect, kind)
        yield effect


class Chain(Generic[T]):
    """A sequence of events that shares what came before: one event longer is one link
    more. A flow keeps the state before each of its events; with the thread starts and
    environment writes so far held in tuples, a module starting a thread on each of its
    lines kept a tuple of every earlier one before each: memory quadratic in the lines.
    It reads like a tuple (in order, ``in``, ``len``, indexing); each read walks it."""

    __slots__ = ("_before", "_first", "_last", "_length")

    def __init__(self, before: Chain[T] | None = None, last: T | None = None) -> None:
        self._before = before
        self._last = last
        self._length: int = 0 if before is None else before._length + 1
        self._first: T | None = last if before is None or before._length == 0 else before._first

    @classmethod
    def of(cls, events: Iterable[T]) -> Chain[T]:
        chain: Chain[T] = EMPTY
        for event in events:
            chain = chain.plus(event)
        return chain

    def plus(self, event: T) -> Chain[T]:
        return Chain(self, event)

    def __len__(self) -> int:
        return self._length

    def __reversed__(self) -> Iterator[T]:
        link: Chain[T] | None = self
        while link is not None and link._length:
            last = link._last
            assert last is not None  # only the empty chain holds nothing
            yield last
            link = link._before

    def __iter__(self) -> Iterator[T]:
        return iter(self._items())

    def _items(self) -> list[T]:
        items = list(reversed(self))
        items.reverse()
        return items

    def __contains__(self, event: object) -> bool:
        return any(item == event for item in reversed(self))

    def __getitem__(self, index: int) -> T:
        if index == 0 and self._first is not None:
            return self._first
        return self._items()[index]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Chain):
            return self._items() == other._items()
        if isinstance(other, tuple):
            return tuple(self._items()) == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self._items()))

    def __repr__(self) -> str:
        return f"Chain({self._items()!r})"


EMPTY: Chain[Any] = Chain()


# Where an event runs among the branches of ``if`` chains marked so (events.Branch): per
# enclosing chain, its site, which run of it (numbered as the flow is replayed: each run
# of a chain in a loop, or of a function called twice, is another) and the branch taken
# (None: between its branches, in the test of an ``elif``).
Branches = tuple[tuple["LazySite", int, "int | None"], ...]


@dataclass(frozen=True)
class Running:
    """A thread start whose threads may still run, with the branches it happened in."""

    event: Event
    branches: Branches = ()

    @property
    def started(self) -> LazySite | None:
        """Where the thread or thread pool was created."""
        effect = self.event.effect
        assert isinstance(effect, ThreadStart)
        return effect.started

    def excluded_by(self, branches: Branches) -> bool:
        """Did it happen in another branch of the same run of a chain than ``branches``
        (so its threads do not exist there)?"""
        taken = {(chain, run): index for chain, run, index in branches if index is not None}
        return any(index is not None and taken.get((chain, run), index) != index
                   for chain, run, index in self.branches)


# How many inits of one kind a state keeps while each came under a test of a version.
MAX_VERSIONED_INITS = 4


def _on_some_versions(event: Event) -> bool:
    """Does ``event`` run only on some releases of a library (under a version test)?"""
    if not event.ctx.conditions:
        return False
    from gpudoctor.lint.frontend.version_tests import version_test  # (libcst: not loaded by a warm run)

    return any(version_test(c.source) is not None for c in event.ctx.conditions)


@dataclass(frozen=True)
class State:
    """What has happened in a process so far (only the first event of each kind matters)."""

    # First Init per (framework, level), in order; and after one made only on some
    # releases of a library (under a test of its version), the next ones, which a
    # finding about code on other releases needs (rules/_base.py may_meet).
    inits: tuple[Event, ...] = ()
    method: SetMethod | None = None
    method_sure: bool = False  # ``method`` was set on every way here (no condition around it)
    # The same for the namespaces with a default context of their own (processes.OWN_CONTEXTS),
    # one (SetMethod, sure) per namespace that set one.
    own_methods: tuple[tuple[SetMethod, bool], ...] = ()
    threads: Chain[Running] = EMPTY  # thread starts whose threads may still run
    branches: Branches = ()  # the branches of marked chains being replayed
    runs: int = 0  # runs of marked chains replayed so far
    default_cuda: Event | None = None
    env: Chain[Event] = EMPTY  # EnvWrite events, in order
    imports: tuple[Event, ...] = ()  # first Imported per top-level module, in order
    preload: Event | None = None  # the last set_forkserver_preload (None: the default list)

    def threads_at(self, branches: Branches) -> list[Event]:
        """The thread starts whose threads may run at a point in ``branches``."""
        return [r.event for r in self.threads if not r.excluded_by(branches)]

    def first_init(self) -> Event | None:
        return self.inits[0] if self.inits else None

    def init_of(self, framework: str, level: InitLevel | None = None) -> Event | None:
        return next(self.inits_of(framework, level), None)

    def inits_of(self, framework: str, level: InitLevel | None = None) -> Iterator[Event]:
        """The inits of ``framework`` (at ``level``, if given), in order."""
        for event in self.inits:
            effect = event.effect
            assert isinstance(effect, Init)
            if effect.framework == framework and (level is None or effect.level == level):
                yield event

    def apply(self, event: Event) -> State:
        effect = event.effect
        if isinstance(effect, Init):
            if self.skips(effect):
                return self
            same = [e for e in self.inits if isinstance(e.effect, Init)
                    and (e.effect.framework, e.effect.level) == (effect.framework, effect.level)]
            if same and not (len(same) < MAX_VERSIONED_INITS and all(_on_some_versions(e) for e in same)):
                return self
            return replace(self, inits=(*self.inits, event))
        if isinstance(effect, SetMethod):
            # Once a method is set, set_start_method raises RuntimeError ("context has already
            # been set") unless given force=True: the first stays (CPython
            # Lib/multiprocessing/context.py, DefaultContext.set_start_method).
            sure = not event.ctx.conditions
            if effect.namespace:
                earlier = self.own_method(effect.namespace)
                if earlier is not None and earlier[1] and not effect.force:
                    return self
                kept = tuple(m for m in self.own_methods if m[0].namespace != effect.namespace)
                return replace(self, own_methods=(*kept, (effect, sure)))
            if self.method is not None and self.method_sure and not effect.force:
                return self
            return replace(self, method=effect, method_sure=sure)
        if isinstance(effect, SetPreload):
            return replace(self, preload=event)
        if isinstance(effect, ThreadStart):
            return replace(self, threads=self.threads.plus(Running(event, self.branches)))
        if isinstance(effect, Join) and effect.threads:
            if not any(r.started == effect.started for r in self.threads):
                return self
            live = Chain.of([r for r in self.threads if r.started != effect.started])
            return replace(self, threads=live)
        if isinstance(effect, Branch):
            top = self.branches[-1] if self.branches else None
            if top is not None and top[0] == effect.chain and top[2] is None:  # the next branch of this run
                return replace(self, branches=(*self.branches[:-1], (effect.chain, top[1], effect.index)))
            return replace(self, branches=(*self.branches, (effect.chain, self.runs, effect.index)),
                           runs=self.runs + 1)
        if isinstance(effect, Merge):
            top = self.branches[-1] if self.branches else None
            if top is None or top[0] != effect.chain:
                return self  # (a flow cut inside the chain: nothing to leave)
            rest = self.branches[:-1]
            return replace(self, branches=rest if effect.last else (*rest, (top[0], top[1], None)))
        if isinstance(effect, EnvWrite):
            return replace(self, env=self.env.plus(event))
        if isinstance(effect, DefaultDevice) and effect.cuda and self.default_cuda is None:
            return replace(self, default_cuda=event)
        if isinstance(effect, DefaultDevice) and not effect.cuda and self.default_cuda is not None:
            return replace(self, default_cuda=None)
        if isinstance(effect, Imported):
            package = effect.module.split(".", 1)[0]
            if any(i.module.split(".", 1)[0] == package for i in _effects(self.imports, Imported)):
                return self
            return replace(self, imports=(*self.imports, event))
        return self

    def own_method(self, namespace: str) -> tuple[SetMethod, bool] | None:
        """The start method set on ``namespace``'s own default context, and whether surely."""
        return next((m for m in self.own_methods if m[0].namespace == namespace), None)

    def import_of(self, module: str) -> Event | None:
        """The first import of ``module`` (or of a submodule of it) so far."""
        for event in self.imports:
            effect = event.effect
            assert isinstance(effect, Imported)
            if effect.module.split(".", 1)[0] == module:
                return event
        return None

    def skips(self, init: Init) -> bool:
        """Does this init not happen, because ``os.environ`` holds the value that makes its
        API initialize nothing (Init.unless) when it is called? The last write before it
        decides. A flow's events are in program order with branches laid end to end, so a
        write in a branch that may not run counts too (erring towards no finding)."""
        if init.unless is None:
            return False
        var, value = init.unless
        for event in reversed(self.env):
            write = event.effect
            assert isinstance(write, EnvWrite)
            if write.var == var and write.environ:
                return write.value == frozenset({Str(value)})
        return False

    def env_value(self, var: str) -> Event | None:
        """The last write to ``var`` so far."""
        for event in reversed(self.env):
            write = event.effect
            assert isinstance(write, EnvWrite)
            if write.var == var:
                return event
        return None


class FlowKind(StrEnum):
    """Where a flow starts."""

    MODULE = "module"  # the linted module run as a script
    FUNCTION = "function"  # a function of it analysed on its own (an entry point)
    CHILD = "child"  # a process started by another flow


@dataclass
class Flow:
    """One process's events from an entry point, with the state before each event."""

    kind: FlowKind
    events: list[Event]
    entry: State
    origin: ModuleState
    daemonic: bool = False
    depth: int = 0
    start: Event | None = None  # for child flows: the start that created the process
    method: str | None = None  # for child flows: how the process was started
    specs: tuple[Child, ...] = ()  # for child flows: the callables and what they receive
    prelude: int = 0  # for spawned children: how many first events are not the child's own code
    # For forkserver children: how many first events ran in the server before it forked
    # this process (its preloaded modules: the main module's top level, then those named to
    # set_forkserver_preload, whose call is ``preload``). They are part of the prelude.
    served: int = 0
    preload: Event | None = None
    sent: frozenset[Atom] = frozenset()  # for child flows: what its start and tasks hand it
    points: list[tuple[Event, State]] = field(default_factory=list)
    children: list[Flow] = field(default_factory=list)
    # Points of process starts that repeat an earlier one of this flow (see FlowBuilder._expand):
    # no child of their own, and no rule reads them as starts.
    repeats: set[int] = field(default_factory=set, repr=False, compare=False)
    # Indexes, built when first asked for: a module with a pool start per line asked for
    # the tasks of each start, and for the child of each, by scanning the whole flow.
    _tasks: dict[PoolObj, list[int]] | None = field(default=None, repr=False, compare=False)
    _child_index: dict[int, Flow] = field(default_factory=dict, repr=False, compare=False)

    def replay(self) -> None:
        state = self.entry
        self.points = []
        for event in self.events:
            self.points.append((event, state))
            state = state.apply(event)

    def task_indexes(self, pool: PoolObj | None) -> list[int]:
        """The positions of the tasks submitted to ``pool``, in order."""
        if self._tasks is None:
            self._tasks = {}
            for index, event in enumerate(self.events):
                if isinstance(event.effect, Task):
                    self._tasks.setdefault(event.effect.pool, []).append(index)
        return self._tasks.get(pool, []) if pool is not None else []

    def tasks_of(self, start: Event) -> list[Event]:
        effect = start.effect
        assert isinstance(effect, Start)
        return [self.events[i] for i in self.task_indexes(effect.pool)]

    def child_started_by(self, event: Event) -> Flow | None:
        if len(self._child_index) != len(self.children):
            self._child_index = {}
            for child in reversed(self.children):  # the first child of a start wins
                self._child_index[id(child.start)] = child
        found = self._child_index.get(id(event))
        return found if found is not None and found.start is event else None


class FlowBuilder:
    """Builds the parent flows of a module and, recursively, their child flows.

    A fork opens a child flow of everything after it, whose own forks open theirs: without
    bounds, a module forking and starting pools in nested branches and loops makes tens of
    thousands of flows, each replayed and read by every rule. Child flows nest at most
    ``Limits.max_child_depth`` deep, and replay ``Limits.max_child_events`` events in all;
    processes started past those are not followed (what they do is unknown)."""

    def __init__(self, analyzer: Analyzer, target: P.Target) -> None:
        self.analyzer = analyzer
        self.target = target
        self.default_method = target.default_method
        self.preloads_main = target.preloads_main  # the target's forkserver runs the main script's top level
        self.max_child_depth = analyzer.limits.max_child_depth
        self.child_events_left = analyzer.limits.max_child_events
        # What the flows left out for a bound, in words (see ``cuts``): functions reached
        # past the calls followed. (The child flows' bounds are not said: a start replayed
        # in a child's child is the same start, seldom another process.)
        self.left_out: list[str] = []
        # The functions of names other files use that this module's code does not reach,
        # by qualified name (see ``function_flows``).
        self.deferred: list[str] = []

    def resolve_method(self, method: str | None, state: State) -> tuple[str, bool]:
        """Return the start method in force and whether the code chose it explicitly."""
        if method and method.startswith(P.OWN_DEFAULT):  # the default of another namespace
            chosen = state.own_method(method[len(P.OWN_DEFAULT):])
            return (chosen[0].method, True) if chosen is not None else (self.default_method, False)
        if method:
            return method, True
        if state.method is not None:
            return state.method.method, True
        return self.default_method, False

    def module_flow(self, state: ModuleState) -> Flow:
        """The module run as a script, with its child flows."""
        flow = Flow(FlowKind.MODULE, self._with_callbacks(state.events), State(), state)
        self._expand(flow)
        return flow

    def _with_callbacks(self, events: list[Event]) -> list[Event]:
        """``events``, then what the functions they handed to code the analysis cannot see
        do when that code calls them (events.Callback): after everything else, in this
        process (a GUI's handlers run once its event loop starts, a server's once it
        serves). Callbacks those register run after them, a few rounds deep."""
        out = list(events)
        seen: set[FuncRef] = set()
        todo = [e for e in events if isinstance(e.effect, Callback)]
        rounds = 0
        while todo and rounds < 3:
            rounds += 1
            later: list[Event] = []
            for event in todo:
                effect = event.effect
                assert isinstance(effect, Callback)
                for func in effect.funcs:
                    if func in seen:
                        continue
                    seen.add(func)
                    called, _ = self.analyzer.call(func, (), UNKNOWN, {})
                    # (it runs later, not in the loop that registered it)
                    spliced = splice(called, replace(event.ctx, in_loop=False, loop=None), effect.site)
                    out.extend(spliced)
                    later.extend(e for e in spliced if isinstance(e.effect, Callback))
            todo = later
        return out

    def function_flows(self, state: ModuleState, called_elsewhere: frozenset[str] = frozenset()) -> list[Flow]:
        """Functions no analysed code calls, each run on its own with nothing known.

        Call this after the module's own flow was built. Not run on their own: functions
        that flow called; functions (and classes) named in ``called_elsewhere``, which other
        analysed files of the project use, not merely import, from this module (their
        analysis runs them with what those callers pass: callers.py); and functions the
        prescan found neither act nor reach by name a function that does (on their own
        they have nothing to report).
        """
        functions = list(self._entry_functions(state))
        # ``?Class.method`` (UNREACHED): a function of a name other files use that none of
        # their analyses reached. Named, this is the second analysis of the module
        # (engine.py), for those functions only: each run on its own after all.
        anyway = {name[1:] for name in called_elsewhere if name.startswith(UNREACHED)}
        deferred = {name for name in called_elsewhere if not name.startswith(UNREACHED)}
        if anyway:
            candidates = [f for f in functions if f.qualname in anyway and not self.analyzer.is_reached(f)
                          and state.parsed.entry_point(f.node)]
        else:
            # What a function other files call reaches is theirs to analyse too: run it
            # here only to mark what it reaches (a class whose methods only it uses), no flow.
            for func in functions:
                if func.qualname.split(".", 1)[0] in deferred and state.parsed.entry_point(func.node):
                    self.analyzer.call(func, (), UNKNOWN, {}, entry=True)
            candidates = [f for f in functions
                          if not self.analyzer.is_reached(f) and state.parsed.entry_point(f.node)
                          and f.qualname.split(".", 1)[0] not in deferred]
        anchored = set(self.analyzer.reached)  # reached by code that runs whatever this module's functions do
        for func in candidates:
            self.analyzer.call(func, (), UNKNOWN, {}, entry=True)
        if not anyway:
            # Those of other files' names that no code of this module reaches: left to those
            # files' analyses, which may not reach them either (then engine.py asks for the
            # second analysis).
            self.deferred = sorted({f.qualname for f in functions
                                    if f.qualname.split(".", 1)[0] in deferred and state.parsed.entry_point(f.node)
                                    and not self.analyzer.is_reached(f)})
        flows = []
        rooted = {id(func.node) for func in candidates if not self.analyzer.is_reached(func)}
        # Functions that only call one another (a recursion no other code enters) are each
        # reached, by the others: the first of them is run on its own too.
        covered = self._called_from(anchored | rooted)
        for func in candidates:
            node = id(func.node)
            if node not in covered and node in self.analyzer.reached:
                rooted.add(node)
                covered |= self._called_from({node})
        roots = [func for func in candidates if id(func.node) in rooted]
        for func in roots:
            flow = Flow(FlowKind.FUNCTION, self._with_callbacks(self._run_entry(state, func)), State(), state)
            self._expand(flow)
            flows.append(flow)
        flows.extend(self.cut_flows(state, rooted))
        return flows

    def _leave_out(self, what: str) -> None:
        if what not in self.left_out:
            self.left_out.append(what)

    def cuts(self) -> list[str]:
        """What the analysis of the module left out for one of its bounds, where a finding
        may be (nothing the module does is past a bound: none), in words."""
        out = list(self.left_out)
        if self.analyzer.meter.tripped:
            out.append("code nested deeper than the analysis follows (imports, calls and expressions within one "
                       f"another, {self.analyzer.limits.max_nesting:,} of its frames) is not analysed")
        if self.analyzer.cut_events():
            most = self.analyzer.limits.max_events
            out.append(f"a function or module import that does more than {most:,} things (process starts, inits, "
                       f"and calls that lead to them) is followed for {most:,} of them, its own before its calls'")
        if self.analyzer.summaries_full:
            out.append(f"calls past the first {self.analyzer.limits.max_summaries:,} analysed are not followed")
        return out

    def _called_from(self, starts: set[int]) -> set[int]:
        """The function nodes ``starts`` are, and those they call, directly or not."""
        calls = self.analyzer.call_graph()
        found = set(starts)
        todo = list(starts)
        while todo:
            for callee in calls.get(todo.pop(), ()):
                if callee not in found:
                    found.add(callee)
                    todo.append(callee)
        return found

    def cut_flows(self, state: ModuleState, started: set[int]) -> list[Flow]:
        """Flows that start again where a chain of calls went past ``max_call_depth``.

        The analysis follows calls that deep (a call further in is unknown to its caller),
        so what a function does at the end of a longer chain (a pool started after an init,
        thirty calls or nested functions down) would be seen by no flow: each function of
        the module reached only past that depth is run again as a flow of its own, with
        the values of the first call that reached it, when it does anything. What came
        before it in the chain is not known there.
        """
        analyzer = self.analyzer
        flows: list[Flow] = []
        seen = set(started)
        while True:
            todo = [(key, cut) for key, cut in analyzer.depth_cuts.items() if key not in seen]
            if not todo:
                return flows
            for key, (func, positional, rest, keywords, device) in todo:
                seen.add(key)
                if func.module == state.path and not state.parsed.entry_point(func.node):
                    continue  # nothing to report on its own (the prescan's word)
                events, _, _ = analyzer.call_in_thread(func, positional, rest, keywords, device, entry=True)
                if not events:
                    continue
                # What it does is seen here without what the calls before it did.
                self._leave_out(f"{func.qualname}() is called more than {analyzer.limits.max_call_depth} calls deep, "
                                "past what the analysis follows: it is analysed on its own, without what ran before it")
                if func.module != state.path:
                    continue  # another module's: its own analysis runs it
                flow = Flow(FlowKind.FUNCTION, self._with_callbacks(events), State(), state)
                self._expand(flow)
                flows.append(flow)

    def _run_entry(self, state: ModuleState, func: FuncRef) -> list[Event]:
        """The events of an entry point run as what runs it would: a test method of a
        ``TestCase`` after the class's set-up methods; a test function (or method) with
        the pytest fixtures its parameters name, each run first (runners.py)."""
        before: list[Event] = []
        keywords: dict[str, Value] = {}
        name = func.qualname.rsplit(".", 1)[-1]
        if name.startswith(R.TEST_PREFIX):
            owner = self.analyzer.classes.owner_of(func)
            if owner is not None and self.analyzer.classes.subclass_of(owner, R.TEST_CASE_BASES):
                for setup in R.SETUP_METHODS:
                    for atom in ordered(self.analyzer.classes.member(Instance(owner), setup)):
                        if isinstance(atom, FuncRef):
                            before.extend(self.analyzer.call(atom, (), UNKNOWN, {}, entry=True)[0])
            else:
                fixtures = self._fixtures(state)
                if fixtures:
                    keywords = self._resolve_fixtures(func, fixtures, before, set())
        hooked = self._hook_context(func)
        if hooked is not None:
            init, param, device = hooked
            before.append(init)
            keywords = {**keywords, param: device}
        events, _ = self.analyzer.call(func, (), UNKNOWN, keywords, entry=True)
        # (Not a notebook's: it is never imported, and a function of it no cell calls may
        # never run; one a cell calls is followed there, after the cells before it.)
        return [*([] if is_notebook(state.path) else _imported_state(state)), *before, *events]

    def _hook_context(self, func: FuncRef) -> tuple[Event, str, Value] | None:
        """For a hook a framework calls with a module it moved to the GPU (a Lightning
        Callback's ``on_*``: runners.HOOK_BASES), the init that came before, the parameter
        and the device object it holds. The init is placed at the hook's ``def``."""
        import libcst as cst

        owner = self.analyzer.classes.owner_of(func)
        node = func.node
        if owner is None or not isinstance(node, cst.FunctionDef):
            return None
        for base in self.analyzer.classes.framework_bases(owner):
            hook = R.HOOK_BASES.get(base)
            if hook is None:
                continue
            prefix, param, framework = hook
            names = {p.name.value for p in (*node.params.params, *node.params.kwonly_params)}
            if not node.name.value.startswith(prefix) or param not in names:
                return None
            state = self.analyzer.module(self.analyzer.project.path_of(func.module))
            if isinstance(state, ParseFailure):
                return None
            home = state.parsed.home_of(node)
            site = home.site(node, state.parsed.anchor_of(node) if home is state.parsed else None)
            init = Event(Init(framework, InitLevel.RUNTIME, R.HOOK_CALLER, site))
            return init, param, frozenset({GpuObj(framework, site)})
        return None

    def _fixtures(self, state: ModuleState) -> dict[str, FuncRef]:
        """The pytest fixtures a test in this module can name: its own, then those of the
        ``conftest.py`` files of its folder and the folders above it (nearest first)."""
        found: dict[str, FuncRef] = {}
        modules: list[ModuleState] = [state]
        project = self.analyzer.project
        for level in range(1, 4):
            path = project.resolve(Path(state.path), "conftest", level)
            if path is not None and str(path) != state.path:
                module = self.analyzer.module(path)
                if not isinstance(module, ParseFailure):
                    modules.append(module)
        for module in modules:
            for fixture_name, value in list(module.env.items()):
                for atom in ordered(value):
                    if isinstance(atom, FuncRef) and _is_fixture(atom):
                        found.setdefault(fixture_name, atom)
        return found

    def _resolve_fixtures(self, func: FuncRef, fixtures: dict[str, FuncRef], before: list[Event],
                          seen: set[str], depth: int = 0) -> dict[str, Value]:
        """The values of the fixtures ``func``'s parameters name, running each (and the
        fixtures it names in turn) first, its events added to ``before``."""
        import libcst as cst

        node = func.node
        if not isinstance(node, cst.FunctionDef) or depth > 4:
            return {}
        values: dict[str, Value] = {}
        for param in (*node.params.params, *node.params.kwonly_params):
            fixture = fixtures.get(param.name.value)
            if fixture is None or param.name.value in seen:
                continue
            seen.add(param.name.value)
            inner = self._resolve_fixtures(fixture, fixtures, before, seen, depth + 1)
            events, value = self.analyzer.call(fixture, (), UNKNOWN, inner, entry=True)
            before.extend(events)
            values[param.name.value] = value
        return values

    def _entry_functions(self, state: ModuleState) -> Iterator[FuncRef]:
        yield from state.functions
        for cls in state.classes:
            for atom in ordered(self.analyzer.classes.member(Instance(cls), "__init__") | _methods(self, cls)):
                if isinstance(atom, FuncRef):
                    yield atom

    def _expand(self, flow: Flow) -> None:
        flow.replay()
        if flow.depth >= self.max_child_depth:
            return
        # A start met again in the same state, in the same context but for the call that led
        # there (a ring's function reaches each module's pool through every other module):
        # its child would be the first's, and every finding at it the first's, which is the
        # one shown (engine.py). In a ring of 60 modules 140 of a flow's 200 starts are such.
        first: dict[tuple[int, int], Context] = {}
        for index, (event, state) in enumerate(flow.points):
            effect = event.effect
            if not isinstance(effect, (Start, DataLoaderStart)):
                continue
            if self.child_events_left <= 0:
                return
            key = (id(effect), id(self.parent_state(flow, index) if isinstance(effect, Start) else state))
            where = replace(event.ctx, via=None, entry=None)
            if first.get(key) == where:
                flow.repeats.add(index)
                continue
            first.setdefault(key, where)
            if isinstance(effect, Start):
                child = self._child_for_start(flow, index, event, state)
            else:
                child = self._child(flow, event, state, effect.children, effect.method, False)
            if child is not None:
                self.child_events_left -= len(child.events)
                if self.child_events_left < 0:
                    return
                flow.children.append(child)
                self._expand(child)

    def parent_state(self, flow: Flow, index: int) -> State:
        """The state when the workers of the start at ``index`` are created."""
        event, state = flow.points[index]
        effect = event.effect
        if isinstance(effect, Start) and effect.kind == P.EXECUTOR:
            tasks = flow.task_indexes(effect.pool)
            later = bisect.bisect_left(tasks, index)
            if later < len(tasks):
                return flow.points[tasks[later]][1]  # executors start workers on the first submit
        return state

    def _child_for_start(self, flow: Flow, index: int, event: Event, state: State) -> Flow | None:
        effect = event.effect
        assert isinstance(effect, Start)
        if effect.kind == P.OS_FORK:
            rest = [e for e in flow.events[index + 1:] if effect.site not in e.ctx.fork_parent]
            return Flow(FlowKind.CHILD, rest, state, flow.origin, depth=flow.depth + 1, start=event,
                        method="fork")
        children = list(effect.children)
        sent = [effect.sent]
        if effect.pool is not None:
            for task in _effects(flow.tasks_of(event), Task):
                children.extend(task.children)
                sent.append(task.sent)
        # (the same task handed to the pool again, or reached by other paths, runs the same)
        child = self._child(flow, event, self.parent_state(flow, index), tuple(dict.fromkeys(children)),
                            effect.method, effect.daemonic)
        child.sent = frozenset().union(*sent)
        return child

    def _child(self, flow: Flow, event: Event, state: State, children: tuple[Child, ...],
               method: str | None, daemonic: bool) -> Flow:
        resolved, _ = self.resolve_method(method, state)
        server: list[Event] = []  # what the forkserver ran before forking the child
        again: list[Event] = []  # what the child runs again first: the main module's top level
        own: list[Event] = []
        entry = state
        preload = None
        if resolved != "fork":
            # A spawned child starts clean, but inherits the global start method
            # (multiprocessing passes it in the spawn preparation data).
            entry = State(method=state.method, own_methods=state.own_methods)
            main_served = False
            if resolved == "forkserver":
                server, main_served = self._server(flow, event, state)
                preload = state.preload
            if not main_served:
                again = list(flow.origin.import_events)  # the main module is imported again
        for child in children:
            child_events, _ = self.analyzer.call(child.func, child.args, child.rest, {})
            own.extend(child_events)
        if daemonic:
            # joblib's multiprocessing backend runs its tasks in the calling process when
            # that is a daemonic worker: no pool, nothing sent.
            server, again, own = (_without_joblib_pools(part) for part in (server, again, own))
        return Flow(FlowKind.CHILD, [*server, *again, *own], entry, flow.origin, daemonic=daemonic,
                    depth=flow.depth + 1, start=event, method=resolved, specs=children,
                    prelude=len(server) + len(again), served=len(server), preload=preload)

    def _server(self, flow: Flow, event: Event, state: State) -> tuple[list[Event], bool]:
        """What the forkserver ran before it forks a worker of the start ``event``, and
        whether that includes the main module's top level.

        The main module is preloaded on targets whose server does it, when the preload list
        names it (the default list does), and when the flow is a script's run by its path:
        the top level of a module with a ``__main__`` block, at a start made from that block
        (a start made while the module is imported is GD104's), neither a package's
        ``__main__.py`` nor a module inside a package: those are run with ``python -m``,
        and the server preloads only a main module it is given the path of. A list
        gpudoctor cannot read preloads nothing it knows of."""
        preload = None if state.preload is None else state.preload.effect
        assert preload is None or isinstance(preload, SetPreload)
        names = P.DEFAULT_PRELOAD if preload is None else preload.modules
        if names is None:
            return [], False
        main = (self.preloads_main and P.MAIN_MODULE in names and flow.kind == FlowKind.MODULE and flow.depth == 0
                and not event.ctx.import_time and self._script(flow.origin))
        # (a module the main block imports runs there, not when the server imports the script)
        events = [e for e in flow.origin.import_events if not e.ctx.main_block] if main else []
        if preload is not None:
            events.extend(preload.events)
        return events, main

    def _script(self, module: ModuleState) -> bool:
        """Is ``module`` a script run by its path (see _server)?"""
        path = Path(module.path)
        if not module.has_main_guard or path.name == "__main__.py" or path.suffix == ".ipynb":
            return False  # (a notebook's __main__ has no file for the server to preload)
        return self.analyzer.project.resolve(path, "", 1) is None  # no __init__.py beside it

    def child_of(self, flow: Flow, event: Event) -> Flow | None:
        return flow.child_started_by(event)


def _is_fixture(func: FuncRef) -> bool:
    """Is this function decorated with ``@pytest.fixture`` (or ``@pytest.fixture(...)``)?"""
    import libcst as cst

    node = func.node
    if not isinstance(node, cst.FunctionDef):
        return False
    for decorator in node.decorators:
        target = decorator.decorator
        target = target.func if isinstance(target, cst.Call) else target
        name = cst.helpers.get_full_name_for_node(target) or ""
        if name in R.FIXTURE_DECORATORS or name == "fixture":
            return True
    return False


def _imported_state(state: ModuleState) -> list[Event]:
    """What the module's import left in the process, which a function of it run on its own
    starts from: a function runs once its module is imported (one called while it is, the
    module's own flow follows). The inits, the start method chosen, the variables written,
    the modules imported and the process group made at its top level (without the
    ``__main__`` block), each on every way through it; not what it started or sent (those
    are the module's own flow's)."""
    return [event for event in state.import_events
            if isinstance(event.effect, (Init, SetMethod, SetPreload, EnvWrite, Imported, ProcessGroupInit))
            and not event.ctx.conditions]


def _methods(builder: FlowBuilder, cls: ClassRef) -> Value:
    import libcst as cst

    out: set[Atom] = set()
    for statement in cls.node.body.body:
        if isinstance(statement, cst.FunctionDef) and statement.name.value != "__init__":
            out |= builder.analyzer.classes.member(Instance(cls), statement.name.value)
    return frozenset(out)


def _without_joblib_pools(events: list[Event]) -> list[Event]:
    out = []
    for event in events:
        effect = event.effect
        if isinstance(effect, Start) and effect.kind == P.JOBLIB or \
                isinstance(effect, Send) and effect.channel == P.JOBLIB or \
                isinstance(effect, Task) and effect.pool.kind == P.JOBLIB:
            continue
        out.append(event)
    return out


def server_init(child: Flow) -> Event | None:
    """Return the first GPU init the forkserver ran before it forked ``child``, if any."""
    for event in child.events[:child.served]:
        if isinstance(event.effect, Init):
            return event
    return None


def first_gpu_use(child: Flow, framework: str | None = None) -> Event | None:
    """Return the first GPU init in a child's own code (of ``framework`` if given), if any.

    A spawned child's re-import of the main module (its prelude) is not its own code.
    """
    replayed = len(child.points) == len(child.events)
    for index in range(child.prelude, len(child.events)):
        event = child.events[index]
        effect = event.effect
        if isinstance(effect, Init) and (framework is None or effect.framework == framework):
            if replayed and child.points[index][1].skips(effect):
                continue
            return event
    return None


def received_gpu_objects(child: Flow) -> list[str]:
    """Frameworks of the device objects a child receives as arguments (also when what
    receives them is not the project's code: unpickling one needs its framework)."""
    return sorted({o.framework for c in child.specs for v in (*c.args, c.rest)
                   for o in gpu_objects(v)} | {o.framework for o in gpu_objects(child.sent)})
