"""What running a piece of code does, in order: the events rules read.

A function's summary is the list of events its body produces; a call splices the
callee's events in at the call, with the call's context merged in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gpudoctor.lint.analysis.values import Atom, Condition, Conditions, FuncRef, PoolObj

if TYPE_CHECKING:
    from gpudoctor.lint.frontend.parsed import LazySite
from gpudoctor.knowledge.processes import ProcessKind
from gpudoctor.knowledge.table import InitLevel


@dataclass(frozen=True)
class Init:
    """A GPU framework was initialized (so far: ``level``)."""

    framework: str
    level: InitLevel
    api: str
    site: LazySite
    # (variable, value): no init happens when ``os.environ`` holds that value at the call
    # (registry.INIT_UNLESS); decided where the flow is replayed.
    unless: tuple[str, str] | None = None


@dataclass(frozen=True)
class Child:
    """A callable that runs in a new process, with the argument values it receives."""

    func: FuncRef
    args: tuple[frozenset[Atom], ...]  # per position
    rest: frozenset[Atom]  # for positions beyond ``args``
    role: str  # "target", "process" (a Process subclass's run), "task", "initializer", "dataset", ...


@dataclass(frozen=True)
class Start:
    """Processes start here (a pool is built, ``.start()``, ``os.fork()``, a launcher)."""

    kind: ProcessKind
    method: str | None  # None: the platform default
    site: LazySite
    children: tuple[Child, ...] = ()
    daemonic: bool = False
    pool: PoolObj | None = None
    workers: int | None = None
    started: LazySite | None = None  # for a Process: its constructor site
    # What the started processes are handed (arguments, initargs), whatever runs them: a
    # child given device objects needs their framework, even for a target not the project's.
    sent: frozenset[Atom] = frozenset()


@dataclass(frozen=True)
class Task:
    """Work submitted to an existing pool or executor."""

    pool: PoolObj
    site: LazySite
    children: tuple[Child, ...]
    sent: frozenset[Atom] = frozenset()  # what the task is handed (see Start.sent)


@dataclass(frozen=True)
class Send:
    """Values cross a process boundary here (task args, Process args, queue put, pipe send)."""

    site: LazySite
    channel: str
    value: frozenset[Atom]
    method: str | None


@dataclass(frozen=True)
class SetMethod:
    method: str
    site: LazySite
    force: bool = False  # ``force=True``: it replaces a method already set (else it raises)
    # The namespace whose default context it sets when that is not the standard library's
    # (processes.OWN_CONTEXTS: ``"multiprocess"``); "" for the standard library's.
    namespace: str = ""


@dataclass(frozen=True)
class ThreadStart:
    site: LazySite
    api: str
    started: LazySite | None = None  # constructor site of the thread or thread pool


@dataclass(frozen=True)
class Join:
    """Threads or a process started at ``started`` (their constructor site) are joined here."""

    started: LazySite
    site: LazySite
    threads: bool


@dataclass(frozen=True)
class EnvWrite:
    var: str
    value: frozenset[Atom]
    site: LazySite
    environ: bool = True  # False for ``os.putenv``: the process environment, not os.environ
    keeps: bool = False  # ``os.environ.setdefault``: writes nothing when the variable is set


@dataclass(frozen=True)
class TfConfig:
    """Device configuration that must run before its framework's runtime exists."""

    api: str
    site: LazySite
    swallowed: bool  # inside a try whose handler only logs or passes
    framework: str = ""


@dataclass(frozen=True)
class Collective:
    """A collective of a distributed job (knowledge/distributed.py): every rank of its
    process group must reach it. ``group``: the call names a process group other than
    the whole job's (its members are then meant to be some ranks only)."""

    api: str
    kind: str
    site: LazySite
    group: bool = False
    device: bool = False  # it names the device it runs on (``barrier(device_ids=[...])``)


@dataclass(frozen=True)
class DeviceChoice:
    """The process chooses its GPU through an API outside the frameworks' tables (an
    accelerator abstraction's ``set_device``); the tables' own (``torch.cuda.set_device``)
    are Init events with that API."""

    api: str
    site: LazySite


@dataclass(frozen=True)
class ProcessGroupInit:
    """A distributed job's process group is made (``init_process_group``): ``backend`` as
    written (None: not a literal), and whether it was told this process's device."""

    api: str
    backend: str | None
    device: bool
    site: LazySite


@dataclass(frozen=True)
class Imported:
    """A module of a GPU framework was imported (it may read its configuration then)."""

    module: str  # the dotted name imported
    site: LazySite


@dataclass(frozen=True)
class DataLoaderStart:
    site: LazySite
    method: str | None
    workers: int | None  # 0: no worker processes; None: a number that cannot be read
    children: tuple[Child, ...]


@dataclass(frozen=True)
class DefaultDevice:
    cuda: bool
    site: LazySite


@dataclass(frozen=True)
class SetPreload:
    """``set_forkserver_preload``: the modules the forkserver imports before it forks any
    worker (None: a list gpudoctor cannot read), and what importing those other than the
    main module does (their GPU inits and environment writes), with the module each of
    those events comes from."""

    modules: tuple[str, ...] | None
    site: LazySite
    events: tuple[Event, ...] = ()
    sources: tuple[str, ...] = ()  # per event: the preloaded module it comes from

    def source_of(self, event: Event) -> str | None:
        for index, own in enumerate(self.events):
            if own is event:
                return self.sources[index]
        return None


@dataclass(frozen=True)
class Callback:
    """Functions handed to code the analysis cannot see (a GUI signal's ``connect``, a web
    framework's handler, a library's hook): they may be called later, in this process. A
    flow runs them at its end, after everything it did (flows.FlowBuilder)."""

    funcs: tuple[FuncRef, ...]
    site: LazySite


@dataclass(frozen=True)
class Branch:
    """What follows, up to the next Merge of the same ``if`` chain, runs only when the
    chain takes its branch ``index``: the branches of one run of a chain exclude each
    other (a thread started in one is not running at a start in another). Only chains
    where that matters carry these (see Executor.mark_branches)."""

    chain: LazySite  # the ``if`` statement (named so, not ``site``: nothing happens there)
    index: int


@dataclass(frozen=True)
class Merge:
    """A branch of the ``if`` chain ``chain`` ends here (``last``: the chain ends; what
    lies between its branches, the tests of ``elif``, is in none of them)."""

    chain: LazySite
    last: bool


Effect = (Init | Start | Task | Send | SetMethod | ThreadStart | Join | EnvWrite | TfConfig
          | DataLoaderStart | DefaultDevice | Imported | SetPreload | Callback | Branch | Merge | Collective
          | ProcessGroupInit | DeviceChoice)


@dataclass(frozen=True)
class Context:
    """Where an event happened, relative to the flow it is part of."""

    import_time: bool = False  # module level of the entry module, outside the main guard
    in_loop: bool = False
    loop: LazySite | None = None  # the innermost loop statement around the event
    fork_parent: frozenset[LazySite] = frozenset()  # parent-side branches of these os.fork() calls
    fork_child: frozenset[LazySite] = frozenset()  # child-side branches of these os.fork() calls
    via: LazySite | None = None  # the call that led into the function where this happened
    entry: LazySite | None = None  # the innermost call or import in the linted file that led here
    # In the entry module's ``if __name__ == "__main__":`` block, or in what it calls or
    # imports (a module imported there runs its top level then, not at import time).
    main_block: bool = False
    # The undecided tests it happens under, outermost first (the caller's before the callee's).
    conditions: Conditions = ()
    # The threads (by the site that started them) whose own code this is: a thread's target,
    # a thread pool's task, and what they call.
    threads: frozenset[LazySite] = frozenset()


@dataclass(frozen=True)
class Event:
    effect: Effect
    ctx: Context = field(default_factory=Context)


def site_of(effect: Effect) -> LazySite | None:
    """Where an effect happens; None for the marks of a chain's branches (Branch, Merge)."""
    return None if isinstance(effect, (Branch, Merge)) else effect.site


def splice(events: list[Event], outer: Context, call_site: LazySite | None, linted: bool = False) -> list[Event]:
    """Re-home a callee's events at a call made in context ``outer`` (``linted``: the call
    is in the linted file)."""
    default = outer == _DEFAULT
    entry = call_site if linted else None
    out = []
    for event in events:
        inner = event.ctx
        if default and (call_site is None or (inner.via is not None and (entry is None or inner.entry is not None))):
            out.append(event)  # nothing to add: the common case, kept cheap
            continue
        out.append(Event(event.effect, Context(
            outer.import_time or inner.import_time,
            outer.in_loop or inner.in_loop,
            inner.loop or outer.loop,
            outer.fork_parent | inner.fork_parent,
            outer.fork_child | inner.fork_child,
            inner.via or call_site,
            inner.entry or entry,
            outer.main_block or inner.main_block,
            _called(outer.conditions, call_site) + inner.conditions if inner.conditions
            else _called(outer.conditions, call_site),
            outer.threads | inner.threads,
        )))
    return out


_DEFAULT = Context()


def _called(conditions: Conditions, call_site: LazySite | None) -> Conditions:
    """The caller's conditions at a call, each test on the rank knowing the call made under
    it (the line a finding about the branch points at: GD501)."""
    if call_site is None or not any(c.ranks is not None and c.call is None for c in conditions):
        return conditions
    return tuple(Condition(c.site, c.holds, c.source, c.ranks, call_site) if c.ranks is not None and c.call is None
                 else c for c in conditions)
