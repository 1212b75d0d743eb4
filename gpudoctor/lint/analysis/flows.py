"""Flows: ordered events of one process, replayed into the state before each event.

A module's top level (with its ``__main__`` block) is a parent flow; so is every
function on its own (for library code no caller reaches). Each process start opens
child flows: under fork a child starts from the parent's state at the start; under
spawn or forkserver it starts clean and re-runs the main module's top level.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from gpudoctor.lint.analysis.events import (
    Child,
    DataLoaderStart,
    DefaultDevice,
    EnvWrite,
    Event,
    Init,
    Join,
    SetMethod,
    Start,
    Task,
    ThreadStart,
)
from gpudoctor.lint.analysis.values import UNKNOWN, FuncRef, Instance, gpu_objects
from gpudoctor.lint.knowledge import processes as P

if TYPE_CHECKING:
    from gpudoctor.lint.analysis.analyzer import Analyzer
    from gpudoctor.lint.analysis.module_state import ModuleState

MAX_CHILD_DEPTH = 3


@dataclass(frozen=True)
class State:
    """What has happened in a process so far (only the first event of each kind matters)."""

    inits: tuple[Event, ...] = ()  # first Init per (framework, level), in order
    method: SetMethod | None = None
    threads: tuple[Event, ...] = ()  # ThreadStart events of threads that may still run
    default_cuda: Event | None = None
    env: tuple[Event, ...] = ()  # EnvWrite events, in order

    def first_init(self) -> Event | None:
        return self.inits[0] if self.inits else None

    def init_of(self, framework: str, level: str | None = None) -> Event | None:
        for event in self.inits:
            effect = event.effect
            assert isinstance(effect, Init)
            if effect.framework == framework and (level is None or effect.level == level):
                return event
        return None

    def apply(self, event: Event) -> State:
        effect = event.effect
        if isinstance(effect, Init):
            known = {(e.effect.framework, e.effect.level) for e in self.inits}  # type: ignore[union-attr]
            if (effect.framework, effect.level) in known:
                return self
            return replace(self, inits=(*self.inits, event))
        if isinstance(effect, SetMethod):
            return replace(self, method=effect)
        if isinstance(effect, ThreadStart):
            return replace(self, threads=(*self.threads, event))
        if isinstance(effect, Join) and effect.threads:
            live = tuple(e for e in self.threads if e.effect.started != effect.started)  # type: ignore[union-attr]
            return replace(self, threads=live)
        if isinstance(effect, EnvWrite):
            return replace(self, env=(*self.env, event))
        if isinstance(effect, DefaultDevice) and effect.cuda and self.default_cuda is None:
            return replace(self, default_cuda=event)
        return self

    def env_value(self, var: str) -> Event | None:
        """The last write to ``var`` so far."""
        for event in reversed(self.env):
            if event.effect.var == var:  # type: ignore[union-attr]
                return event
        return None


@dataclass
class Flow:
    """One process's events from an entry point, with the state before each event."""

    kind: str  # "module", "function" or "child"
    events: list[Event]
    entry: State
    origin: ModuleState
    daemonic: bool = False
    depth: int = 0
    start: Event | None = None  # for child flows: the start that created the process
    method: str | None = None  # for child flows: how the process was started
    specs: tuple[Child, ...] = ()  # for child flows: the callables and what they receive
    prelude: int = 0  # for spawned children: how many events re-import the main module
    points: list[tuple[Event, State]] = field(default_factory=list)
    children: list[Flow] = field(default_factory=list)

    def replay(self) -> None:
        state = self.entry
        self.points = []
        for event in self.events:
            self.points.append((event, state))
            state = state.apply(event)

    def tasks_of(self, start: Event) -> list[Event]:
        pool = start.effect.pool  # type: ignore[union-attr]
        return [e for e in self.events if isinstance(e.effect, Task) and e.effect.pool == pool]


class FlowBuilder:
    """Builds the parent flows of a module and, recursively, their child flows."""

    def __init__(self, analyzer: Analyzer, default_method: str) -> None:
        self.analyzer = analyzer
        self.default_method = default_method

    def resolve_method(self, method: str | None, state: State) -> tuple[str, bool]:
        """Return the start method in force and whether the code chose it explicitly."""
        if method:
            return method, True
        if state.method is not None:
            return state.method.method, True
        return self.default_method, False

    def module_flow(self, state: ModuleState) -> Flow:
        """The module run as a script, with its child flows."""
        flow = Flow("module", state.events, State(), state)
        self._expand(flow)
        return flow

    def function_flows(self, state: ModuleState, called_elsewhere: frozenset[str] = frozenset()) -> list[Flow]:
        """Functions no analysed code calls, each run on its own with nothing known.

        Call this after the module's own flow was built. Not run on their own: functions
        that flow called; functions (and classes) named in ``called_elsewhere``, which other
        linted files import from this module (their analysis runs them with what those
        callers pass); and functions the prescan found neither act nor reach by name a
        function that does (on their own they have nothing to report).
        """
        candidates = [f for f in self._entry_functions(state)
                      if id(f.node) not in self.analyzer.reached and state.parsed.entry_point(f.node)
                      and f.qualname.split(".", 1)[0] not in called_elsewhere]
        for func in candidates:
            self.analyzer.call(func, (), UNKNOWN, {}, entry=True)
        flows = []
        for func in candidates:
            if id(func.node) in self.analyzer.reached:
                continue
            events, _ = self.analyzer.call(func, (), UNKNOWN, {}, entry=True)
            flow = Flow("function", events, State(), state)
            self._expand(flow)
            flows.append(flow)
        return flows

    def _entry_functions(self, state: ModuleState) -> Iterator[FuncRef]:
        yield from state.functions
        for cls in state.classes:
            for atom in self.analyzer.member(Instance(cls), "__init__") | _methods(self, cls):
                if isinstance(atom, FuncRef):
                    yield atom

    def _expand(self, flow: Flow) -> None:
        flow.replay()
        if flow.depth >= MAX_CHILD_DEPTH:
            return
        for index, (event, state) in enumerate(flow.points):
            effect = event.effect
            if isinstance(effect, Start):
                child = self._child_for_start(flow, index, event, state)
            elif isinstance(effect, DataLoaderStart):
                child = self._child(flow, event, state, effect.children, effect.method, False)
            else:
                continue
            if child is not None:
                flow.children.append(child)
                self._expand(child)

    def parent_state(self, flow: Flow, index: int) -> State:
        """The state when the workers of the start at ``index`` are created."""
        event, state = flow.points[index]
        effect = event.effect
        if isinstance(effect, Start) and effect.kind == P.EXECUTOR:
            for later, later_state in flow.points[index:]:
                if isinstance(later.effect, Task) and later.effect.pool == effect.pool:
                    return later_state  # executors start workers on the first submit
        return state

    def _child_for_start(self, flow: Flow, index: int, event: Event, state: State) -> Flow | None:
        effect = event.effect
        assert isinstance(effect, Start)
        if effect.kind == P.OS_FORK:
            rest = [e for e in flow.events[index + 1:] if effect.site not in e.ctx.fork_parent]
            return Flow("child", rest, state, flow.origin, depth=flow.depth + 1, start=event,
                        method="fork")
        children = list(effect.children)
        if effect.pool is not None:
            for task in flow.tasks_of(event):
                children.extend(task.effect.children)  # type: ignore[union-attr]
        return self._child(flow, event, self.parent_state(flow, index), tuple(children),
                           effect.method, effect.daemonic)

    def _child(self, flow: Flow, event: Event, state: State, children: tuple[Child, ...],
               method: str | None, daemonic: bool) -> Flow:
        resolved, _ = self.resolve_method(method, state)
        events: list[Event] = []
        entry = state
        if resolved != "fork":
            # A spawned child starts clean, but inherits the global start method
            # (multiprocessing passes it in the spawn preparation data).
            entry = State(method=state.method)
            events.extend(flow.origin.import_events)  # the main module is imported again
        for child in children:
            child_events, _ = self.analyzer.call(child.func, child.args, child.rest, {})
            events.extend(child_events)
        return Flow("child", events, entry, flow.origin, daemonic=daemonic,
                    depth=flow.depth + 1, start=event, method=resolved, specs=children,
                    prelude=0 if resolved == "fork" else len(flow.origin.import_events))

    def child_of(self, flow: Flow, event: Event) -> Flow | None:
        for child in flow.children:
            if child.start is event:
                return child
        return None


def _methods(builder: FlowBuilder, cls: object) -> frozenset:
    import libcst as cst

    out = set()
    for statement in cls.node.body.body:  # type: ignore[attr-defined]
        if isinstance(statement, cst.FunctionDef) and statement.name.value != "__init__":
            out |= builder.analyzer.member(Instance(cls), statement.name.value)  # type: ignore[arg-type]
    return frozenset(out)


def first_gpu_use(child: Flow, framework: str | None = None) -> Event | None:
    """Return the first GPU init in a child's own code (of ``framework`` if given), if any.

    A spawned child's re-import of the main module (its prelude) is not its own code.
    """
    for event in child.events[child.prelude:]:
        effect = event.effect
        if isinstance(effect, Init) and (framework is None or effect.framework == framework):
            return event
    return None


def received_gpu_objects(child: Flow) -> list[str]:
    """Frameworks of the device objects a child receives as arguments."""
    return sorted({o.framework for c in child.specs for v in (*c.args, c.rest)
                   for o in gpu_objects(v)})
