"""Execute statements in order: assignments, branches, loops, ``try``, ``with``, imports,
and definitions (a ``def`` binds its function as its decorators leave it, with the
enclosing functions a nested def uses; a ``class`` binds its class with its project bases).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, TypedDict

import libcst as cst

from gpudoctor.knowledge.distributed import RANK_ZERO_DECORATORS
from gpudoctor.knowledge.processes import COMPILER, JOBLIB, THREAD_POOL, kind_of
from gpudoctor.knowledge.registry import (
    DEVICE_CONTEXTS,
    DEVICE_TYPES,
    IMPORT_READERS,
    KERNEL_DECORATORS,
    canonical,
    framework_of_module,
    initializing_import,
)
from gpudoctor.knowledge.table import InitLevel
from gpudoctor.lint.analysis import process_calls
from gpudoctor.lint.analysis.arguments import Args
from gpudoctor.lint.analysis.evaluator import Evaluator, present_on_every_target
from gpudoctor.lint.analysis.events import (
    Branch,
    Callback,
    Context,
    DefaultDevice,
    Event,
    Imported,
    Init,
    Join,
    Merge,
    Start,
    ThreadStart,
)
from gpudoctor.lint.analysis.module_state import ModuleState
from gpudoctor.lint.analysis.ranks import distinguishes
from gpudoctor.lint.analysis.ranks import samples as rank_samples
from gpudoctor.lint.analysis.values import (
    DEFAULT_DEVICE,
    FACTORY_PREFIX,
    LOCAL_SCOPE,
    MAIN_BLOCK_SCOPE,
    MODULE_SCOPE,
    UNKNOWN,
    Atom,
    Bool,
    ClassRef,
    Compiled,
    Compiler,
    Condition,
    Container,
    CudaDevice,
    ForkPid,
    FuncRef,
    GpuObj,
    Instance,
    Int,
    JoblibConfig,
    ModRef,
    PoolObj,
    Str,
    Value,
    elements,
    is_cuda,
    join,
    one,
    ordered,
    truth,
)
from gpudoctor.lint.frontend.conditions import (
    MISSING_NAME_ERRORS,
    caught_names,
    condition_text,
    handler_swallows,
    is_main_guard,
)
from gpudoctor.lint.frontend.version_tests import version_test
from gpudoctor.lint.nesting import BLOCK

if TYPE_CHECKING:
    from gpudoctor.lint.frontend.parsed import LazySite

EXITS = frozenset({"builtins.exit", "builtins.quit", "sys.exit", "os._exit", "os.abort",
                   # exec replaces the process: the code after it never runs
                   *(f"os.exec{suffix}" for suffix in ("l", "le", "lp", "lpe", "v", "ve", "vp", "vpe"))})
IMPORT_READ_MODULES = frozenset(IMPORT_READERS.values())
# Placement methods whose call, as a statement, moves the object itself (a module's ``to``
# and ``cuda`` return self; a tensor's return a copy, and the statement is then a no-op).
IN_PLACE_PLACEMENT = frozenset({"to", "cuda"})


class ForkSide(TypedDict, total=False):
    """What one side of ``if pid == 0`` adds to the context (see Executor.fork_sides)."""

    fork_child: frozenset[LazySite]
    fork_parent: frozenset[LazySite]


class Executor(Evaluator):
    """Interpret a block of statements, in order, emitting events.

    Branches (``if``, ``try`` handlers, loop bodies, ``match`` cases) are walked one after
    the other from the same environment and their environments joined after. A branch is
    undone by the names it bound, not by copying the environment: the environment of a
    module's top level holds every name the module bound so far, and copying it at each
    branch made a long module quadratic in its statements.

    A loop's body is walked twice, so that what one iteration leaves reaches the next,
    but only the outermost loop (of the code walked) does that: a loop inside it is walked
    once each time the outer body is, starting from what its earlier walks left (its
    carried names). Walking every loop twice each time made nested loops cost 2 to the
    power of their depth.

    An import runs the top level of the project modules it names through the interpreter
    (interpreter.py), and their import events are spliced in here, once per module.
    """

    def walk_block(self, body: Sequence[cst.CSTNode]) -> bool:
        """Walk statements; return True when the block cannot fall through (return, raise...)."""
        meter = self.meter
        depth = meter.depth + BLOCK
        if depth > meter.peak and not meter.room(BLOCK):
            return False  # nested past the meter: the block is unknown, assumed to do nothing
        meter.depth = depth
        try:
            top = self.module_level and body is self.module.parsed.module.body
            for statement in body:
                if top:
                    self.anchor = statement
                if self.walk_statement(statement):
                    return True
            return False
        finally:
            meter.depth = depth - BLOCK

    def walk_statement(self, node: cst.CSTNode) -> bool:
        if isinstance(node, cst.SimpleStatementLine):
            for small in node.body:  # (a loop, not ``any``: no C frame per nested call)
                if self.walk_small(small):
                    return True
            return False
        if isinstance(node, cst.BaseSmallStatement):  # the body of ``if x: a(); b()``
            return self.walk_small(node)
        handler = getattr(self, f"_s_{type(node).__name__}", None)
        if handler is not None:
            return bool(handler(node))
        return False

    def walk_small(self, node: cst.BaseSmallStatement) -> bool:
        if isinstance(node, cst.Expr):
            expr = node.value
            callee = self.eval(expr.func) if isinstance(expr, cst.Call) else UNKNOWN
            value = self.eval(expr)
            if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and \
                    expr.func.attr.value in IN_PLACE_PLACEMENT and isinstance(expr.func.value, cst.Name):
                # ``model.to(device)`` as a statement moves a module (or a graph batch) in
                # place: the name now holds a device object too.
                moved = frozenset(a for a in value if isinstance(a, GpuObj))
                if moved:
                    name = expr.func.value.value
                    self.assign(name, self.lookup(name) | moved)
            return any(isinstance(a, ModRef) and a.qualname in EXITS for a in callee)
        if isinstance(node, cst.Assign):
            value = self.eval(node.value)
            for target in node.targets:
                self.bind(target.target, value)
        elif isinstance(node, cst.AnnAssign) and node.value is not None:
            self.bind(node.target, self.eval(node.value))
        elif isinstance(node, cst.AugAssign):
            value = self.eval(node.value)
            if isinstance(node.target, cst.Name):
                self.assign(node.target.value, self.lookup(node.target.value) | value)
        elif isinstance(node, cst.Return):
            self.give_back(self.eval(node.value))
            return True
        elif isinstance(node, cst.Raise):
            self.eval(node.exc)
            return True
        elif isinstance(node, (cst.Break, cst.Continue)):
            return True
        elif isinstance(node, cst.Import):
            self.do_import(node)
        elif isinstance(node, cst.ImportFrom):
            self.do_import_from(node)
        elif isinstance(node, (cst.Assert, cst.Del)):
            self.eval_children(node)
        elif isinstance(node, cst.Global):
            self.globals.update(item.name.value for item in node.names)
        return False

    def eval_quiet(self, expr: cst.BaseExpression) -> Value:
        saved = len(self.events)
        value = self.eval(expr)
        del self.events[saved:]
        return value

    def eval_args_quiet(self, node: cst.Call) -> Args:
        saved = len(self.events)
        args = self.eval_args(node)
        del self.events[saved:]
        return args

    # -- branches ------------------------------------------------------------------------
    def branch(self, walk: Callable[[], bool], ctx: Context) -> tuple[dict[str, Value], bool]:
        """Run ``walk`` under ``ctx``, then undo what it bound. Return what it bound (each
        name with its value at the end) and whether it cannot fall through."""
        saved_ctx = self.ctx
        self.ctx = ctx
        trail: dict[str, Value | None] = {}
        self.trails.append(trail)
        try:
            ended = walk()
        finally:
            self.trails.pop()
            self.ctx = saved_ctx
        env = self.env
        bound = {name: env[name] for name in trail}
        for name, before in trail.items():
            if before is None:
                del env[name]
            else:
                env[name] = before
        return bound, ended

    def block(self, body: Sequence[cst.CSTNode], ctx: Context | None = None) -> tuple[dict[str, Value], bool]:
        """A block walked as a branch (see branch)."""
        return self.branch(lambda: self.walk_block(body), self.ctx if ctx is None else ctx)

    def merge(self, outcomes: list[tuple[dict[str, Value], bool]], fallthrough: bool) -> bool:
        """Join what the branches that fall through bound (``fallthrough``: the code may also
        run none of them); True if no way falls through."""
        live = [bound for bound, ended in outcomes if not ended]
        if fallthrough:
            live.append({})
        if not live:
            return True
        if len(live) == 1:  # one way through: what it bound stands
            for name, value in live[0].items():
                self.assign(name, value)
            return False
        for name in dict.fromkeys(name for bound in live for name in bound):
            before = self.env.get(name)  # (a branch that did not bind it leaves it so)
            # (a way on which it stays unbound adds nothing: using it there raises)
            ways = [held for bound in live if (held := bound.get(name, before)) is not None]
            if ways:
                self.assign(name, join(*ways))
        return False

    def _s_If(self, node: cst.If) -> bool:
        """An ``if`` with its ``elif`` chain, walked as the flat list of its branches (a
        long chain is not a deep recursion). A test on a literal flag picks its branch;
        the main guard's body runs at module level only; on the child's side of ``if pid
        == 0`` the child's events are marked as such (see fork_sides)."""
        original = self.ctx
        ctx = original  # the context the rest of the chain runs in
        outcomes: list[tuple[dict[str, Value], bool]] = []
        fallthrough = False  # the chain may run none of its branches
        parent_only: ForkSide = {}
        head = True  # nothing branched yet: what is decided here is walked in place
        current: cst.If | cst.Else | None = node
        spans: list[tuple[int, int]] = []  # where the events of each branch walked lie

        def branch(body: Sequence[cst.CSTNode], branch_ctx: Context) -> None:
            begin = len(self.events)
            outcomes.append(self.block(body, branch_ctx))
            spans.append((begin, len(self.events)))

        while True:
            if not isinstance(current, cst.If):
                if isinstance(current, cst.Else):
                    branch(current.body.body, ctx)
                else:
                    fallthrough = True
                break
            test = current.test
            if is_main_guard(test):
                main = replace(ctx, import_time=False, main_block=True)
                if head:
                    if self.module_level:
                        self.merge([self.block(current.body.body, main)], fallthrough=False)
                    return False
                if self.module_level:
                    branch(current.body.body, main)
                else:
                    fallthrough = True
                break
            if isinstance(test, cst.Name) and test.value == "TYPE_CHECKING":
                if head:
                    return False
                fallthrough = True
                break
            self.ctx = ctx
            sides = self.fork_sides(test)
            known = truth(self.eval(test))
            self.ctx = original
            if known is not None and not sides[0]:
                # A condition on a literal flag (``helper(False)``): only one branch runs.
                if known:
                    if head:
                        return self.walk_block(current.body.body)
                    branch(current.body.body, ctx)
                    break
                current = current.orelse
                if head and not isinstance(current, cst.If):
                    return self.walk_block(current.body.body) if current is not None else False
                continue
            if sides[0]:
                branch(current.body.body, replace(ctx, **sides[0]))
            else:
                branch(current.body.body, self.under(ctx, test, True))
            if head and "fork_child" in sides[0] and outcomes[-1][1]:
                # The child's branch ends (os._exit): what follows runs in the parent only.
                parent_only = sides[1]
            head = False
            ctx = replace(ctx, **sides[1]) if sides[1] else self.under(ctx, test, False)
            current = current.orelse
        self.mark_branches(node, spans, original)
        ended = self.merge(outcomes, fallthrough)
        if parent_only:
            self.ctx = replace(self.ctx, **parent_only)
        elif not ended:
            self.after_exit(node, outcomes)
        return ended

    def after_exit(self, node: cst.If, outcomes: list[tuple[dict[str, Value], bool]]) -> None:
        """``if rank != 0: return`` (or ``continue``, ``raise``): the rest of the block runs
        only on the ranks where the test is false, and its events say so (GD501 compares
        what each rank reaches). The same for a test on a library's version (``if
        tf.__version__ >= "2.0": raise``): what follows runs only on the other releases, which
        a finding joining it to code that needs one of those must agree with
        (frontend/version_tests.py). Other tests are left as they are: what follows them
        is analysed as if either way reached it."""
        if isinstance(node.orelse, cst.If) or len(outcomes) != (1 if node.orelse is None else 2):
            return  # an ``elif`` chain, or a test decided here
        body_ended = outcomes[0][1]
        else_ended = outcomes[1][1] if node.orelse is not None else False
        if not body_ended and node.orelse is None and self.tree.mentions_ranks and \
                distinguishes(rank_samples(node.test, self.known_integer)):
            word = _may_leave(node.body.body)
            if word is not None:
                # ``if rank == 0: ... if mode == "infer": continue``: the rank that takes the
                # branch may leave there, the others never do, so what follows is not reached
                # by every rank alike (as after ``if rank == 0: continue``).
                held = self.under(self.ctx, node.test, False).conditions[-1]
                exit_text = f"if {condition_text(node.test)}: ...: {word}"
                self.ctx = replace(self.ctx, conditions=(*self.ctx.conditions, Condition(
                    held.site, held.holds, exit_text, held.ranks)))
            return
        if body_ended == else_ended:
            return
        if not (self.tree.mentions_ranks and distinguishes(rank_samples(node.test, self.known_integer))) \
                and version_test(node.test) is None:
            return
        self.ctx = self.under(self.ctx, node.test, not body_ended)
        if body_ended and node.orelse is None:
            # Named as written, for a message about what follows: "the ranks that get past
            # `if rank != 0: return`".
            last = node.body.body[-1] if node.body.body else None
            small = last.body[-1] if isinstance(last, cst.SimpleStatementLine) and last.body else None
            word = {cst.Return: "return", cst.Continue: "continue", cst.Break: "break", cst.Raise: "raise"}.get(
                type(small)) if small is not None else None
            if word is not None:
                condition = self.ctx.conditions[-1]
                exit_text = f"if {condition_text(node.test)}: {word}"
                self.ctx = replace(self.ctx, conditions=(*self.ctx.conditions[:-1], Condition(
                    condition.site, condition.holds, exit_text, condition.ranks)))

    def rank_only(self, node: cst.FunctionDef) -> Context:
        """The context a function's body runs in: on rank 0 only when a decorator says so
        (knowledge/distributed.py RANK_ZERO_DECORATORS), as if under ``if rank == 0:``."""
        if not node.decorators or not self.tree.mentions_ranks:
            return self.ctx
        for decorator in node.decorators:
            target = decorator.decorator
            name = target.attr.value if isinstance(target, cst.Attribute) else \
                target.value if isinstance(target, cst.Name) else None
            if name in RANK_ZERO_DECORATORS:
                test = f"@{condition_text(target)}"
                condition = Condition(self.site(decorator), True, test, (True, False))
                return replace(self.ctx, conditions=(*self.ctx.conditions, condition))
        return self.ctx

    def known_integer(self, name: str) -> int | bool | None:
        """The integer or truth value a plain name surely holds here (``rank=-1``,
        ``evaluate=True`` passed in), else None."""
        value = self.lookup(name)
        if len(value) == 1:
            atom = next(iter(value))
            if isinstance(atom, (Int, Bool)):
                return atom.value
        return None

    def under(self, ctx: Context, test: cst.BaseExpression, holds: bool) -> Context:
        """``ctx`` for code that runs only when the undecided ``test`` is ``holds``."""
        ranks = rank_samples(test, self.known_integer) if self.tree.mentions_ranks else None
        condition = Condition(self.site(test), holds, test, ranks)
        return replace(ctx, conditions=(*ctx.conditions, condition))

    def mark_branches(self, node: cst.If, spans: list[tuple[int, int]], ctx: Context) -> None:
        """Mark where each branch of the chain begins and ends (events Branch and Merge)
        when one branch starts threads and another starts processes: within one run of
        the chain those threads are not running at those starts. Other chains are left
        unmarked (their events are what a flow's budget counts)."""
        events = self.events

        def holding(kind: type) -> set[int]:
            return {k for k, (begin, end) in enumerate(spans)
                    if any(isinstance(e.effect, kind) for e in events[begin:end])}

        threads, forks = holding(ThreadStart), holding(Start)
        if not any(i != j for i in threads for j in forks):
            return
        chain = self.site(node)
        for k in reversed(range(len(spans))):  # from the end: earlier positions stay put
            begin, end = spans[k]
            events.insert(end, Event(Merge(chain, last=k == len(spans) - 1), ctx))
            events.insert(begin, Event(Branch(chain, k), ctx))

    def fork_sides(self, test: cst.BaseExpression) -> tuple[ForkSide, ForkSide]:
        """Which branch of ``if pid == 0`` (and its variants) runs in the forked child."""
        negate = False
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            test, negate = test.expression, True
        child_if_true: bool | None = None
        name: cst.BaseExpression = test
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
            op, right = test.comparisons[0].operator, test.comparisons[0].comparator
            name = test.left
            zero = isinstance(right, cst.Integer) and right.value == "0"
            if zero and isinstance(op, cst.Equal):
                child_if_true = True
            elif zero and isinstance(op, (cst.NotEqual, cst.GreaterThan)):
                child_if_true = False
        elif isinstance(test, cst.Name):
            child_if_true = False  # ``if pid:`` is the parent
        if child_if_true is None or not isinstance(name, cst.Name):
            return {}, {}
        forks = frozenset(a.site for a in self.lookup(name.value) if isinstance(a, ForkPid))
        if not forks:
            return {}, {}
        if negate:
            child_if_true = not child_if_true
        child: ForkSide = {"fork_child": self.ctx.fork_child | forks}
        parent: ForkSide = {"fork_parent": self.ctx.fork_parent | forks}
        return (child, parent) if child_if_true else (parent, child)

    def _loop(self, node: cst.For | cst.While, bind_target: bool) -> bool:
        source = self.eval(node.iter) if isinstance(node, cst.For) else self.eval(node.test)
        # Iterating a DataLoader starts here; a pin-memory thread of its iterator lives
        # while the loop runs (the iterator is dropped when the loop ends).
        threads = process_calls.iterate_loaders(self, source, node.iter, lasting=True) \
            if isinstance(node, cst.For) else []
        ctx = replace(self.ctx, in_loop=True, loop=self.site(node))
        outermost = not self.loops
        carried = self.carried.get(id(node), {})

        def iteration() -> bool:
            for name, value in carried.items():  # what earlier iterations left
                before = self.env.get(name)
                self.assign(name, value if before is None else join(before, value))
            if bind_target and isinstance(node, cst.For):
                self.bind(node.target, elements(source))
            self.walk_block(node.body.body)
            return False  # (a break or return ends one iteration, not the code after the loop)

        outcomes = []
        self.loops += 1
        try:
            # Twice from the outermost loop: state at the end of one iteration reaches the next.
            for _ in range(2 if outermost else 1):
                bound, _ended = self.branch(iteration, ctx)
                outcomes.append((bound, False))
                carried = _join(carried, bound)
        finally:
            self.loops -= 1
        if not outermost:
            self.carried[id(node)] = carried
        self.merge(outcomes, fallthrough=True)
        for loader in threads:
            self.emit(Join(loader.site, self.site(node), threads=True))
        if node.orelse is not None:
            self.walk_block(node.orelse.body.body)
        return False

    def _s_For(self, node: cst.For) -> bool:
        return self._loop(node, bind_target=True)

    def _s_While(self, node: cst.While) -> bool:
        return self._loop(node, bind_target=False)

    def _s_Try(self, node: cst.Try) -> bool:
        swallow = any(handler_swallows(h) for h in node.handlers)
        self.swallowing += swallow
        ended = self.walk_block(node.body.body)
        self.swallowing -= swallow
        # The way without an exception keeps what the handlers' names held before.
        kept: dict[str, Value] = {}
        outcomes = [(kept, ended)]
        for handler in node.handlers:
            if self.dead_handler(handler, node.body.body):
                continue  # (its bindings do not reach the code after the ``try``)
            if handler.name is not None:
                target = handler.name.name
                if isinstance(target, cst.Name) and target.value not in kept and \
                        (before := self.env.get(target.value)) is not None:
                    kept[target.value] = before
                self.bind(target, UNKNOWN)
            outcomes.append(self.block(handler.body.body))
        if node.orelse is not None and not ended:
            outcomes[0] = self.block(node.orelse.body.body)
        ended = self.merge(outcomes, fallthrough=False)
        if node.finalbody is not None:
            ended = self.walk_block(node.finalbody.body.body) or ended
        return ended

    _s_TryStar = _s_Try

    def dead_handler(self, handler: cst.ExceptHandler | cst.ExceptStarHandler,
                     body: Sequence[cst.BaseStatement] | Sequence[cst.BaseSmallStatement]) -> bool:
        """Can the handler never run? It catches only a missing attribute or import
        (conditions.MISSING_NAME_ERRORS) around statements that only call, or import
        from ``multiprocessing``, names every supported target has, with literal or
        plain-name arguments, binding plain names: the fallback of ``try: ctx =
        mp.get_context("spawn") except AttributeError: ctx = mp`` is dead code."""
        caught = caught_names(handler)
        if not caught or not set(caught) <= MISSING_NAME_ERRORS:
            return False
        for statement in body:
            if not isinstance(statement, cst.SimpleStatementLine):
                return False
            for small in statement.body:
                if isinstance(small, cst.ImportFrom):
                    if not self._present_import(small):
                        return False
                    continue
                if isinstance(small, cst.Assign) and all(isinstance(t.target, cst.Name) for t in small.targets):
                    value = small.value
                elif isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) and small.value:
                    value = small.value
                elif isinstance(small, cst.Expr):
                    value = small.value
                else:
                    return False
                if not self._present_call(value):
                    return False
        return bool(body)

    def _present_call(self, expr: cst.BaseExpression) -> bool:
        """A call of a name every target has, whose arguments cannot raise either."""
        if not isinstance(expr, cst.Call) or not _plain_reference(expr.func):
            return False
        if any(not _inert(arg.value) or arg.star for arg in expr.args):
            return False
        callee = self.eval_quiet(expr.func)
        return bool(callee) and all(isinstance(a, ModRef) and present_on_every_target(a.qualname) for a in callee)

    @staticmethod
    def _present_import(node: cst.ImportFrom) -> bool:
        """``from multiprocessing import get_context`` (names every target has)."""
        if node.relative or node.module is None or isinstance(node.names, cst.ImportStar):
            return False
        module = cst.helpers.get_full_name_for_node(node.module)
        return module == "multiprocessing" and all(
            isinstance(alias.name, cst.Name) and present_on_every_target(f"{module}.{alias.name.value}")
            for alias in node.names)

    def _s_With(self, node: cst.With) -> bool:
        values = []
        devices: list[Value | None] = []  # the default device before each device context
        configs = 0
        for item in node.items:
            value = self.eval(item.item)
            values.append(value)
            self.enter_context(item.item, value)
            devices.append(self.enter_device(item.item))
            bound = value
            for atom in ordered(value):
                if isinstance(atom, Instance):  # a class of the project: its __enter__ runs
                    self.call_method_of(atom, "__enter__", item.item)
                elif isinstance(atom, PoolObj) and atom.kind == JOBLIB and not atom.entered:
                    # joblib's Parallel builds its pool on entry; calls in the block reuse it
                    bound = (bound - {atom}) | process_calls.enter_parallel(self, atom, item.item)
            chosen = {atom for atom in value if isinstance(atom, JoblibConfig)}
            if len(chosen) == 1 and len(value) == 1:
                self.joblib_config.append(next(iter(chosen)))
                configs += 1
            if item.asname is not None:
                self.bind(item.asname.name, bound)
        try:
            ended = self.walk_block(node.body.body)
        finally:
            del self.joblib_config[len(self.joblib_config) - configs:]
        for before in reversed(devices):
            if before is not None:  # leaving ``with device(...)`` restores the default device
                self.assign(DEFAULT_DEVICE, before)
        for value in reversed(values):
            for atom in ordered(value):
                if isinstance(atom, PoolObj) and atom.kind == THREAD_POOL:
                    # leaving the block shuts thread pools down (joins their threads)
                    self.emit(Join(atom.site, self.site(node), threads=True))
                elif isinstance(atom, Instance):
                    self.call_method_of(atom, "__exit__", node)
        return ended

    def enter_context(self, expr: cst.BaseExpression, value: Value) -> None:
        """``with cp.cuda.Device(0):`` selects (and so initializes) the device on entry
        (registry.DEVICE_CONTEXTS)."""
        if not isinstance(expr, cst.Call):
            return
        callee = self.eval_quiet(expr.func)
        for atom in ordered(callee):
            if isinstance(atom, ModRef) and canonical(atom.qualname) in DEVICE_CONTEXTS:
                self.emit(Init(DEVICE_CONTEXTS[canonical(atom.qualname)], InitLevel.RUNTIME,
                               f"{atom.qualname}.__enter__", self.site(expr)))

    def enter_device(self, expr: cst.BaseExpression) -> Value | None:
        """``with torch.device(d):`` makes ``d`` the default device in the block
        (torch/utils/_device.py DeviceContext, entered from torch/csrc/Device.cpp, 2.11);
        return the default device before it, or None for any other context manager. A
        device not known to be CUDA is taken for one that is not."""
        if not isinstance(expr, cst.Call):
            return None
        if not any(isinstance(a, ModRef) and a.qualname in DEVICE_TYPES for a in self.eval_quiet(expr.func)):
            return None
        device = self.eval_args_quiet(expr).get(0, "type") or UNKNOWN
        before = self.env.get(DEFAULT_DEVICE, UNKNOWN)
        # (No DefaultDevice event: those record the thread's own setting, which the block
        # leaves as it found it.)
        self.assign(DEFAULT_DEVICE, device if is_cuda(device) else UNKNOWN)
        return before

    def _s_Match(self, node: cst.Match) -> bool:
        self.eval(node.subject)
        outcomes = [self.block(case.body.body) for case in node.cases]
        return self.merge(outcomes, fallthrough=True)

    # -- imports -----------------------------------------------------------------------
    def do_import(self, node: cst.Import) -> None:
        for alias in node.names:
            dotted = cst.helpers.get_full_name_for_node(alias.name) or ""
            self.note_framework(dotted, node)
            self.initializing_import(dotted, node)
            bound = self.run_import(self.interpreter.import_module(self.module.path, dotted, 0, self.site(node)), node)
            if alias.asname is not None:
                self.bind(alias.asname.name, bound)
            else:
                head = dotted.split(".")[0]
                self.assign(head, self.interpreter.import_module(self.module.path, head, 0, None)[0])

    def do_import_from(self, node: cst.ImportFrom) -> None:
        level = len(node.relative)
        base = cst.helpers.get_full_name_for_node(node.module) if node.module else ""
        base = base or ""
        self.note_framework(base, None if level else node)
        interpreter = self.interpreter
        module_value = self.run_import(interpreter.import_module(self.module.path, base, level, self.site(node)), node)
        if isinstance(node.names, cst.ImportStar):
            for name, bound in interpreter.import_star(module_value):
                self.assign(name, bound)
            return
        for alias in node.names:
            name = cst.helpers.get_full_name_for_node(alias.name) or ""
            full = f"{base}.{name}" if base else name
            if not level:
                self.note_framework(full, None)
            self.initializing_import(full, node)
            value = self.run_import(
                interpreter.import_submodule(self.module.path, module_value, full, level, self.site(node)), node)
            if not value and module_value:
                value = self.attribute(module_value, name, node)
            if not value and not level:
                value = one(ModRef(full))
            target = alias.asname.name if alias.asname is not None else alias.name
            self.bind(target, value)

    def run_import(self, imported: tuple[Value, list[ModuleState]], node: cst.CSTNode) -> Value:
        """Splice in at ``node`` what the top level of each project module an import ran
        does (once per module in this scope); return what the import binds."""
        value, ran = imported
        for state in ran:
            if state.path in self.imported:
                continue
            self.imported.add(state.path)
            self.take(state.import_events, node)
            settings = [e.effect for e in state.import_events if isinstance(e.effect, DefaultDevice)]
            if settings:  # its top level set the default device (of this thread: the importer's)
                self.assign(DEFAULT_DEVICE, one(CudaDevice()) if settings[-1].cuda else UNKNOWN)
        return value

    def note_framework(self, dotted: str, node: cst.CSTNode | None) -> None:
        """Note a GPU framework the module imports (``node``: the statement importing the
        module ``dotted`` itself, whose import may read configuration)."""
        framework = framework_of_module(dotted)
        if framework is not None:
            self.module.frameworks.add(framework)
        if node is not None and (framework is not None or dotted.split(".", 1)[0] in IMPORT_READ_MODULES):
            self.emit(Imported(dotted, self.site(node)))

    def initializing_import(self, dotted: str, node: cst.CSTNode) -> None:
        api = initializing_import(dotted)
        if api is not None:
            self.emit(Init(api.framework, InitLevel.RUNTIME, f"import {dotted}", self.site(node)))

    # -- definitions -------------------------------------------------------------------
    def _s_FunctionDef(self, node: cst.FunctionDef) -> bool:
        """Bind the function as its decorators leave it. What a ``def`` statement evaluates
        runs now, in this scope: its decorator expressions (a decorator factory's call
        included) and its default values (``def f(x, shape=tf.constant(...))`` starts
        TensorFlow when the module is imported). Their values are found again when the
        function is called (Analyzer.defaults)."""
        decorators = [self.decorator_value(d.decorator) for d in node.decorators]
        self.evaluate_defaults(node.params)
        kernel = None
        for found in decorators:
            for atom in ordered(found):
                if isinstance(atom, ModRef) and canonical(atom.qualname) in KERNEL_DECORATORS:
                    kernel = KERNEL_DECORATORS[canonical(atom.qualname)]
        self.module.parsed.note_tree(node, self.tree)
        closure = self.definition_closure(node)
        scope = self.definition_scope()
        func = FuncRef(self.module.path, node.name.value, node, cuda_kernel=kernel, closure=closure, scope=scope)
        value = one(func)
        for decorator, found in zip(reversed(node.decorators), reversed(decorators), strict=True):
            value = self.decorated(decorator, found, value)
        if node.decorators and scope != LOCAL_SCOPE:
            # A decorator's wrapper is reached by the decorated function's name (functools.wraps
            # gives it that name, which is how pickle finds it): it is where that name is.
            value = frozenset(replace(a, scope=scope) if isinstance(a, FuncRef) and a.scope != scope else a
                              for a in value)
        self.assign(node.name.value, value)
        if self.module_level:
            self.module.functions.append(func)
        return False

    def decorator_value(self, expr: cst.BaseExpression) -> Value:
        """What a decorator expression evaluates to, with the effects its evaluation has.

        ``@factory(arg)`` calls a project factory now, and evaluates its arguments now; a
        framework's decorator called with options (``@tf.function(jit_compile=True)``,
        ``@cuda.jit("void(f4[:])")``) is looked up as it is, its call's own effect left
        to the knowledge tables' decorator entries (a compiler is lazy), its arguments
        evaluated."""
        if not isinstance(expr, cst.Call):
            return self.eval_quiet(expr)
        callee = self.eval_quiet(expr.func)
        if any(isinstance(a, (FuncRef, ClassRef)) for a in callee):
            # Literal arguments are passed as unknown: a registry decorator named with a
            # string on every class of a code base (``@export("pkg.Name")``) is then one
            # analysis of the factory, not one per name.
            args = self.eval_args(expr)
            args.positional = [UNKNOWN if _literal(v) else v for v in args.positional]
            args.keywords = {k: UNKNOWN if _literal(v) else v for k, v in args.keywords.items()}
            return self.call_value(callee, args, expr)
        for arg in expr.args:
            self.eval(arg.value)
        return self.eval_quiet(expr)

    def evaluate_defaults(self, params: cst.Parameters) -> None:
        """Evaluate a ``def``'s or lambda's default values for what that does now (their
        values are computed again where a call needs them)."""
        for param in (*params.posonly_params, *params.params, *params.kwonly_params):
            if param.default is not None and not isinstance(param.default, _LITERALS):
                self.eval(param.default)

    def definition_closure(self, node: cst.FunctionDef) -> tuple[tuple[str, Value], ...]:
        """The enclosing function's names a nested def uses (none at module level; a method
        sees the names of the function around its class, never the class body's)."""
        if self.module_level:
            return ()
        if self.class_of is not None:
            outer = self.outer
            return () if outer is None or outer.module_level or not isinstance(outer, Executor) \
                else outer.captured(node)
        return self.captured(node)

    def definition_scope(self) -> str:
        """Where a ``def`` or ``class`` statement being walked defines its name."""
        if self.class_of is not None:
            return self.class_of.scope
        if not self.module_level:
            return LOCAL_SCOPE
        return MAIN_BLOCK_SCOPE if self.ctx.main_block else MODULE_SCOPE

    def decorated(self, decorator: cst.Decorator, found: Value, value: Value) -> Value:
        """What a project decorator returns for the function (the wrapper that runs in its
        place), a lazy compiler's wrapper (calling it compiles); the function itself for any
        other decorator. ``found``: what the decorator expression evaluated to."""
        compilers = [a for a in found if isinstance(a, Compiler)]
        if any(isinstance(a, ModRef) and kind_of(a.qualname) == COMPILER for a in found):
            compilers.append(Compiler(self.site(decorator)))  # bare ``@compile``
        if compilers:
            return value | frozenset(Compiled(c.site) for c in compilers)
        funcs = [a for a in found if isinstance(a, FuncRef) and not a.cuda_kernel]
        if not funcs:
            return value
        results: set[Atom] = set()
        for deco in funcs:
            begin = len(self.events)
            returned = self.inline(deco, Args(positional=[value]), decorator)
            if not returned & value:
                self._not_called_later(begin, value)
            results |= returned
        wrapped = frozenset(a for a in results if isinstance(a, FuncRef))
        return wrapped or value

    def _not_called_later(self, begin: int, value: Value) -> None:
        """A project decorator that does not hand the function back wraps it: what it gave the
        function to (``torch.no_grad()(fn)``, any object the analysis cannot see) returns the
        wrapper the name is bound to, called where the name is. Unlike a registrar's hook
        (``app.add_url_rule(view_func=fn); return fn``), it is no callback run later in
        this process: the events since ``begin`` lose it (events.Callback)."""
        funcs = {a for a in value if isinstance(a, FuncRef)}
        if not funcs:
            return
        kept: list[Event] = []
        for event in self.events[begin:]:
            effect = event.effect
            if isinstance(effect, Callback) and funcs & set(effect.funcs):
                rest = tuple(f for f in effect.funcs if f not in funcs)
                if not rest:
                    continue
                event = replace(event, effect=replace(effect, funcs=rest))
            kept.append(event)
        self.events[begin:] = kept

    def _s_ClassDef(self, node: cst.ClassDef) -> bool:
        """Bind the class, then run its body: a class body runs when the ``class``
        statement does (``device = tf.constant(...)`` as a class attribute starts
        TensorFlow at import), its methods' defaults and decorators with it. What the body
        binds is found again when a member is read (ClassModel.namespace)."""
        bases: list[str] = []
        project_bases: list[ClassRef] = []
        for arg in node.bases:
            for atom in ordered(self.eval_quiet(arg.value)):
                if isinstance(atom, ModRef):
                    bases.append(atom.qualname)
                elif isinstance(atom, ClassRef):
                    project_bases.append(atom)
        for decorator in node.decorators:
            self.decorator_value(decorator.decorator)
        self.module.parsed.note_tree(node, self.tree)
        cls = ClassRef(self.module.path, node.name.value, node, tuple(bases), self.definition_scope())
        self.interpreter.classes.register_class(cls, project_bases)
        self.class_body(cls, node, self.events)
        self.assign(node.name.value, one(cls))
        if self.module_level:
            self.module.classes.append(cls)
        return False

    def class_body(self, cls: ClassRef, node: cst.ClassDef, events: list[Event]) -> dict[str, Value]:
        """Run a class body in a scope of its own (names it cannot find are looked up in
        the scope around it), its events added to ``events``; return what it bound."""
        frame = Executor(self.interpreter, self.module, {}, module_level=False, ctx=self.ctx)
        frame.outer = self
        frame.class_of = cls
        frame.events = events
        frame.tree = self.tree
        frame.anchor = self.anchor
        frame.swallowing = self.swallowing
        frame.joblib_config = self.joblib_config
        body = node.body
        if isinstance(body, cst.IndentedBlock):
            frame.walk_block(body.body)
            # A dataclass field's ``default_factory`` is called by the generated __init__
            # (Evaluator.instantiate): kept under a name no code can bind.
            for statement in body.body:
                for small in getattr(statement, "body", ()) if isinstance(statement, cst.SimpleStatementLine) else ():
                    factory = _default_factory(small)
                    if factory is not None:
                        frame.env[FACTORY_PREFIX + factory[0]] = frame.eval_quiet(factory[1])
        else:
            for small in body.body:
                frame.walk_statement(small)
        return frame.env


def _literal(value: Value, depth: int = 2) -> bool:
    """Is the value only strings, numbers or booleans (or containers of them)?"""
    return bool(value) and all(isinstance(a, (Str, Int, Bool)) or
                               (isinstance(a, Container) and depth > 0 and
                                all(_literal(frozenset((item,)), depth - 1) for item in a.items))
                               for a in value)


def _default_factory(small: cst.BaseSmallStatement) -> tuple[str, cst.BaseExpression] | None:
    """``name: T = field(default_factory=F)``: the field's name and ``F``."""
    if not isinstance(small, cst.AnnAssign) or not isinstance(small.target, cst.Name) or \
            not isinstance(small.value, cst.Call):
        return None
    func = cst.helpers.get_full_name_for_node(small.value.func) or ""
    if func.rsplit(".", 1)[-1] != "field":
        return None
    for arg in small.value.args:
        if arg.keyword is not None and arg.keyword.value == "default_factory":
            return small.target.value, arg.value
    return None


_LITERALS = (cst.SimpleString, cst.Integer, cst.Float, cst.Name, cst.Imaginary)


def _plain_reference(expr: cst.BaseExpression) -> bool:
    """A name, or names joined by dots (``mp.get_context``)."""
    while isinstance(expr, cst.Attribute):
        expr = expr.value
    return isinstance(expr, cst.Name)


def _inert(expr: cst.BaseExpression) -> bool:
    """An argument whose evaluation raises neither AttributeError nor ImportError: a
    literal or a plain name."""
    return isinstance(expr, (cst.SimpleString, cst.Integer, cst.Float, cst.Name))


def _join(carried: dict[str, Value], bound: dict[str, Value]) -> dict[str, Value]:
    """What iterations so far left: each name's values joined."""
    out = dict(carried)
    for name, value in bound.items():
        out[name] = join(out[name], value) if name in out else value
    return out


_LEAVING = {cst.Return: "return", cst.Continue: "continue", cst.Break: "break"}


def _may_leave(body: Sequence[cst.BaseStatement | cst.BaseSmallStatement], in_loop: bool = False) -> str | None:
    """The word of a ``return``, or of a ``continue``/``break`` of the enclosing loop, that some
    path through ``body`` may end on (None: none). Not a ``raise`` (an error path), nor what a
    nested function or class, or a ``continue``/``break`` of a loop nested in ``body``, does."""
    for statement in body:
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                word = _LEAVING.get(type(small))
                if word == "return" or (word is not None and not in_loop):
                    return word
        elif isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            continue
        elif isinstance(statement, (cst.For, cst.While)):
            word = _may_leave(statement.body.body, in_loop=True)
            if word is None and statement.orelse is not None:
                word = _may_leave(statement.orelse.body.body, in_loop)
            if word is not None:
                return word
        elif isinstance(statement, cst.BaseCompoundStatement):
            for block in _blocks(statement):
                word = _may_leave(block, in_loop)
                if word is not None:
                    return word
    return None


def _blocks(statement: cst.BaseCompoundStatement) -> list[Sequence[cst.BaseStatement]]:
    """The statement blocks of an ``if``/``elif``/``else``, ``with`` or ``try`` statement."""
    found: list[Sequence[cst.BaseStatement]] = []
    body = getattr(statement, "body", None)
    if isinstance(body, cst.IndentedBlock):
        found.append(body.body)
    orelse = getattr(statement, "orelse", None)
    if isinstance(orelse, cst.If):
        found.extend(_blocks(orelse))
    elif isinstance(orelse, cst.Else) and isinstance(orelse.body, cst.IndentedBlock):
        found.append(orelse.body.body)
    for handler in getattr(statement, "handlers", ()):
        if isinstance(handler.body, cst.IndentedBlock):
            found.append(handler.body.body)
    final = getattr(statement, "finalbody", None)
    if isinstance(final, cst.Finally) and isinstance(final.body, cst.IndentedBlock):
        found.append(final.body.body)
    return found
