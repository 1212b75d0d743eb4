"""OpenMP thread pools as the probe sees them in a fork child's native stack: which
runtime libraries lose their pool across ``fork()``, and which frameworks run their CPU
ops on one.

The probe's own modules stay framework-neutral (``probe/explain_openmp_fork.py``); the
libraries' file names, the frameworks that load them and the frameworks' own way to keep
a parent out of its pool live here.

Sources:
- GCC bug 60035, on using OpenMP on both sides of a fork: GNU OpenMP (libgomp) keeps its
  worker threads for the next parallel region and does nothing about them at a fork, so a
  fork child's next parallel region waits for threads that are not there
  (OpenMathLib/OpenBLAS#343 points to it for OpenBLAS built on libgomp).
- pytorch/pytorch#17199 ("Deadlock with multiprocessing (using fork) and unittest"): a
  CPU op in the parent, the same op in a fork child, which never returns.
- Observed with the torch 2.13.0 CPU wheel (Linux x86-64, Python 3.11, 2 cores; its
  ``torch.__config__.parallel_info()`` says "ATen parallel backend: OpenMP", and the wheel
  ships ``torch/lib/libgomp.so.1``): after ``torch.set_num_threads(2)`` and a 2000x2000
  matmul in the parent, a fork ``Pool(2)`` whose task makes a 2000x2000 tensor hangs, and
  so does a child of ``os.fork()``; ``py-spy dump --native`` shows the child's only thread
  in two frames of ``libgomp.so.1`` (no symbols) called by
  ``at::TensorIteratorBase::for_each`` (``libtorch_cpu.so``). The same program finishes
  with ``torch.set_num_threads(1)`` called in the parent after its matmul and before the
  fork, with ``Pool(initializer=torch.set_num_threads, initargs=(1,))``, with
  ``OMP_NUM_THREADS=1`` in the environment (and no ``set_num_threads`` call), and with the
  spawn and forkserver start methods.
"""

from __future__ import annotations

from dataclasses import dataclass

# OpenMP runtimes that do not rebuild their pool in a fork child: (the start of the
# library's file name as a native frame names it, e.g. "libgomp.so.1" or a wheel's
# "libgomp-a34b3233.so.1"; the start of its own functions' names, where the library has
# symbols or is linked in statically; the runtime as a report names it).
FORK_UNSAFE = (("libgomp", ("gomp_", "GOMP_"), "GNU OpenMP"),)

@dataclass(frozen=True)
class PoolOwner:
    """A framework whose CPU ops run on an OpenMP pool, and how to keep a parent that forks
    out of it."""

    framework: str  # as the probe's causes name frameworks ("torch")
    name: str  # as a report says it
    libraries: tuple[str, ...]  # the start of its native libraries' file names in a stack
    pool: str  # what it runs on the pool, as a sentence
    one_thread: str  # the framework's own fix, worded to follow "or "
    source: str


OWNERS = (
    PoolOwner(
        framework="torch",
        name="PyTorch",
        libraries=("libtorch_cpu", "libtorch_python", "libtorch.so"),
        pool="PyTorch runs its CPU ops in parallel (intra-op parallelism) on this pool",
        one_thread=("call `torch.set_num_threads(1)` in the parent before it forks, or first thing in each worker "
                    "(`Pool(initializer=torch.set_num_threads, initargs=(1,))`): the children's ops then run on "
                    "their own thread, outside the pool"),
        source="pytorch/pytorch#17199; observed with torch 2.13.0 CPU (see the module's docstring)",
    ),
)


def runtime_of(library: str, function: str = "") -> str | None:
    """Name the fork-unsafe OpenMP runtime a native frame is in (by its library's file, or
    by its function's name), or None."""
    return next((name for start, functions, name in FORK_UNSAFE
                 if library.startswith(start) or function.startswith(functions)), None)


def owner_of(library: str) -> PoolOwner | None:
    """The framework a native library file belongs to, among those that run on OpenMP."""
    return next((owner for owner in OWNERS if library.startswith(owner.libraries)), None)
