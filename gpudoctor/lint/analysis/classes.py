"""The classes of the checked project: bases, members set in ``__init__``, bound methods."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Protocol

import libcst as cst

from gpudoctor.lint.analysis.values import UNKNOWN, ClassRef, FuncRef, Instance, Value, join, one, ordered
from gpudoctor.lint.knowledge.processes import canonical

if TYPE_CHECKING:
    from gpudoctor.lint.analysis.events import Event



class Caller(Protocol):
    """What the class model needs of the analysis that owns it (the Analyzer)."""

    def call(self, func: FuncRef, positional: tuple[Value, ...], rest: Value,
             keywords: dict[str, Value], entry: bool = False) -> tuple[list[Event], Value]: ...

    def note_method_tree(self, cls: ClassRef, node: cst.FunctionDef) -> None:
        """Remember which parsed tree a method is in (see ParsedModule.tree_of)."""


class ClassModel:
    """What one analysis knows of each class: project bases, members, bound methods. The
    analysis that owns it (``caller``) walks ``__init__`` for it on first use."""

    def __init__(self, caller: Caller) -> None:
        self._caller = caller
        self._members: dict[ClassRef, dict[str, Value]] = {}
        self.class_bases: dict[ClassRef, list[ClassRef]] = {}
        self._primed: set[ClassRef] = set()

    def register_class(self, cls: ClassRef, project_bases: list[ClassRef]) -> None:
        self.class_bases[cls] = project_bases
        self._members.setdefault(cls, {})

    def subclass_of(self, cls: ClassRef, bases: frozenset[str], depth: int = 0) -> bool:
        if any(canonical(b) in bases for b in cls.bases):
            return True
        return depth < 8 and any(self.subclass_of(b, bases, depth + 1) for b in self.class_bases.get(cls, ()))

    def store_member(self, cls: ClassRef, attr: str, value: Value) -> None:
        """``self.attr = value`` somewhere in the class: members are not followed in
        order, so an attribute holds what any of its writes stored (joined as at a branch,
        values.join: a write that may not run is one way among others)."""
        members = self._members.setdefault(cls, {})
        members[attr] = join(members[attr], value) if attr in members else value

    def member(self, atom: Instance | ClassRef, attr: str, depth: int = 0) -> Value:
        cls = atom.cls if isinstance(atom, Instance) else atom
        if isinstance(atom, Instance) and attr != "__init__":
            self._prime(cls)
            stored = self._members.get(cls, {}).get(attr)
            if stored:
                # The class body binding it too: before (or without) a write to the
                # instance, a read finds the class's value, which is not followed.
                return join(stored, UNKNOWN) if self._class_binds(cls, attr) else stored
        for statement in cls.node.body.body:
            if isinstance(statement, cst.FunctionDef) and statement.name.value == attr:
                return one(self._method(cls, statement, atom))
        if depth < 8:
            for base in self.class_bases.get(cls, ()):
                found = self.member(Instance(base) if isinstance(atom, Instance) else base, attr, depth + 1)
                if found and isinstance(atom, Instance):
                    # A method found on a base class is bound to this instance.
                    return frozenset(replace(f, bound=(one(atom),)) if isinstance(f, FuncRef) else f for f in found)
                if found:
                    return found
        return UNKNOWN

    def _class_binds(self, cls: ClassRef, attr: str, depth: int = 0) -> bool:
        """Does the body of ``cls`` (or of a project base) assign ``attr`` a value?"""
        for statement in cls.node.body.body:
            if not isinstance(statement, cst.SimpleStatementLine):
                continue
            for small in statement.body:
                targets: list[cst.BaseExpression] = []
                if isinstance(small, cst.Assign):
                    targets = [t.target for t in small.targets]
                elif isinstance(small, cst.AnnAssign) and small.value is not None:
                    targets = [small.target]
                if any(isinstance(t, cst.Name) and t.value == attr for t in targets):
                    return True
        return depth < 8 and any(self._class_binds(b, attr, depth + 1) for b in self.class_bases.get(cls, ()))

    def _method(self, cls: ClassRef, node: cst.FunctionDef, atom: Instance | ClassRef) -> FuncRef:
        decorators = {cst.helpers.get_full_name_for_node(d.decorator) for d in node.decorators}
        bound: tuple[Value, ...] = ()
        if "staticmethod" not in decorators:
            if "classmethod" in decorators:
                bound = (one(cls),)
            elif isinstance(atom, Instance):
                bound = (one(atom),)
        self._caller.note_method_tree(cls, node)
        return FuncRef(cls.module, f"{cls.qualname}.{node.name.value}", node, bound, scope=cls.scope)

    def _prime(self, cls: ClassRef) -> None:
        """Walk ``__init__`` once so ``self.x`` set there is known to other methods.

        The walk only learns the members: it is no caller of ``__init__`` (a class no code
        instantiates still has its ``__init__`` analysed on its own; marking it reached here
        lost it whenever ``__init__`` itself read an attribute of ``self``)."""
        if cls in self._primed:
            return
        self._primed.add(cls)
        for atom in ordered(self.member(Instance(cls), "__init__")):
            if isinstance(atom, FuncRef):
                self._caller.call(atom, (), UNKNOWN, {}, entry=True)

