"""Process and thread starts, and how each chooses its start method.

Sources: https://docs.python.org/3/library/multiprocessing.html#contexts-and-start-methods
(default fork on Linux up to 3.13, forkserver from 3.14, spawn on macOS and Windows);
https://docs.python.org/3/library/concurrent.futures.html#processpoolexecutor
(workers start on demand; not daemonic since 3.9);
https://pytorch.org/docs/stable/multiprocessing.html (torch.multiprocessing wraps
multiprocessing; ``spawn``/``start_processes`` default to spawn);
https://joblib.readthedocs.io/en/stable/parallel.html (loky, the default backend,
does not fork the calling interpreter).

CPython facts read in its source (Lib/concurrent/futures/process.py of 3.11 and 3.14):

- ``ProcessPoolExecutor(max_tasks_per_child=N)`` without ``mp_context`` takes
  ``get_context("spawn")``, not the default context (3.11+; a fork context with
  ``max_tasks_per_child`` raises ValueError, so its workers never fork).
"""

from __future__ import annotations

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
DEFAULT_DEVICE = "default-device"  # torch.set_default_device

APIS: dict[str, str] = {
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
    "concurrent.futures.ProcessPoolExecutor": EXECUTOR,
    "concurrent.futures.process.ProcessPoolExecutor": EXECUTOR,
    "os.fork": OS_FORK,
    "os.forkpty": OS_FORK,
    "torch.multiprocessing.spawn": SPAWN_LAUNCHER,
    "torch.multiprocessing.start_processes": SPAWN_LAUNCHER,
    "threading.Thread": THREAD,
    "threading.Timer": THREAD,
    "concurrent.futures.ThreadPoolExecutor": THREAD_POOL,
    "concurrent.futures.thread.ThreadPoolExecutor": THREAD_POOL,
    "multiprocessing.pool.ThreadPool": THREAD_POOL,
    "multiprocessing.dummy.Pool": THREAD_POOL,
    "torch.utils.data.DataLoader": DATALOADER,
    "torch.utils.data.dataloader.DataLoader": DATALOADER,
    "torch.set_default_device": DEFAULT_DEVICE,
}

# Drop-in replacements of the multiprocessing namespace.
ALIASES = (
    ("torch.multiprocessing.", "multiprocessing."),
    ("multiprocess.", "multiprocessing."),
)

# Methods of a context object that build the same things as the module functions.
CONTEXT_METHODS = {
    "Pool": POOL, "Process": PROCESS, "Queue": QUEUE, "SimpleQueue": QUEUE,
    "JoinableQueue": QUEUE, "Pipe": PIPE,
}

# The executor keyword that, given without ``mp_context``, makes the workers spawned.
SPAWNING_EXECUTOR_KEYWORD = "max_tasks_per_child"

POOL_TASK_METHODS = frozenset({
    "map", "map_async", "imap", "imap_unordered", "starmap", "starmap_async",
    "apply", "apply_async",
})
EXECUTOR_TASK_METHODS = frozenset({"submit", "map"})
STAR_METHODS = frozenset({"starmap", "starmap_async"})
APPLY_METHODS = frozenset({"apply", "apply_async"})
PROCESS_BASES = frozenset({"multiprocessing.Process", "multiprocessing.process.BaseProcess"})
THREAD_BASES = frozenset({"threading.Thread"})
DATASET_METHODS = ("__getitem__", "__iter__", "__getitems__")


def canonical(qualname: str) -> str:
    """Map drop-in namespaces onto ``multiprocessing`` (keeping torch's own launchers)."""
    if qualname in APIS:
        return qualname
    for prefix, target in ALIASES:
        if qualname.startswith(prefix):
            return target + qualname[len(prefix):]
    return qualname


def kind_of(qualname: str) -> str | None:
    """Return the process/thread kind of an API, if it is one."""
    return APIS.get(canonical(qualname))
