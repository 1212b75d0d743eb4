"""Statements in order: branches, loops, try, with, imports, definitions."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import libcst as cst

from gpudoctor.lint.analysis.conditions import handler_swallows, is_main_guard
from gpudoctor.lint.analysis.definitions import DefinitionWalker
from gpudoctor.lint.analysis.events import EnvWrite, Init, Join
from gpudoctor.lint.analysis.values import (
    UNKNOWN,
    ForkPid,
    Instance,
    ModRef,
    PoolObj,
    strings,
    truth,
)
from gpudoctor.lint.knowledge.environment import READERS
from gpudoctor.lint.knowledge.processes import THREAD_POOL

Value = frozenset
EXITS = frozenset({"builtins.exit", "builtins.quit", "sys.exit", "os._exit", "os.abort",
                   # exec replaces the process: the code after it never runs
                   *(f"os.exec{suffix}" for suffix in ("l", "le", "lp", "lpe", "v", "ve", "vp", "vpe"))})


class Walker(DefinitionWalker):
    """Interpret a block of statements, in order, emitting events."""

    def walk_block(self, body: Sequence[cst.CSTNode]) -> bool:
        """Walk statements; return True when the block cannot fall through (return, raise...)."""
        top = self.module_level and body is self.module.parsed.module.body
        for statement in body:
            if top:
                self.anchor = statement
            if self.walk_statement(statement):
                return True
        return False

    def walk_statement(self, node: cst.CSTNode) -> bool:
        if isinstance(node, cst.SimpleStatementLine):
            return any(self.walk_small(small) for small in node.body)
        if isinstance(node, cst.BaseSmallStatement):  # the body of ``if x: a(); b()``
            return self.walk_small(node)
        handler = getattr(self, f"_s_{type(node).__name__}", None)
        if handler is not None:
            return bool(handler(node))
        return False

    def walk_small(self, node: cst.BaseSmallStatement) -> bool:
        if isinstance(node, cst.Expr):
            value = node.value
            callee = self.eval(value.func) if isinstance(value, cst.Call) else UNKNOWN
            self.eval(value)
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
                self.env[node.target.value] = self.lookup(node.target.value) | value
        elif isinstance(node, cst.Return):
            self.returns.update(self.eval(node.value))
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
        return False

    def assign_subscript(self, target: cst.Subscript, value: Value) -> None:
        base = self.eval(target.value)
        if not any(isinstance(a, ModRef) and a.qualname == "os.environ" for a in base):
            return
        for element in target.slice:
            if isinstance(element.slice, cst.Index):
                for name in sorted(strings(self.eval(element.slice.value)) & READERS.keys()):
                    self.emit(EnvWrite(name, value, self.site(target)))

    # -- branches ------------------------------------------------------------------------
    def branch(self, body: Sequence[cst.CSTNode], **ctx_changes: object) -> tuple[dict[str, Value], bool]:
        saved_env, saved_ctx = dict(self.env), self.ctx
        self.ctx = replace(self.ctx, **ctx_changes) if ctx_changes else self.ctx
        ended = self.walk_block(body)
        result = dict(self.env)
        self.env.clear()
        self.env.update(saved_env)
        self.ctx = saved_ctx
        return result, ended

    def merge(self, outcomes: list[tuple[dict[str, Value], bool]], fallthrough: bool) -> bool:
        """Join the environments of branches that fall through; True if none does."""
        live = [env for env, ended in outcomes if not ended]
        if fallthrough:
            live.append(dict(self.env))
        if not live:
            return True
        merged: dict[str, Value] = {}
        for env in live:
            for name, value in env.items():
                merged[name] = merged.get(name, UNKNOWN) | value
        self.env.clear()
        self.env.update(merged)
        return False

    def _s_If(self, node: cst.If) -> bool:
        if is_main_guard(node.test):
            if self.module_level:
                self.merge([self.branch(node.body.body, import_time=False)], fallthrough=False)
            return False
        if isinstance(node.test, cst.Name) and node.test.value == "TYPE_CHECKING":
            return False
        sides = self.fork_sides(node.test)
        known = truth(self.eval(node.test))
        if known is not None and not sides[0]:
            # A condition on a literal flag (``helper(False)``): only one branch runs.
            if known:
                return self.walk_block(node.body.body)
            orelse = node.orelse
            if isinstance(orelse, cst.If):
                return self._s_If(orelse)
            return self.walk_block(orelse.body.body) if orelse is not None else False
        outcomes = [self.branch(node.body.body, **sides[0])]
        if "fork_child" in sides[0] and outcomes[0][1]:
            # The child's branch ends (os._exit): what follows runs in the parent only.
            parent_only = sides[1]
            result = self._rest_of_if(node, outcomes, sides)
            self.ctx = replace(self.ctx, **parent_only)
            return result
        return self._rest_of_if(node, outcomes, sides)

    def _rest_of_if(self, node: cst.If, outcomes: list[tuple[dict[str, Value], bool]],
                    sides: tuple[dict[str, object], dict[str, object]]) -> bool:
        orelse = node.orelse
        if isinstance(orelse, cst.If):
            saved_ctx = self.ctx
            self.ctx = replace(self.ctx, **sides[1]) if sides[1] else self.ctx
            ended = self._s_If(orelse)
            outcomes.append((dict(self.env), ended))
            self.ctx = saved_ctx
            return self.merge(outcomes, fallthrough=False)
        if orelse is not None:
            outcomes.append(self.branch(orelse.body.body, **sides[1]))
            return self.merge(outcomes, fallthrough=False)
        return self.merge(outcomes, fallthrough=True)

    def fork_sides(self, test: cst.BaseExpression) -> tuple[dict[str, object], dict[str, object]]:
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
        child = {"fork_child": self.ctx.fork_child | forks}
        parent = {"fork_parent": self.ctx.fork_parent | forks}
        return (child, parent) if child_if_true else (parent, child)

    def _loop(self, node: cst.For | cst.While, bind_target: bool) -> bool:
        source = self.eval(node.iter) if isinstance(node, cst.For) else self.eval(node.test)
        before = dict(self.env)
        outcomes = []
        for _ in range(2):  # twice: state at the end of one iteration reaches the next
            if bind_target and isinstance(node, cst.For):
                from gpudoctor.lint.analysis.values import elements

                self.bind(node.target, elements(source))
            env, ended = self.branch(node.body.body, in_loop=True, loop=self.site(node))
            outcomes.append((env, False))
            self.env.update({k: self.env.get(k, UNKNOWN) | v for k, v in env.items()})
        self.env.clear()
        self.env.update(before)
        self.merge(outcomes, fallthrough=True)
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
        outcomes = [(dict(self.env), ended)]
        for handler in node.handlers:
            if handler.name is not None:
                self.bind(handler.name.name, UNKNOWN)
            outcomes.append(self.branch(handler.body.body))
        if node.orelse is not None and not ended:
            outcomes[0] = self.branch(node.orelse.body.body)
        ended = self.merge(outcomes, fallthrough=False)
        if node.finalbody is not None:
            ended = self.walk_block(node.finalbody.body.body) or ended
        return ended

    _s_TryStar = _s_Try

    def _s_With(self, node: cst.With) -> bool:
        values = []
        for item in node.items:
            value = self.eval(item.item)
            values.append(value)
            self.enter_context(item.item, value)
            bound = value
            for atom in value:
                if isinstance(atom, Instance):  # a class of the project: its __enter__ runs
                    self.call_method_of(atom, "__enter__", item.item)
            if item.asname is not None:
                self.bind(item.asname.name, bound)
        ended = self.walk_block(node.body.body)
        for value in reversed(values):
            for atom in value:
                if isinstance(atom, PoolObj) and atom.kind == THREAD_POOL:
                    # leaving the block shuts thread pools down (joins their threads)
                    self.emit(Join(atom.site, self.site(node), threads=True))
                elif isinstance(atom, Instance):
                    self.call_method_of(atom, "__exit__", node)
        return ended

    def enter_context(self, expr: cst.BaseExpression, value: Value) -> None:
        """``with cp.cuda.Device(0):`` selects (and so initializes) the device on entry."""
        if not isinstance(expr, cst.Call):
            return
        callee = self.eval_quiet(expr.func)
        for atom in callee:
            if isinstance(atom, ModRef) and atom.qualname == "cupy.cuda.Device":
                self.emit(Init("cupy", "runtime", "cupy.cuda.Device.__enter__", self.site(expr)))

    def _s_Match(self, node: cst.Match) -> bool:
        self.eval(node.subject)
        outcomes = [self.branch(case.body.body) for case in node.cases]
        return self.merge(outcomes, fallthrough=True)
