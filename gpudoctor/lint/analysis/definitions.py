"""Definitions: a ``def`` binds its function (as its decorators leave it, with the
enclosing functions a nested def uses), a ``class`` binds its class with its project bases."""

from __future__ import annotations

from dataclasses import replace

import libcst as cst

from gpudoctor.lint.analysis.calls import Args
from gpudoctor.lint.analysis.imports import ImportWalker
from gpudoctor.lint.analysis.values import (
    LOCAL_SCOPE,
    MAIN_BLOCK_SCOPE,
    MODULE_SCOPE,
    Atom,
    ClassRef,
    Compiled,
    Compiler,
    FuncRef,
    ModRef,
    one,
    ordered,
)
from gpudoctor.lint.knowledge.processes import COMPILER, kind_of
from gpudoctor.lint.knowledge.registry import KERNEL_DECORATORS, canonical

Value = frozenset


class DefinitionWalker(ImportWalker):
    """``def`` and ``class`` statements; part of the statement walker."""

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

    def _s_FunctionDef(self, node: cst.FunctionDef) -> bool:
        kernel = None
        for decorator in node.decorators:
            target = decorator.decorator
            target = target.func if isinstance(target, cst.Call) else target
            for atom in ordered(self.eval_quiet(target)):
                if isinstance(atom, ModRef) and canonical(atom.qualname) in KERNEL_DECORATORS:
                    kernel = KERNEL_DECORATORS[canonical(atom.qualname)]
        self.module.parsed.note_tree(node, self.tree)
        closure = () if self.module_level else self.captured(node)
        scope = self.definition_scope()
        func = FuncRef(self.module.path, node.name.value, node, cuda_kernel=kernel, closure=closure, scope=scope)
        value = one(func)
        for decorator in reversed(node.decorators):
            value = self.decorated(decorator, value)
        if node.decorators and scope != LOCAL_SCOPE:
            # A decorator's wrapper is reached by the decorated function's name (functools.wraps
            # gives it that name, which is how pickle finds it): it is where that name is.
            value = frozenset(replace(a, scope=scope) if isinstance(a, FuncRef) and a.scope != scope else a
                              for a in value)
        self.assign(node.name.value, value)
        if self.module_level:
            self.module.functions.append(func)
        return False

    def definition_scope(self) -> str:
        """Where a ``def`` or ``class`` statement being walked defines its name."""
        if not self.module_level:
            return LOCAL_SCOPE
        return MAIN_BLOCK_SCOPE if self.ctx.main_block else MODULE_SCOPE

    def captured(self, node: cst.FunctionDef) -> tuple[tuple[str, Value], ...]:
        """The functions of the enclosing scope a nested def refers to (its closure, as bound
        now): what a decorator's wrapper calls. Other captured values stay unknown, which
        keeps function summaries keyed small."""
        funcs = {name: frozenset(a for a in value if isinstance(a, FuncRef))
                 for name, value in self.env.items() if name != node.name.value}
        funcs = {name: value for name, value in funcs.items() if value}
        if not funcs:
            return ()
        used: set[str] = set()
        todo: list[cst.CSTNode] = [node.body]
        while todo:
            current = todo.pop()
            if isinstance(current, cst.Name):
                used.add(current.value)
            todo.extend(current.children)
        return tuple(sorted((name, funcs[name]) for name in used & funcs.keys()))

    def decorated(self, decorator: cst.Decorator, value: Value) -> Value:
        """What a project decorator returns for the function (the wrapper that runs in its
        place), a lazy compiler's wrapper (calling it compiles); the function itself for any
        other decorator."""
        found = self.eval_quiet(decorator.decorator)
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
            results |= self.inline(deco, Args(positional=[value]), decorator)
        wrapped = frozenset(a for a in results if isinstance(a, FuncRef))
        return wrapped or value

    def _s_ClassDef(self, node: cst.ClassDef) -> bool:
        bases: list[str] = []
        project_bases: list[ClassRef] = []
        for arg in node.bases:
            for atom in ordered(self.eval_quiet(arg.value)):
                if isinstance(atom, ModRef):
                    bases.append(atom.qualname)
                elif isinstance(atom, ClassRef):
                    project_bases.append(atom)
        self.module.parsed.note_tree(node, self.tree)
        cls = ClassRef(self.module.path, node.name.value, node, tuple(bases), self.definition_scope())
        self.analyzer.classes.register_class(cls, project_bases)
        self.assign(node.name.value, one(cls))
        if self.module_level:
            self.module.classes.append(cls)
        return False
