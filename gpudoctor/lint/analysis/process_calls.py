"""How process, pool, queue and thread APIs turn into events and abstract values.

Each function models one kind of call made in a frame (frame.py): it emits the call's
events there and returns the value the call makes. A thread's target runs in this
process, through the frame's interpreter.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import libcst as cst

from gpudoctor.knowledge import processes as P
from gpudoctor.knowledge.registry import DATALOADER_FRAMEWORK, INIT_UNLESS, initializing_import
from gpudoctor.knowledge.table import InitLevel
from gpudoctor.lint.analysis.arguments import Args
from gpudoctor.lint.analysis.events import (
    Child,
    Context,
    DataLoaderStart,
    DefaultDevice,
    EnvWrite,
    Event,
    Init,
    Join,
    Send,
    SetMethod,
    SetPreload,
    Start,
    Task,
    ThreadStart,
    splice,
)
from gpudoctor.lint.analysis.frame import Frame
from gpudoctor.lint.analysis.values import (
    DEFAULT_DEVICE,
    UNKNOWN,
    Atom,
    ClassRef,
    Compiled,
    Compiler,
    Container,
    CudaDevice,
    Deferred,
    ForkPid,
    FuncRef,
    Instance,
    Int,
    JoblibConfig,
    LoaderObj,
    ModRef,
    MpContext,
    PoolObj,
    ProcessObj,
    QueueObj,
    Str,
    ThreadObj,
    Value,
    container,
    elements,
    is_cuda,
    one,
    ordered,
    positions,
    strings,
    truth,
)

if TYPE_CHECKING:
    from gpudoctor.lint.frontend.parsed import LazySite


def _callable(frame: Frame, args: Args, node: cst.Call, index: int, *keywords: str) -> Value | None:
    """The callable a child process runs (a Process's target, a pool's task function):
    the argument's value; where it is no project function and is written ``module.name``,
    the function ``name`` of that project module, walked even where the gate would not
    follow it (a worker function in a helper module that names no GPU framework itself
    but calls methods of the model it is given)."""
    value = next((v for k in keywords if (v := args.get(index, k)) is not None), None)
    if value is not None and any(isinstance(a, (FuncRef, ClassRef)) for a in value):
        return value
    expr = next((a.value for a in node.args if a.keyword is not None and a.keyword.value in keywords), None)
    if expr is None:
        plain = [a for a in node.args if a.keyword is None]
        expr = plain[index].value if index < len(plain) and not plain[index].star else None
    if not (isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name)):
        return value
    found: set[Atom] = set()
    for atom in ordered(frame.lookup(expr.value.value)):
        found.update(frame.interpreter.needed_member(atom, expr.attr.value))
    return frozenset(found) | (value or UNKNOWN) if found else value


def _funcs(value: Value | None, frame: Frame | None = None) -> tuple[FuncRef, ...]:
    """The project callables in ``value``. With ``frame``, a class counts too: calling it
    (as a process target or a pool task) runs its ``__init__`` in the worker."""
    out: list[FuncRef] = []
    for atom in ordered(value or UNKNOWN):
        if isinstance(atom, FuncRef) and not atom.cuda_kernel:
            out.append(atom)
        elif isinstance(atom, ClassRef) and frame is not None:
            out.extend(a for a in ordered(frame.interpreter.classes.member(Instance(atom), "__init__"))
                       if isinstance(a, FuncRef))
    return tuple(out)


def carried(frame: Frame, callables: Value | None) -> Value:
    """What is sent along with the callables in ``callables`` when they are pickled for a
    worker: the values bound to them (``functools.partial`` arguments, a bound method's
    object), an object being sent as what its attributes hold. (A class sends nothing: its
    instance is made in the worker.)"""
    values = [v for f in ordered(callables or UNKNOWN) if isinstance(f, FuncRef) for v in f.bound]
    return _with_attributes(frame, container(*values)) if values else UNKNOWN


def _with_attributes(frame: Frame, value: Value, depth: int = 3, nested: int = 3) -> Value:
    """``value`` with, beside each project object in it, what its attributes hold (pickling
    an object sends them), objects ``depth`` deep and containers ``nested`` deep."""
    extra: list[Value] = []
    for atom in ordered(value):
        if isinstance(atom, Instance) and depth > 0:
            held = frame.interpreter.classes.attributes_of(atom)
            extra.extend(_with_attributes(frame, v, depth - 1, nested) for v in held)
        elif isinstance(atom, Container) and nested > 0:
            extra.extend(_with_attributes(frame, one(item), depth, nested - 1) for item in atom.items
                         if isinstance(item, (Instance, Container)))
    return value | container(*extra) if extra else value


def _method(value: Value | None) -> str | None:
    """The start method a ``get_context``/``mp_context``/string argument chooses."""
    for atom in ordered(value or UNKNOWN):
        if isinstance(atom, MpContext):
            return atom.method
    names = strings(value or UNKNOWN)
    return sorted(names)[0] if names else None


def _int(value: Value | None) -> int | None:
    ints = [a.value for a in (value or UNKNOWN) if isinstance(a, Int)]
    return ints[0] if len(ints) == 1 else None


def api(frame: Frame, kind: P.ProcessKind, args: Args, node: cst.Call, method: str | None = None,
        qualname: str = "") -> Value:
    """Model a call to a process/thread API of kind ``kind``."""
    site = frame.site(node)
    if kind == P.POOL:
        return _pool(frame, P.POOL, method, args, node, workers=args.get(0, "processes"),
                     initializer=args.get(1, "initializer"), initargs=args.get(2, "initargs"))
    if kind == P.EXECUTOR:
        return _pool(frame, P.EXECUTOR, _executor_method(args, node), args, node,
                     workers=args.get(0, "max_workers"), initializer=args.get(2, "initializer"),
                     initargs=args.get(3, "initargs"))
    if kind == P.PROCESS:
        call_args = args.get(3, "args") or UNKNOWN
        kwargs = args.get(4, "kwargs") or UNKNOWN
        per_position, rest = positions(call_args)
        target = _callable(frame, args, node, 1, "target")
        targets = _funcs(target, frame)
        proc = ProcessObj(method, site, targets, per_position or (rest,), args.is_true("daemon"))
        sent = _with_attributes(frame, call_args | kwargs) | carried(frame, target)
        if sent:
            frame.emit(Send(site, "process-args", sent, method))
        return one(proc)
    if kind == P.CONTEXT:
        return one(MpContext(_method(args.get(0, "method")) or method))
    if kind == P.SET_METHOD:
        chosen = _method(args.get(0, "method"))
        if chosen:
            # (``method``: the marker of a namespace with a default context of its own)
            namespace = method[len(P.OWN_DEFAULT):] if method else ""
            frame.emit(SetMethod(chosen, site, args.is_true("force"), namespace))
        return UNKNOWN
    if kind == P.MANAGER:  # its server process starts now, and runs none of the program's code
        frame.emit(Start(P.MANAGER, method, site))
        return UNKNOWN
    if kind == P.QUEUE:
        return one(QueueObj(method))
    if kind == P.PIPE:
        end = one(QueueObj(method))
        return container(end, end, ordered=True)
    if kind == P.OS_FORK:
        frame.emit(Start(P.OS_FORK, "fork", site))
        return one(ForkPid(site))
    if kind == P.SPAWN_LAUNCHER:
        return _launcher(frame, args, node)
    if kind == P.THREAD:
        if qualname in P.OWN_THREADS:  # a library object whose start() runs a thread of its own code
            return one(ThreadObj(site, api=qualname))
        return one(ThreadObj(site, _funcs(args.get(1, "target"), frame), args.get(3, "args") or UNKNOWN))
    if kind == P.THREAD_POOL:
        frame.emit(ThreadStart(site, "thread pool", site))
        return one(PoolObj(P.THREAD_POOL, None, site, (), UNKNOWN, None))
    if kind == P.DATALOADER:
        return _dataloader(frame, args, node)
    if kind == P.DEFAULT_DEVICE:
        device = args.get(0, "device") or args.get(0, "t") or UNKNOWN
        if any(isinstance(a, ModRef) and a.qualname.startswith(P.CUDA_TENSOR_TYPES) or
               isinstance(a, Str) and a.value.startswith(P.CUDA_TENSOR_TYPES) for a in device):
            device = one(CudaDevice())  # set_default_tensor_type(torch.cuda.FloatTensor)
        frame.emit(DefaultDevice(is_cuda(device), site))
        # Factories called after it, here and in what this code calls, allocate there
        # (an unknown device is none that can be named: nothing is claimed for it).
        frame.assign(DEFAULT_DEVICE, device if is_cuda(device) else UNKNOWN)
        return UNKNOWN
    if kind == P.COMPILER:
        return _compiler(frame, args, node)
    if kind == P.PROCESS_GROUP:
        frame.emit(ThreadStart(site, P.THREAD_STARTS[P.PROCESS_GROUP]))
        return UNKNOWN
    if kind == P.SET_PRELOAD:
        names = _module_names(args.get(0, "module_names"))
        preloaded = _preload_events(frame, names, node) if names else []
        frame.emit(SetPreload(names, site, tuple(e for _, e in preloaded), tuple(m for m, _ in preloaded)))
    if kind == P.JOBLIB:
        return _parallel(frame, args, node)
    if kind == P.DELAYED:
        funcs = _funcs(args.get(0, "function"))
        return one(Deferred(funcs)) if funcs else UNKNOWN
    if kind in P.JOBLIB_CONFIG_JOBS:
        jobs = P.JOBLIB_CONFIG_JOBS[kind] if _is_none(args, node, 1, "n_jobs") else _jobs(args.get(1, "n_jobs"))
        return one(JoblibConfig(_joblib_backend(args.get(0, "backend")), jobs))
    return UNKNOWN


def _compiler(frame: Frame, args: Args, node: cst.Call) -> Value:
    """``compile(f, ...)``: ``f`` and a marker that calling it compiles; with no function, a
    decorator that does that. Only backends that start threads get the marker."""
    backend, disable = args.get(-1, "backend"), args.get(-1, "disable")
    named = strings(backend or UNKNOWN)
    surely = bool(named) and len(named) == len(backend or UNKNOWN) and named <= P.COMPILER_THREAD_BACKENDS
    if (backend is not None and not surely) or (disable is not None and truth(disable) is not False) or args.rest:
        return args.get(0, "model") or UNKNOWN
    site = frame.site(node)
    if not args.positional and args.get(-1, "model") is None:
        return one(Compiler(site))
    wrapped = args.get(0, "model") or UNKNOWN
    return wrapped | one(Compiled(site))


def call_compiled(frame: Frame, atom: Compiled, node: cst.CSTNode) -> None:
    """Calling a compiled function: its first call starts the compiler's threads."""
    frame.emit(ThreadStart(frame.site(node), P.THREAD_STARTS[P.COMPILER], atom.site))


def _is_none(args: Args, node: cst.Call, index: int, name: str) -> bool:
    """Is the argument absent, or the literal ``None``?"""
    if args.get(index, name) is None:
        return True
    if name in args.keyword_nodes:
        expr: cst.BaseExpression | None = args.keyword_nodes[name]
    else:
        positional = [a.value for a in node.args if a.keyword is None and not a.star]
        expr = positional[index] if index < len(positional) else None
    return isinstance(expr, cst.Name) and expr.value == "None"


def _executor_method(args: Args, node: cst.Call) -> str | None:
    """The start method of a ProcessPoolExecutor's workers (None: the default context).

    With ``max_tasks_per_child`` and no ``mp_context``, CPython takes the spawn context
    (3.11+); with a context gpudoctor cannot read, the workers cannot be forked either (a
    fork context with ``max_tasks_per_child`` raises), so they start fresh too.
    """
    chosen = _method(args.get(1, "mp_context"))
    if chosen is not None:
        return chosen
    keyword = P.SPAWNING_EXECUTOR_KEYWORD
    if keyword in args.keywords and not _is_none(args, node, -1, keyword):
        return "spawn"
    return None


def _module_names(value: Value | None) -> tuple[str, ...] | None:
    """The module names of a list literal (None where any item is not a known string)."""
    items = [a for a in value or UNKNOWN if isinstance(a, Container)]
    if len(items) != 1 or len(value or UNKNOWN) != 1:
        return None
    listed = items[0]
    per_item = listed.ordered if listed.ordered or not listed.items else ()
    if not per_item and listed.items:
        return None  # a comprehension or a list grown elsewhere: its order and members unknown
    names = []
    for item in per_item:
        found = strings(item)
        if len(found) != 1 or len(item) != 1:
            return None
        names.append(next(iter(found)))
    return tuple(names)


def _parallel(frame: Frame, args: Args, node: cst.Call) -> Value:
    """``joblib.Parallel(...)``: a pool when its backend is the multiprocessing one and it
    runs more than one job; it starts when the object is called (or its ``with`` entered)."""
    config = frame.joblib_config[-1] if frame.joblib_config else None
    if not _is_none(args, node, 1, "backend"):
        backend = _joblib_backend(args.get(1, "backend"))
        jobs = None
    elif config is not None and "prefer" not in args.keywords and "require" not in args.keywords:
        backend, jobs = config.backend, config.jobs
    else:
        return UNKNOWN  # the default backend, loky, starts fresh interpreters
    if backend is None:
        return UNKNOWN  # loky, threads, or a backend gpudoctor cannot read
    if not _is_none(args, node, 0, "n_jobs"):
        jobs = _jobs(args.get(0, "n_jobs"))
    if jobs is None or jobs == 1:
        return UNKNOWN  # one job: joblib runs the tasks in this process
    return one(PoolObj(P.JOBLIB, backend[0], frame.site(node), (), UNKNOWN, jobs if jobs > 1 else None))


def _jobs(value: Value | None) -> int:
    """``n_jobs`` given: its value, or 0 when it is not a known integer (taken as several)."""
    found = _int(value)
    return found if found is not None and len(value or UNKNOWN) == 1 else 0


def _joblib_backend(value: Value | None) -> tuple[str | None] | None:
    """The start method (None: the default context) when a joblib backend is a
    multiprocessing Pool: the multiprocessing backend, or a context object given as the
    backend; None for any other backend."""
    value = value or UNKNOWN
    contexts = [a for a in value if isinstance(a, MpContext)]
    if contexts and len(contexts) == len(value) and len({c.method for c in contexts}) == 1:
        return (contexts[0].method,)
    if len(value) == 1 and strings(value) == {P.JOBLIB_POOL_BACKEND}:
        return (None,)
    return None


def run_parallel(frame: Frame, pool: PoolObj, args: Args, node: cst.Call) -> Value:
    """Calling a joblib ``Parallel`` object with its ``delayed`` calls: the pool forks here
    (or, entered by a ``with``, forked there and receives these tasks)."""
    site = frame.site(node)
    children: list[Child] = []
    sent: list[Value] = []
    for atom in ordered(elements(args.get(0, "iterable") or UNKNOWN)):
        if isinstance(atom, Deferred) and atom.args is not None:
            children.extend(Child(f, atom.args, atom.rest, "task") for f in atom.funcs)
            sent.extend((*atom.args, atom.rest))
    if sent:
        frame.emit(Send(site, P.JOBLIB, container(*sent), pool.method))
    if pool.entered:
        frame.emit(Task(pool, site, tuple(children)))
    else:
        frame.emit(Start(P.JOBLIB, pool.method, site, tuple(children), daemonic=True, workers=pool.workers))
    return UNKNOWN


def enter_parallel(frame: Frame, pool: PoolObj, node: cst.CSTNode) -> Value:
    """``with Parallel(...) as p:`` builds the pool on entry; calls of ``p`` are its tasks."""
    entered = replace(pool, entered=True)
    frame.emit(Start(P.JOBLIB, pool.method, pool.site, (), daemonic=True, pool=entered, workers=pool.workers))
    return one(entered)


def call_deferred(atom: Deferred, args: Args) -> Value:
    """``delayed(f)(*args)``: the call, recorded."""
    if atom.args is not None:
        return UNKNOWN
    rest = frozenset().union(args.rest, *args.keywords.values())
    return one(Deferred(atom.funcs, tuple(args.positional), rest))


def _pool(frame: Frame, kind: P.ProcessKind, method: str | None, args: Args, node: cst.Call, *,
          workers: Value | None, initializer: Value | None, initargs: Value | None) -> Value:
    site = frame.site(node)
    inits = _funcs(initializer, frame)
    per_position, rest = positions(initargs or UNKNOWN)
    pool = PoolObj(kind, method, site, inits, initargs or UNKNOWN, _int(workers))
    children = tuple(Child(f, per_position, rest, "initializer") for f in inits)
    sent = _with_attributes(frame, initargs or UNKNOWN) | carried(frame, initializer)
    if sent:
        frame.emit(Send(site, "initargs", sent, method))
    frame.emit(Start(kind, method, site, children, daemonic=kind == P.POOL, pool=pool,
                     workers=_int(workers), sent=sent))
    return one(pool)


def _launcher(frame: Frame, args: Args, node: cst.Call) -> Value:
    site = frame.site(node)
    call_args = args.get(1, "args") or UNKNOWN
    per_position, rest = positions(call_args)
    method = _method(args.get(5, "start_method")) or "spawn"
    funcs = _funcs(args.get(0, "fn"), frame)
    children = tuple(Child(f, (one(Int(0)), *per_position), rest, "target") for f in funcs)
    sent = _with_attributes(frame, call_args) | carried(frame, args.get(0, "fn"))
    if sent:
        frame.emit(Send(site, "process-args", sent, method))
    frame.emit(Start(P.SPAWN_LAUNCHER, method, site, children, workers=_int(args.get(2, "nprocs")), sent=sent))
    return UNKNOWN


def _dataloader(frame: Frame, args: Args, node: cst.Call) -> Value:
    children: list[Child] = []
    for atom in ordered(args.get(0, "dataset") or UNKNOWN):
        if isinstance(atom, Instance):
            for name in P.DATASET_METHODS:
                for func in _funcs(frame.interpreter.classes.member(atom, name)):
                    children.append(Child(func, (), UNKNOWN, "dataset"))
    for role, index in (("collate_fn", 6), ("worker_init_fn", 10)):
        for func in _funcs(args.get(index, role)):
            children.append(Child(func, (), UNKNOWN, role))
    method = _method(args.get(11, "multiprocessing_context"))
    given = args.get(5, "num_workers")
    # 0: no workers (not given, or 0); None: a number gpudoctor cannot read (a setting).
    workers = 0 if given is None else _int(given)
    site = frame.site(node)
    frame.emit(DataLoaderStart(site, method, workers, tuple(children)))
    return one(LoaderObj(site, truth(args.get(7, "pin_memory") or UNKNOWN) is True, workers,
                         truth(args.get(-1, "persistent_workers") or UNKNOWN) is True))


def loaders(value: Value) -> list[LoaderObj]:
    return [atom for atom in value if isinstance(atom, LoaderObj)]


def iterate_loaders(frame: Frame, value: Value, node: cst.CSTNode, *, lasting: bool) -> list[LoaderObj]:
    """Iteration of the DataLoaders in ``value`` starts at ``node``; return those whose
    pin-memory thread started here and lives only as long as this iteration (the caller
    joins it where the iteration ends). ``lasting``: the iteration outlives this expression
    (a ``for`` loop's body runs while it goes on).

    torch/utils/data/dataloader.py (2.11): creating the iterator calls
    ``torch.accelerator.is_available()`` when ``pin_memory=True`` (cuInit, as
    ``torch.cuda.is_available()``; 2.5 called that directly); with workers it then calls
    ``torch.accelerator.current_device_index()`` (CUDA's lazy init) and starts
    ``pin_memory_thread`` in this process, after forking the workers. A loader with
    ``persistent_workers=True`` keeps that iterator (and thread) for its lifetime; any other
    iterator shuts its thread down when exhausted or dropped. With ``num_workers=0`` pinning
    happens in this thread.
    """
    transient: list[LoaderObj] = []
    site = frame.site(node)
    for loader in loaders(value):
        if not loader.pin_memory:
            continue
        what = f"iterating a DataLoader with pin_memory=True: {P.DATALOADER_PIN_CHECK}()"
        frame.emit(Init(DATALOADER_FRAMEWORK, InitLevel.DRIVER, what, site, INIT_UNLESS.get(P.DATALOADER_PIN_CHECK)))
        if not loader.workers:
            continue
        what = f"iterating a DataLoader with pin_memory=True and workers: {P.DATALOADER_PIN_DEVICE}()"
        frame.emit(Init(DATALOADER_FRAMEWORK, InitLevel.RUNTIME, what, site))
        if loader.persistent or lasting:
            frame.emit(ThreadStart(site, P.THREAD_STARTS[P.DATALOADER], loader.site))
            if not loader.persistent:
                transient.append(loader)
    return transient


def _task_children(frame: Frame, pool: PoolObj, name: str, args: Args,
                   node: cst.Call | None = None) -> tuple[tuple[Child, ...], Value]:
    func = _callable(frame, args, node, 0, "func", "fn") if node is not None else \
        args.get(0, "func") or args.get(0, "fn")
    funcs = _funcs(func, frame)
    with_func = carried(frame, func)
    if pool.kind == P.EXECUTOR and name == "submit":
        sent = container(*args.positional[1:], *args.keywords.values())
        per = tuple(args.positional[1:])
        return tuple(Child(f, per, args.rest, "task") for f in funcs), _with_attributes(frame, sent) | with_func
    if name in P.APPLY_METHODS:
        call_args = args.get(1, "args") or UNKNOWN
        per_position, rest = positions(call_args)
        return (tuple(Child(f, per_position, rest, "task") for f in funcs),
                _with_attributes(frame, call_args) | with_func)
    iterables = args.positional[1:] or [args.get(1, "iterable") or UNKNOWN]
    if name in P.STAR_METHODS:
        items = elements(iterables[0])
        ordered = [a for a in items if isinstance(a, Container) and a.ordered]
        per = ordered[0].ordered if len(ordered) == 1 else ()
        rest = elements(items) if not per else UNKNOWN
        return (tuple(Child(f, per, rest, "task") for f in funcs),
                _with_attributes(frame, iterables[0]) | with_func)
    per = tuple(elements(v) for v in iterables)
    return (tuple(Child(f, per, UNKNOWN, "task") for f in funcs),
            _with_attributes(frame, container(*iterables)) | with_func)


def method(frame: Frame, atom: Atom, name: str, args: Args, node: cst.Call) -> Value:
    """Model a method call on a pool, process, queue, thread or context object."""
    site = frame.site(node)
    if isinstance(atom, MpContext):
        kind = P.CONTEXT_METHODS.get(name)
        if kind is None:
            if name == "get_context":
                # (without a method, a context's ``get_context()`` is the context itself)
                return one(MpContext(_method(args.get(0, "method")) or atom.method))
            return UNKNOWN
        return api(frame, kind, args, node, method=atom.method)
    if isinstance(atom, PoolObj):
        if atom.kind == P.THREAD_POOL and name in ("shutdown", "join"):
            frame.emit(Join(atom.site, site, threads=True))
            return UNKNOWN
        tasks = P.EXECUTOR_TASK_METHODS if atom.kind == P.EXECUTOR else P.POOL_TASK_METHODS
        if atom.kind == P.THREAD_POOL and name in P.POOL_TASK_METHODS | {"submit"}:
            children, _ = _task_children(frame, atom, name, args)
            for child in children:
                _run_here(frame, child, node, atom.site)
            return UNKNOWN
        if name in tasks:
            children, sent = _task_children(frame, atom, name, args, node)
            if sent:
                frame.emit(Send(site, "task", sent, atom.method))
            frame.emit(Task(atom, site, children, sent))
        return UNKNOWN
    if isinstance(atom, ProcessObj) and name == "start":
        children = tuple(Child(f, atom.args, UNKNOWN, "target") for f in atom.targets)
        frame.emit(Start(P.PROCESS, atom.method, site, children, daemonic=atom.daemon, started=atom.site,
                         sent=container(*atom.args)))
        return UNKNOWN
    if isinstance(atom, ProcessObj) and name == "join":
        frame.emit(Join(atom.site, site, threads=False))
        return UNKNOWN
    if isinstance(atom, ThreadObj) and (name == "join" or (name == "stop" and atom.api in P.OWN_THREADS)):
        frame.emit(Join(atom.site, site, threads=True))
        return UNKNOWN

    if isinstance(atom, QueueObj) and name in ("put", "put_nowait", "send"):
        value = args.get(0, "obj") or UNKNOWN
        frame.emit(Send(site, "pipe" if name == "send" else "queue", value, atom.method))
        return UNKNOWN
    if isinstance(atom, ThreadObj) and name == "start":
        frame.emit(ThreadStart(site, atom.api, atom.site))
        for func in atom.targets:
            per_position, rest = positions(atom.args)
            _run_here(frame, Child(func, per_position, rest, "thread"), node, site)
    return UNKNOWN


def start_instance(frame: Frame, atom: Instance, node: cst.Call) -> Value | None:
    """``.start()`` on an instance of a project class: a Process or Thread subclass (None:
    the class is neither)."""
    site = frame.site(node)
    run = _funcs(frame.interpreter.classes.member(atom, "run"))
    if frame.interpreter.classes.subclass_of(atom.cls, P.PROCESS_BASES):
        # The child gets the Process object: pickled under spawn, with what its attributes hold.
        held = _with_attributes(frame, one(atom)) - {atom}
        if held:
            frame.emit(Send(site, "process-args", held, None))
        bases = frame.interpreter.classes.framework_bases(atom.cls)
        method = next((m for m in map(P.own_default, bases) if m), None)
        frame.emit(Start(P.PROCESS, method, site, tuple(Child(f, (), UNKNOWN, "process") for f in run)))
    elif frame.interpreter.classes.subclass_of(atom.cls, P.THREAD_BASES):
        bases = frame.interpreter.classes.framework_bases(atom.cls)
        frame.emit(ThreadStart(site, next((b for b in bases if b in P.THREAD_BASES), "threading.Thread"),
                               frame.interpreter.class_site(atom.cls)))
        for func in run:
            _run_here(frame, Child(func, (), UNKNOWN, "thread"), node, site)
    else:
        return None
    return UNKNOWN



def library_pool(frame: Frame, pool: P.PoolMethod, args: Args, node: cst.Call) -> None:
    """A library's method that runs the function it is given in a pool of processes of its
    own (``dataset.map(tokenize, num_proc=8)``): a daemonic pool of that library's start
    method, whose workers run the function. No processes when the keyword asks for none
    (None, 0 or 1)."""
    workers = args.get(-1, pool.workers) or UNKNOWN
    if _is_none(args, node, -1, pool.workers) or _int(workers) in (0, 1):
        return
    function = args.get(*pool.function)
    funcs = _funcs(function, frame)
    if not funcs:
        return
    site = frame.site(node)
    # The function goes to each worker with what it is bound to (a bound method's object).
    sent = carried(frame, function)
    if sent:
        frame.emit(Send(site, "task", sent, pool.method))
    frame.emit(Start(P.LIBRARY_POOL, pool.method, site, tuple(Child(f, (), UNKNOWN, "task") for f in funcs),
                     daemonic=True, workers=_int(workers), sent=frozenset(sent)))


def join_instance(frame: Frame, atom: Instance, node: cst.Call) -> Value | None:
    """``.join()`` on an instance of a project class that subclasses Thread and keeps its
    ``join``: the threads of that class are joined (instances are known by their class
    only, so this joins each of them). None: the class is no such subclass."""
    classes = frame.interpreter.classes
    if not classes.subclass_of(atom.cls, P.THREAD_BASES) or _funcs(classes.member(atom, "join")):
        return None
    started = frame.interpreter.class_site(atom.cls)
    if started is None:
        return None
    frame.emit(Join(started, frame.site(node), threads=True))
    return UNKNOWN

def _run_here(frame: Frame, child: Child, node: cst.CSTNode, thread: LazySite) -> None:
    """Run a callable in this process, in the thread started at ``thread`` (a thread's
    target, a thread pool's task): what it does is marked as that thread's own, so that a
    process it forks is not forked "while that thread runs" (it is that thread)."""
    events, _ = frame.interpreter.call(child.func, child.args, child.rest, {})
    marked = [Event(e.effect, replace(e.ctx, threads=e.ctx.threads | {thread})) for e in events]
    frame.take(marked, node)


def _preload_events(frame: Frame, names: tuple[str, ...], node: cst.Call) -> list[tuple[str, Event]]:
    """What the forkserver's import of these modules does, besides the main module's:
    the GPU inits and environment writes of each (an import that initializes CUDA by
    itself, or a project module's top level), each with the module it comes from."""
    site = frame.site(node)
    linted = frame.module.path in frame.interpreter.linted_paths
    out: list[tuple[str, Event]] = []
    for name in names:
        if name == P.MAIN_MODULE:
            continue
        api = initializing_import(name)
        if api is not None:
            out.append((name, Event(Init(api.framework, InitLevel.RUNTIME, f"import {name}", site))))
        effects = frame.interpreter.import_effects(frame.module.path, name)
        out.extend((name, e) for e in splice(effects, Context(), site, linted)
                   if isinstance(e.effect, (Init, EnvWrite)))
    return out

