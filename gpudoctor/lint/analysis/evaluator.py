"""Evaluate expressions and calls to abstract values, emitting the events they cause.

One Evaluator holds the semantics of every expression: names, literals, attributes,
subscripts, operators, comprehensions, and calls (a project function is run in this
thread through the interpreter, a framework API looked up in the knowledge tables, a
process or thread API modelled by process_calls.py). The executor (executor.py) adds the
statements.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import libcst as cst

from gpudoctor.knowledge import distributed, processes
from gpudoctor.knowledge.registry import (
    BACKEND_SWITCH,
    CUDA_PLACEMENT,
    DEFAULT_DEVICE_FACTORIES,
    DEVICE_TYPES,
    HOST_METHODS,
    HOST_RESULT_METHODS,
    INIT_UNLESS,
    WATCHED_VARIABLES,
    api_table,
    framework_of_module,
)
from gpudoctor.knowledge.runners import RUNNERS, SETUP_METHODS, TEST_CASE_BASES, TEST_MAINS, TEST_PREFIX
from gpudoctor.knowledge.table import (
    GPU_OBJECT,
    INIT_EFFECTS,
    ON_CUDA,
    ON_NO_ARGUMENTS,
    RUNTIME_OBJECT,
    TF_CONFIG,
    Api,
    InitLevel,
)
from gpudoctor.lint.analysis import process_calls
from gpudoctor.lint.analysis.arguments import Args
from gpudoctor.lint.analysis.events import (
    Callback,
    Collective,
    DeviceChoice,
    EnvWrite,
    Event,
    Init,
    ProcessGroupInit,
    Start,
    TfConfig,
    ThreadStart,
)
from gpudoctor.lint.analysis.frame import Frame
from gpudoctor.lint.analysis.values import (
    DEFAULT_DEVICE,
    FACTORY_PREFIX,
    ITEM_PREFIX,
    SOME_UNKNOWN,
    UNKNOWN,
    Atom,
    Bool,
    ClassRef,
    Compiled,
    Compiler,
    Condition,
    Container,
    CudaDevice,
    Deferred,
    FuncRef,
    GpuObj,
    Instance,
    Int,
    ModRef,
    ModuleObj,
    MpContext,
    Options,
    PoolObj,
    ProcessObj,
    QueueObj,
    SavedEnv,
    Str,
    Super,
    ThreadObj,
    Value,
    container,
    cuda_conditions,
    elements,
    gpu_objects,
    is_cuda,
    join,
    one,
    ordered,
    positions,
    strings,
    truth,
    with_conditions,
)
from gpudoctor.lint.frontend.literals import integer_value, string_value
from gpudoctor.lint.nesting import EXPRESSION
from gpudoctor.lint.settings import SUPPORTED_MINORS

# Attributes of a device array that are host values.
HOST_ATTRIBUTES = frozenset({"shape", "dtype", "ndim", "size", "nbytes", "itemsize", "device",
                             "is_cuda", "name", "strides", "history", "layers", "input_shape",
                             "output_shape"})
SWITCH_VARIABLES = frozenset(variable for variable, _ in BACKEND_SWITCH.values())
MUTATORS = frozenset({"append", "extend", "add", "insert", "appendleft", "update"})
ENV_CALLS = frozenset({"os.putenv", "os.environ.setdefault", "os.environ.update",
                       "os.environ.__setitem__"})
ENV_READS = frozenset({"os.environ.get", "os.getenv", "os.environ.pop"})


_HANDLERS: dict[tuple[type, type], Callable[[Evaluator, Any], Value] | None] = {}


def _handler(evaluator: type[Evaluator], kind: type[cst.CSTNode]) -> Callable[[Evaluator, Any], Value] | None:
    """The ``_e_<Node>`` method of ``evaluator`` for a node type, looked up once per pair
    (eval runs for every expression: a name built and looked up each time showed)."""
    key = (evaluator, kind)
    try:
        return _HANDLERS[key]
    except KeyError:
        found = _HANDLERS[key] = getattr(evaluator, f"_e_{kind.__name__}", None)
        return found


# The standard library's command-line parser (its string defaults can name the device).
ARGUMENT_PARSERS = frozenset({"argparse.ArgumentParser"})


class Evaluator(Frame):
    """Evaluate expressions to abstract values in a frame, and calls: project functions are
    inlined, framework APIs looked up in the knowledge tables, process APIs modelled
    (process_calls.py)."""

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
                return handler(self, node)
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
        if isinstance(node.operator, cst.Not) and value and all(isinstance(a, (FuncRef, ClassRef)) for a in value):
            # ``not evaluate`` where ``evaluate`` is the module's function (a flag was meant):
            # a function or a class is always true, so the test never holds.
            return one(Bool(False))
        if isinstance(node.operator, cst.Minus) and len(value) == 1:
            atom = next(iter(value))
            if type(atom) is Int:
                return one(Int(-atom.value))  # ``rank=-1``
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
        value = integer_value(node.value, self.interpreter.limits.max_integer_chars)
        return UNKNOWN if value is None else one(Int(value))

    def captured(self, node: cst.FunctionDef | cst.Lambda) -> tuple[tuple[str, Value], ...]:
        """The functions and device objects of the enclosing scope a nested def or lambda
        refers to (its closure, as bound now): what a decorator's wrapper calls, the model a
        callback uses (``lambda: make_env(writer)`` handed to a forked process carries the
        writer). Other captured values stay unknown, which keeps function summaries keyed
        small."""
        own = node.name.value if isinstance(node, cst.FunctionDef) else None
        kept = {name: frozenset(a for a in value if isinstance(a, FuncRef) or gpu_objects(one(a), 1))
                for name, value in self.env.items() if name != own}
        kept = {name: value for name, value in kept.items() if value}
        if not kept:
            return ()
        used: set[str] = set()
        todo: list[cst.CSTNode] = [node.body]
        while todo:
            current = todo.pop()
            if isinstance(current, cst.Name):
                used.add(current.value)
            todo.extend(current.children)
        return tuple(sorted((name, kept[name]) for name in used & kept.keys()))

    def _e_Lambda(self, node: cst.Lambda) -> Value:
        for param in (*node.params.posonly_params, *node.params.params, *node.params.kwonly_params):
            if param.default is not None:
                self.eval(param.default)  # evaluated when the lambda is (Executor.evaluate_defaults)
        self.module.parsed.note_tree(node, self.tree)
        closure = () if self.module_level else self.captured(node)
        return one(FuncRef(self.module.path, "<lambda>", node, closure=closure))

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
                found = self.interpreter.classes.member(atom, attr)
                out.update(self.read_properties(found, node) if isinstance(atom, Instance) else found)
            elif isinstance(atom, Super):
                found = self.interpreter.classes.super_member(atom, attr)
                out.update(self.read_properties(found, node) if isinstance(atom.instance, Instance) else found)
            elif isinstance(atom, Options) and atom.parsed:
                # The option's default, or what the command line gave instead.
                out.update(Str(value) for name, value in atom.defaults if name == attr)
                out |= SOME_UNKNOWN
        return frozenset(out) | self.module_members(base, attr)

    def read_properties(self, members: Value, node: cst.CSTNode) -> Value:
        """Reading a property of an instance runs its getter: its result, and its effects."""
        if not any(isinstance(a, FuncRef) and a.bound and _is_property(a.node) for a in members):
            return members
        out: set[Atom] = set()
        for atom in ordered(members):
            if isinstance(atom, FuncRef) and atom.bound and _is_property(atom.node):
                out |= self.inline(atom, Args(), node)
            else:
                out.add(atom)
        return frozenset(out)

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
                out.update(self.interpreter.module_member(atom, attr))
        if out and any(isinstance(a, ModRef) and api_table().lookup(f"{a.qualname}.{attr}") for a in base):
            out = {a for a in out if not (isinstance(a, ModRef) and api_table().lookup(a.qualname))}
        return frozenset(out)

    def emit_init(self, framework: str, level: InitLevel, api: str, node: cst.CSTNode) -> None:
        self.emit(Init(framework, level, api, self.site(node)))

    def gpu_object(self, framework: str, node: cst.CSTNode, device: Value = UNKNOWN) -> GpuObj:
        """A device object made at ``node``, under this code's undecided conditions (and
        those that make ``device``, where it was placed, name a CUDA device)."""
        return GpuObj(framework, self.site(node), (*self.ctx.conditions, *cuda_conditions(device)))

    def emit_on_device(self, effect: Init, device: Value) -> None:
        """Emit an init that happens because ``device`` names a CUDA device: under the
        conditions that make it name one, when a conditional expression chose it."""
        when = cuda_conditions(device)
        if not when:
            self.emit(effect)
            return
        self.events.append(Event(effect, replace(self.ctx, conditions=(*self.ctx.conditions, *when))))

    def _e_Subscript(self, node: cst.Subscript) -> Value:
        key = item_key(node)
        if key is not None:
            held = self.lookup(key)
            if held:  # written earlier by ``cfg["workers"] = 0`` (assign_subscript)
                self.eval(node.value)
                return held
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
            process_calls.iterate_loaders(self, source, clause.iter, lasting=False)
            self.bind(clause.target, elements(source))
            for condition in clause.ifs:
                self.eval(condition.test)
            clause = clause.inner_for_in
        for key in keys:  # evaluated for their effects; what a dict holds is its values
            self.eval(key)
        begin = len(self.events)
        values = [self.eval(result) for result in results]
        if any(isinstance(e.effect, (Start, ThreadStart)) for e in self.events[begin:]):
            # Starting processes or threads per item: the second item's start comes after
            # the first's (``[make_worker() for _ in range(n)]``), as a loop's second
            # iteration does.
            values = [join(v, self.eval(result)) for v, result in zip(values, results, strict=True)]
        return container(*values)

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
            return one(self.gpu_object(framework, node))
        lefts = [a for a in left if isinstance(a, Str)]
        rights = [a for a in right if isinstance(a, Str)]
        if lefts and rights and isinstance(node.operator, cst.Add):
            # Strings are followed for the names rules read: a few short ones. Past the
            # limits a concatenation is unknown: a path joined in a recursive walk (os.walk's)
            # would otherwise double its set of strings, and their length, at every call.
            limits = self.interpreter.limits
            if len(lefts) * len(rights) > limits.max_strings:
                return UNKNOWN
            joined = frozenset(Str(a.value + b.value) for a in lefts for b in rights)
            return joined if all(len(s.value) <= limits.max_string_chars for s in joined) else UNKNOWN
        if isinstance(node.operator, cst.Add) and any(isinstance(a, Container) for a in left) and \
                any(isinstance(a, Container) for a in right):
            # ``IMAGE_DATASETS + TEXT_DATASETS``: the items of both (positions not kept).
            return container(*(one(a) for c in left | right if isinstance(c, Container) for a in elements(one(c))))
        if isinstance(node.operator, cst.Multiply) and any(isinstance(a, Container) for a in left):
            # ``[device] * 4``: the same items, repeated (their positions no longer known).
            return container(*(one(a) for c in left if isinstance(c, Container) for a in elements(one(c))))
        return frozenset(lefts) if isinstance(node.operator, (cst.Add, cst.Modulo)) else UNKNOWN

    def _e_BooleanOperation(self, node: cst.BooleanOperation) -> Value:
        left, right = self.eval(node.left), self.eval(node.right)
        known = truth(left)
        if known is not None:  # short-circuit on a literal flag
            decides = known if isinstance(node.operator, cst.Or) else not known
            return left if decides else right
        if truth(right) is isinstance(node.operator, cst.Or):  # ``x and False``, ``x or True``
            return right
        return join(left, right)

    def _e_IfExp(self, node: cst.IfExp) -> Value:
        """A test known true or false (a literal flag, a ``hasattr`` on a name every
        target has) picks its branch, as in an ``if`` statement."""
        known = truth(self.eval(node.test))
        if known is not None:
            return self.eval(node.body if known else node.orelse)
        narrowed = self._unwrapping(node)
        if narrowed is not None:
            return narrowed
        site = self.site(node.test)
        return join(with_conditions(self.eval(node.body), (Condition(site, True, node.test),)),
                    with_conditions(self.eval(node.orelse), (Condition(site, False, node.test),)))

    def _unwrapping(self, node: cst.IfExp) -> Value | None:
        """``m.module if hasattr(m, "module") else m`` (or ``isinstance(m, DDP)``), where ``m``
        holds a module wrapper's object (knowledge/distributed.py COLLECTIVE_WRAPPERS): the
        wrapper takes the first branch, whatever else ``m`` holds takes both."""
        test = node.test
        if not (isinstance(test, cst.Call) and isinstance(test.func, cst.Name) and len(test.args) == 2
                and test.func.value in ("hasattr", "isinstance") and isinstance(test.args[0].value, cst.Name)):
            return None
        name = test.args[0].value.value
        held = self.env.get(name)
        if not held:
            return None
        wrappers = frozenset(a for a in held if isinstance(a, ModRef) and a.qualname.endswith(distributed.WRAPPED)
                             and a.qualname.removesuffix(distributed.WRAPPED) in distributed.COLLECTIVE_WRAPPERS)
        if not wrappers:
            return None
        second = test.args[1].value
        if test.func.value == "hasattr":
            if not (isinstance(second, cst.SimpleString) and string_value(second) == "module"):
                return None
        elif not any(isinstance(a, ModRef) and a.qualname in distributed.COLLECTIVE_WRAPPERS
                     for a in self.eval(second)):
            return None
        site = self.site(node.test)
        body = with_conditions(self.eval(node.body), (Condition(site, True, node.test),))
        self.env[name] = held - wrappers  # (what the wrapper is not takes the other branch too)
        try:
            rest = with_conditions(self.eval(node.orelse), (Condition(site, False, node.test),)) \
                if self.env[name] else UNKNOWN
        finally:
            self.env[name] = held
        return join(body, rest)

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
                    self.interpreter.classes.store_member(atom.cls, target.attr.value, value)
        elif isinstance(target, cst.Subscript):
            self.assign_subscript(target, value)

    def mutate(self, name: str, held: Value, added: Value) -> None:
        """The container ``name`` holds (``held``) now holds ``added`` too: a list appended
        to, a dict given an item. The object is changed where it is bound, also when that
        is the module's name and this is a function (a registry filled by a helper:
        ``BACKENDS[cls.name] = cls``)."""
        grown = held | container(added)
        if self.module_level or name in self.env or name not in self.module.env:
            self.assign(name, grown)
        else:
            env = self.module.env
            env[name] = env[name] | container(added)

    def assign_subscript(self, target: cst.Subscript, value: Value) -> None:
        """``os.environ[name] = value`` writes a variable a framework reads; an item of a
        name, by constant keys (``config["training"]["workers"] = 0``), holds ``value`` for
        later reads of the same item (until the name is bound again), and the container
        the name holds holds ``value`` too, whatever the key."""
        key = item_key(target)
        if key is not None:
            self.assign(key, value)
        if isinstance(target.value, cst.Name) and value:
            held = self.lookup(target.value.value)
            if any(isinstance(a, Container) for a in held):
                self.mutate(target.value.value, held, value)
        base = self.eval(target.value)
        if not any(isinstance(a, ModRef) and a.qualname == "os.environ" for a in base):
            return
        for element in target.slice:
            if isinstance(element.slice, cst.Index):
                for name in sorted(strings(self.eval(element.slice.value)) & WATCHED_VARIABLES):
                    self.emit(EnvWrite(name, value, self.site(target)))
                    self.note_backend(name, value)

    # -- calls ---------------------------------------------------------------------------
    def eval_args(self, node: cst.Call) -> Args:
        args = Args()
        for arg in node.args:
            value = self.eval(arg.value)
            if arg.keyword is not None:
                args.keywords[arg.keyword.value] = value
                args.keyword_nodes[arg.keyword.value] = arg.value
            elif arg.star:
                # (an unknown ``*args``/``**kwargs`` may hold anything: not "no arguments",
                # which would leave the parameters to their defaults)
                args.rest = args.rest | elements(value) | (value or SOME_UNKNOWN)
            else:
                args.positional.append(value)
        return args

    def _e_Call(self, node: cst.Call) -> Value:
        func = node.func
        if isinstance(func, cst.Attribute):
            receiver = self.eval(func.value)
            args = self.eval_args(node)
            name = func.attr.value
            if name in MUTATORS and isinstance(func.value, cst.Name) and args.positional and \
                    (not receiver or any(isinstance(a, Container) for a in receiver)):
                # (a list's or set's, not a project object's own ``add``)
                added = args.positional[-1]
                grown = elements(added) if name in ("extend", "update") else added
                self.mutate(func.value.value, receiver, grown)
            elif name in MUTATORS and isinstance(func.value, cst.Attribute) and args.positional and \
                    any(isinstance(a, Container) for a in receiver):
                # ``self.workers.append(p)``: the container an attribute holds grows, for
                # every later read of the attribute (a member joins what its writes stored).
                added = args.positional[-1]
                grown = receiver | container(elements(added) if name in ("extend", "update") else added)
                for atom in ordered(self.eval(func.value.value)):
                    if isinstance(atom, Instance):
                        self.interpreter.classes.store_member(atom.cls, func.value.attr.value, grown)
            if name in distributed.SYNCED_LOGS and _true_keyword(node, distributed.SYNCED_LOGS[name]):
                self.collective(distributed.SYNCED_LOG, args, node)
            return self.call_method(receiver, name, args, node)
        callee = self.eval(func)
        args = self.eval_args(node)
        if not callee:
            self.defer_callbacks(args, node)
        return self.call_value(callee, args, node)

    # -- receivers -----------------------------------------------------------------------
    def call_method(self, receiver: Value, name: str, args: Args, node: cst.Call) -> Value:
        out: set[Atom] = set()
        handled_device = False
        for atom in ordered(receiver):
            if isinstance(atom, ModRef):
                out |= self.call_qualname(f"{atom.qualname}.{name}", args, node)
            elif isinstance(atom, GpuObj):
                handled_device = True
                out |= self.method_on_device(atom, name, args, node)
            elif isinstance(atom, (PoolObj, ProcessObj, QueueObj, ThreadObj, MpContext)):
                out |= process_calls.method(self, atom, name, args, node)
            elif isinstance(atom, Instance) and name == "start":
                started = process_calls.start_instance(self, atom, node)
                # Not a Process or Thread subclass: its own ``start`` method, if it has one.
                out |= started if started is not None else \
                    self.call_value(self.attribute(one(atom), "start", node), Args(), node)
            elif isinstance(atom, Instance) and name == "join" and \
                    (joined := process_calls.join_instance(self, atom, node)) is not None:
                out |= joined
            elif isinstance(atom, (Instance, ClassRef, Super)):
                out |= self.call_value(self.attribute(one(atom), name, node), args, node)
            elif isinstance(atom, Container):
                out |= container_method(atom, name)
            elif isinstance(atom, Options) and not atom.parsed:
                out |= self.option_method(receiver, atom, name, node)
        # Project modules: together with the qualified names beside them (module_members).
        if any(isinstance(a, ModuleObj) for a in receiver):
            out |= self.call_value(self.module_members(receiver, name), args, node)
        if not handled_device and not any(isinstance(a, ModRef) for a in receiver):
            out |= self.untyped_placement(name, args, node)
        if not receiver:  # a method of an object the analysis cannot name
            library_pool = processes.LIBRARY_POOL_BY_NAME.get(name)
            if library_pool is not None and library_pool.workers in args.keywords:
                process_calls.library_pool(self, library_pool, args, node)
            self.defer_callbacks(args, node)
            collective = distributed.DISTINCT_METHODS.get(name)
            named = distributed.NAMED_RECEIVER_METHODS.get(name, ())
            if named and isinstance(node.func, cst.Attribute):
                owner = node.func.value
                owner_name = owner.attr.value if isinstance(owner, cst.Attribute) else \
                    owner.value if isinstance(owner, cst.Name) else ""
                collective = next((c for owners, c in named if owner_name.lower().endswith(owners)), collective)
            if collective is not None:
                self.collective(collective, args, node)
        # A framework base's method that returns the object (``model.to(device)``): the
        # same object, with its own methods (``forward``) still reachable.
        classes = self.interpreter.classes
        out.update(a for a in receiver if isinstance(a, Instance) and classes.returns_self(a.cls, name)
                   and not classes.member(a, name))
        return frozenset(out)

    def option_method(self, receiver: Value, parser: Options, name: str, node: cst.Call) -> Value:
        """``parser.add_argument("--device", default="cuda")`` (a default naming a CUDA
        device is kept: the parser held by a name is bound again with it);
        ``parser.parse_args()`` (the namespace: each option's default, or another value)."""
        if name in ("parse_args", "parse_known_args", "parse_intermixed_args"):
            parsed = one(Options(parser.defaults, parsed=True))
            return container(parsed, SOME_UNKNOWN, ordered=True) if name == "parse_known_args" else parsed
        if name != "add_argument" or not isinstance(node.func, cst.Attribute) or \
                not isinstance(node.func.value, cst.Name):
            return UNKNOWN
        flags = [v for a in node.args if a.keyword is None and isinstance(a.value, cst.SimpleString)
                 and isinstance(v := string_value(a.value), str)]
        keywords = {a.keyword.value: a.value for a in node.args if a.keyword is not None}
        default = keywords.get("default")
        value = string_value(default) if isinstance(default, cst.SimpleString) else None
        dest_node = keywords.get("dest")
        dest = string_value(dest_node) if isinstance(dest_node, cst.SimpleString) else None
        if dest is None and flags:
            longs = [f for f in flags if f.startswith("--")]
            dest = (longs[0] if longs else flags[0]).lstrip("-").replace("-", "_")
        if isinstance(value, str) and value.startswith("cuda") and isinstance(dest, str) and dest.isidentifier():
            grown = Options((*(d for d in parser.defaults if d[0] != dest), (dest, value)))
            self.assign(node.func.value.value, frozenset(a for a in receiver if a != parser) | {grown})
        return UNKNOWN

    def method_on_device(self, atom: GpuObj, name: str, args: Args, node: cst.Call) -> Value:
        if name in HOST_METHODS:
            return UNKNOWN
        # Using a device object needs the runtime in this process (in a child: unpickling
        # it, or inheriting it through fork, is not enough to make CUDA usable).
        self.emit(Init(atom.framework, InitLevel.RUNTIME, f".{name}() on a device object", self.site(node)))
        if name in HOST_RESULT_METHODS:
            return UNKNOWN
        if name == "to":
            target = args.get(0, "device") or UNKNOWN
            if not is_cuda(target) and "cpu" in strings(target):
                return UNKNOWN
        return one(self.gpu_object(atom.framework, node))

    def untyped_placement(self, name: str, args: Args, node: cst.Call) -> Value:
        """``x.cuda()`` and ``x.to("cuda")`` on a value of unknown type place it on the GPU
        (credited to the first framework whose values move so, registry.CUDA_PLACEMENT)."""
        target = args.get(0, "device") or UNKNOWN
        if CUDA_PLACEMENT and (name == "cuda" or (name == "to" and is_cuda(target))):
            framework = CUDA_PLACEMENT[0]
            device = target if name == "to" else UNKNOWN
            self.emit_on_device(Init(framework, InitLevel.RUNTIME, f".{name}()", self.site(node)), device)
            return one(self.gpu_object(framework, node, device))
        return UNKNOWN

    def run_tests(self, node: cst.Call) -> None:
        """``unittest.main()``: the test methods of this module's TestCase classes run now,
        each after the class's set-up methods (runners.py)."""
        classes = self.interpreter.classes
        for cls in self.module.classes:
            if not classes.subclass_of(cls, TEST_CASE_BASES):
                continue
            for statement in cls.node.body.body:
                if isinstance(statement, cst.FunctionDef) and statement.name.value.startswith(TEST_PREFIX):
                    for name in (*SETUP_METHODS, statement.name.value):
                        for atom in ordered(classes.member(Instance(cls), name)):
                            if isinstance(atom, FuncRef):
                                self.inline(atom, Args(), node)

    def defer_callbacks(self, args: Args, node: cst.Call) -> None:
        """The project's functions handed to a call the analysis cannot follow (a signal's
        ``connect``, a web UI's ``click``, a library hook) may be called later, in this
        process: recorded here, run at the end of the flow (events.Callback)."""
        values = (*args.positional, *args.keywords.values())
        funcs = tuple(a for v in values for a in ordered(v) if isinstance(a, FuncRef) and not a.cuda_kernel)
        if funcs:
            self.emit(Callback(funcs, self.site(node)))

    def call_value(self, callee: Value, args: Args, node: cst.Call) -> Value:
        out: set[Atom] = set()
        for atom in ordered(callee):
            if isinstance(atom, ModRef):
                out |= self.call_qualname(atom.qualname, args, node)
            elif isinstance(atom, FuncRef) and atom.cuda_kernel:
                self.emit(Init(atom.cuda_kernel, InitLevel.RUNTIME, "CUDA kernel launch", self.site(node)))
            elif isinstance(atom, FuncRef):
                out |= self.inline(atom, args, node)
            elif isinstance(atom, ClassRef):
                out |= self.instantiate(atom, args, node)
            elif isinstance(atom, Instance):
                out |= self.call_instance(atom, args, node)
            elif isinstance(atom, GpuObj):
                # Calling a device object (a model: ``MODEL(batch)``) runs the framework on
                # the GPU in this process: in a child, that needs a runtime of its own.
                self.emit(Init(atom.framework, InitLevel.RUNTIME, "calling a device object", self.site(node)))
                out.add(self.gpu_object(atom.framework, node))
            elif isinstance(atom, Compiled):
                process_calls.call_compiled(self, atom, node)
            elif isinstance(atom, Compiler):  # ``compile(mode=...)(f)``
                out |= (args.positional[0] if args.positional else UNKNOWN) | one(Compiled(atom.site))
            elif isinstance(atom, Deferred):
                out |= process_calls.call_deferred(atom, args)
            elif isinstance(atom, PoolObj) and atom.kind == processes.JOBLIB:
                out |= process_calls.run_parallel(self, atom, args, node)
        return frozenset(out)

    def inline(self, func: FuncRef, args: Args, node: cst.CSTNode) -> Value:
        """Run a function of the project in this thread: it sees this code's default device,
        and what it leaves as the default device stays (the setting is per thread)."""
        device = self.env.get(DEFAULT_DEVICE, UNKNOWN)
        events, result, after = self.interpreter.call_in_thread(
            func, tuple(args.positional), args.rest, args.keywords, device)
        self.take(events, node)
        if after != device:
            self.assign(DEFAULT_DEVICE, after)
        return result

    def instantiate(self, cls: ClassRef, args: Args, node: cst.Call) -> Value:
        instance = Instance(cls)
        init = self.interpreter.classes.member(instance, "__init__")
        for atom in ordered(init):
            if isinstance(atom, FuncRef):
                self.inline(atom, args, node)
        if is_dataclass(cls.node):
            # The generated __init__ stores what it is given in its fields (by keyword, or
            # by position in the order the fields are declared), calls each other field's
            # default_factory, then __post_init__.
            classes = self.interpreter.classes
            fields = [s.target.value for line in cls.node.body.body if isinstance(line, cst.SimpleStatementLine)
                      for s in line.body if isinstance(s, cst.AnnAssign) and isinstance(s.target, cst.Name)]
            given = dict(zip(fields, args.positional, strict=False))
            given.update((name, value) for name, value in args.keywords.items() if name in fields)
            for name, value in given.items():
                classes.store_member(cls, name, value)
            for key, factory in sorted(classes.namespace(cls).items()):
                if key.startswith(FACTORY_PREFIX) and key[len(FACTORY_PREFIX):] not in args.keywords:
                    classes.store_member(cls, key[len(FACTORY_PREFIX):], self.call_value(factory, Args(), node))
            self.call_method_of(instance, "__post_init__", node)
        return one(instance)

    def call_instance(self, instance: Instance, args: Args, node: cst.Call) -> Value:
        """Calling an object of a project class: its ``__call__``, or the method its
        framework base calls (``model(x)`` runs ``forward``)."""
        classes = self.interpreter.classes
        method = classes.call_method(instance.cls)
        return self.call_value(frozenset(a for a in classes.member(instance, method) if isinstance(a, FuncRef)),
                               args, node)

    def call_method_of(self, instance: Instance, name: str, node: cst.CSTNode) -> None:
        """Run a special method Python calls on its own (``__post_init__``, ``__enter__``)."""
        for atom in ordered(self.interpreter.classes.member(instance, name)):
            if isinstance(atom, FuncRef):
                self.inline(atom, Args(), node)

    # -- qualified names -----------------------------------------------------------------
    def call_qualname(self, qualname: str, args: Args, node: cst.Call) -> Value:
        if qualname in distributed.PROCESS_GROUP_INITS:
            self.process_group(qualname, node)  # (and its threads start, below)
        kind = processes.kind_of(qualname)
        if kind is not None:
            return process_calls.api(self, kind, args, node, method=processes.own_default(qualname), qualname=qualname)
        if qualname in ENV_CALLS:
            self.env_write(qualname, args, node)
            return UNKNOWN
        if qualname in TEST_MAINS:
            self.run_tests(node)
            return UNKNOWN
        runner = RUNNERS.get(qualname)
        if runner is not None:  # it calls the function it is given, here (runners.py)
            func = args.get(runner.index, runner.keyword) or UNKNOWN
            self.call_value(frozenset(a for a in func if isinstance(a, FuncRef)),
                            Args(positional=[UNKNOWN] * runner.arguments), node)
            return UNKNOWN
        if qualname in ENV_READS and args.positional:
            return frozenset(SavedEnv(name) for name in strings(args.positional[0]) & WATCHED_VARIABLES)
        if qualname.startswith("builtins."):
            return self.builtin(qualname[9:], args, node)
        if qualname == "functools.partial" and args.positional:
            bound = tuple(args.positional[1:])
            return frozenset(
                replace(a, bound=a.bound + bound) for a in args.positional[0] if isinstance(a, FuncRef)
            )
        if qualname in DEVICE_TYPES:
            named = args.get(0, "type") or UNKNOWN
            return one(CudaDevice(cuda_conditions(named))) if is_cuda(named) else UNKNOWN
        if qualname in DEFAULT_DEVICE_FACTORIES and "device" not in args.keywords and not args.rest and \
                is_cuda(self.env.get(DEFAULT_DEVICE, UNKNOWN)):
            # No device given: the default device set earlier (in this thread) is used.
            framework = DEFAULT_DEVICE_FACTORIES[qualname]
            self.emit(Init(framework, InitLevel.RUNTIME, f"{qualname} on the default device (CUDA)", self.site(node)))
            return one(self.gpu_object(framework, node))
        collective = distributed.BY_QUALNAME.get(qualname)
        if collective is not None:
            self.collective(collective, args, node)
            return UNKNOWN
        if qualname in ARGUMENT_PARSERS:
            return one(Options())
        wrapper = distributed.COLLECTIVE_WRAPPERS.get(qualname)
        if wrapper is not None:  # ``DDP(model)``: calling what it returns is a collective
            self.defer_callbacks(args, node)
            off = args.keyword_nodes.get(wrapper[0])
            if isinstance(off, cst.Name) and off.value == "False":
                return UNKNOWN
            return one(ModRef(qualname + distributed.WRAPPED))
        if qualname.endswith(distributed.WRAPPED) or qualname.endswith(distributed.WRAPPED + ".forward"):
            wrapped = distributed.COLLECTIVE_WRAPPERS.get(qualname.removesuffix(".forward").removesuffix(
                distributed.WRAPPED))
            if wrapped is not None:
                self.defer_callbacks(args, node)
                self.collective(wrapped[1], args, node)
                return UNKNOWN
        if qualname in distributed.CLASSES:
            return one(ModRef(qualname))  # its collective methods are known by this name
        if qualname in distributed.ACCELERATOR_GETTERS:
            return one(ModRef(distributed.ACCELERATOR_GETTERS[qualname]))
        if qualname in distributed.DEVICE_CHOICES and api_table().lookup(qualname) is None:
            self.emit(DeviceChoice(qualname, self.site(node)))
            return UNKNOWN
        if qualname in distributed.STARTUP_STRATEGIES:
            # It configures collective ops, which must precede the runtime (GD503); then,
            # as the table says, it starts the runtime itself.
            self.emit(TfConfig(qualname, self.site(node), self.swallowing > 0,
                               framework_of_module(qualname) or ""))
        api = api_table().lookup(qualname)
        if api is not None and (api.effect not in INIT_EFFECTS | {TF_CONFIG} or not self.applies(api, args, node)):
            if api.returns:
                return one(ModRef(api.returns))
            # An inert constructor (``cupy.cuda.Device(0)``) keeps its name, so that a
            # method called on the object (``.use()``) is looked up as ``Device.use``.
            return one(ModRef(qualname)) if _is_class_name(qualname) else UNKNOWN
        if api is None:
            self.defer_callbacks(args, node)
            owner = framework_of_module(qualname) if "." in qualname else None
            device = args.get(-1, "device") or UNKNOWN
            if owner is not None and owner in CUDA_PLACEMENT and is_cuda(device):
                self.emit_on_device(Init(owner, InitLevel.RUNTIME, f'{qualname}(device="cuda")', self.site(node)),
                                    device)
                return one(self.gpu_object(owner, node, device))
            return UNKNOWN
        framework = self.backend_of(qualname, api.framework)
        if api.effect == TF_CONFIG:
            self.emit(TfConfig(qualname, self.site(node), self.swallowing > 0, framework))
            return UNKNOWN
        device = (self.device_argument(args) if api.when == ON_CUDA else None) or UNKNOWN
        self.emit_on_device(Init(framework, api.level or InitLevel.RUNTIME, qualname, self.site(node),
                                 INIT_UNLESS.get(qualname)), device)
        if api.effect == GPU_OBJECT:
            return one(self.gpu_object(framework, node, device))
        if api.effect == RUNTIME_OBJECT:
            return one(replace(self.gpu_object(framework, node, device), resident=False))
        # A constructor that initialized (``cupy.cuda.Device()``) keeps its name too.
        return one(ModRef(qualname)) if _is_class_name(qualname) else UNKNOWN

    def collective(self, api: distributed.Collective, args: Args, node: cst.Call) -> None:
        """A collective: every rank of its group must reach it (GD501). A group named other
        than the whole job's (``group=None`` and ``group.WORLD`` are the job's) marks it."""
        group: cst.BaseExpression | None = None
        for argument in node.args:
            if argument.keyword is not None and argument.keyword.value == api.group_keyword:
                group = argument.value
        position = api.group_position
        if group is None and position is not None:
            plain = [a for a in node.args if a.keyword is None]
            if any(a.star for a in plain[:position + 1]):
                group = plain[0].value  # ``*args``: the group may be among them
            elif len(plain) > position:
                group = plain[position].value
        subgroup = group is not None and not (
            (isinstance(group, cst.Name) and group.value == "None")
            or (isinstance(group, cst.Attribute) and group.attr.value == "WORLD"))
        device = any(a.keyword is not None and a.keyword.value in ("device_ids", "device") for a in node.args) or \
            (api.kind == "barrier" and len([a for a in node.args if a.keyword is None]) > 2)
        self.emit(Collective(api.qualname, api.kind, self.site(node), subgroup, device))

    def process_group(self, qualname: str, node: cst.Call) -> None:
        """``init_process_group`` with NCCL (a literal, or DeepSpeed's default) and no device
        (GD502)."""
        keyword, position, device_keyword, default = distributed.PROCESS_GROUP_INITS[qualname]
        backend: cst.BaseExpression | None = None
        plain = [a for a in node.args if a.keyword is None]
        if len(plain) > position and not plain[position].star:
            backend = plain[position].value
        backend = next((a.value for a in node.args if a.keyword is not None and a.keyword.value == keyword), backend)
        text = string_value(backend) if isinstance(backend, cst.SimpleString) else None
        if isinstance(backend, cst.Attribute) and isinstance(backend.value, cst.Attribute) and \
                backend.value.attr.value == "Backend":
            text = backend.attr.value.lower()  # ``dist.Backend.NCCL``
        device = any(a.keyword is not None and a.keyword.value == device_keyword for a in node.args) or \
            any(a.star == "**" for a in node.args)
        if backend is None:
            text = default
        if isinstance(text, str) and "nccl" in text.lower() and not device:
            # Only the groups GD502 is about: an event per group made would double what a
            # library making its group in many places costs (each start of its threads).
            self.emit(ProcessGroupInit(qualname, text, device, self.site(node)))

    def applies(self, api: Api, args: Args, node: cst.Call) -> bool:
        """Whether a conditional entry's effect happens for these arguments (table.py)."""
        enabled = args.keyword_nodes.get("enabled")
        if isinstance(enabled, cst.Name) and enabled.value == "False":
            return False
        if api.keys and not (strings(args.get(0, "name") or UNKNOWN) & api.keys):
            return False
        if api.when == ON_NO_ARGUMENTS:
            return not node.args
        if api.when == ON_CUDA:
            device = self.device_argument(args)
            return is_cuda(device) if device is not None else api.cuda_default
        return True

    @staticmethod
    def device_argument(args: Args) -> Value | None:
        """The device a call names (its first argument, ``device=`` or ``device_type=``)."""
        device = args.get(0, "device")
        for keyword in ("device", "device_type"):
            device = args.keywords.get(keyword, device)
        return device

    def backend_of(self, qualname: str, framework: str) -> str:
        """The framework a call belongs to: a module whose backend an environment variable
        chose when it was imported (standalone Keras under ``KERAS_BACKEND``) gives the
        chosen one, when this module set the variable to a literal before importing it."""
        switch = BACKEND_SWITCH.get(qualname.split(".", 1)[0])
        if switch is None:
            return framework
        chosen = self.module.backends.get(switch[0])
        return switch[1].get(chosen, framework) if chosen else framework

    def env_write(self, qualname: str, args: Args, node: cst.Call) -> None:
        values: dict[str, Value] = {}
        if qualname == "os.environ.update":
            values.update(args.keywords)
            first = node.args[0].value if node.args and node.args[0].keyword is None else None
            if isinstance(first, cst.Dict):
                for element in first.elements:
                    key = getattr(element, "key", None)
                    if isinstance(key, cst.SimpleString) and isinstance(key_name := string_value(key), str):
                        item = element.value
                        text = string_value(item) if isinstance(item, cst.SimpleString) else None
                        values[key_name] = one(Str(text)) if isinstance(text, str) else UNKNOWN
        elif args.positional:
            value = args.positional[1] if len(args.positional) > 1 else UNKNOWN
            values.update(dict.fromkeys(strings(args.positional[0]), value))
        for name in sorted(values.keys() & WATCHED_VARIABLES):
            # os.putenv changes the environment children get, not os.environ (os.getenv).
            self.emit(EnvWrite(name, values[name], self.site(node), environ=qualname != "os.putenv",
                               keeps=qualname == "os.environ.setdefault"))
            self.note_backend(name, values[name])

    def note_backend(self, var: str, value: Value) -> None:
        """Remember a literal backend choice written at module level (``backend_of``)."""
        if var in SWITCH_VARIABLES and self.module_level:
            chosen = strings(value)
            if len(chosen) == 1:
                self.module.backends[var] = next(iter(chosen))

    def builtin(self, name: str, args: Args, node: cst.Call) -> Value:
        first = args.positional[0] if args.positional else UNKNOWN
        # DataLoaders: the lazy wrappers hand them on to what iterates them; the others
        # iterate them now (to the end: a thread their iterator starts ends with it).
        lazy = frozenset(process_calls.loaders(frozenset().union(*args.positional)))
        if name == "zip":
            return container(*(elements(v) for v in args.positional)) | lazy
        if name == "enumerate":
            return container(elements(first), one(Int(0))) | lazy
        if name in ("map", "filter") and len(args.positional) > 1:
            items = elements(args.positional[1])
            if name == "map":
                call_args = Args(positional=[items])
                return container(self.call_value(first, call_args, node)) | lazy
            return container(items) | lazy
        if name in ("list", "tuple", "set", "frozenset", "iter", "reversed", "sorted", "dict"):
            process_calls.iterate_loaders(self, first, node, lasting=False)
            return container(elements(first))
        if name == "next":
            return elements(first)
        if name in ("hasattr", "getattr") and len(args.positional) > 1:
            # On a name every supported target has: true, and the attribute itself.
            attrs = strings(args.positional[1])
            if len(attrs) == 1 and len(args.positional[1]) == 1:
                attr = next(iter(attrs))
                if self.surely_present(first, attr):
                    return one(Bool(True)) if name == "hasattr" else self.attribute(first, attr, node)
                if name == "getattr" and any(isinstance(a, (Instance, ClassRef, ModuleObj, Super)) for a in first):
                    # ``getattr(obj, "name")`` of the project's objects is ``obj.name``
                    # (or the default given, when there is none).
                    found = self.attribute(first, attr, node)
                    default = args.positional[2] if len(args.positional) > 2 else None
                    return join(found, default) if default is not None else found
        if name == "super":
            return self.super_of(args)
        return UNKNOWN

    def super_of(self, args: Args) -> Value:
        """``super()`` in a method (the class defining it, and its first parameter), or
        ``super(Class, self)``."""
        classes = self.interpreter.classes
        if len(args.positional) == 2:
            owners = [a for a in args.positional[0] if isinstance(a, ClassRef)]
            targets = [a for a in args.positional[1] if isinstance(a, (Instance, ClassRef))]
        else:
            func = self.function
            owner = classes.owner_of(func) if func is not None else None
            owners = [owner] if owner is not None else []
            targets = [a for v in (func.bound[:1] if func is not None else ()) for a in v
                       if isinstance(a, (Instance, ClassRef))]
        return frozenset(Super(owner, target) for owner in owners for target in targets)

    def surely_present(self, owner: Value, attr: str) -> bool:
        """Is ``owner.attr`` a name that every supported target has (processes.ADDED_IN)?"""
        return bool(owner) and all(isinstance(a, ModRef) and present_on_every_target(f"{a.qualname}.{attr}")
                                   for a in owner)


def present_on_every_target(qualname: str) -> bool:
    """Does ``qualname`` exist on the oldest Python gpudoctor checks for, and so on all?"""
    return processes.present_on(qualname, SUPPORTED_MINORS.start)


def container_method(atom: Container, name: str) -> Value:
    """What a list's or dict's method returns, as far as what it holds goes: its items
    (``values()``, ``get``, ``pop``, ``copy``), pairs of an unknown key and each item
    (``items()``: ``for name, (cls, n) in table.items():``)."""
    if name in ("values", "copy", "get", "pop", "setdefault", "popitem"):
        return one(atom) if name == "copy" else (container(atom.items) if name == "values" else atom.items)
    if name == "items":
        return container(*(container(UNKNOWN, one(item), ordered=True) for item in atom.items))
    return UNKNOWN


def item_key(node: cst.Subscript, depth: int = 4) -> str | None:
    """The name under which a scope holds an item written by constant keys on a name
    (``cfg["a"][0]``: not an identifier, so no code can bind it); None for any other
    subscript."""
    keys: list[str] = []
    current: cst.BaseExpression = node
    while isinstance(current, cst.Subscript) and len(keys) < depth:
        if len(current.slice) != 1 or not isinstance(current.slice[0].slice, cst.Index):
            return None
        index = current.slice[0].slice.value
        if isinstance(index, cst.SimpleString) and isinstance(text := string_value(index), str):
            keys.append(repr(text))
        elif isinstance(index, cst.Integer) and len(index.value) < 8:
            keys.append(index.value)
        else:
            return None
        current = current.value
    if not isinstance(current, cst.Name) or isinstance(current, cst.Subscript):
        return None
    return ITEM_PREFIX + current.value + "".join(f"[{k}]" for k in reversed(keys))


PROPERTY_DECORATORS = frozenset({"property", "functools.cached_property", "cached_property"})


def _is_property(node: cst.CSTNode) -> bool:
    """Is this method a property getter (``@property``, ``@functools.cached_property``)?"""
    if not isinstance(node, cst.FunctionDef):
        return False
    return any(cst.helpers.get_full_name_for_node(d.decorator) in PROPERTY_DECORATORS for d in node.decorators)


def _is_class_name(qualname: str) -> bool:
    return qualname.rsplit(".", 1)[-1][:1].isupper()


def is_dataclass(node: cst.ClassDef) -> bool:
    """Decorated with ``@dataclass`` or ``@dataclasses.dataclass(...)``."""
    for decorator in node.decorators:
        target = decorator.decorator
        if isinstance(target, cst.Call):
            target = target.func
        name = cst.helpers.get_full_name_for_node(target) or ""
        if name.rsplit(".", 1)[-1] == "dataclass":
            return True
    return False


def _true_keyword(node: cst.Call, keyword: str) -> bool:
    """Does the call pass ``keyword=True``?"""
    return any(a.keyword is not None and a.keyword.value == keyword and isinstance(a.value, cst.Name)
               and a.value.value == "True" for a in node.args)
