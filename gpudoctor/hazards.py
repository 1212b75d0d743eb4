"""What gpudoctor says about each hazard it explains: why it breaks, and the fix.

One wording, used by all three faces: the linter's rule documentation (``{{cause.why}}``
and ``{{cause.fix}}`` in a rule's docstring are filled from here, see ``fill``), the
probe's diagnosis of a run, and the pytest plugin's failure reports. A sentence improved
here is improved everywhere, and the faces cannot drift apart.

Deliberately free of imports from the rest of gpudoctor: the linter must not import the
probe, and both import this module. The text may use Markdown's backticks (a rule's
documentation is Markdown; in a terminal they read as quotes).

``why`` is one or more whole sentences. ``fix`` is written to follow "Fix: " (the probe
and the plugin) or a comma (the rule docs): it starts in lower case.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Hazard:
    """A cause of failure a diagnosis can name, the lint rule that finds it in the code,
    why it breaks programs, and the fix."""

    cause: str  # as a diagnosis names it; the probe's error-string categories use the same words
    rule: str | None  # None: no lint rule can see it in the code (it depends on what happens at run time)
    why: str
    fix: str
    # The fix in a Jupyter kernel, where it differs: a spawned worker cannot run a function
    # defined in a cell (GD108), and a kernel has no main script for a forkserver to run.
    notebook_fix: str | None = None
    # Native functions a process of this hazard is found waiting in for ever: seen in a
    # stack, such a wait is evidence of a hang, not of an idle process.
    hang_sites: tuple[str, ...] = ()

    @property
    def fix_line(self) -> str:
        return f"Fix: {self.fix}"

    @property
    def notebook_fix_line(self) -> str:
        return f"Fix: {self.notebook_fix or self.fix}"


FORK_AFTER_INIT = Hazard(
    cause="fork-after-init",
    rule="GD101",
    why=("A CUDA context does not survive `fork()`. The child inherits a copy of the parent's memory that "
         "claims CUDA is initialized, but the driver state behind it is gone: PyTorch raises \"Cannot "
         "re-initialize CUDA in forked subprocess\", CuPy fails with `cudaErrorInitializationError`, Numba "
         "raises \"CUDA initialized before forking\", and TensorFlow aborts or hangs. TensorFlow hangs even on "
         "a CPU-only build: the child's ops wait forever for the parent's intra-op thread pool, whose threads "
         "do not exist after fork."),
    fix=('start the workers with the spawn start method (multiprocessing.get_context("spawn")), or '
         "initialize the GPU framework only inside the workers, never in the parent before it forks. The "
         "forkserver method helps only while nothing at the main script's top level initializes the GPU: "
         "from Python 3.13.8 and 3.14.1 the forkserver runs that top level before it forks each worker."),
    notebook_fix=('move the worker function into a .py module next to the notebook and import it, then start '
                  'the workers with the spawn start method (multiprocessing.get_context("spawn")); or '
                  "initialize the GPU framework only inside the workers, never in the kernel before it forks."),
    # TensorFlow's intra-op pool in a fork child: parallel_for waits on a BlockingCounter
    # that the parent's pool threads, absent in the child, would have counted down.
    hang_sites=("OneDnnThreadPool::parallel_for", "ThreadPoolDevice::parallelFor", "BlockingCounter::Wait"),
)

FORKSERVER_AFTER_INIT = Hazard(
    cause="forkserver-after-init",
    rule="GD101",
    why=("A forkserver worker is a fork too: of the server, which runs the main script's top level (Python "
         "3.13.8 and 3.14.1 on) and imports the modules given to `set_forkserver_preload`, and is as broken "
         "as any parent once that code touched the GPU."),
    fix=('move the GPU initialization under `if __name__ == "__main__":` (or into the function that needs '
         "it), take a module that initializes the GPU out of `set_forkserver_preload`, or start the workers "
         "with the spawn start method."),
)

MULTITHREADED_FORK = Hazard(
    cause="multithreaded-fork",
    rule="GD102",
    why=("`fork()` copies only the calling thread. Locks held by the other threads at that moment — in the "
         "allocator, in logging, in a framework's runtime — stay locked in the child forever, and the child "
         "deadlocks the first time it needs one."),
    fix=('start the workers with the spawn or forkserver start method (multiprocessing.get_context("spawn")), '
         "or fork before any thread starts (before the library that starts them runs), or join the threads "
         "first."),
    # CPython's wait for a thread lock: in a process with one thread left, no thread can
    # release it (a wait with other threads alive may just be a join).
    hang_sites=("PyThread_acquire_lock",),
)

GPU_MEMORY_GRAB_ALL = Hazard(
    cause="gpu-memory-grab-all",
    rule="GD401",
    why=("TensorFlow reserves nearly all free GPU memory when it initializes and JAX preallocates 75%, so "
         "only the first worker per GPU gets any."),
    fix=("turn on memory growth in each worker before its first op "
         "(tf.config.experimental.set_memory_growth, or TF_FORCE_GPU_ALLOW_GROWTH=true in the workers' "
         "environment), cap each worker (set_logical_device_configuration with a memory_limit; "
         "XLA_PYTHON_CLIENT_PREALLOCATE=false or XLA_PYTHON_CLIENT_MEM_FRACTION for JAX), or give each "
         "worker its own GPU (CUDA_VISIBLE_DEVICES set before the worker starts)."),
)

CONFIG_AFTER_INIT = Hazard(
    cause="config-after-init",
    rule="GD302",
    why=("TensorFlow reads its device and thread configuration once, when its runtime initializes (the first "
         "op, model build or device query): after that, `tf.config` calls that change devices, memory growth "
         "or thread pools raise RuntimeError, and some are ignored."),
    fix=("make the `tf.config` calls first, before anything that creates a tensor, builds a model or lists "
         "logical devices, or set the matching environment variables (TF_FORCE_GPU_ALLOW_GROWTH, "
         "CUDA_VISIBLE_DEVICES) before TensorFlow is imported."),
)

PROCESS_IN_DAEMONIC_WORKER = Hazard(
    cause="process-in-daemonic-worker",
    rule="GD105",
    why=("Pool and ProcessPoolExecutor workers are daemonic processes, and a daemonic process may not start "
         "children: the task raises AssertionError (\"daemonic processes are not allowed to have children\")."),
    fix=("start the inner processes from the parent instead (one pool, flattened work), or run the inner work "
         "in threads or in the same process."),
)

WORKER_NOT_IMPORTABLE = Hazard(
    cause="worker-not-importable",
    rule="GD108",
    why=("A spawn or forkserver worker gets the function it runs by name and imports it from its module: a "
         "lambda, a nested function, or one defined in a notebook cell or under `if __name__ == \"__main__\":` "
         "cannot be pickled by name or is not there when the worker imports the main module."),
    fix=("define the function at the top level of a module the workers can import (next to the script or "
         "notebook), or pass arguments with functools.partial of such a function instead of a lambda."),
)

PROCESS_START_AT_IMPORT = Hazard(
    cause="process-start-at-import",
    rule="GD104",
    why=("A spawned child imports the main module again (as `__mp_main__`) before it runs its task, so the "
         "module's top-level code runs once more in every child. If that code starts processes, each child "
         "tries to start its own children: Python stops this with \"An attempt has been made to start a new "
         "process before the current process has finished its bootstrapping phase\", the child exits with "
         "status 1, and a `Pool` starts a new worker in its place, which fails the same way, for ever."),
    fix=('move the process start under `if __name__ == "__main__":`, with the code that uses the pool or the '
         "processes, or into a function called only from there; a module the workers import must not start "
         "processes when it is imported."),
)

WORKER_DIED_IN_TASK = Hazard(
    cause="worker-died-in-task",
    rule=None,  # a worker's death is a run-time event: no rule sees it in the code
    why=("A worker that dies while it runs a task (killed by a signal, such as the SIGKILL of the kernel's OOM "
         "killer; a crash; `os._exit` in the task) takes the task with it. CPython's `multiprocessing.Pool` "
         "starts a new worker in its place but never learns that the task is lost: `Pool.map`, `apply` and "
         "`AsyncResult.get()` without a timeout wait for ever for its result. The start method is not the "
         "cause: a spawn or forkserver pool hangs the same way."),
    fix=("use `concurrent.futures.ProcessPoolExecutor`, which raises `BrokenProcessPool` when a worker dies "
         "instead of waiting (or give `AsyncResult.get` a timeout); if the kernel's OOM killer killed it, use "
         "fewer workers or smaller tasks, set `maxtasksperchild` so that workers whose memory grows are "
         "replaced, or cap each worker's memory (`resource.setrlimit(resource.RLIMIT_AS, ...)` in the pool's "
         "initializer), which turns the kill into a MemoryError the pool reports."),
)

FORK_AFTER_OPENMP = Hazard(
    cause="fork-after-openmp",
    rule=None,  # which CPU ops start an OpenMP pool is known at run time (the probe sees it in a stack)
    why=("GNU OpenMP's thread pool does not survive `fork()`. The parent's first parallel CPU op started the "
         "pool's threads and libgomp keeps them for the next op; `fork()` copies only the calling thread, and "
         "libgomp does not start a new pool in the child, so the child's first parallel op waits for ever for "
         "threads that do not exist. No GPU is involved: it happens on a CPU-only machine."),
    fix=('start the workers with the spawn or forkserver start method (multiprocessing.get_context("spawn")), '
         "or set OMP_NUM_THREADS=1 in the environment before the program starts (the pool never starts; CPU "
         "ops run on one thread)."),
)

QUEUE_JOINED_BEFORE_READ = Hazard(
    cause="join-before-queue-drained",
    rule=None,  # how much a child puts, and when the parent reads it, is known at run time
    why=("A process that put items on a `multiprocessing.Queue` does not exit until the queue's feeder thread "
         "has written them all into the queue's pipe, and the pipe holds little (64 KiB on Linux) until the "
         "other end reads it; on a queue with a `maxsize`, `put` itself waits while the queue is full. A "
         "parent that joins the child before it takes the items off the queue waits for a child that waits "
         "for it: both wait for ever, with no error (Python's multiprocessing documentation, programming "
         "guidelines: \"Joining processes that use queues\")."),
    fix=("take the child's items off the queue (`q.get()`, as many as it puts) before `p.join()`; or, if the "
         "items not yet read may be lost, call `q.cancel_join_thread()` in the child, which then exits without "
         "writing them (that does not help a `put` waiting on a full queue)."),
)

WORKERS_EACH_A_COPY = Hazard(
    cause="workers-each-a-copy",
    rule=None,  # how much each worker loads is data, known at run time
    why=("Each worker process has memory of its own: data or a model that every worker loads or builds itself "
         "(in its initializer, or when it imports the module that loads it) exists once per worker, and N "
         "workers need N times as much. A fork child starts out sharing its parent's pages, but the kernel "
         "copies each page a child writes (copy-on-write), and CPython writes an object's reference count "
         "whenever it uses the object: a worker that reads a list of Python objects copies the pages they lie "
         "in, until it holds a copy of its own."),
    fix=("load the data once, in the parent before the workers start, and share it: under fork keep it in a "
         "few large read-only arrays or `bytes` (no list or dict of Python objects, whose reference counts are "
         "written when read); under spawn, put it in `multiprocessing.shared_memory` or in a file each worker "
         "maps (`numpy.memmap`, `mmap`); or use fewer workers; or give each worker a budget "
         "(`resource.setrlimit(resource.RLIMIT_AS, ...)` in the pool's initializer), which turns the kill into "
         "a MemoryError the worker reports."),
)

# Distributed jobs: the probe names these from the ranks' stacks and exits; GD501 finds the
# collective under a test on the rank, and the mismatched pair, before the job runs.
COLLECTIVE_NOT_REACHED = Hazard(
    cause="collective-not-reached",
    rule="GD501",
    why=("A collective (a barrier, an all-reduce, a broadcast) returns on a rank only when every rank of its "
         "process group has called it: a rank that never reaches it, because it is blocked or busy elsewhere, "
         "often in a branch only some ranks take (`if rank == 0:`), leaves the others waiting in it, with no "
         "error."),
    fix=("call the collective on every rank, or move it out of the rank test: let every rank reach it, and "
         "keep only the rank's own work (saving, logging) under the test."),
)

COLLECTIVES_MISMATCHED = Hazard(
    cause="mismatched-collectives",
    rule="GD501",
    why=("The ranks wait in different collectives. Every rank of a process group must call the same "
         "collectives in the same order: each waits for the others to call the one it is in, and none ever "
         "does."),
    fix=("make every rank call the same collectives in the same order; a collective under a rank test "
         "(`if rank == 0:`) must have its counterpart on the other ranks, or move out of the test."),
)

RANK_HELD_UP = Hazard(
    cause="rank-held-up",
    rule=None,  # every rank calls the collective: what holds one up is known only at run time
    why=("Every rank calls the collective, but one never gets there: it is held up before it, in a call that "
         "does not return (a lock, a queue, a network or file operation with no timeout), and the others "
         "wait for it in the collective, with no error."),
    fix=("find why that call never returns and give it a timeout, or move it out of the way of the "
         "collective (after it, or to a thread of its own); the collective itself is called on every rank."),
)

RANK_FAILED = Hazard(
    cause="rank-failed",
    rule=None,  # a rank's death is a run-time event
    why=("When one rank of a distributed job dies, the others wait for it in their next collective, until "
         "the launcher stops them or the process group's timeout ends the wait: their waits, timeouts and "
         "SIGTERMs are the effect; the first rank that failed is the cause."),
    fix=("fix what made that rank fail (its exception and line above); an error only some ranks can meet "
         "(a file that one rank reads) is best checked on every rank before the first collective."),
)

RANK_MISSING_AT_RENDEZVOUS = Hazard(
    cause="rank-missing-at-rendezvous",
    rule=None,  # how many processes a launch starts, against the world size, is known at run time
    why=("`init_process_group` returns only once all `world_size` ranks have joined its rendezvous: rank 0 "
         "hosts the store and waits for the others to register, and every rank waits in the store-based "
         "barrier for all of them. A rank that was never started (fewer processes launched than `world_size`: "
         "`mp.spawn(..., nprocs=N)` with N below it, a `--nproc_per_node` too small, a world size written for "
         "another machine) or that died before it joined never comes: the ranks that exist wait, with no CPU "
         "and no error, until the rendezvous timeout (30 minutes by default)."),
    fix=("start exactly `world_size` processes: pass `nprocs=world_size` to `mp.spawn`, give torchrun "
         "`--nproc_per_node` (times the nodes) equal to it, or derive `world_size` from the number of processes "
         "you start (torchrun sets `WORLD_SIZE`; read it with `dist.get_world_size()`); for a rank that died, "
         "fix what ended it; and pass a short `timeout=` (`datetime.timedelta(minutes=2)`) to "
         "`init_process_group` so a missing rank fails the job with an error instead of a silent wait."),
)

# Exceptions that mean something specific when processes share work (the probe's
# explain_exceptions.py recognizes them; no lint rule sees them: they happen at run time).
TASK_EXCEPTION_UNPICKLABLE = Hazard(
    cause="task-exception-unpicklable",
    rule=None,  # whether an exception class rebuilds from its args is known when it is unpickled
    why=("A `multiprocessing.Pool` worker sends the exception its task raised back to the parent pickled, and the "
         "parent rebuilds it by calling its class with the exception's `args`. An exception class whose "
         "`__init__` takes other arguments than it passes to `super().__init__()` cannot be rebuilt: the "
         "unpickling raises TypeError in the Pool's result-handler thread (`_handle_results`), that thread "
         "dies, no result of any task is delivered any more, and `Pool.map`, `apply` and `AsyncResult.get()` "
         "wait for ever (python/cpython#79492)."),
    fix=("make the exception picklable: pass every argument of its `__init__` on to `super().__init__(...)` "
         "(so that `args` rebuilds it), or define `__reduce__`; or raise a plain exception type from code that "
         "runs in a worker; `concurrent.futures.ProcessPoolExecutor` reports such an exception instead of "
         "hanging."),
)

TASK_RESULT_UNPICKLABLE = Hazard(
    cause="task-result-unpicklable",
    rule=None,  # what a task returns is known at run time
    why=("A worker sends its task's return value back to the parent pickled; a value that holds something "
         "that cannot be pickled (a lock, an open file, a socket, a generator, a database connection, a "
         "lambda) fails in the worker, and `Pool.map` raises `multiprocessing.pool.MaybeEncodingError` in the "
         "parent, naming the value and what could not be pickled."),
    fix=("return plain data from the task (numbers, strings, lists, dicts, arrays: the values, not an object "
         "that holds a lock or an open file), or give the class `__getstate__`/`__reduce__` that leaves the "
         "unpicklable part out."),
)

TOO_MANY_OPEN_FILES = Hazard(
    cause="too-many-open-files",
    rule=None,  # how many descriptors a run keeps open is known at run time
    why=("A process reached its limit of open file descriptors (`ulimit -n`, errno 24 EMFILE). PyTorch's "
         "default sharing strategy on Linux, `file_descriptor`, sends every tensor a DataLoader worker (or any "
         "`torch.multiprocessing` process) returns as an open descriptor of a shared-memory segment, which "
         "stays open as long as the tensor lives: a loop that keeps the batches' tensors (in a list) keeps "
         "their descriptors until the limit is reached, and receiving the next one fails (\"received 0 items "
         "of ancdata\", \"Too many open files\")."),
    fix=("call `torch.multiprocessing.set_sharing_strategy('file_system')` at the start of the program, or "
         "raise the limit (`ulimit -n 65536` in the shell, `resource.setrlimit(resource.RLIMIT_NOFILE, ...)`, "
         "docker `--ulimit nofile=...`), or keep copies of what you keep (`tensor.clone()`, "
         "`tensor.numpy().copy()`), not the shared tensors themselves."),
)

SHARED_MEMORY_FULL = Hazard(
    cause="shared-memory-full",
    rule=None,  # the size of /dev/shm and of the batches in flight are known at run time
    why=("DataLoader workers (and `torch.multiprocessing`) pass each batch to the parent in a shared-memory "
         "segment in /dev/shm; every batch in flight (`num_workers` × `prefetch_factor`) holds one. When "
         "/dev/shm is too small for them (a Docker container gets 64 MB unless told otherwise) a worker "
         "fails to allocate its batch (\"unable to allocate shared memory(shm)\", \"No space left on "
         "device\") or dies of SIGBUS (\"Bus error\"), and the parent's loop over the loader raises it."),
    fix=("give /dev/shm more room (docker `--shm-size=8g` or `--ipc=host`; Kubernetes: an `emptyDir` with "
         "`medium: Memory` mounted on /dev/shm), or keep less in flight: fewer workers, smaller batches, a "
         "smaller `prefetch_factor`; the `file_system` sharing strategy does not help, its segments live in "
         "/dev/shm too."),
)

POOL_INITIALIZER_FAILED = Hazard(
    cause="pool-initializer-failed",
    rule=None,  # whether an initializer fails (a missing file, a busy device) is known at run time
    why=("A `multiprocessing.Pool`'s initializer runs in every worker before its first task; when it raises, "
         "the worker exits with status 1 before taking a task, and the Pool starts another in its place, "
         "which fails the same way, for ever: the tasks are never run and `Pool.map` never returns "
         "(python/cpython#87472)."),
    fix=("check or load what the initializer needs in the parent, before the Pool starts (a missing file or "
         "device then fails once, visibly); or use `concurrent.futures.ProcessPoolExecutor(initializer=...)`, "
         "which marks the pool broken and raises `BrokenProcessPool` instead of starting workers for ever."),
)

BROKEN_PROCESS_POOL = Hazard(
    cause="broken-process-pool",
    rule=None,  # a worker's death is a run-time event
    why=("`concurrent.futures.ProcessPoolExecutor` raises `BrokenProcessPool` in the parent when one of its "
         "workers ended abruptly (killed by a signal, such as the SIGKILL of the kernel's OOM killer; a crash; "
         "`os._exit` or `sys.exit` in a task; an initializer that raised): the executor cannot tell which "
         "task was lost, so it fails every pending one and can no longer be used. The exception is the effect: "
         "the worker's death is the cause."),
    fix=("find why the worker ended (its exit, its exception, its memory: above) and fix that: if it was "
         "killed for memory, use fewer workers or smaller tasks or cap each worker's memory; to survive it, "
         "catch `BrokenProcessPool` around the results and submit the lost tasks again to a new executor."),
)

PEER_PROCESS_GONE = Hazard(
    cause="peer-process-gone",
    rule=None,  # which process is at the other end of a connection is known at run time
    why=("`EOFError`, `ConnectionResetError`, `BrokenPipeError` and `ConnectionRefusedError` raised inside "
         "multiprocessing's connections (a `Pipe`, a `Queue`'s reader, a `Manager` proxy) mean the process "
         "at the other end is gone: it exited, crashed or was killed, or closed its end. For a `Manager` "
         "proxy that is the Manager's server process, which holds every shared object: once it is dead, "
         "every proxy call of every process fails."),
    fix=("find why the other process ended and keep it alive for as long as it is used (a Manager must "
         "outlive the processes that use its proxies: do not let it be killed or OOM-killed, and shut it down "
         "last); treat its death as fatal (catch the error and stop), and pass bulk data through "
         "`multiprocessing.shared_memory`, files or result queues rather than a Manager."),
)

START_METHOD_SET_TWICE = Hazard(
    cause="start-method-set-twice",
    rule=None,
    why=("`multiprocessing.set_start_method()` may be called once per program, before any process starts: a "
         "second call, or one after the start method was fixed (by a library, or by a first process start), "
         "raises RuntimeError."),
    fix=("call `set_start_method` once, in the `if __name__ == \"__main__\":` block before anything starts a "
         "process, or do not set it globally: use `ctx = multiprocessing.get_context(\"spawn\")` and "
         "`ctx.Pool`/`ctx.Process` (or `ProcessPoolExecutor(mp_context=ctx)`); `set_start_method(..., "
         "force=True)` only where you own the whole program."),
)

# A process that died or blocks, and the processes that wait on it (the probe reads these
# from exit statuses, signals and the waiting processes' stacks; no rule sees them).
TASK_CALLED_EXIT = Hazard(
    cause="task-called-exit",
    rule=None,  # whether the exit is reached is known at run time
    why=("`sys.exit()` raises SystemExit, which is not an `Exception`: in a `multiprocessing.Pool` task it escapes "
         "the `except Exception` with which the pool's worker loop sends a task's error back, and ends the worker "
         "process without a result. The pool starts a new worker in its place but never learns that the task is "
         "lost: `Pool.map`, `apply` and `AsyncResult.get()` without a timeout wait for ever."),
    fix=("raise an exception (such as `ValueError`) instead of calling `sys.exit` (or `exit`) in code that runs in "
         "a worker, or catch `SystemExit` in the task and raise an error from it; "
         "`concurrent.futures.ProcessPoolExecutor` would raise `BrokenProcessPool` instead of waiting."),
)

RESULT_NEVER_SENT = Hazard(
    cause="result-never-sent",
    rule=None,  # a child's death is a run-time event
    why=("A process that waits for another's result without a timeout (`Queue.get()`, `Connection.recv()`) does "
         "not notice that the process that was to send it died: the result never comes, and it waits for ever."),
    fix=("wait with a timeout and check the workers (`q.get(timeout=...)`, then `p.exitcode` or `p.is_alive()`), "
         "have the worker's target catch its exceptions and put them on the queue in place of the result, or use "
         "`concurrent.futures.ProcessPoolExecutor`, which returns a worker's exception to the caller and raises "
         "`BrokenProcessPool` when a worker dies."),
)

PIPE_BOTH_SENDING = Hazard(
    cause="pipe-both-sending",
    rule=None,  # how much each side sends is data, known at run time
    why=("A pipe holds little (a Linux pipe or socket buffer holds a few hundred KiB at most) until the other end "
         "reads: `Connection.send()` of a larger message waits for the reader. When both processes send on the "
         "same `Pipe` before either receives, each waits for the other to read, and neither ever does."),
    fix=("let one side receive before it sends (a strict request-then-reply order), send from a separate thread, "
         "use a `multiprocessing.Queue` (its feeder thread sends in the background), or pass large data through "
         "shared memory or a file."),
)

LOCK_HOLDER_DIED = Hazard(
    cause="lock-holder-died",
    rule=None,  # a death inside the critical section is a run-time event
    why=("A `multiprocessing.Lock` (as `RLock`, `Semaphore` and `Condition`) is a semaphore that nothing releases "
         "when the process holding it dies: `with lock:` releases it only when Python runs the end of the block, "
         "and a SIGKILL (the kernel's OOM killer's) or `os._exit` runs no code. Every process that then acquires "
         "it waits for ever."),
    fix=("keep the critical section small and do nothing there that can be killed (no large allocation or long "
         "work under the lock); acquire with a timeout (`lock.acquire(timeout=...)`) and check whether the holder "
         "is still alive (record its pid); or use a lock the kernel releases when its holder dies "
         "(`fcntl.flock` on a file)."),
)

MANAGER_DIED = Hazard(
    cause="manager-died",
    rule=None,  # a death is a run-time event
    why=("A `multiprocessing.Manager()` runs a server process that holds every object its proxies name "
         "(`manager.dict()`, `list()`, `Queue()`, ...), and every proxy call is a message to it. When that process "
         "dies (killed by a signal, such as the OOM killer's SIGKILL: it grows with everything put in its "
         "objects), every later proxy call in every process fails with `ConnectionResetError`, `BrokenPipeError`, "
         "`EOFError` or `ConnectionRefusedError`."),
    fix=("keep the manager's process alive: do not pass bulk data through it (use "
         "`multiprocessing.shared_memory`, files, or a `Queue` of results), and treat its death as fatal (catch "
         "those connection errors where the workers call the proxies and stop them cleanly)."),
)

EXECUTOR_WORKER_DIED = Hazard(
    cause="executor-worker-died",
    rule=None,  # a worker's death is a run-time event
    why=("When a worker of a `concurrent.futures.ProcessPoolExecutor` dies (killed by a signal, such as the "
         "kernel's OOM killer's SIGKILL, or a crash), the executor cannot tell which task killed it: it marks "
         "the pool broken and every pending future raises `BrokenProcessPool`."),
    fix=("find why the worker died: if memory ran short, lower each task's memory (process a large input in "
         "chunks), use fewer workers, set `max_tasks_per_child` (Python 3.11+) so that workers whose memory grows "
         "are replaced, or give each worker a budget (`resource.setrlimit(resource.RLIMIT_AS, ...)` in the "
         "executor's `initializer`, which turns the kill into a MemoryError the future raises); catch "
         "`BrokenProcessPool` and submit the remaining tasks to a new executor."),
)

MEMORY_ERROR = Hazard(
    cause="memory-error",
    rule=None,  # how much memory there is to allocate is known at run time
    why=("A process raised `MemoryError`: an allocation failed, because the process reached an address-space "
         "limit (`ulimit -v`, `resource.setrlimit(RLIMIT_AS, ...)`, a batch scheduler's per-process limit) or "
         "the system had no memory left to give (no overcommit). In a `multiprocessing.Pool` the worker's "
         "`MemoryError` is sent back as the task's error and raised again by `Pool.map` in the parent; in a "
         "`ProcessPoolExecutor` by the future's `result()`. Workers that each load the same data or model "
         "multiply what the program needs."),
    fix=("lower what each process holds at once: process a large input in chunks (`imap` with a `chunksize`, "
         "generators instead of lists), load data once in the parent before a fork pool or share it "
         "(`multiprocessing.shared_memory`, `numpy.memmap`), use fewer workers, set `maxtasksperchild` "
         "(`max_tasks_per_child`) when a worker's memory grows from task to task; or raise the limit "
         "if it is lower than the machine can give."),
)

# Objects that refuse to be pickled into a task, and torch.multiprocessing.spawn's report of a
# process that failed (explain_exceptions.py recognizes them by their messages).
SYNC_OBJECT_PICKLED = Hazard(
    cause="sync-object-pickled",
    rule=None,  # what ends up in a task's arguments is known when it is pickled
    why=("multiprocessing's synchronization objects (`Lock`, `RLock`, `Semaphore`, `BoundedSemaphore`, "
         "`Condition`, `Event`, `Barrier`), its queues (`Queue`, `JoinableQueue`, `SimpleQueue`) and its shared "
         "values (`Value`, `Array`, `RawValue`, `RawArray`) are kernel objects or shared memory that a process "
         "can only get when it is created (inherited by a fork child, or handed to `Process(args=...)`, which "
         "pickles them while the child is spawned); pickled at any other time they refuse, with a RuntimeError "
         "that says they \"should only be shared between processes through inheritance\". The function and "
         "arguments of a `Pool` or `ProcessPoolExecutor` task are pickled when the task is sent to a worker "
         "(by the pool's task-handler thread, by the executor's queue feeder), long after the workers were "
         "created: such an object among them (in a `functools.partial`, a tuple, an object's attribute) fails "
         "there, no task runs, and `map`, `get()` or `result()` raise it in the parent."),
    fix=("hand the object to the workers when they are created: `Pool(initializer=init, initargs=(lock,))` (or "
         "`ProcessPoolExecutor(initializer=..., initargs=...)`) with `init` keeping it in a global of the "
         "worker, or `Process(target=..., args=(lock,))` for a process of your own; or use a "
         "`multiprocessing.Manager()`'s `Lock()`, `Queue()`, `Value()`..., whose proxies can be passed as "
         "task arguments (each use is then a message to the manager's process)."),
)

POOL_PICKLED = Hazard(
    cause="pool-pickled",
    rule=None,  # what a task drags along with it is known when it is pickled
    why=("A task's function and arguments are pickled to be sent to a worker, and a bound method "
         "(`self.work`) is pickled with its whole object (`self`) and every attribute of it. A "
         "`multiprocessing.Pool` cannot be pickled (`Pool.__reduce__` raises NotImplementedError), nor a "
         "`Process` or a `Manager` (their `authkey` refuses, with a TypeError): a pool kept on the object "
         "whose method is the task (`self.pool = Pool()`, then `self.pool.map(self.work, ...)`), or passed "
         "as an argument, fails the task there, and `map` raises it in the parent."),
    fix=("do not keep the pool on the object whose method is the task: create the pool where it is used "
         "(`with Pool() as pool:` in the method) and map a module-level function given the data it needs "
         "(`functools.partial(work, strength=self.strength)`); or give the class a `__getstate__` that drops "
         "the pool (`state = self.__dict__.copy(); del state[\"pool\"]; return state`)."),
)

SPAWNED_PROCESS_RAISED = Hazard(
    cause="spawned-process-raised",
    rule=None,  # which process raises, and what, is known at run time
    why=("`torch.multiprocessing.spawn` (and `start_processes`) waits for the processes it started; when one of "
         "them raises, it sends the traceback to the parent, terminates the other processes (SIGTERM, then "
         "SIGKILL after a grace period) and raises `ProcessRaisedException` in the parent with that traceback "
         "(\"-- Process N terminated with the following error\"). The process that raised is the cause: the "
         "others, often waiting for it in a collective, were stopped by spawn as a consequence."),
    fix=("fix what that process raised, at the line of your code its traceback names (above): that is the "
         "error; nothing needs to change in how the processes are started. An error only some processes can "
         "meet (their own shard of data, a file one of them reads) is best checked on every process before the "
         "first collective."),
)

SPAWNED_PROCESS_EXITED = Hazard(
    cause="spawned-process-exited",
    rule=None,  # how a process ends is known at run time
    why=("`torch.multiprocessing.spawn` (and `start_processes`) raises `ProcessExitedException` (\"process N "
         "terminated with signal SIGKILL\", \"... with exit code 2\") when one of its processes ended without a "
         "Python exception to report: killed by a signal (the kernel's OOM killer sends SIGKILL; a crash in "
         "native code is SIGSEGV or SIGABRT) or exited with a status of its own (`sys.exit`, `os._exit`). "
         "It then terminates the other processes: their ends are the consequence."),
    fix=("find why that process ended: for SIGKILL, memory (fewer processes, smaller batches, less loaded "
         "per process); for SIGSEGV or SIGABRT, the native library it was in (its stderr, `faulthandler`); for "
         "an exit status, the `sys.exit` (an argument parser's error exits with 2) or `os._exit` in the "
         "function the processes run, which should raise an exception instead."),
)

# A pool or executor that waits for work its own shutdown stopped or cannot stop, and a
# subprocess waited for while its output pipe is full (explain_pool_terminated.py,
# explain_executor_shutdown.py, explain_pipe_full.py); a Pool worker whose memory grows
# task after task (explain_memory.py).
POOL_TERMINATED_EARLY = Hazard(
    cause="pool-terminated-early",
    rule=None,  # when the results are consumed, against when the pool ends, is known at run time
    why=("`Pool.terminate()` stops the workers at once (SIGTERM) and the pool's handler threads, and drops the "
         "tasks not yet done; `with Pool() as pool:` calls it when the block ends, whatever is still running. "
         "Results asked for after that (a lazy `imap`/`imap_unordered` iterator consumed after the block, "
         "`AsyncResult.get()` of an `apply_async` or `map_async`) wait for ever: no process is left to send "
         "them."),
    fix=("consume the results inside the `with` block (iterate the `imap` there, call `get()` there), or call "
         "`pool.close()` then `pool.join()` before leaving it, which waits for the tasks instead of "
         "terminating them."),
)

EXECUTOR_SHUTDOWN_WAITS = Hazard(
    cause="executor-shutdown-waits",
    rule=None,  # whether a task returns is known at run time
    why=("`ProcessPoolExecutor.shutdown(wait=True)`, which the `with` block's exit and the interpreter's exit "
         "call, waits for every task that is running, and a running task cannot be cancelled: "
         "`Future.cancel()` returns False, and a `result(timeout=...)` that raised `TimeoutError` only stopped "
         "the waiting, not the task. A task blocked in a call that never returns (a network read without a "
         "timeout, a lock, a child process) holds the shutdown, and the program, for ever."),
    fix=("give the blocking call its own timeout (`socket.settimeout`, `requests.get(..., timeout=...)`, "
         "`lock.acquire(timeout=...)`); on a `TimeoutError`, call `shutdown(wait=False, cancel_futures=True)` and "
         "end the workers (Python 3.14: `terminate_workers()` or `kill_workers()`; before it, terminate the "
         "processes of `executor._processes`); or run such a call in a process of your own that you can kill "
         "(`multiprocessing.Process`, then `join(timeout)` and `terminate()`)."),
)

THREAD_POOL_STARVED = Hazard(
    cause="thread-pool-starved",
    rule=None,  # whether every thread waits at once depends on how many tasks run together
    why=("A thread pool runs each task on one of its threads until the task returns. A task that submits "
         "tasks to the same pool and waits for them (`Future.result()`, `wait()`, `as_completed()`, "
         "`AsyncResult.get()`) holds its thread while it waits; once every thread holds such a task, the tasks "
         "they wait for sit in the pool's queue behind them and no thread is ever free to run them: the pool is "
         "starved, and the program waits for ever with no CPU and no error. More workers only move the "
         "threshold: it hangs again when as many waiting tasks run at once as there are threads."),
    fix=("do not wait inside a pool for tasks of the same pool: run the inner tasks on a separate executor "
         "(`inner = ThreadPoolExecutor()`, which the outer tasks submit to), or call them inline in the task "
         "(`[embed(c) for c in chunks]`), or submit them from the caller and wait there (the outer task returns "
         "the work to submit, the caller submits it and waits)."),
)

PIPE_FULL_BEFORE_WAIT = Hazard(
    cause="pipe-full-before-wait",
    rule=None,  # how much the child writes is known at run time
    why=("`subprocess.Popen(..., stdout=PIPE)` (or `stderr=PIPE`) connects the child's output to a pipe the "
         "parent must read; a pipe holds 64 KiB on Linux. `Popen.wait()` reads nothing: a child that writes "
         "more than the pipe holds waits for the parent to read, while the parent waits for the child to exit, "
         "and neither ever does (the `subprocess` documentation warns of it at `Popen.wait`)."),
    fix=("use `out, err = proc.communicate()` (or `subprocess.run(..., capture_output=True)`), which reads the "
         "pipes while it waits; or read the pipe while the child runs (`for line in proc.stdout:`) before "
         "`wait()`; or send the output to a file (`stdout=open(path, \"wb\")`) or to `subprocess.DEVNULL`."),
)

WORKER_MEMORY_GROWS = Hazard(
    cause="worker-memory-grows",
    rule=None,  # how much each task leaves behind is known at run time
    why=("A long-lived pool worker runs task after task, and what a task leaves in the worker (a cache or list in "
         "a module-level global, a memoized function, objects kept alive by a reference cycle or a C "
         "extension) stays there until the worker exits: its memory grows with every task it runs, and N "
         "workers grow N times as fast, until the machine runs out."),
    fix=("replace the workers after some tasks: `Pool(maxtasksperchild=N)` (`ProcessPoolExecutor("
         "max_tasks_per_child=N)`, Python 3.11+) so each exits and returns its memory; and do not keep per-task "
         "data in the worker's globals (bound the cache: `functools.lru_cache(maxsize=...)`, or drop it at the "
         "end of the task)."),
)

ENV_AFTER_INIT = Hazard(
    cause="env-after-init",
    rule="GD301",
    why=("A GPU framework reads its environment variables once, when it initializes (`CUDA_VISIBLE_DEVICES` when "
         "CUDA starts; `TF_FORCE_GPU_ALLOW_GROWTH`, `XLA_PYTHON_CLIENT_PREALLOCATE`, `PYTORCH_CUDA_ALLOC_CONF` "
         "when its runtime is built): a value written to `os.environ` after that is silently ignored, and the "
         "process keeps the GPUs, the memory behaviour and the thread counts it started with."),
    fix=("set the variables before the framework initializes: in the shell or the job's environment, at the top "
         "of the program before the framework is imported, or in the parent before it starts the worker."),
)

POOL_CALLBACK_RAISED = Hazard(
    cause="pool-callback-raised",
    rule=None,  # whether a callback raises depends on the results it is given
    why=("A `multiprocessing.Pool` runs the `callback` and `error_callback` of `apply_async`, `map_async` and "
         "`starmap_async` in its result-handler thread (`_handle_results`), in the parent. An exception that "
         "escapes a callback kills that thread: the job whose callback raised is never marked done, no later "
         "result is delivered, and `pool.join()`, `AsyncResult.get()` and `wait()` wait for ever. With results "
         "still unread, the pool's worker-handler thread then loops without pause: the process uses CPU and makes "
         "no progress (python/cpython#83371)."),
    fix=("never let a callback raise: catch exceptions inside it (and record them), or keep the `AsyncResult` "
         "objects and do the work after `.get()` on each, in the main thread, where an exception reaches you; "
         "keep callbacks short (they run one at a time in the pool's only result thread)."),
)

SHARED_TENSOR_SENDER_EXITED = Hazard(
    cause="shared-tensor-sender-exited",
    rule=None,  # when the sender exits, relative to the receiver's reads, is known at run time
    why=("Some shared memory is sent between processes as a handle, not as data: the receiver, when it takes "
         "the item from the queue, connects to the SENDING process (its `multiprocessing.resource_sharer` "
         "thread) to be handed the memory's file descriptor. When the sender has already exited, with items "
         "still queued, that connection fails and the receiver's `get()` raises FileNotFoundError, "
         "ConnectionRefusedError, ConnectionResetError or EOFError."),
    fix=("keep the sending process alive until the receiver has taken everything it sent: have it wait on an "
         "`Event` the receiver sets after its last `get()` (or a final acknowledgement), rather than return "
         "after its last `put()`."),
)

BY_CAUSE = {h.cause: h for h in (FORK_AFTER_INIT, FORKSERVER_AFTER_INIT, MULTITHREADED_FORK, GPU_MEMORY_GRAB_ALL,
                                 CONFIG_AFTER_INIT, PROCESS_IN_DAEMONIC_WORKER, WORKER_NOT_IMPORTABLE,
                                 PROCESS_START_AT_IMPORT, WORKER_DIED_IN_TASK, FORK_AFTER_OPENMP,
                                 QUEUE_JOINED_BEFORE_READ, WORKERS_EACH_A_COPY, COLLECTIVE_NOT_REACHED,
                                 COLLECTIVES_MISMATCHED, RANK_HELD_UP, RANK_FAILED, TASK_EXCEPTION_UNPICKLABLE,
                                 TASK_RESULT_UNPICKLABLE, TOO_MANY_OPEN_FILES, SHARED_MEMORY_FULL,
                                 POOL_INITIALIZER_FAILED, BROKEN_PROCESS_POOL, PEER_PROCESS_GONE,
                                 START_METHOD_SET_TWICE, TASK_CALLED_EXIT, RESULT_NEVER_SENT, PIPE_BOTH_SENDING,
                                 LOCK_HOLDER_DIED, MANAGER_DIED, EXECUTOR_WORKER_DIED, MEMORY_ERROR,
                                 SYNC_OBJECT_PICKLED, POOL_PICKLED, SPAWNED_PROCESS_RAISED,
                                 SPAWNED_PROCESS_EXITED, RANK_MISSING_AT_RENDEZVOUS, THREAD_POOL_STARVED,
                                 POOL_TERMINATED_EARLY, EXECUTOR_SHUTDOWN_WAITS, PIPE_FULL_BEFORE_WAIT,
                                 WORKER_MEMORY_GROWS, ENV_AFTER_INIT,
                                 POOL_CALLBACK_RAISED, SHARED_TENSOR_SENDER_EXITED)}

# Why a fork after init breaks, worded for what the forking process had: ``why`` above
# says it for every framework (the rule docs, which cannot know), a diagnosis for the
# runtimes that were there: the runtime ids the probe records (the bootstrap's at a fork,
# ``/proc/PID/maps``' for an attached process), whose records (gpudoctor/knowledge) say
# which hold CUDA state, what a fork child of each framework meets, and which framework
# runs its ops on a CPU thread pool.


def why_for(hazard: Hazard, runtimes: Sequence[str]) -> str:
    """Say why ``hazard`` breaks, for a parent that had ``runtimes`` initialized at the fork.

    A fork after init breaks in two ways that share nothing but the fork: a CUDA context
    does not survive it (only where CUDA was there), and a framework's CPU thread pool
    does not either (TensorFlow-CPU's freeze, where no CUDA was ever loaded). Only the
    one that applies is said, naming only the frameworks present; with no runtime known
    (or another hazard), it is ``hazard.why``.
    """
    if hazard is not FORK_AFTER_INIT or not runtimes:
        return hazard.why
    from gpudoctor.knowledge.registry import RECORDS
    from gpudoctor.knowledge.runtimes import FRAMEWORK_OF, holds_cuda

    frameworks = {FRAMEWORK_OF.get(r.split(":", 1)[0]) for r in runtimes}
    if any(holds_cuda(r) for r in runtimes):
        effects = [f.cuda_in_child for f in RECORDS if f.name in frameworks and f.cuda_in_child]
        what = _joined(effects) if effects else "its first CUDA call fails or hangs"
        return ("A CUDA context does not survive `fork()`. The child inherits a copy of the parent's memory that "
                f"claims CUDA is initialized, but the driver state behind it is gone: {what}.")
    pools = [f.cpu_pool for f in RECORDS if f.name in frameworks and f.cpu_pool]
    if not pools:
        return hazard.why
    return (f"{_joined(pools)} {'does' if len(pools) == 1 else 'do'} not survive `fork()`: `fork()` copies only "
            "the calling thread, so the pool's threads do not exist in the child, and the child's ops wait for "
            "ever for them. No CUDA was involved: this freeze happens on a CPU-only build too.")


def _joined(parts: Sequence[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]

_PLACEHOLDER = re.compile(r"\{\{([a-z-]+)\.(why|fix)\}\}")


def fill(text: str) -> str:
    """Replace each ``{{cause.why}}`` and ``{{cause.fix}}`` in ``text`` by that sentence
    (a KeyError names a cause that does not exist)."""
    def sentence(match: re.Match[str]) -> str:
        hazard = BY_CAUSE[match[1]]
        return hazard.why if match[2] == "why" else hazard.fix

    return _PLACEHOLDER.sub(sentence, text)
