"""Calls: project functions are inlined, framework APIs looked up, process APIs modelled."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import libcst as cst

from gpudoctor.lint.analysis import process_calls
from gpudoctor.lint.analysis.events import Child, Context, EnvWrite, Event, Init, TfConfig, splice
from gpudoctor.lint.analysis.expressions import ExprEvaluator
from gpudoctor.lint.analysis.literals import string_value
from gpudoctor.lint.analysis.values import (
    DEFAULT_DEVICE,
    UNKNOWN,
    Atom,
    Bool,
    ClassRef,
    Compiled,
    Compiler,
    CudaDevice,
    Deferred,
    FuncRef,
    GpuObj,
    Instance,
    Int,
    ModRef,
    ModuleObj,
    MpContext,
    PoolObj,
    ProcessObj,
    QueueObj,
    SavedEnv,
    Str,
    ThreadObj,
    container,
    elements,
    is_cuda,
    one,
    ordered,
    strings,
)
from gpudoctor.lint.knowledge import processes
from gpudoctor.lint.knowledge.registry import (
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
    initializing_import,
)
from gpudoctor.lint.knowledge.table import GPU_OBJECT, INIT_EFFECTS, ON_CUDA, ON_NO_ARGUMENTS, TF_CONFIG, Api, InitLevel
from gpudoctor.lint.settings import SUPPORTED_MINORS

Value = frozenset
SWITCH_VARIABLES = frozenset(variable for variable, _ in BACKEND_SWITCH.values())
MUTATORS = frozenset({"append", "extend", "add", "insert", "appendleft", "update"})
ENV_CALLS = frozenset({"os.putenv", "os.environ.setdefault", "os.environ.update",
                       "os.environ.__setitem__"})
ENV_READS = frozenset({"os.environ.get", "os.getenv", "os.environ.pop"})


@dataclass
class Args:
    """Evaluated call arguments, with the keyword nodes kept for literal checks."""

    positional: list[Value] = field(default_factory=list)
    keywords: dict[str, Value] = field(default_factory=dict)
    keyword_nodes: dict[str, cst.BaseExpression] = field(default_factory=dict)
    rest: Value = UNKNOWN  # what *args / **kwargs may hold

    def get(self, index: int, name: str) -> Value | None:
        if name in self.keywords:
            return self.keywords[name]
        if index >= 0 and index < len(self.positional):
            return self.positional[index]
        return None

    def is_true(self, name: str) -> bool:
        node = self.keyword_nodes.get(name)
        return isinstance(node, cst.Name) and node.value == "True"


class CallEvaluator(ExprEvaluator):
    """Adds call semantics to expression evaluation."""

    def eval_args(self, node: cst.Call) -> Args:
        args = Args()
        for arg in node.args:
            value = self.eval(arg.value)
            if arg.keyword is not None:
                args.keywords[arg.keyword.value] = value
                args.keyword_nodes[arg.keyword.value] = arg.value
            elif arg.star:
                args.rest = args.rest | elements(value) | value
            else:
                args.positional.append(value)
        return args

    def _e_Call(self, node: cst.Call) -> Value:
        func = node.func
        if isinstance(func, cst.Attribute):
            receiver = self.eval(func.value)
            args = self.eval_args(node)
            name = func.attr.value
            if name in MUTATORS and isinstance(func.value, cst.Name) and args.positional:
                added = args.positional[-1]
                grown = elements(added) if name in ("extend", "update") else added
                self.assign(func.value.value, receiver | container(grown))
            return self.call_method(receiver, name, args, node)
        callee = self.eval(func)
        return self.call_value(callee, self.eval_args(node), node)

    def iterate(self, source: Value, node: cst.CSTNode) -> None:
        process_calls.iterate_loaders(self, source, node, lasting=False)

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
                out |= process_calls.start_instance(self, atom, node)
            elif isinstance(atom, (Instance, ClassRef)):
                out |= self.call_value(self.attribute(one(atom), name, node), args, node)
        # Project modules: together with the qualified names beside them (module_members).
        if any(isinstance(a, ModuleObj) for a in receiver):
            out |= self.call_value(self.module_members(receiver, name), args, node)
        if not handled_device and not any(isinstance(a, ModRef) for a in receiver):
            out |= self.untyped_placement(name, args, node)
        return frozenset(out)

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
        return one(GpuObj(atom.framework, self.site(node)))

    def untyped_placement(self, name: str, args: Args, node: cst.Call) -> Value:
        """``x.cuda()`` and ``x.to("cuda")`` on a value of unknown type place it on the GPU
        (credited to the first framework whose values move so, registry.CUDA_PLACEMENT)."""
        target = args.get(0, "device") or UNKNOWN
        if CUDA_PLACEMENT and (name == "cuda" or (name == "to" and is_cuda(target))):
            framework = CUDA_PLACEMENT[0]
            self.emit(Init(framework, InitLevel.RUNTIME, f".{name}()", self.site(node)))
            return one(GpuObj(framework, self.site(node)))
        return UNKNOWN

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
            elif isinstance(atom, GpuObj):
                out.add(GpuObj(atom.framework, self.site(node)))
            elif isinstance(atom, Compiled):
                process_calls.call_compiled(self, atom, node)
            elif isinstance(atom, Compiler):  # ``compile(mode=...)(f)``
                out |= (args.positional[0] if args.positional else UNKNOWN) | one(Compiled(atom.site))
            elif isinstance(atom, Deferred):
                out |= process_calls.call_deferred(atom, args)
            elif isinstance(atom, PoolObj) and atom.kind == processes.JOBLIB:
                out |= process_calls.run_parallel(self, atom, args, node)
        return frozenset(out)

    def preload_events(self, names: tuple[str, ...], node: cst.Call) -> list[tuple[str, Event]]:
        """What the forkserver's import of these modules does, besides the main module's:
        the GPU inits and environment writes of each (an import that initializes CUDA by
        itself, or a project module's top level), each with the module it comes from."""
        site = self.site(node)
        linted = self.module.path in self.analyzer.linted_paths
        out: list[tuple[str, Event]] = []
        for name in names:
            if name == processes.MAIN_MODULE:
                continue
            api = initializing_import(name)
            if api is not None:
                out.append((name, Event(Init(api.framework, InitLevel.RUNTIME, f"import {name}", site))))
            effects = self.analyzer.import_effects(self.module.path, name)
            out.extend((name, e) for e in splice(effects, Context(), site, linted)
                       if isinstance(e.effect, (Init, EnvWrite)))
        return out

    def inline(self, func: FuncRef, args: Args, node: cst.CSTNode) -> Value:
        """Run a function of the project in this thread: it sees this code's default device,
        and what it leaves as the default device stays (the setting is per thread)."""
        device = self.env.get(DEFAULT_DEVICE, UNKNOWN)
        events, result, after = self.analyzer.call_in_thread(
            func, tuple(args.positional), args.rest, args.keywords, device)
        self.events.extend(splice(events, self.ctx, self.site(node), self.module.path in self.analyzer.linted_paths))
        if after != device:
            self.assign(DEFAULT_DEVICE, after)
        return result

    def inline_child(self, child: Child, node: cst.CSTNode) -> None:
        """Run a callable in this process (a thread target or thread-pool task)."""
        events, _ = self.analyzer.call(child.func, child.args, child.rest, {})
        self.events.extend(splice(events, self.ctx, self.site(node), self.module.path in self.analyzer.linted_paths))

    def instantiate(self, cls: ClassRef, args: Args, node: cst.Call) -> Value:
        instance = Instance(cls)
        init = self.analyzer.classes.member(instance, "__init__")
        for atom in ordered(init):
            if isinstance(atom, FuncRef):
                self.inline(atom, args, node)
        if is_dataclass(cls.node):  # the generated __init__ ends by calling __post_init__
            self.call_method_of(instance, "__post_init__", node)
        return one(instance)

    def call_method_of(self, instance: Instance, name: str, node: cst.CSTNode) -> None:
        """Run a special method Python calls on its own (``__post_init__``, ``__enter__``)."""
        for atom in ordered(self.analyzer.classes.member(instance, name)):
            if isinstance(atom, FuncRef):
                self.inline(atom, Args(), node)

    # -- qualified names -----------------------------------------------------------------
    def call_qualname(self, qualname: str, args: Args, node: cst.Call) -> Value:
        kind = processes.kind_of(qualname)
        if kind is not None:
            return process_calls.api(self, kind, args, node)
        if qualname in ENV_CALLS:
            self.env_write(qualname, args, node)
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
            return one(CudaDevice()) if is_cuda(args.get(0, "type") or UNKNOWN) else UNKNOWN
        if qualname in DEFAULT_DEVICE_FACTORIES and "device" not in args.keywords and not args.rest and \
                is_cuda(self.env.get(DEFAULT_DEVICE, UNKNOWN)):
            # No device given: the default device set earlier (in this thread) is used.
            framework = DEFAULT_DEVICE_FACTORIES[qualname]
            self.emit(Init(framework, InitLevel.RUNTIME, f"{qualname} on the default device (CUDA)", self.site(node)))
            return one(GpuObj(framework, self.site(node)))
        api = api_table().lookup(qualname)
        if api is not None and (api.effect not in INIT_EFFECTS | {TF_CONFIG} or not self.applies(api, args, node)):
            if api.returns:
                return one(ModRef(api.returns))
            # An inert constructor (``cupy.cuda.Device(0)``) keeps its name, so that a
            # method called on the object (``.use()``) is looked up as ``Device.use``.
            return one(ModRef(qualname)) if _is_class_name(qualname) else UNKNOWN
        if api is None:
            framework = framework_of_module(qualname) if "." in qualname else None
            if framework is not None and framework in CUDA_PLACEMENT and is_cuda(args.get(-1, "device") or UNKNOWN):
                self.emit(Init(framework, InitLevel.RUNTIME, f'{qualname}(device="cuda")', self.site(node)))
                return one(GpuObj(framework, self.site(node)))
            return UNKNOWN
        framework = self.backend_of(qualname, api.framework)
        if api.effect == TF_CONFIG:
            self.emit(TfConfig(qualname, self.site(node), self.swallowing > 0, framework))
            return UNKNOWN
        self.emit(Init(framework, api.level or InitLevel.RUNTIME, qualname, self.site(node), INIT_UNLESS.get(qualname)))
        if api.effect == GPU_OBJECT:
            return one(GpuObj(framework, self.site(node)))
        # A constructor that initialized (``cupy.cuda.Device()``) keeps its name too.
        return one(ModRef(qualname)) if _is_class_name(qualname) else UNKNOWN

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
            device = args.get(0, "device")
            for keyword in ("device", "device_type"):
                device = args.keywords.get(keyword, device)
            return is_cuda(device) if device is not None else api.cuda_default
        return True

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
            self.emit(EnvWrite(name, values[name], self.site(node), environ=qualname != "os.putenv"))
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
        return UNKNOWN

    def surely_present(self, owner: Value, attr: str) -> bool:
        """Is ``owner.attr`` a name that every supported target has (processes.ADDED_IN)?"""
        return bool(owner) and all(isinstance(a, ModRef) and present_on_every_target(f"{a.qualname}.{attr}")
                                   for a in owner)


def present_on_every_target(qualname: str) -> bool:
    """Does ``qualname`` exist on the oldest Python gpudoctor checks for, and so on all?"""
    return processes.present_on(qualname, SUPPORTED_MINORS.start)


def _is_class_name(qualname: str) -> bool:
    return qualname.rsplit(".", 1)[-1][:1].isupper()


def literal_int(value: Value | None) -> int | None:
    """Return the integer a value surely is, if it is one."""
    ints = [a.value for a in (value or UNKNOWN) if isinstance(a, Int)]
    return ints[0] if len(ints) == 1 and len(value or ()) == 1 else None


def literal_str(value: Value | None) -> str | None:
    found = [a.value for a in (value or UNKNOWN) if isinstance(a, Str)]
    return found[0] if len(found) == 1 and len(value or ()) == 1 else None


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
