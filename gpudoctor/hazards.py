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

BY_CAUSE = {h.cause: h for h in (FORK_AFTER_INIT, FORKSERVER_AFTER_INIT, MULTITHREADED_FORK, GPU_MEMORY_GRAB_ALL,
                                 CONFIG_AFTER_INIT, PROCESS_IN_DAEMONIC_WORKER, WORKER_NOT_IMPORTABLE,
                                 PROCESS_START_AT_IMPORT, WORKER_DIED_IN_TASK, FORK_AFTER_OPENMP,
                                 QUEUE_JOINED_BEFORE_READ, WORKERS_EACH_A_COPY, COLLECTIVE_NOT_REACHED,
                                 COLLECTIVES_MISMATCHED, RANK_HELD_UP, RANK_FAILED)}

# Why a fork after init breaks, worded for what the forking process had: ``why`` above
# says it for every framework (the rule docs, which cannot know), a diagnosis for the
# runtimes that were there. The keys are the runtime ids the probe records (the
# bootstrap's at a fork, ``/proc/PID/maps``' for an attached process).
_CUDA_RUNTIMES = frozenset({"cuda-driver", "cuda-context", "cuda-runtime", "nvrtc", "torch.cuda", "numba.cuda",
                            "pycuda", "cupy", "jax:cuda", "jax:gpu", "jax:rocm"})
# What a fork child of a parent with CUDA initialized meets, per framework, in the order named.
_CUDA_IN_CHILD = (
    ("torch", "PyTorch raises \"Cannot re-initialize CUDA in forked subprocess\""),
    ("cupy", "CuPy fails with `cudaErrorInitializationError`"),
    ("numba", "Numba raises \"CUDA initialized before forking\""),
    ("tensorflow", "TensorFlow aborts or hangs"),
    ("jax", "JAX warns (`os.fork() was called`) and its workers hang"),
)
# The CPU thread pool a framework's ops run on, which a fork child does not get.
_CPU_POOLS = (
    ("tensorflow", "TensorFlow's intra-op thread pool"),
    ("jax", "JAX's (XLA's) CPU thread pool"),
)


def _framework(runtime: str) -> str:
    """"torch.cuda" -> "torch", "jax:cpu" -> "jax": the framework a runtime id belongs to."""
    return runtime.split(":", 1)[0].split(".", 1)[0]


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
    frameworks = {_framework(r) for r in runtimes}
    if _CUDA_RUNTIMES & set(runtimes):
        effects = [effect for name, effect in _CUDA_IN_CHILD if name in frameworks]
        what = _joined(effects) if effects else "its first CUDA call fails or hangs"
        return ("A CUDA context does not survive `fork()`. The child inherits a copy of the parent's memory that "
                f"claims CUDA is initialized, but the driver state behind it is gone: {what}.")
    pools = [pool for name, pool in _CPU_POOLS if name in frameworks]
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
