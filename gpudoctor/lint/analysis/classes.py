"""The classes of the checked project: bases, members set in ``__init__``, bound methods."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Protocol

import libcst as cst

from gpudoctor.knowledge.distributed import BY_QUALNAME as COLLECTIVE_APIS
from gpudoctor.knowledge.processes import canonical
from gpudoctor.knowledge.registry import CALL_METHODS, SELF_METHODS
from gpudoctor.knowledge.registry import canonical as framework_spelling
from gpudoctor.knowledge.runners import SETUP_METHODS, TEST_CASE_BASES
from gpudoctor.lint.analysis.values import (
    UNKNOWN,
    ClassRef,
    FuncRef,
    Instance,
    ModRef,
    Super,
    Value,
    join,
    one,
    ordered,
)

if TYPE_CHECKING:
    from gpudoctor.lint.analysis.events import Event



class Caller(Protocol):
    """What the class model needs of the analysis that owns it (the Analyzer)."""

    def call(self, func: FuncRef, positional: tuple[Value, ...], rest: Value,
             keywords: dict[str, Value], entry: bool = False) -> tuple[list[Event], Value]: ...

    def note_method_tree(self, cls: ClassRef, node: cst.FunctionDef) -> None:
        """Remember which parsed tree a method is in (see ParsedModule.tree_of)."""

    def class_namespace(self, cls: ClassRef) -> dict[str, Value]:
        """What the body of ``cls`` binds (its class attributes and methods)."""


class ClassModel:
    """What one analysis knows of each class: project bases, members, bound methods. The
    analysis that owns it (``caller``) walks ``__init__`` for it on first use."""

    def __init__(self, caller: Caller) -> None:
        self._caller = caller
        self._members: dict[ClassRef, dict[str, Value]] = {}
        self.class_bases: dict[ClassRef, list[ClassRef]] = {}
        self._primed: set[ClassRef] = set()
        self._namespaces: dict[ClassRef, dict[str, Value]] = {}

    def register_class(self, cls: ClassRef, project_bases: list[ClassRef]) -> None:
        self.class_bases[cls] = project_bases
        self._members.setdefault(cls, {})

    def subclass_of(self, cls: ClassRef, bases: frozenset[str], depth: int = 0) -> bool:
        if any(canonical(b) in bases for b in cls.bases):
            return True
        return depth < 8 and any(self.subclass_of(b, bases, depth + 1) for b in self.class_bases.get(cls, ()))

    def framework_bases(self, cls: ClassRef) -> list[str]:
        """The bases of ``cls`` and of its project bases that are not the project's own,
        nearest first, spelled as the knowledge tables spell them."""
        found: list[str] = []
        todo: list[ClassRef] = [cls]
        seen: set[ClassRef] = set()
        while todo and len(seen) < 16:
            current = todo.pop(0)
            if current in seen:
                continue
            seen.add(current)
            found.extend(framework_spelling(base) for base in current.bases)
            todo.extend(self.class_bases.get(current, ()))
        return found

    def call_method(self, cls: ClassRef) -> str:
        """The method a call of an instance runs: the one a framework base calls
        (``forward``: registry.CALL_METHODS), else ``__call__``."""
        for base in self.framework_bases(cls):
            method = CALL_METHODS.get(base)
            if method is not None:
                return method
        return "__call__"

    def returns_self(self, cls: ClassRef, name: str) -> bool:
        """Does ``name``, a method of a framework base of ``cls``, return the object itself?"""
        return any(name in SELF_METHODS.get(base, ()) for base in self.framework_bases(cls))

    def store_member(self, cls: ClassRef, attr: str, value: Value) -> None:
        """``self.attr = value`` somewhere in the class: members are not followed in
        order, so an attribute holds what any of its writes stored (joined as at a branch,
        values.join: a write that may not run is one way among others)."""
        members = self._members.setdefault(cls, {})
        members[attr] = join(members[attr], value) if attr in members else value

    def member(self, atom: Instance | ClassRef, attr: str, depth: int = 0) -> Value:
        """What ``atom.attr`` holds: for an instance, what its own attributes were set to
        (joined with the class's value of the name, which a read finds before or without
        such a write); then the class body's function or value of that name, then the
        bases'."""
        cls = atom.cls if isinstance(atom, Instance) else atom
        if isinstance(atom, Instance) and attr != "__init__":
            self._prime(cls)
            stored = self._members.get(cls, {}).get(attr)
            if stored:
                in_class = self._class_value(cls, attr)
                return join(stored, in_class if in_class else UNKNOWN) if in_class is not None else stored
        for statement in cls.node.body.body:
            if isinstance(statement, cst.FunctionDef) and statement.name.value == attr:
                return one(self._method(cls, statement, atom))
        own = self.namespace(cls).get(attr)
        if own is not None:
            return own
        if depth < 8:
            for base in self.class_bases.get(cls, ()):
                found = self.member(Instance(base) if isinstance(atom, Instance) else base, attr, depth + 1)
                if found and isinstance(atom, Instance):
                    # A method found on a base class is bound to this instance.
                    return frozenset(replace(f, bound=(one(atom),)) if isinstance(f, FuncRef) else f for f in found)
                if found:
                    return found
        return UNKNOWN

    def owner_of(self, func: FuncRef) -> ClassRef | None:
        """The class whose body defines the method ``func`` (None: not a method of a class
        this analysis met)."""
        owner, dot, _ = func.qualname.rpartition(".")
        if not dot:
            return None
        for cls in self.class_bases:
            if cls.module == func.module and cls.qualname == owner:
                return cls
        return None

    def super_member(self, atom: Super, attr: str) -> Value:
        """``super().attr`` in a method of ``atom.owner``: the bases' member, bound to the
        method's own ``self`` (or class)."""
        for base in self.class_bases.get(atom.owner, ()):
            target = atom.instance
            found = self.member(Instance(base) if isinstance(target, Instance) else base, attr)
            if found:
                return frozenset(replace(f, bound=(one(target),)) if isinstance(f, FuncRef) and f.bound else f
                                 for f in found)
        for base_name in self.framework_bases(atom.owner):
            # A library base's collective (``super().save_checkpoint(...)`` in a Trainer subclass).
            if f"{base_name}.{attr}" in COLLECTIVE_APIS:
                return one(ModRef(f"{base_name}.{attr}"))
        return UNKNOWN

    def attributes_of(self, instance: Instance) -> list[Value]:
        """What the attributes of an instance hold (its own, set in its methods): what
        pickling the object sends along."""
        self._prime(instance.cls)
        values: list[Value] = []
        cls: ClassRef | None = instance.cls
        seen: set[ClassRef] = set()
        todo = [instance.cls]
        while todo and len(seen) < 8:
            cls = todo.pop()
            if cls in seen:
                continue
            seen.add(cls)
            values.extend(self._members.get(cls, {}).values())
            todo.extend(self.class_bases.get(cls, ()))
        return values

    def namespace(self, cls: ClassRef) -> dict[str, Value]:
        """What the class body binds (walked once, on first use)."""
        found = self._namespaces.get(cls)
        if found is None:
            self._namespaces[cls] = {}  # (a body that reads its own class finds nothing yet)
            found = self._namespaces[cls] = self._caller.class_namespace(cls)
        return found

    def _class_value(self, cls: ClassRef, attr: str, depth: int = 0) -> Value | None:
        """What the body of ``cls`` (or of a project base) binds to ``attr``; None when none does."""
        if self._class_binds(cls, attr):
            return self.namespace(cls).get(attr, UNKNOWN)
        if depth < 8:
            for base in self.class_bases.get(cls, ()):
                found = self._class_value(base, attr, depth + 1)
                if found is not None:
                    return found
        return None

    def _class_binds(self, cls: ClassRef, attr: str) -> bool:
        """Does the body of ``cls`` assign ``attr`` a value?"""
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
        return False

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
        names = ("__init__", *SETUP_METHODS) if self.subclass_of(cls, TEST_CASE_BASES) else ("__init__",)
        for name in names:  # a test case's set-up methods run before each test, as if in __init__
            for atom in ordered(self.member(Instance(cls), name)):
                if isinstance(atom, FuncRef):
                    self._caller.call(atom, (), UNKNOWN, {}, entry=True)

