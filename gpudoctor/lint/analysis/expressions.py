"""Evaluate expressions to abstract values, emitting the events their calls cause."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import libcst as cst

from gpudoctor.lint.analysis.events import Context, Effect, Event
from gpudoctor.lint.analysis.literals import integer_value, string_value
from gpudoctor.lint.analysis.nesting import EXPRESSION
from gpudoctor.lint.analysis.values import (
    UNKNOWN,
    Atom,
    Bool,
    ClassRef,
    Container,
    FuncRef,
    GpuObj,
    Instance,
    Int,
    JoblibConfig,
    ModRef,
    ProcessObj,
    SavedEnv,
    Str,
    container,
    elements,
    gpu_objects,
    join,
    one,
    ordered,
    positions,
    strings,
    truth,
)
from gpudoctor.lint.findings import Site
from gpudoctor.lint.knowledge.registry import WATCHED_VARIABLES, api_table
from gpudoctor.lint.knowledge.table import InitLevel

if TYPE_CHECKING:
    from gpudoctor.lint.analysis.analyzer import Analyzer
    from gpudoctor.lint.analysis.module_state import ModuleState

BUILTINS = frozenset({
    "zip", "list", "tuple", "set", "frozenset", "iter", "enumerate", "reversed", "sorted",
    "map", "filter", "dict", "next", "exit", "quit", "hasattr", "getattr",
})
# Attributes of a device array that are host values.
HOST_ATTRIBUTES = frozenset({"shape", "dtype", "ndim", "size", "nbytes", "itemsize", "device",
                             "is_cuda", "name", "strides", "history", "layers", "input_shape",
                             "output_shape"})
Value = frozenset


_HANDLERS: dict[tuple[type, type], Any] = {}


def _handler(evaluator: type, kind: type) -> Any:
    """The ``_e_<Node>`` method of ``evaluator`` for a node type, looked up once per pair
    (eval runs for every expression: a name built and looked up each time showed)."""
    key = (evaluator, kind)
    try:
        return _HANDLERS[key]
    except KeyError:
        found = _HANDLERS[key] = getattr(evaluator, f"_e_{kind.__name__}", None)
        return found


class ExprEvaluator:
    """State shared by expression, call and statement evaluation of one scope."""

    def __init__(self, analyzer: Analyzer, module: ModuleState, env: dict[str, Value],
                 *, module_level: bool, ctx: Context) -> None:
        self.analyzer = analyzer
        self.module = module
        self.env = env
        self.module_level = module_level
        self.ctx = ctx
        self.events: list[Event] = []
        self.returns: set[Atom] = set()
        self.returns_unknown = False  # some way out of the function returns an unknown value
        self.swallowing = 0  # depth of enclosing try blocks whose handlers only log/pass
        self.imported: set[str] = set()  # project modules whose import effects are spliced
        # The tree the walked code belongs to: the module's, or the separately parsed body
        # of one of its functions (see ParsedModule.body).
        self.tree = module.parsed
        self.anchor: cst.CSTNode | None = None  # the top-level statement being walked
        self.meter = analyzer.meter  # how deep the analysis is nested (see nesting.py)
        # One record per branch being walked (see Walker.branch): each name the branch
        # bound, with its value before the branch (None: it was unbound).
        self.trails: list[dict[str, Value | None]] = []
        # joblib backends chosen by the ``with parallel_config(...)`` blocks being walked.
        self.joblib_config: list[JoblibConfig] = []

    # -- helpers -------------------------------------------------------------------------
    def site(self, node: cst.CSTNode) -> Site:
        return self.tree.site(node, self.anchor if self.tree is self.module.parsed else None)

    def emit(self, effect: Effect) -> None:
        self.events.append(Event(effect, self.ctx))

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
        by the names it bound rather than by copying the environment (see Walker.branch)."""
        if self.trails:
            trail = self.trails[-1]
            if name not in trail:
                trail[name] = self.env.get(name)
        self.env[name] = value

    def lookup(self, name: str) -> Value:
        if name in self.env:
            return self.env[name]
        if not self.module_level and name in self.module.env:
            return self.module.env[name]
        if name in BUILTINS:
            return one(ModRef(f"builtins.{name}"))
        return UNKNOWN

    # -- dispatch ------------------------------------------------------------------------
    def eval(self, node: cst.CSTNode | None) -> Value:
        if node is None:
            return UNKNOWN
        meter = self.meter
        depth = meter.depth + EXPRESSION
        if depth > meter.peak and not meter.room(EXPRESSION):
            return UNKNOWN  # nested past the meter: unknown, and its effects unseen
        meter.depth = depth
        try:
            handler = _handler(type(self), type(node))
            if handler is not None:
                return handler(self, node)  # type: ignore[no-any-return]
            self.eval_children(node)
            return UNKNOWN
        finally:
            meter.depth = depth - EXPRESSION

    def eval_children(self, node: cst.CSTNode) -> None:
        for child in node.children:
            if isinstance(child, (cst.Lambda, cst.FunctionDef, cst.ClassDef)):
                continue
            if isinstance(child, cst.BaseExpression):
                self.eval(child)
            else:
                self.eval_children(child)

    # -- leaves --------------------------------------------------------------------------
    def _e_Name(self, node: cst.Name) -> Value:
        if node.value in ("True", "False"):
            return one(Bool(node.value == "True"))
        return self.lookup(node.value)

    def _e_UnaryOperation(self, node: cst.UnaryOperation) -> Value:
        value = self.eval(node.expression)
        known = truth(value)
        if isinstance(node.operator, cst.Not) and known is not None:
            return one(Bool(not known))
        return UNKNOWN

    def _e_SimpleString(self, node: cst.SimpleString) -> Value:
        value = string_value(node)
        return one(Str(value)) if isinstance(value, str) else UNKNOWN

    def _e_ConcatenatedString(self, node: cst.ConcatenatedString) -> Value:
        value = node.evaluated_value
        return one(Str(value)) if isinstance(value, str) else UNKNOWN

    def _e_FormattedString(self, node: cst.FormattedString) -> Value:
        self.eval_children(node)
        head = node.parts[0] if node.parts else None
        return one(Str(head.value)) if isinstance(head, cst.FormattedStringText) else UNKNOWN

    def _e_Integer(self, node: cst.Integer) -> Value:
        value = integer_value(node.value, self.analyzer.limits.max_integer_chars)
        return UNKNOWN if value is None else one(Int(value))

    def _e_Lambda(self, node: cst.Lambda) -> Value:
        self.module.parsed.note_tree(node, self.tree)
        return one(FuncRef(self.module.path, "<lambda>", node))

    # -- compound ------------------------------------------------------------------------
    def _e_Attribute(self, node: cst.Attribute) -> Value:
        return self.attribute(self.eval(node.value), node.attr.value, node)

    def attribute(self, base: Value, attr: str, node: cst.CSTNode) -> Value:
        out: set[Atom] = set()
        for atom in ordered(base):
            if isinstance(atom, ModRef):
                qualname = f"{atom.qualname}.{attr}"
                api = api_table().lookup(qualname)
                if api is not None and api.attribute and api.level:
                    self.emit_init(api.framework, api.level, qualname, node)
                out.add(ModRef(qualname))
            elif isinstance(atom, GpuObj) and attr not in HOST_ATTRIBUTES:
                out.add(atom)
            elif isinstance(atom, (Instance, ClassRef)):
                out.update(self.analyzer.classes.member(atom, attr))
        return frozenset(out) | self.module_members(base, attr)

    def module_members(self, base: Value, attr: str) -> Value:
        """What the project modules in ``base`` bind to ``attr``.

        A framework's own module (Analyzer.module_value: ``base`` holds its qualified name
        too) may bind the name by another spelling that the tables also match through a
        wildcard: ``cupy.cuda.Device`` is imported from ``cupy.cuda.device``, a Cython
        module the analysis cannot read. Where the tables know the name under the qualified
        name of ``base``, that entry wins (it is the one users call and the tables list),
        and such other spellings are dropped; the project's own code (its functions and
        classes) is still followed.
        """
        out: set[Atom] = set()
        for atom in ordered(base):
            if not isinstance(atom, (ModRef, GpuObj, Instance, ClassRef)):
                out.update(self.analyzer.module_member(atom, attr))
        if out and any(isinstance(a, ModRef) and api_table().lookup(f"{a.qualname}.{attr}") for a in base):
            out = {a for a in out if not (isinstance(a, ModRef) and api_table().lookup(a.qualname))}
        return frozenset(out)

    def emit_init(self, framework: str, level: InitLevel, api: str, node: cst.CSTNode) -> None:
        from gpudoctor.lint.analysis.events import Init

        self.emit(Init(framework, level, api, self.site(node)))

    def _e_Subscript(self, node: cst.Subscript) -> Value:
        base = self.eval(node.value)
        out: set[Atom] = set(elements(base))
        environ = any(isinstance(a, ModRef) and a.qualname == "os.environ" for a in base)
        for element in node.slice:
            if environ and isinstance(element.slice, cst.Index):
                out.update(SavedEnv(name) for name in strings(self.eval(element.slice.value)) & WATCHED_VARIABLES)
            else:
                self.eval_children(element)
        out.update(a for a in base if isinstance(a, FuncRef) and a.cuda_kernel)
        return frozenset(out)

    def _sequence(self, items: Any) -> Value:
        values = []
        for element in items:
            value = self.eval(element.value)
            values.append(elements(value) if isinstance(element, cst.StarredElement) else value)
        starred = any(isinstance(element, cst.StarredElement) for element in items)
        return container(*values, ordered=not starred)

    def _e_List(self, node: cst.List) -> Value:
        return self._sequence(node.elements)

    _e_Tuple = _e_List
    _e_Set = _e_List

    def _e_Dict(self, node: cst.Dict) -> Value:
        values = []
        for element in node.elements:
            if isinstance(element, cst.DictElement):
                self.eval(element.key)
            values.append(self.eval(element.value))
        return container(*values)

    def comprehension(self, node: Any, results: list[cst.BaseExpression],
                      keys: tuple[cst.BaseExpression, ...] = ()) -> Value:
        clause = node.for_in
        while clause is not None:
            source = self.eval(clause.iter)
            self.iterate(source, clause.iter)
            self.bind(clause.target, elements(source))
            for condition in clause.ifs:
                self.eval(condition.test)
            clause = clause.inner_for_in
        for key in keys:  # evaluated for their effects; what a dict holds is its values
            self.eval(key)
        return container(*[self.eval(result) for result in results])

    def iterate(self, source: Value, node: cst.CSTNode) -> None:
        """What starting to iterate ``source`` does (the call evaluator knows)."""

    def _e_ListComp(self, node: cst.ListComp) -> Value:
        return self.comprehension(node, [node.elt])

    _e_SetComp = _e_ListComp
    _e_GeneratorExp = _e_ListComp

    def _e_DictComp(self, node: cst.DictComp) -> Value:
        return self.comprehension(node, [node.value], keys=(node.key,))

    def _e_BinaryOperation(self, node: cst.BinaryOperation) -> Value:
        left, right = self.eval(node.left), self.eval(node.right)
        devices = gpu_objects(left, 0) + gpu_objects(right, 0)
        if devices:
            framework = devices[0].framework
            self.emit_init(framework, InitLevel.RUNTIME, "an operation on a device object", node)
            return one(GpuObj(framework, self.site(node)))
        lefts = [a for a in left if isinstance(a, Str)]
        rights = [a for a in right if isinstance(a, Str)]
        if lefts and rights and isinstance(node.operator, cst.Add):
            # Strings are followed for the names rules read: a few short ones. Past the
            # limits a concatenation is unknown: a path joined in a recursive walk (os.walk's)
            # would otherwise double its set of strings, and their length, at every call.
            limits = self.analyzer.limits
            if len(lefts) * len(rights) > limits.max_strings:
                return UNKNOWN
            joined = frozenset(Str(a.value + b.value) for a in lefts for b in rights)
            return joined if all(len(s.value) <= limits.max_string_chars for s in joined) else UNKNOWN
        return frozenset(lefts) if isinstance(node.operator, (cst.Add, cst.Modulo)) else UNKNOWN

    def _e_BooleanOperation(self, node: cst.BooleanOperation) -> Value:
        left, right = self.eval(node.left), self.eval(node.right)
        known = truth(left)
        if known is not None:  # short-circuit on a literal flag
            decides = known if isinstance(node.operator, cst.Or) else not known
            return left if decides else right
        return join(left, right)

    def _e_IfExp(self, node: cst.IfExp) -> Value:
        """A test known true or false (a literal flag, a ``hasattr`` on a name every
        target has) picks its branch, as in an ``if`` statement."""
        known = truth(self.eval(node.test))
        if known is not None:
            return self.eval(node.body if known else node.orelse)
        return join(self.eval(node.body), self.eval(node.orelse))

    def _e_NamedExpr(self, node: cst.NamedExpr) -> Value:
        value = self.eval(node.value)
        self.bind(node.target, value)
        return value

    def _e_Await(self, node: cst.Await) -> Value:
        return self.eval(node.expression)

    def _e_Yield(self, node: cst.Yield) -> Value:
        value = node.value
        result = self.eval(value.item if isinstance(value, cst.From) else value)
        self.returns.update(result)
        return UNKNOWN

    # -- binding (statements use it too) -------------------------------------------------
    def bind(self, target: cst.CSTNode, value: Value) -> None:
        if isinstance(target, cst.Name):
            self.assign(target.value, value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            per_position, rest = positions(value)
            if not per_position and not any(isinstance(a, Container) for a in value):
                rest = value
            for index, element in enumerate(target.elements):
                item = per_position[index] if index < len(per_position) else rest
                self.bind(element.value, item)
        elif isinstance(target, cst.StarredElement):
            self.bind(target.value, container(value))
        elif isinstance(target, cst.Attribute):
            owner = self.eval(target.value)
            if target.attr.value == "daemon" and isinstance(target.value, cst.Name) and \
                    any(isinstance(atom, ProcessObj) for atom in owner):
                # ``p.daemon = True`` before ``p.start()``: as daemonic as ``daemon=True``.
                flag = truth(value)
                self.assign(target.value.value, frozenset(
                    replace(atom, daemon=flag) if isinstance(atom, ProcessObj) and flag is not None else atom
                    for atom in owner))
            for atom in ordered(owner):
                if isinstance(atom, Instance):
                    self.analyzer.classes.store_member(atom.cls, target.attr.value, value)
        elif isinstance(target, cst.Subscript):
            self.assign_subscript(target, value)

    def assign_subscript(self, target: cst.Subscript, value: Value) -> None:
        """Overridden by the statement walker to see ``os.environ[...] = ...``."""
        self.eval(target.value)
