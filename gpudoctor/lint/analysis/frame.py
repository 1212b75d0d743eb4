"""One scope being interpreted: its names, its context, the events it emits, what it returns.

A frame is the state the evaluator and the executor (evaluator.py, executor.py) work on,
and the few operations every part of them shares: binding and looking up a name, emitting
an event, splicing in the events of code run elsewhere, returning. What lies outside the
scope (other functions, other modules, the classes met so far) it asks of its
``interpreter``, the analysis that made it (interpreter.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpudoctor.lint.analysis.events import Branch, Callback, Context, Effect, Event, Imported, Init, Merge, splice
from gpudoctor.lint.analysis.values import ITEM_PREFIX, UNKNOWN, Atom, JoblibConfig, ModRef, Value, join, one

if TYPE_CHECKING:
    import libcst as cst

    from gpudoctor.lint.analysis.interpreter import Interpreter
    from gpudoctor.lint.analysis.module_state import ModuleState
    from gpudoctor.lint.analysis.values import ClassRef, FuncRef
    from gpudoctor.lint.frontend.parsed import LazySite

BUILTINS = frozenset({
    "zip", "list", "tuple", "set", "frozenset", "iter", "enumerate", "reversed", "sorted",
    "map", "filter", "dict", "next", "exit", "quit", "hasattr", "getattr", "super",
})


class Frame:
    """The state of one scope's interpretation: a module's top level or one call of a
    function, in a module ``module``, with its names ``env`` and its context ``ctx``."""

    def __init__(self, interpreter: Interpreter, module: ModuleState, env: dict[str, Value],
                 *, module_level: bool, ctx: Context) -> None:
        self.interpreter = interpreter
        self.module = module
        self.env = env
        self.module_level = module_level
        self.ctx = ctx
        self.events: list[Event] = []
        # A call's summary keeps at most ``Limits.max_events`` of what the calls it makes did
        # (module_state.compress): set where ``events`` become one (Analyzer.call_in_thread).
        self.capped = False
        # (length of ``events`` when counted, its last event then, events from calls among them)
        self._taken: tuple[int, Event | None, int] = (0, None, 0)
        self.returns: set[Atom] = set()
        self.returns_unknown = False  # some way out of the function returns an unknown value
        self.swallowing = 0  # depth of enclosing try blocks whose handlers only log/pass
        self.imported: set[str] = set()  # project modules whose import effects are spliced
        # The tree the walked code belongs to: the module's, or the separately parsed body
        # of one of its functions (see ParsedModule.body).
        self.tree = module.parsed
        self.anchor: cst.CSTNode | None = None  # the top-level statement being walked
        self.meter = interpreter.meter  # how deep the analysis is nested (see nesting.py)
        # One record per branch being walked (see Executor.branch): each name the branch
        # bound, with its value before the branch (None: it was unbound).
        self.trails: list[dict[str, Value | None]] = []
        # joblib backends chosen by the ``with parallel_config(...)`` blocks being walked.
        self.joblib_config: list[JoblibConfig] = []
        self.loops = 0  # loops around the statement being walked
        self.carried: dict[int, dict[str, Value]] = {}  # inner loop -> names its iterations left
        # A class body's scope: the class, and the scope around the ``class`` statement
        # (where a name the body does not bind is looked up before the module's).
        self.class_of: ClassRef | None = None
        self.outer: Frame | None = None
        self.function: FuncRef | None = None  # the function whose call this frame runs
        self.globals: set[str] = set()  # names a ``global`` statement of this function declared
        self.items: dict[str, set[str]] = {}  # name -> the items written on it by constant keys

    def site(self, node: cst.CSTNode) -> LazySite:
        return self.tree.site(node, self.anchor if self.tree is self.module.parsed else None)

    def emit(self, effect: Effect) -> None:
        self.events.append(Event(effect, self.ctx))

    def take(self, events: list[Event], node: cst.CSTNode) -> None:
        """Splice in, at ``node``, the events of code it ran: a call, a thread's target.

        In a call's summary, once the events from its calls are as many as it keeps of them,
        what further calls did would be left out of it (module_state.compress): it is left
        out here already (save the marks of ``if`` chains, kept whole), and said so. A
        function that calls a hundred others that each do a hundred things costs what
        it keeps, not what they do."""
        if self.capped and events:
            most = self.interpreter.limits.max_events
            if self._from_calls() >= most:
                kept = self.interpreter.marks_in(events)
                if len(kept) < len(events):
                    self.interpreter.events_cut = True
                events = kept
                if not events:
                    return
        self.events.extend(splice(events, self.ctx, self.site(node),
                                  self.module.path in self.interpreter.linted_paths))

    def _from_calls(self) -> int:
        """How many of ``events`` came from calls and are kept whatever came before them
        (all but inits, imports and callbacks, of which compress keeps the first of each only)."""
        length, last, count = self._taken
        events = self.events
        if len(events) < length or (length and events[length - 1] is not last):
            length, count = 0, 0  # some were taken back since (Executor.eval_quiet)
        for event in events[length:]:
            if event.ctx.via is not None and not isinstance(event.effect, (Init, Imported, Callback, Branch, Merge)):
                count += 1
        self._taken = (len(events), events[-1] if events else None, count)
        return count

    def give_back(self, value: Value) -> None:
        """A way out of the function returns ``value`` (``return``, or None falling off
        the end); the call's result is the join of them all (see values.join)."""
        self.returns.update(value)
        self.returns_unknown = self.returns_unknown or not value

    def result(self) -> Value:
        """What calling the walked function returns."""
        found = frozenset(self.returns)
        return join(found, UNKNOWN) if self.returns_unknown else found

    def assign(self, name: str, value: Value) -> None:
        """Bind ``name``: every binding goes through here, so that a branch can be undone
        by the names it bound rather than by copying the environment (see Executor.branch)."""
        if name in self.globals and not self.module_level:
            # ``global name`` in a function: the module's name, joined with what it held
            # (the function may run or not, before or after any other use).
            env = self.module.env
            env[name] = join(env[name], value) if name in env else value
            return
        if self.trails:
            trail = self.trails[-1]
            if name not in trail:
                trail[name] = self.env.get(name)
        self.env[name] = value
        if name.startswith(ITEM_PREFIX):
            self.items.setdefault(name[len(ITEM_PREFIX):].split("[", 1)[0], set()).add(name)
        elif name in self.items:  # bound again: the items written on the old value are gone
            for key in self.items[name]:
                if self.env.get(key):
                    self.assign(key, UNKNOWN)

    def lookup(self, name: str) -> Value:
        if name in self.globals and not self.module_level:
            return self.module.env.get(name, UNKNOWN)
        if name in self.env:
            return self.env[name]
        if self.outer is not None and not self.outer.module_level:
            return self.outer.lookup(name)
        if not self.module_level and name in self.module.env:
            return self.module.env[name]
        if name in BUILTINS:
            return one(ModRef(f"builtins.{name}"))
        return UNKNOWN
