"""Process and thread starts, and how each chooses its start method.

Sources: https://docs.python.org/3/library/multiprocessing.html#contexts-and-start-methods
(default fork on Linux up to 3.13, forkserver from 3.14, spawn on macOS and Windows);
https://docs.python.org/3/library/concurrent.futures.html#processpoolexecutor
(workers start on demand; not daemonic since 3.9);
https://pytorch.org/docs/stable/multiprocessing.html (torch.multiprocessing wraps
multiprocessing; ``spawn``/``start_processes`` default to spawn);
https://joblib.readthedocs.io/en/stable/parallel.html (loky, the default backend,
does not fork the calling interpreter).

CPython facts read in its source (Lib/concurrent/futures/process.py,
Lib/multiprocessing/forkserver.py and context.py of 3.14; 3.11 for the executor):

- ``ProcessPoolExecutor(max_tasks_per_child=N)`` without ``mp_context`` takes
  ``get_context("spawn")``, not the default context (3.11+; a fork context with
  ``max_tasks_per_child`` raises ValueError, so its workers never fork).
- The forkserver is a fresh interpreter that imports the modules of its preload list,
  then forks every worker from itself. The list is ``["__main__"]`` unless
  ``set_forkserver_preload`` replaced it. Up to 3.13.7 and in 3.14.0 the path of the
  main module never reached the server (gh-126631), so ``__main__`` was not preloaded
  and each worker ran the main module's top level itself, like a spawned one; 3.13.8 and
  3.14.1 fixed that (PR 135295, backport PR 138609): the server runs the main script's
  top level (as ``__mp_main__``: not its ``if __name__ == "__main__":`` block) once, and
  what it initialized there is inherited by every worker. It runs a script given by path
  (``python main.py``); a module run with ``-m`` is not preloaded.

joblib, read in its source (joblib/parallel.py, _parallel_backends.py and pool.py at 1.5.3):

- ``Parallel(backend="multiprocessing")`` builds a ``multiprocessing.pool.Pool`` subclass
  with ``multiprocessing.get_context()`` (the default start method, or what
  ``set_start_method`` chose), so it forks where the default is fork; a context object
  as ``backend`` chooses the method. With ``n_jobs`` unset (None) or 1 it runs the tasks
  in the calling process. The pool is built when the ``Parallel`` object is called, or
  on entering its ``with`` block; ``delayed(f)(*args)`` only records the call.
  ``parallel_backend(backend, n_jobs=-1)`` and ``parallel_config(backend, n_jobs=None)``
  set the backend of the ``Parallel`` objects built inside their ``with`` block. In a
  daemonic worker the multiprocessing backend falls back to one job (no child process).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpudoctor.knowledge.names import StrEnum


class ProcessKind(StrEnum):
    """What a process, thread or parallelism API is, to the analysis."""

    POOL = "pool"  # multiprocessing.Pool: daemonic workers, forked when the pool is built
    EXECUTOR = "executor"  # ProcessPoolExecutor: workers start on the first submit/map
    PROCESS = "process"  # a Process object; the child starts at .start()
    CONTEXT = "context"  # get_context(method)
    SET_METHOD = "set-method"
    QUEUE = "queue"
    PIPE = "pipe"
    OS_FORK = "os-fork"
    SPAWN_LAUNCHER = "spawn-launcher"  # torch.multiprocessing.spawn / start_processes
    THREAD = "thread"  # a Thread object; starts at .start()
    THREAD_POOL = "thread-pool"  # threads start with the pool
    DATALOADER = "dataloader"
    DEFAULT_DEVICE = "default-device"  # torch.set_default_device, set_default_tensor_type
    COMPILER = "compiler"  # torch.compile: calling what it returns starts threads (see below)
    SET_PRELOAD = "set-preload"  # set_forkserver_preload: what the forkserver imports
    JOBLIB = "joblib"  # joblib.Parallel: a Pool (multiprocessing backend) built when it is called
    DELAYED = "delayed"  # joblib.delayed: a call recorded, to run in a worker
    JOBLIB_CONFIG = "joblib-config"  # parallel_config: the backend of a with block
    JOBLIB_BACKEND = "joblib-backend"  # parallel_backend: the same, with n_jobs=-1 by default
    PROCESS_GROUP = "process-group"  # torch.distributed.init_process_group: starts threads (below)
    LIBRARY_POOL = "library-pool"  # a library's method that runs a function in a pool of its own (below)
    MANAGER = "manager"  # multiprocessing.Manager(): starts its server process at once


# The kinds by their short names, as the rest of the linter writes them (``P.POOL``).
POOL = ProcessKind.POOL
EXECUTOR = ProcessKind.EXECUTOR
PROCESS = ProcessKind.PROCESS
CONTEXT = ProcessKind.CONTEXT
SET_METHOD = ProcessKind.SET_METHOD
QUEUE = ProcessKind.QUEUE
PIPE = ProcessKind.PIPE
OS_FORK = ProcessKind.OS_FORK
SPAWN_LAUNCHER = ProcessKind.SPAWN_LAUNCHER
THREAD = ProcessKind.THREAD
THREAD_POOL = ProcessKind.THREAD_POOL
DATALOADER = ProcessKind.DATALOADER
DEFAULT_DEVICE = ProcessKind.DEFAULT_DEVICE
COMPILER = ProcessKind.COMPILER
SET_PRELOAD = ProcessKind.SET_PRELOAD
JOBLIB = ProcessKind.JOBLIB
DELAYED = ProcessKind.DELAYED
JOBLIB_CONFIG = ProcessKind.JOBLIB_CONFIG
JOBLIB_BACKEND = ProcessKind.JOBLIB_BACKEND
PROCESS_GROUP = ProcessKind.PROCESS_GROUP
LIBRARY_POOL = ProcessKind.LIBRARY_POOL
MANAGER = ProcessKind.MANAGER
SPAWN_LAUNCHER_NAME = "torch.multiprocessing.spawn"  # what a message calls it
# The function each process it starts runs first (a process tree's record names it).
SPAWN_LAUNCHER_TARGET = "torch.multiprocessing.spawn._wrap"
# Its argument that is the process's index (``_wrap(fn, i, args, error_file)``, torch 2.13
# torch/multiprocessing/spawn.py): what it passes to ``fn`` first, which programs take as the rank.
SPAWN_LAUNCHER_INDEX = 1
# Its arguments that are the function it runs and that function's own arguments: ``_wrap``
# calls ``fn(i, *args)``, so the function's parameter k (from 1) is ``args[k - 1]``.
SPAWN_LAUNCHER_FUNCTION = 0
SPAWN_LAUNCHER_ARGS = 2
# How many processes it starts: ``spawn(fn, args=(), nprocs=1, ...)``'s keyword, and its position.
SPAWN_LAUNCHER_COUNT = ("nprocs", 2)

APIS: dict[str, ProcessKind] = {
    "multiprocessing.Pool": POOL,
    "multiprocessing.pool.Pool": POOL,
    "multiprocessing.Process": PROCESS,
    "multiprocessing.process.BaseProcess": PROCESS,
    "multiprocessing.get_context": CONTEXT,
    "multiprocessing.set_start_method": SET_METHOD,
    "multiprocessing.Queue": QUEUE,
    "multiprocessing.SimpleQueue": QUEUE,
    "multiprocessing.JoinableQueue": QUEUE,
    "multiprocessing.queues.Queue": QUEUE,
    "multiprocessing.Pipe": PIPE,
    # Lib/multiprocessing/context.py: ``Manager()`` builds a SyncManager and calls its
    # ``start()``, which starts the server process with the context's start method (a
    # child that runs no code of the program: under spawn it imports the main module again).
    "multiprocessing.Manager": MANAGER,
    "concurrent.futures.ProcessPoolExecutor": EXECUTOR,
    "concurrent.futures.process.ProcessPoolExecutor": EXECUTOR,
    "os.fork": OS_FORK,
    "os.forkpty": OS_FORK,
    "torch.multiprocessing.spawn": SPAWN_LAUNCHER,
    "torch.multiprocessing.start_processes": SPAWN_LAUNCHER,
    "threading.Thread": THREAD,
    "threading.Timer": THREAD,
    # Lib/logging/handlers.py (3.10 to 3.14): ``QueueListener.start()`` starts a daemon
    # ``threading.Thread`` running ``_monitor``, which takes records off the queue and calls
    # the handlers (holding their locks) until ``stop()``.
    "logging.handlers.QueueListener": THREAD,
    "concurrent.futures.ThreadPoolExecutor": THREAD_POOL,
    "concurrent.futures.thread.ThreadPoolExecutor": THREAD_POOL,
    "multiprocessing.pool.ThreadPool": THREAD_POOL,
    "multiprocessing.dummy.Pool": THREAD_POOL,
    "torch.utils.data.DataLoader": DATALOADER,
    "torch.utils.data.dataloader.DataLoader": DATALOADER,
    "torch.set_default_device": DEFAULT_DEVICE,
    # The older spelling: a CUDA tensor type (``"torch.cuda.FloatTensor"``) as the default
    # makes factories allocate on the GPU too (torch/__init__.py, deprecated since 2.1).
    "torch.set_default_tensor_type": DEFAULT_DEVICE,
    "torch.compile": COMPILER,
    "torch.distributed.init_process_group": PROCESS_GROUP,
    # DeepSpeed's communication layer wraps torch.distributed.init_process_group
    # (deepspeed/comm/comm.py init_distributed -> TorchBackend), with its threads.
    "deepspeed.init_distributed": PROCESS_GROUP,
    "deepspeed.comm.init_distributed": PROCESS_GROUP,
    "deepspeed.comm.comm.init_distributed": PROCESS_GROUP,
    "multiprocessing.set_forkserver_preload": SET_PRELOAD,
    "multiprocessing.forkserver.set_forkserver_preload": SET_PRELOAD,
    "joblib.Parallel": JOBLIB,
    "joblib.parallel.Parallel": JOBLIB,
    "joblib.delayed": DELAYED,
    "joblib.parallel.delayed": DELAYED,
    "joblib.parallel_backend": JOBLIB_BACKEND,
    "joblib.parallel.parallel_backend": JOBLIB_BACKEND,
    "joblib.parallel_config": JOBLIB_CONFIG,
    "joblib.parallel.parallel_config": JOBLIB_CONFIG,
}

# torch.compile wraps lazily; the first call of what it returns compiles (torch 2.11). With
# the Inductor backend (the default; torch/__init__.py wraps it in
# ``_TorchCompileInductorWrapper``, which calls ``compile_fx``), the generated code compiles
# its kernels through ``AsyncCompile`` (torch/_inductor/async_compile.py): Triton kernels
# call ``use_process_pool()``, which builds ``SubprocPool`` — a compile-worker subprocess and
# a daemon reader thread "InductorSubproc" in the calling process, alive until exit
# (torch/_inductor/compile_worker/subproc_pool.py) — also when the code comes from the cache;
# C++ kernels go to a ThreadPoolExecutor (``AsyncCompile.pool``). Both only when compile
# threads > 1: the default on Linux and macOS with more than one CPU, not on Windows or with
# TORCHINDUCTOR_COMPILE_THREADS=1. (The backend found by name in Dynamo's registry,
# torch/_dynamo/backends/inductor.py, starts the same pool first, in ``maybe_warm_pool()``.)
COMPILER_THREAD_BACKENDS = frozenset({"inductor"})
# torch/utils/data/dataloader.py (2.11) ``_BaseDataLoaderIter.__init__`` and
# ``_MultiProcessingDataLoaderIter.__init__``: what an iterator of a DataLoader with
# ``pin_memory=True`` calls in this process (the first initializes the driver, the second
# the runtime; the second only with workers, before starting the pin-memory thread).
DATALOADER_PIN_CHECK = "torch.accelerator.is_available"
DATALOADER_PIN_DEVICE = "torch.accelerator.current_device_index"
# What each kind of hidden thread start is called in messages.
THREAD_STARTS = {
    COMPILER: "the first call of a torch.compile'd function starts Inductor's compile workers "
              "and their reader thread",
    DATALOADER: "iterating a DataLoader with pin_memory=True and workers starts its pin-memory thread",
    # The backends are built when the group is (torch/distributed/distributed_c10d.py
    # _new_process_group_helper); torch/csrc/distributed/c10d/ProcessGroupGloo.cpp starts its
    # worker threads (2 by default) in the constructor, ProcessGroupNCCL its watchdog and
    # heartbeat-monitor threads; the default backend on a CUDA machine is both
    # ("cuda:nccl,cpu:gloo"). They run until destroy_process_group().
    PROCESS_GROUP: "init_process_group starts the group's backend threads: Gloo's workers, NCCL's watchdog",
}

# Channels that pickle with a pickler of their own rather than multiprocessing's
# ForkingPickler, so the reducers frameworks register there (PyTorch's CUDA IPC sharing)
# do not apply: joblib's PicklingPool queues (joblib/pool.py ``CustomizablePickler`` starts
# from ``copyreg.dispatch_table``). Objects sent through them are copied as by ``pickle``.
OWN_PICKLER_CHANNELS = frozenset({JOBLIB})

# Drop-in replacements of the multiprocessing namespace.
ALIASES = (
    ("torch.multiprocessing.", "multiprocessing."),
    ("multiprocess.", "multiprocessing."),
)
# Of those, the namespaces that keep a default context of their own. torch.multiprocessing
# is the standard library's module (``from multiprocessing import *``), but ``multiprocess``
# (the dill-based copy, multiprocess 0.70 ``multiprocess/context.py``) has its own
# ``_default_context``: its ``set_start_method("spawn")`` leaves the standard library's
# default (fork on Linux up to 3.13) as it was, and the standard library's leaves its
# default alone. Its default is the same as the standard library's on each platform. A
# start or context of such a namespace with no method of its own carries ``OWN_DEFAULT``
# followed by the namespace as its method: "the default of that namespace's context".
OWN_CONTEXTS = ("multiprocess",)
OWN_DEFAULT = "@"


def own_default(qualname: str) -> str | None:
    """The method marker of an API of a namespace with a default context of its own
    (``"@multiprocess"`` for ``multiprocess.Pool``), None for the standard library's."""
    for namespace in OWN_CONTEXTS:
        if qualname.startswith(namespace + "."):
            return OWN_DEFAULT + namespace
    return None

@dataclass(frozen=True)
class PoolMethod:
    """A library method that runs a function it is given in a process pool of its own when
    a keyword asks for processes, called on an object of that library (which the analysis
    seldom knows: a dataset read from a hub, passed from module to module), so it is known
    by its method name and that keyword."""

    names: frozenset[str]
    workers: str  # the keyword giving the number of processes (absent, None, 0 or 1: none)
    function: tuple[int, str]  # the function's position and keyword
    method: str  # the start method of its pool: OWN_DEFAULT + the namespace whose default it takes
    shown: str  # what a message calls it
    choose: str  # how its user chooses the spawn start method


# Hugging Face datasets 2.x-4.x ``arrow_dataset.py`` (``Dataset.map``/``filter``, also
# reached through ``DatasetDict``'s): with ``num_proc`` > 1 it shards the dataset and runs
# the function over the shards in ``multiprocess.Pool(num_proc)`` (``from multiprocess
# import Pool``), built with multiprocess's default context: fork on Linux, unless the
# program called ``multiprocess.set_start_method``, as datasets' documentation tells GPU
# users to ("Multiprocessing" in process.mdx: ``set_start_method("spawn")`` before a map that
# uses CUDA). Pool workers are daemonic. The function is pickled with dill: a lambda or a
# local function is fine under spawn too.
LIBRARY_POOLS = (
    PoolMethod(frozenset({"map", "filter"}), "num_proc", (0, "function"), OWN_DEFAULT + "multiprocess",
               "datasets' map/filter(num_proc=...)",
               'call `multiprocess.set_start_method("spawn")` under the main guard before it (datasets builds its '
               "pool with the multiprocess package's default context), or initialize the GPU inside the function "
               "only"),
)
LIBRARY_POOL_BY_NAME = {name: pool for pool in LIBRARY_POOLS for name in sorted(pool.names)}
# What messages call a start of the kind LIBRARY_POOL, and how to make it spawn (one
# library so far: a second one would put its PoolMethod on the start).
(LIBRARY_POOL_SHOWN, LIBRARY_POOL_CHOOSE), = ((pool.shown, pool.choose) for pool in LIBRARY_POOLS)

# Methods of a context object that build the same things as the module functions.
CONTEXT_METHODS = {
    "Pool": POOL, "Process": PROCESS, "Queue": QUEUE, "SimpleQueue": QUEUE,
    "JoinableQueue": QUEUE, "Pipe": PIPE, "set_forkserver_preload": SET_PRELOAD, "Manager": MANAGER,
}

# The executor keyword that, given without ``mp_context``, makes the workers spawned.
SPAWNING_EXECUTOR_KEYWORD = "max_tasks_per_child"
# What the forkserver preloads unless ``set_forkserver_preload`` says otherwise, and the
# name that stands for the main module in that list.
MAIN_MODULE = "__main__"
DEFAULT_PRELOAD = (MAIN_MODULE,)
# The joblib backend that is a multiprocessing Pool; the default (loky) and the others
# start no process of the multiprocessing kind (loky starts fresh interpreters).
JOBLIB_POOL_BACKEND = "multiprocessing"
# The default ``n_jobs`` of each with-block configuration (None: unset, which in
# ``Parallel`` means one job, in this process).
JOBLIB_CONFIG_JOBS: dict[str, int | None] = {JOBLIB_CONFIG: None, JOBLIB_BACKEND: -1}

POOL_TASK_METHODS = frozenset({
    "map", "map_async", "imap", "imap_unordered", "starmap", "starmap_async",
    "apply", "apply_async",
})
EXECUTOR_TASK_METHODS = frozenset({"submit", "map"})
STAR_METHODS = frozenset({"starmap", "starmap_async"})
APPLY_METHODS = frozenset({"apply", "apply_async"})
PROCESS_BASES = frozenset({"multiprocessing.Process", "multiprocessing.process.BaseProcess"})
# Qt's QThread runs ``run`` in a thread of its own when started (QThread::start, Qt 5/6).
# Library objects of the THREAD kind whose ``start()`` runs a thread of the library's own
# code (their arguments are no target).
OWN_THREADS = frozenset({"logging.handlers.QueueListener"})
THREAD_BASES = frozenset({"threading.Thread", "PySide6.QtCore.QThread", "PySide2.QtCore.QThread",
                          "PyQt6.QtCore.QThread", "PyQt5.QtCore.QThread", "qtpy.QtCore.QThread"})
DATASET_METHODS = ("__getitem__", "__iter__", "__getitems__")


# Names of the multiprocessing namespace, with the Python 3 minor version that added
# them: each is ``.. versionadded:: 3.4`` in Doc/library/multiprocessing.rst, defined on
# the contexts in Lib/multiprocessing/context.py and copied onto the module by
# Lib/multiprocessing/__init__.py (``__all__`` from the default context's names), which
# torch.multiprocessing re-exports with ``from multiprocessing import *`` (torch 2.x
# torch/multiprocessing/__init__.py). A name every supported target has cannot be missing:
# ``hasattr(mp, "get_context")`` is true, and an ``except AttributeError`` (or
# ``ImportError``) around nothing but a call of it never runs. None of them raises those
# itself: ``get_context`` raises ValueError for a method it does not know or that is not
# available, ``set_start_method`` RuntimeError once a method was set (context.py).
ADDED_IN: dict[str, int] = {
    "multiprocessing.get_context": 4,
    "multiprocessing.set_start_method": 4,
    "multiprocessing.get_start_method": 4,
    "multiprocessing.get_all_start_methods": 4,
}


def present_on(qualname: str, minor: int) -> bool:
    """Does ``qualname`` surely exist on Python 3.``minor`` (see ADDED_IN)?"""
    added = ADDED_IN.get(canonical(qualname))
    return added is not None and added <= minor


def default_start_method(minor: int, platform: str) -> str:
    """multiprocessing's default start method on Python 3.``minor`` for ``platform``.

    fork on Linux up to 3.13, forkserver on Linux from 3.14 (gh-84559), spawn on macOS
    (since 3.8, bpo-33725) and Windows.
    """
    if platform != "linux":
        return "spawn"
    return "forkserver" if minor >= 14 else "fork"


def forkserver_preloads_main(minor: int) -> bool:
    """Does the forkserver of Python 3.``minor`` run the main script's top level itself?

    Yes from 3.13.8 and 3.14.1 (see the module docstring). A target names a minor version,
    not a patch release: 3.13 and 3.14 count as preloading, because their current releases
    do and a program written for them meets it on its next patch update (3.13.0-3.13.7 and
    3.14.0 ran the top level in each worker instead; the fix that makes a preloading
    forkserver safe, guarding the GPU initialization, is right on those too).
    """
    return minor >= 13


@dataclass(frozen=True)
class Target:
    """The Pythons and the platform a lint run judges: the oldest minor version the project
    supports (the analysis runs there), the newest, and the platform.

    A start that leaves the method to the default gets the oldest minor's default; where a
    later supported minor has another default (forkserver on Linux from 3.14), the hazards
    of that method are judged there too (``later_method``, ``later_minor``)."""

    minor: int
    platform: str = "linux"
    newest: int | None = None  # None: the oldest minor alone

    @property
    def default_method(self) -> str:
        """The oldest minor's default start method."""
        return default_start_method(self.minor, self.platform)

    @property
    def preloads_main(self) -> bool:
        """Does the oldest minor's forkserver run the main script's top level itself?"""
        return forkserver_preloads_main(self.minor)

    @property
    def later_minor(self) -> int | None:
        """The first supported minor after the oldest whose default start method differs
        from the oldest's; None where the range has none."""
        newest = self.newest if self.newest is not None else self.minor
        return next((m for m in range(self.minor + 1, newest + 1)
                     if default_start_method(m, self.platform) != self.default_method), None)

    @property
    def later_method(self) -> str | None:
        """The default start method of ``later_minor`` (None: the range has one default)."""
        later = self.later_minor
        return None if later is None else default_start_method(later, self.platform)

    @property
    def later_preloads_main(self) -> bool:
        """Does ``later_minor``'s forkserver run the main script's top level itself?"""
        later = self.later_minor
        return later is not None and forkserver_preloads_main(later)


def canonical(qualname: str) -> str:
    """Map drop-in namespaces onto ``multiprocessing`` (keeping torch's own launchers)."""
    if qualname in APIS:
        return qualname
    for prefix, target in ALIASES:
        if qualname.startswith(prefix):
            return target + qualname[len(prefix):]
    return qualname


def kind_of(qualname: str) -> ProcessKind | None:
    """Return the process/thread kind of an API, if it is one."""
    return APIS.get(canonical(qualname))


# A tensor type naming the GPU, given to torch.set_default_tensor_type.
CUDA_TENSOR_TYPES = "torch.cuda."
