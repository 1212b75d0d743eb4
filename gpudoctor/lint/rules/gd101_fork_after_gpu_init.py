"""GD101: a process is forked after this process initialized a GPU runtime."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from gpudoctor.knowledge import processes as P
from gpudoctor.knowledge.registry import BY_NAME
from gpudoctor.lint.analysis.events import Event, Init, SetPreload, Start
from gpudoctor.lint.analysis.flows import Flow, first_gpu_use, received_gpu_objects, server_init
from gpudoctor.lint.findings import ERROR, Finding, Fix, NoFix
from gpudoctor.lint.rules._base import (
    CheckContext,
    Rule,
    condition_sites,
    conditions_of,
    display,
    line_of,
    may_meet,
    method_set_elsewhere,
    related_site,
    spawn_hint,
    what_runs,
    when_text,
)

if TYPE_CHECKING:
    from gpudoctor.lint.frontend.parsed import LazySite

WHAT = {
    P.POOL: "the Pool forks its worker processes",
    P.EXECUTOR: "the ProcessPoolExecutor forks its worker processes",
    P.PROCESS: "this Process is forked",
    P.LIBRARY_POOL: f"{P.LIBRARY_POOL_SHOWN} forks its worker processes",
    P.OS_FORK: "os.fork() is called",
    P.JOBLIB: 'joblib\'s "multiprocessing" backend forks its worker processes (a multiprocessing Pool)',
}
# The same starts under forkserver: the worker is a fork of the server process.
SERVED = {
    P.POOL: "the Pool's workers are forked from the forkserver process",
    P.EXECUTOR: "the ProcessPoolExecutor's workers are forked from the forkserver process",
    P.PROCESS: "this Process is forked from the forkserver process",
    P.LIBRARY_POOL: f"{P.LIBRARY_POOL_SHOWN} has its workers forked from the forkserver process",
    P.JOBLIB: "joblib's workers are forked from the forkserver process",
}


class ForkAfterGpuInit(Rule):
    """## What it does
    Flags a process started with the `fork` start method (explicitly, through
    `os.fork()`, or because fork is the platform default) after this process
    initialized a GPU runtime, when the child uses a GPU framework. It reports the
    pool constructor, the `Process.start()` or the `os.fork()` call, and points to the
    line where the GPU was first initialized.

    Initialization means CUDA itself ran (`tf.config.list_physical_devices("GPU")`,
    `torch.cuda.is_available()`, `numba.cuda.gpus`), or a framework built its runtime
    (a TensorFlow op or model, a CuPy array, a CUDA tensor, a JAX array). A bare
    `import` is not initialization. `torch.cuda.device_count()` counts devices through
    NVML since torch 1.13 and is not counted; on older torch it initialized CUDA.

    Less obvious initializers (checked in torch 2.11, CuPy 14.2, jax 0.10/0.11, TF 2.21
    with Keras 3.15): `torch.cuda.get_arch_list()`, a CUDA `GradScaler` or `autocast`,
    `torch.cuda.initial_seed()` / `get_rng_state()` / `current_stream()`,
    `torch.accelerator.current_device_index()`; `cupy.cuda.Device()` with no argument and
    the memory pool's `set_limit()` / `used_bytes()`; `jax.process_index()`;
    `tf.config.experimental.get_memory_info()`; Keras 3 optimizers, metrics, `keras.ops`
    and `keras.random` (initializing the backend `KERAS_BACKEND` chose at import). Not
    initializers: `torch.cuda.Event()` (made when first recorded), `jax.numpy` dtype
    helpers (`finfo`, `issubdtype`, `result_type`), CuPy's version queries,
    `tf.compat.v1.reset_default_graph()`, and `import numba` / `@numba.njit` (only
    `numba.cuda` is Numba's GPU target). Triton: the first use of
    `triton.runtime.driver.active` (`get_current_target()`, ...) runs the NVIDIA
    backend's `is_active()` probe, which runs cuInit in every version;
    `triton.testing.do_bench` and a `@triton.jit` kernel launch initialize too;
    `@triton.autotune` at import does not (Triton 3.3 and later).

    PyTorch, version-dependent details (checked against torch 2.11):
    - `torch.cuda.is_available()` (and `torch.accelerator.is_available()`) reads
      `PYTORCH_NVML_BASED_CUDA_CHECK` at every call: when the program has set it to
      `"1"` before the call (`os.environ[...] = "1"`, `setdefault`, `update`; not
      `os.putenv`, which leaves `os.environ` alone), the call counts devices through
      NVML and does not initialize CUDA (unless NVML fails: then torch falls back to
      `cuInit`). A write on any path before the call counts, also in a branch that may
      not run. A value set outside the program, or by a library it imports (vLLM sets
      it on import), is not seen.
    - After `torch.set_default_device("cuda")`, or inside `with torch.device("cuda"):`,
      tensor factories called without `device=` (`torch.zeros`, `ones`, `empty`,
      `randn`, `rand`, `arange`, `tensor`, `full`, `eye`, `linspace`, ...; not the
      `*_like` ones, which follow their input) and layers such as `torch.nn.Linear`
      allocate on the GPU. An explicit `device=` or an inner `with torch.device("cpu"):`
      wins. The default device is followed through the code of one thread — a function
      and what it calls, a module's top level and what it imports — not into the
      threads and processes it starts.
    - Iterating a `DataLoader` with `pin_memory=True` initializes CUDA: its iterator
      calls `torch.accelerator.is_available()` (torch 2.5: `torch.cuda.is_available()`),
      and with workers `torch.accelerator.current_device_index()`.

    Which start method a start uses: an explicit `get_context(...)`, `mp_context=` or
    `set_start_method(...)` wins; otherwise the target's default (fork on Linux up to
    Python 3.13, forkserver on Linux from 3.14, spawn on macOS and Windows). A
    `ProcessPoolExecutor` given `max_tasks_per_child` and no `mp_context` uses spawn
    (Python 3.11+). joblib's `Parallel(backend="multiprocessing")` (also chosen by a
    surrounding `parallel_backend`/`parallel_config` block) is a multiprocessing Pool
    with the default start method, started when the `Parallel` object is called or its
    `with` block entered, and with `n_jobs` left unset or 1 it starts no process;
    joblib's default backend, loky, starts fresh interpreters and is never flagged.
    The `multiprocess` package (dill's copy of multiprocessing) keeps a default context
    of its own: its `set_start_method` does not change the standard library's, nor the
    other way round. Hugging Face datasets' `map`/`filter` with `num_proc` (not None, 0
    or 1) run their function in a `multiprocess` pool: forked by default, spawned after
    `multiprocess.set_start_method("spawn")`.
    Fallbacks for Pythons without `get_context`/`set_start_method` (added in 3.4) are
    dead code on every target (py310 and later): the `except AttributeError` or
    `except ImportError` branch around such a call never runs, and
    `hasattr(multiprocessing, "get_context")` is true.

    Forkserver workers are flagged too, when the forkserver itself initialized the GPU
    before forking them. The forkserver is a fresh interpreter that imports the
    modules of its preload list, then forks every worker from itself:
    - By default it preloads the main script: it runs the script's top level (not its
      `if __name__ == "__main__":` block) once. This works since Python 3.13.8 and
      3.14.1 (gh-126631); before, the script's path never reached the server and each
      worker ran the top level itself, which is harmless. gpudoctor applies it to
      targets py313 and py314: their current releases preload, and a program written
      for them meets it on its next patch update. It assumes so only for a script run
      by its path (a module with a main guard that is not in a package; a package's
      module is run with `python -m`, which the server does not preload), and not once
      `set_forkserver_preload` named a list without `"__main__"`.
    - `set_forkserver_preload([...])` (on `multiprocessing` or a context) names modules
      the server imports, in every version: one whose import initializes the GPU
      (`pycuda.autoinit`, or a module of the project that does at its top level)
      poisons every worker the same way.

    ## Why is this bad?
    {{fork-after-init.why}}

    {{forkserver-after-init.why}} Module-level
    `DEVICE = "cuda" if torch.cuda.is_available() else "cpu"` in the main script is
    enough on Python 3.14, where forkserver is the Linux default.

    ## Example
    ```python
    | import multiprocessing as mp
    | import cupy as cp
    |
    | x = cp.arange(10)  # CUDA initialized in the parent
    |
    | def work(i):
    |     return float(cp.sum(cp.arange(i)))
    |
    | if __name__ == "__main__":
    |     with mp.Pool(4) as pool:  # workers are forked here
    |         print(pool.map(work, range(8)))
    ```

    Use instead:
    ```python
    | if __name__ == "__main__":
    |     with mp.get_context("spawn").Pool(4) as pool:
    |         print(pool.map(work, range(8)))
    ```

    For a forkserver worker, {{forkserver-after-init.fix}}

    ## Fix safety
    Switching to spawn is unsafe to apply automatically: spawn re-imports the main
    module in every worker and needs picklable task functions and arguments.

    ## References
    - [PyTorch: CUDA in multiprocessing](https://pytorch.org/docs/stable/notes/multiprocessing.html#cuda-in-multiprocessing)
    - [Python: contexts and start methods](https://docs.python.org/3/library/multiprocessing.html#contexts-and-start-methods)
    - [CPython gh-126631: forkserver preloads `__main__` (3.13.8, 3.14.1)](https://github.com/python/cpython/issues/126631)
    - [joblib: Parallel and its backends](https://joblib.readthedocs.io/en/stable/parallel.html)
    - [CUDA programming guide: initialization](https://docs.nvidia.com/cuda/cuda-c-programming-guide/#initialization)
    """

    code = "GD101"
    name = "fork-after-gpu-init"
    severity = ERROR
    summary = "Process forked after a GPU runtime was initialized"
    fix_title = 'Use the spawn start method: multiprocessing.get_context("spawn")'
    INVALID = (
        """\
        | import multiprocessing as mp
        | import cupy as cp
        |
        | cp.cuda.Device(0).use()
        |
        | def work(x):
        |     return cp.sum(cp.asarray(x))
        |
        | if __name__ == "__main__":
        |     # ruleid: GD101
        |     with mp.Pool(2) as pool:
        |         pool.map(work, [[1, 2], [3]])
        """,
        """\
        | import os
        | import torch
        |
        | def main():
        |     torch.cuda.is_available()
        |     # ruleid: GD101
        |     pid = os.fork()
        |     if pid == 0:
        |         torch.zeros(1).cuda()
        |         os._exit(0)
        """,
        """\
        | import multiprocessing as mp
        | import tensorflow as tf
        |
        | def infer(n):
        |     return float(tf.reduce_sum(tf.ones((n, n))))
        |
        | def run():
        |     print(tf.constant(1.0))
        |     p = mp.Process(target=infer, args=(3,))
        |     # ruleid: GD101
        |     p.start()
        |
        | if __name__ == "__main__":
        |     run()
        """,
        """\
        | import multiprocessing as mp
        |
        | def work(n):
        |     import pycuda.gpuarray as gpuarray
        |     return gpuarray.zeros(n, "f4").get().sum()
        |
        | if __name__ == "__main__":
        |     ctx = mp.get_context("forkserver")
        |     ctx.set_forkserver_preload(["pycuda.autoinit"])  # the server initializes CUDA
        |     # ruleid: GD101
        |     with ctx.Pool(2) as pool:
        |         pool.map(work, [10, 20])
        """,
        """\
        | import torch
        | from joblib import Parallel, delayed
        |
        | def work(i):
        |     return torch.ones(i, device="cuda").sum().item()
        |
        | if __name__ == "__main__":
        |     torch.cuda.is_available()
        |     # ruleid: GD101
        |     Parallel(n_jobs=2, backend="multiprocessing")(delayed(work)(i) for i in range(4))
        """,
        """\
        | import torch
        | from datasets import load_dataset
        |
        | def embed(batch):
        |     return {"vector": torch.ones(len(batch["text"]), device="cuda").tolist()}
        |
        | if __name__ == "__main__":
        |     print(torch.cuda.get_device_name(0))
        |     dataset = load_dataset("imdb", split="train")
        |     # ruleid: GD101
        |     dataset = dataset.map(embed, batched=True, num_proc=4)
        """,
    )
    VALID = (
        """\
        | import torch
        | from datasets import load_dataset
        | from multiprocess import set_start_method
        |
        | def embed(batch):
        |     return {"vector": torch.ones(len(batch["text"]), device="cuda").tolist()}
        |
        | if __name__ == "__main__":
        |     set_start_method("spawn")  # datasets' pool is the multiprocess package's
        |     print(torch.cuda.get_device_name(0))
        |     dataset = load_dataset("imdb", split="train")
        |     dataset = dataset.map(embed, batched=True, num_proc=4)
        """,
        """\
        | import multiprocessing as mp
        | import cupy as cp
        |
        | def work(x):
        |     return float(cp.sum(cp.asarray(x)))
        |
        | if __name__ == "__main__":
        |     with mp.get_context("spawn").Pool(2) as pool:
        |         pool.map(work, [[1, 2], [3]])
        """,
        """\
        | import multiprocessing as mp
        | import tensorflow as tf
        |
        | def cpu_only(path):
        |     return open(path).read()
        |
        | if __name__ == "__main__":
        |     tf.constant(1.0)
        |     with mp.get_context("fork").Pool(2) as pool:
        |         pool.map(cpu_only, ["a", "b"])
        """,
        """\
        | import multiprocessing as mp
        | import torch
        |
        | def work(i):
        |     return torch.ones(i, device="cuda").sum().item()
        |
        | if __name__ == "__main__":
        |     n = torch.cuda.device_count()
        |     mp.set_start_method("spawn")
        |     with mp.Pool(n) as pool:
        |         pool.map(work, range(n))
        """,
        """\
        | from concurrent.futures import ProcessPoolExecutor
        | import torch
        |
        | def work(i):
        |     return torch.ones(i, device="cuda").sum().item()
        |
        | if __name__ == "__main__":
        |     torch.cuda.is_available()
        |     # max_tasks_per_child without mp_context: the workers are spawned
        |     with ProcessPoolExecutor(2, max_tasks_per_child=4) as ex:
        |         list(ex.map(work, range(3)))
        """,
    )

    def check(self, ctx: CheckContext) -> Iterator[Finding]:
        for site in ctx.process_starts():
            effect, parent, method, child = site.start, site.parent, site.method, site.child
            if not isinstance(effect, Start) or effect.kind not in WHAT or child is None:
                continue
            if method == "fork":
                # The first init that does not depend on a condition the start does not
                # (else the first): the message then names no condition it need not.
                shared = site.event.ctx.conditions
                inits = [e for e in parent.inits if may_meet(e, site.event)]
                init = next((e for e in inits if not conditions_of(e.ctx.conditions, shared)),
                            inits[0] if inits else None)
            elif method == "forkserver" and child.served:
                init = server_init(child)  # the server was initialized before it forked the child
            else:
                continue
            if init is None:
                continue
            use = first_gpu_use(child)
            received = received_gpu_objects(child)
            if use is None and not received:
                continue
            if not self.first_at(effect.site):
                continue
            if method == "fork":
                yield self._finding(effect, init, use, received, ctx.spawn_fix(site), child, site.event,
                                    method_set_elsewhere(site))
            else:
                yield self._served(effect, child, init, use, received, ctx.spawn_fix(site))

    def _finding(self, start: Start, init_event: Event, use_event: Event | None, received: list[str],
                 fix: Fix | NoFix, child: Flow, start_event: Event,
                 elsewhere: tuple[LazySite, str] | None = None) -> Finding:
        init = init_event.effect
        assert isinstance(init, Init)
        child_fw, consequence = _child_framework(use_event, received)
        when = conditions_of(init_event.ctx.conditions, start_event.ctx.conditions)
        message = (
            f"{WHAT[start.kind]} after {display(init.framework)} {_initialized(init.framework)} in this "
            f"process ({init.api}, {line_of(init.site, start.site)}{when_text(when, start.site)}); the child uses "
            f"{display(child_fw)} and will {consequence}"
        )
        related = [related_site(init.site, f"{display(init.framework)} initialized here ({init.api})"),
                   *condition_sites(when)]
        if elsewhere is not None:  # a start method set on another package's context
            message += f" (it forks: {elsewhere[1]}, {line_of(elsewhere[0], start.site)})"
            related.append(related_site(elsewhere[0], elsewhere[1]))
        if init_event.ctx.via is not None and init_event.ctx.via.path == start.site.path:
            related.append(related_site(init_event.ctx.via, f"through this {what_runs(init_event.ctx.via)}"))
        if use_event is not None:
            related.append(related_site(_used(use_event).site, f"the child uses {display(child_fw)} here"))
        return self.finding(start.site, message, tuple(related), fix=fix,
                            hint=spawn_hint(start.kind, child, self.fix_title))

    def _served(self, start: Start, child: Flow, init_event: Event, use_event: Event | None, received: list[str],
                fix: Fix | NoFix) -> Finding:
        """A forkserver worker: the server initialized the GPU while importing the main
        module (its top level) or a module named to set_forkserver_preload."""
        init = init_event.effect
        assert isinstance(init, Init)
        child_fw, consequence = _child_framework(use_event, received)
        preload = child.preload.effect if child.preload is not None else None
        assert preload is None or isinstance(preload, SetPreload)
        fw = display(init.framework)
        related = [related_site(init.site, f"{fw} initialized here ({init.api})")]
        module = preload.source_of(init_event) if preload is not None else None
        if preload is not None and module is not None:
            where = f"it imported {module}, named by set_forkserver_preload ({line_of(preload.site, start.site)})"
            related.append(related_site(preload.site, f"the forkserver is told to import {module} here"))
            hint = (f"Do not preload a module that initializes the GPU ({module}): import it where the "
                    'worker needs it, or use the spawn start method: multiprocessing.get_context("spawn")')
        else:
            where = f"it ran the main module's top level ({init.api}, {line_of(init.site, start.site)})"
            hint = ('Move the GPU initialization under `if __name__ == "__main__":` or into the function '
                    "that needs it (the forkserver runs the main module's top level, then forks every "
                    'worker from itself), or use the spawn start method: multiprocessing.get_context("spawn")')
        if init_event.ctx.via is not None and init_event.ctx.via.path == start.site.path \
                and (preload is None or init_event.ctx.via != preload.site):
            related.append(related_site(init_event.ctx.via, f"through this {what_runs(init_event.ctx.via)}"))
        if use_event is not None:
            related.append(related_site(_used(use_event).site, f"the child uses {display(child_fw)} here"))
        message = (
            f"{SERVED[start.kind]}, which {_initialized(init.framework)} ({fw}) when {where}; the child uses "
            f"{display(child_fw)} and will {consequence}"
        )
        return self.finding(start.site, message, tuple(related), fix=fix, hint=hint)


def _initialized(framework: str) -> str:
    """What the framework's initialization started ("initialized CUDA")."""
    record = BY_NAME.get(framework)
    return record.initialized if record is not None else "initialized CUDA"


def _used(use_event: Event) -> Init:
    """The init of a child's first GPU use (what first_gpu_use finds)."""
    init = use_event.effect
    assert isinstance(init, Init)
    return init


def _child_framework(use_event: Event | None, received: list[str]) -> tuple[str, str]:
    """The framework the child uses, and what it will do."""
    child_fw = _used(use_event).framework if use_event is not None else received[0]
    return child_fw, BY_NAME[child_fw].consequence if child_fw in BY_NAME else "fail"
