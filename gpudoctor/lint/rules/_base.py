"""The rule contract: a docstring that is the documentation, examples that are the tests."""

from __future__ import annotations

import inspect
import textwrap
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from gpudoctor.knowledge import processes as P
from gpudoctor.knowledge.registry import DISPLAY
from gpudoctor.lint.analysis.events import DataLoaderStart, Event, Join, Start, site_of
from gpudoctor.lint.analysis.flows import Flow, FlowBuilder, FlowKind, State
from gpudoctor.lint.analysis.values import FuncRef, ModRef
from gpudoctor.lint.findings import ERROR, Finding, Fix, NoFix, Related, Site

if TYPE_CHECKING:
    from gpudoctor.lint.analysis.analyzer import Analyzer
    from gpudoctor.lint.analysis.module_state import ModuleState
    from gpudoctor.lint.analysis.values import Conditions
    from gpudoctor.lint.frontend.parsed import LazySite


@dataclass(frozen=True)
class Later:
    """A later Python the project supports, whose default start method is not the oldest's."""

    minor: int
    method: str  # its default start method
    preloads_main: bool  # its forkserver runs the main script's top level
    oldest: int  # the oldest minor, the one the analysis ran for
    oldest_method: str  # the method the start gets there
    platform: str

    def words(self) -> str:
        """How the message says which default is meant: "forkserver on Linux from Python
        3.14 (fork up to 3.13)"."""
        where = _PLATFORM_NAMES.get(self.platform, self.platform)
        return f"{self.method} on {where} from Python 3.{self.minor} ({self.oldest_method} up to 3.{self.minor - 1})"


_PLATFORM_NAMES = {"linux": "Linux", "darwin": "macOS", "win32": "Windows"}


@dataclass(frozen=True, eq=False)
class StartSite:
    """A process start as a rule reads it: where it is, the state of the process that
    starts the workers when it creates them, the start method in force, and what the
    started processes run."""

    flow: Flow
    index: int  # of the start in ``flow.points``
    event: Event
    parent: State  # for an executor: at its first task, when its workers are created
    method: str  # "fork", "spawn" or "forkserver"
    explicit: bool  # chosen by the code (an argument, a context, set_start_method), not the default
    child: Flow | None  # the started processes' flow; None where it is not known

    @property
    def start(self) -> Start | DataLoaderStart:
        effect = self.event.effect
        assert isinstance(effect, (Start, DataLoaderStart))
        return effect


@dataclass
class CheckContext:
    """What a rule reads: the flows of one module, its process starts, and the few facts
    about the project a rule may ask for. Rules never reach the analyzer or the flow
    builder themselves (a test checks it): what they need is a method here."""

    module: ModuleState
    flows: list[Flow]
    _builder: FlowBuilder
    _analyzer: Analyzer
    # Computed once per module, on first use: rules ask them for every process start, and
    # recomputing them per start made a module of many starts quadratic.
    _joins: dict[int, dict[tuple[object, object, bool], int]] = field(default_factory=dict)
    _import_time: frozenset[object] | None = None
    _starts: list[StartSite] | None = None
    _fixes: dict[int, Fix | NoFix] = field(default_factory=dict)  # start -> its spawn fix (spawn_context)
    _by_position: dict[tuple[str, int, int], list[StartSite]] | None = None  # see _start_switchable
    _states: dict[str, ModuleState | None] = field(default_factory=dict)  # path -> its state (see _state)
    _imports: dict[tuple[str, frozenset[str]], bool] = field(default_factory=dict)  # see imports_any

    def joined_later(self, flow: Flow, index: int, started: object, loop: object,
                     threads: bool | None = None) -> bool:
        """Is what was started at ``started`` joined after point ``index`` of ``flow``, in
        the loop ``loop``? (``threads``: only joins of threads, or of processes; None: any.)"""
        last = self._joins.get(id(flow))
        if last is None:
            last = self._joins[id(flow)] = {}
            for position, (event, _) in enumerate(flow.points):
                if isinstance(event.effect, Join):
                    last[(event.effect.started, event.ctx.loop, event.effect.threads)] = position
        kinds = (True, False) if threads is None else (threads,)
        return any(last.get((started, loop, kind), -1) > index for kind in kinds)

    def all_flows(self) -> Iterator[Flow]:
        stack = list(self.flows)
        while stack:
            flow = stack.pop(0)
            yield flow
            stack.extend(flow.children)

    def points(self) -> Iterator[tuple[Flow, int, Event, State]]:
        for flow in self.all_flows():
            for index, (event, state) in enumerate(flow.points):
                yield flow, index, event, state

    def process_starts(self) -> list[StartSite]:
        """Every process start (``Start`` and ``DataLoaderStart`` events) of every flow, in
        the order of ``points()``."""
        if self._starts is None:
            self._starts = []
            for flow, index, event, state in self.points():
                effect = event.effect
                if index in flow.repeats:
                    continue  # the same start again: its findings are the first's (FlowBuilder._expand)
                if isinstance(effect, Start):
                    parent = self._builder.parent_state(flow, index)
                elif isinstance(effect, DataLoaderStart):
                    parent = state
                else:
                    continue
                method, explicit = self._builder.resolve_method(effect.method, parent)
                self._starts.append(StartSite(flow, index, event, parent, method, explicit,
                                              self._builder.child_of(flow, event)))
        return self._starts

    def method_at(self, method: str | None, state: State) -> tuple[str, bool]:
        """The start method in force for something created with ``method`` (None: the
        default) in ``state``, and whether the code chose it."""
        return self._builder.resolve_method(method, state)

    @property
    def forkserver_preloads_main(self) -> bool:
        """Does the target's forkserver run the main script's top level before forking?"""
        return self._builder.preloads_main

    def later(self, method: str, explicit: bool) -> Later | None:
        """For a start that leaves its method to the default (``method``, as resolved for the
        oldest Python, and ``explicit``, whether the code chose it): the later Python the project
        supports whose default differs (forkserver on Linux from 3.14), where the hazards of
        that method are the start's too; None for a start that chose its method, or a
        project whose Pythons share one default."""
        target = self._builder.target
        if explicit or target.later_minor is None or target.later_method is None:
            return None
        return Later(target.later_minor, target.later_method, target.later_preloads_main, target.minor,
                     method, target.platform)

    def spawn_fix(self, site: StartSite) -> Fix | NoFix:
        """The unsafe fix that switches this process start to spawn, or why it is not offered."""
        from gpudoctor.lint.fixes.spawn_context import spawn_fix

        where = site_of(site.event.effect)
        path = where.path if where is not None else None
        state = self._state(path) if path else None
        states = {path: state} if path and state is not None else {}
        return spawn_fix(site.event, site.child, states, set(self._import_time_starts()), self._fixes,
                         self._start_switchable, self._analyzer.project.rewrites)

    def _import_time_starts(self) -> frozenset[object]:
        if self._import_time is None:
            self._import_time = frozenset(
                e.effect.site for f in self.flows if f.kind == FlowKind.MODULE for e in f.events
                if isinstance(e.effect, Start) and e.ctx.import_time)
        return self._import_time

    def _start_switchable(self, row: int, col: int) -> str | None:
        """Can every start the analysis saw at this call (a pool, an executor or a
        ``Process(...)``, by its position) switch to spawn? None, or why not. For a
        context held in a variable: the fix switches every start through it."""
        from gpudoctor.lint.fixes.spawn_context import IMPORT_TIME, unloadable_child
        from gpudoctor.lint.frontend.parsed import LazySite, StoredSite

        if self._by_position is None:
            self._by_position = {}
            for start in self.process_starts():
                effect = start.event.effect
                if not isinstance(effect, Start):
                    continue
                node_site = effect.site if effect.kind in (P.POOL, P.EXECUTOR) else effect.started
                if isinstance(node_site, LazySite) and not isinstance(node_site, StoredSite):
                    at = node_site.concrete()
                    self._by_position.setdefault((at.path, at.row, at.col), []).append(start)
        path = self.module.parsed.path
        found = self._by_position.get((path, row, col), [])
        if not found:
            return f"line {row} is not reached by the analysis"
        import_time = self._import_time_starts()
        for start in found:
            effect = start.start
            if effect.site in import_time:
                return IMPORT_TIME
            why = unloadable_child(start.child)
            if why is not None:
                return why
        return None

    def frameworks_of(self, path: str) -> set[str]:
        state = self._state(path)
        return set() if state is None else state.frameworks

    def imports_any(self, path: str, names: frozenset[str]) -> bool:
        """Does the module at ``path`` bind a name to one of ``names`` (qualified names of
        modules or of what they define), or to something under one of them? (Asked for
        every start of every flow: the answer is kept per module and names.)"""
        known = self._imports.get((path, names))
        if known is None:
            state = self._state(path)
            known = self._imports[(path, names)] = state is not None and any(
                isinstance(atom, ModRef) and any(atom.qualname == n or atom.qualname.startswith(n + ".")
                                                 for n in names)
                for value in state.env.values() for atom in value)
        return known

    def definition_site(self, func: FuncRef) -> LazySite | None:
        """Where ``func`` is defined (its name, for a ``def``)."""
        state = self._state(func.module)
        if state is None:
            return None
        node = getattr(func.node, "name", None) or func.node
        return state.parsed.tree_of(func.node).site(node)

    def _state(self, path: str) -> ModuleState | None:
        if path in self._states:
            return self._states[path]
        from pathlib import Path

        from gpudoctor.lint.analysis.module_state import ModuleState

        state = self._analyzer.module(Path(path))
        found = self._states[path] = state if isinstance(state, ModuleState) else None
        return found


def display(framework: str) -> str:
    return DISPLAY.get(framework, framework)


def unmargin(text: str) -> str:
    """Remove the ``| `` margin example code is written behind (see ``Rule``): from every
    line of an example, and from the code blocks of a docstring (not from its tables)."""
    lines = textwrap.dedent(text).split("\n")
    if all(line.startswith("|") for line in lines if line.strip()):
        return "\n".join(_strip_margin(line) for line in lines)
    fenced = False
    out = []
    for line in lines:
        if line.startswith("```"):
            fenced = not fenced
        elif fenced:
            line = _strip_margin(line)
        out.append(line)
    return "\n".join(out)


def _strip_margin(line: str) -> str:
    return line[2:] if line.startswith("| ") else line[1:] if line.startswith("|") else line


# How to choose the start method, per kind of process start (the rule's own fix_title for
# the others).
SPAWN_HINTS = {
    P.EXECUTOR: 'Use the spawn start method: ProcessPoolExecutor(..., mp_context=multiprocessing.get_context("spawn"))',
    P.OS_FORK: "os.fork() always forks: start the child with multiprocessing.get_context(\"spawn\").Process, "
               "or initialize the GPU only after the fork, in the process that uses it",
    P.JOBLIB: 'Use joblib\'s default backend, loky (fresh worker processes), or pass a spawn context as the '
              'backend: Parallel(..., backend=multiprocessing.get_context("spawn"))',
    P.LIBRARY_POOL: P.LIBRARY_POOL_CHOOSE[0].upper() + P.LIBRARY_POOL_CHOOSE[1:],
}


# The step that makes a function loadable by a spawned worker, per reason it is not
# (analysis.pickling): GD108's fix, and the first half of a "use spawn" fix where the
# child runs such a function (spawn alone would trade a fork crash for a pickling one).
LOADING_STEPS = {
    "notebook": "Move `{name}` into a module next to the notebook (e.g. `workers.py`) and import it from there",
    "main-block": 'Define `{name}` at the top level of the script, above the `if __name__ == "__main__":` block',
    "local": "Define `{name}` at the top level of a module (pass what it uses from the enclosing function as "
             "arguments, or bind them with functools.partial)",
    "lambda": "Replace the lambda with a function defined at the top level of a module (functools.partial "
              "binds arguments)",
}


def spawn_hint(kind: P.ProcessKind, child: Flow | None, default: str | None) -> str | None:
    """The hint of a finding whose way out is the spawn start method: ``SPAWN_HINTS`` for
    the kind (or ``default``), preceded by the step that lets spawned workers load what the
    child runs, when it needs one."""
    from gpudoctor.lint.analysis.pickling import shown_name, unloadable

    hint = SPAWN_HINTS.get(kind, default)
    for spec in child.specs if child is not None else ():
        why = unloadable(spec.func)
        if why is not None and hint:
            step = LOADING_STEPS[why].format(name=shown_name(spec.func))
            return f"{step}; then {hint[0].lower()}{hint[1:]}"
    return SPAWN_HINTS.get(kind)


def what_runs(site: object) -> str:
    """"import" when code ran because a module was imported at ``site``, else "call"."""
    from gpudoctor.lint.frontend.parsed import LazySite

    kind = site.kind if isinstance(site, LazySite) else None
    return "import" if kind in ("Import", "ImportFrom") else "call"


def line_of(site: Site | LazySite, here: Site | LazySite | None = None) -> str:
    """Where ``site`` is, for a message about ``here``: "line 12", or "helpers.py:12" when
    it is in another file, always relative to ``here``'s folder ("../main.py:10"), unless
    that climbs more than two folders (then the absolute path). In a Jupyter notebook,
    "cell 3, line 2" (or "nb.ipynb, cell 3, line 2")."""
    import os

    from gpudoctor.lint.frontend.parsed import concrete
    from gpudoctor.lint.notebook import describe

    where = concrete(site)
    cell = describe(where.path, where.row)  # "cell 3, line 2" in a notebook
    if here is None or concrete(here).path == where.path:
        return cell or f"line {where.row}"
    shown = os.path.relpath(where.path, os.path.dirname(concrete(here).path))
    if shown.startswith(os.path.join(os.pardir, os.pardir, os.pardir)):
        shown = where.path
    return f"{shown}, {cell}" if cell else f"{shown}:{where.row}"


def conditions_of(conditions: Conditions, shared: Conditions = ()) -> Conditions:
    """The condition of ``conditions`` that is not also in ``shared`` (those the reported
    code itself runs under), the innermost one: it is the one that decides, and a message
    naming a chain of them no longer reads."""
    own = tuple(c for c in conditions if c not in shared)
    return own[-1:]


def may_meet(first: Event, then: Event) -> bool:
    """Can one run reach both events: do the tests on a library's version that each runs
    under agree (frontend/version_tests.py)? A path that needs TensorFlow 2.1 or later for
    the init and earlier than 2.0 for what follows is taken by no program."""
    if not first.ctx.conditions and not then.ctx.conditions:
        return True
    from gpudoctor.lint.frontend.version_tests import can_all_hold, version_test

    tests = []
    for condition in (*first.ctx.conditions, *then.ctx.conditions):
        found = version_test(condition.source)
        if found is not None:
            tests.append(found if condition.holds else found.negated())
    return len(tests) < 2 or can_all_hold(tests)


def first_met(events: Iterable[Event], then: Event) -> Event | None:
    """The first of ``events`` (inits, in order) that one run can reach along with ``then``."""
    return next((event for event in events if may_meet(event, then)), None)


def when_text(conditions: Conditions, here: Site | LazySite) -> str:
    """", when `args.gpu` is true (line 12)" for undecided conditions (the analysis took
    both ways; a finding that needs one names it), "" when there are none."""
    if not conditions:
        return ""
    parts = [f"{c.describe()} ({line_of(c.site, here)})" for c in conditions]
    return ", when " + " and ".join(parts)


def condition_sites(conditions: Conditions) -> tuple[Related, ...]:
    """A related location for each condition a finding depends on."""
    return tuple(related_site(c.site, f"only when {c.describe()}") for c in conditions)


def method_set_elsewhere(site: StartSite) -> tuple[LazySite, str] | None:
    """Where a start method was set on a namespace other than the one whose default this
    start uses (``multiprocess.set_start_method("spawn")`` before a standard library
    ``Process``, or the other way round), and the words for it: the code meant it for
    this start, and it does not apply."""
    if site.explicit:
        return None
    method = site.start.method
    own = method[len(P.OWN_DEFAULT):] if method and method.startswith(P.OWN_DEFAULT) else ""
    for chosen, _ in site.parent.own_methods:
        if chosen.namespace != own:
            return chosen.site, (f"{chosen.namespace}.set_start_method sets the default of {chosen.namespace}, "
                                 f"a separate package, not of {own or 'multiprocessing'}")
    if own and site.parent.method is not None:
        return site.parent.method.site, f"set_start_method sets the default of multiprocessing, not of {own}"
    return None


def related_site(site: Site | LazySite, message: str) -> Related:
    """A second location of a finding, from a site of the analysis (its rows and columns
    computed now)."""
    from gpudoctor.lint.frontend.parsed import concrete

    return Related(concrete(site), message)


class Rule:
    """Base class. Subclasses set the class variables and implement ``check``.

    The docstring is the rule's documentation (ruff's headings). ``VALID`` and
    ``INVALID`` are snippets in the fixture format (``# ruleid: CODE`` on the line
    before each expected finding); the test suite runs them. Example code, in those and
    in the docstring's code blocks, is written behind a ``| `` margin that is removed
    here, so that no line of the linter's source reads as an import of a GPU framework.
    A ``{{cause.why}}`` or ``{{cause.fix}}`` in the docstring is a sentence of
    ``gpudoctor.hazards``, worded once for the rule, the probe and the pytest plugin.
    """

    code: ClassVar[str]
    name: ClassVar[str]
    severity: ClassVar[str] = ERROR
    summary: ClassVar[str]
    fix_title: ClassVar[str | None] = None
    suppressed_by: ClassVar[tuple[str, ...]] = ()
    # A finding of this rule that one of ``suppressed_by`` hides at the same place is still
    # there once that one is fixed (GD401 under GD101: once the pool spawns, each worker
    # reserves the GPU's memory): the hiding finding's help names this rule's fix as the
    # next step, so that fixing it does not turn up a finding no report showed.
    outlives_fix: ClassVar[bool] = False
    default_enabled: ClassVar[bool] = True
    # Whether a finding of this rule in a module that a linted file reaches (its pool
    # forks after the linted file initialized CUDA) is shown at the call or import there
    # when the module is not linted itself (see rehoming.py). False for a rule whose
    # findings depend on the reported code alone, never on what ran before it.
    shown_at_callers: ClassVar[bool] = True
    VALID: ClassVar[tuple[str, ...]] = ()
    INVALID: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        cls.VALID = tuple(unmargin(text) for text in cls.VALID)
        cls.INVALID = tuple(unmargin(text) for text in cls.INVALID)

    def check(self, ctx: CheckContext) -> Iterator[Finding]:
        raise NotImplementedError

    def first_at(self, site: object) -> bool:
        """Is this the first time this check reports at ``site`` (a start's site)? Of the
        findings of one rule at one place the first is the one shown (engine.py), so a
        rule reaching a start by many paths (each flow that runs it) need not build the
        later ones: in a ring of modules that call each other there are hundreds."""
        seen: set[object] = self.__dict__.setdefault("_reported_at", set())
        if site in seen:
            return False
        seen.add(site)
        return True

    def finding(self, site: Site | LazySite, message: str, related: tuple[Related, ...] = (),
                severity: str | None = None, fix: Fix | NoFix | None = None, hint: str | None = None) -> Finding:
        """A finding of this rule; ``hint`` replaces the rule's ``fix_title`` where the way
        out depends on the code (``os.fork()`` takes no start method); ``fix`` may be why
        there is none (NoFix)."""
        from gpudoctor.lint.frontend.parsed import concrete

        plain = tuple(Related(concrete(r.site), r.message) for r in related)
        refused = fix.reason if isinstance(fix, NoFix) else None
        return Finding(self.code, self.name, message, severity or self.severity, concrete(site), plain,
                       hint or self.fix_title, fix if isinstance(fix, Fix) else None, no_fix=refused)

    @classmethod
    def documentation(cls) -> str:
        """The docstring as Markdown: margins removed, and each ``{{cause.why}}`` or
        ``{{cause.fix}}`` replaced by the sentence the probe and the pytest plugin say too
        (gpudoctor.hazards)."""
        from gpudoctor.hazards import fill

        return fill(unmargin(inspect.cleandoc(cls.__doc__ or "")))
