"""GD301: a GPU environment variable is written after the runtime that reads it started."""

from __future__ import annotations

from collections.abc import Iterator

from gpudoctor.knowledge.registry import AT_IMPORT, IMPORT_READERS, READ_AT, READERS
from gpudoctor.knowledge.table import InitLevel
from gpudoctor.lint.analysis.events import EnvWrite, Event, Imported, Init
from gpudoctor.lint.analysis.flows import Flow, State
from gpudoctor.lint.analysis.values import SavedEnv, strings
from gpudoctor.lint.findings import ERROR, Finding
from gpudoctor.lint.rules._base import (
    CheckContext,
    Rule,
    condition_sites,
    conditions_of,
    display,
    line_of,
    may_meet,
    related_site,
    when_text,
)


def too_late(var: str, state: State, write: Event | None = None) -> Event | None:
    """Return the event (an init, or an import for variables read at import) after which
    writing ``var`` has no effect in this process (one a run can meet along with the
    ``write`` event, when given: see ``may_meet``)."""
    if var not in READERS:
        return None
    if READ_AT[var] == AT_IMPORT:
        return state.import_of(IMPORT_READERS[var])
    reader = READERS[var]
    for event in state.inits:
        init = event.effect
        assert isinstance(init, Init)
        # CUDA_* are read by the driver at cuInit; the others by their framework when it
        # builds its runtime (torch.cuda.is_available() alone does not read the allocator
        # settings, the first CUDA allocation does).
        if (reader is None or (init.framework == reader and init.level == InitLevel.RUNTIME)) and \
                (write is None or may_meet(event, write)):
            return event
    return None


def _changes_nothing(write: EnvWrite, state: State) -> bool:
    """Does the write leave the variable as it was: a ``setdefault`` of a variable this
    process already set, or the same literal value written again (a pool worker running
    its task a second time writes what its first task wrote, before the runtime read it)?"""
    earlier = [e.effect for e in state.env if isinstance(e.effect, EnvWrite) and e.effect.var == write.var
               and e.effect.environ]
    if not earlier:
        return False
    if write.keeps:
        return True
    value = strings(write.value)  # one known string, the same as an earlier write's
    return len(value) == 1 and len(write.value) == 1 and \
        any(strings(e.value) == value and len(e.value) == 1 for e in earlier)


class GpuEnvSetAfterInit(Rule):
    """## What it does
    Flags a write to an environment variable that a GPU framework reads once, through
    `os.environ[k] = v`, `os.environ.update`, `os.environ.setdefault` or `os.putenv`, after
    the moment it was read in this process — including in a forked child whose parent
    passed that moment before the fork. Three moments:

    - when CUDA initializes (`cuInit`): `CUDA_VISIBLE_DEVICES`, `CUDA_DEVICE_ORDER`; any
      driver initialization makes them too late;
    - when a framework builds its runtime: `TF_FORCE_GPU_ALLOW_GROWTH`, `TF_GPU_ALLOCATOR`,
      `XLA_PYTHON_CLIENT_PREALLOCATE`, `XLA_PYTHON_CLIENT_MEM_FRACTION`,
      `XLA_CLIENT_MEM_FRACTION`, `XLA_PYTHON_CLIENT_ALLOCATOR`, `XLA_FLAGS`,
      `CUPY_GPU_MEMORY_LIMIT`, `PYTORCH_CUDA_ALLOC_CONF`, `PYTORCH_ALLOC_CONF` (a device
      query such as `torch.cuda.is_available()` is not enough);
    - when the framework is imported: `JAX_PLATFORMS`, `JAX_PLATFORM_NAME`,
      `JAX_CUDA_VISIBLE_DEVICES` (`import jax` reads its configuration) and
      `KERAS_BACKEND` (`import keras`) — a write after the import is ignored even though
      no device was touched yet.

    Version notes: JAX has read its flags at import since its configuration moved to
    `jax/_src/config.py` (checked on 0.10.2 and 0.11); `XLA_CLIENT_MEM_FRACTION` replaces
    the deprecated `XLA_PYTHON_CLIENT_MEM_FRACTION` (setting both is an error);
    `PYTORCH_ALLOC_CONF` is read besides `PYTORCH_CUDA_ALLOC_CONF` by recent torch (2.11
    checked), older releases know only the latter.

    `PYTORCH_NVML_BASED_CUDA_CHECK` is not one of them: PyTorch reads it each time
    `torch.cuda.is_available()` is called, so a write after an init still changes the
    calls after it, and is not reported. Nor is writing back the value read from the
    same variable earlier (`old = os.environ.get("CUDA_VISIBLE_DEVICES")` ... then, in a
    `finally`, `os.environ["CUDA_VISIBLE_DEVICES"] = old`): a restore, not a setting.

    ## Why is this bad?
    The write succeeds and changes nothing: the driver already enumerated the devices,
    the allocator is already configured. Worker processes that "select their GPU" this
    way all keep using GPU 0 — or, forked from an initialized parent, cannot use CUDA.

    ## Example
    ```python
    | def worker(gpu_id, data):
    |     os.environ["CUDA_VISIBLE_DEVICES"] = str(gpu_id)  # the parent already ran cuInit
    |     return tf.square(data).numpy()
    ```

    Use instead:
    ```python
    | def init_worker(gpu_ids):
    |     os.environ["CUDA_VISIBLE_DEVICES"] = str(gpu_ids.get())
    |
    | ctx = mp.get_context("spawn")
    | pool = ctx.Pool(n, initializer=init_worker, initargs=(queue,))
    ```

    ## References
    - [CUDA environment variables](https://docs.nvidia.com/cuda/cuda-c-programming-guide/#env-vars)
    - [TensorFlow: limiting GPU memory growth](https://www.tensorflow.org/guide/gpu#limiting_gpu_memory_growth)
    - [JAX: GPU memory allocation](https://docs.jax.dev/en/latest/gpu_memory_allocation.html)
    """

    code = "GD301"
    name = "gpu-env-set-after-init"
    severity = ERROR
    summary = "GPU environment variable set after the runtime that reads it was initialized"
    fix_title = "Set the variable before the first GPU call (or before the process that needs it starts)"
    INVALID = (
        """\
        | import os
        | import tensorflow as tf
        |
        | tf.constant(1.0)
        | # ruleid: GD301
        | os.environ["TF_FORCE_GPU_ALLOW_GROWTH"] = "true"
        """,
        """\
        | import os
        | import torch
        |
        | def pick(gpu):
        |     torch.cuda.is_available()
        |     # ruleid: GD301
        |     os.environ.update({"CUDA_VISIBLE_DEVICES": str(gpu)})
        """,
        """\
        | import multiprocessing as mp
        | import os
        | import tensorflow as tf
        |
        | def work(gpu):
        |     # ruleid: GD301
        |     os.environ["CUDA_VISIBLE_DEVICES"] = str(gpu)
        |     return tf.constant(1.0).numpy()
        |
        | if __name__ == "__main__":
        |     tf.config.list_physical_devices("GPU")
        |     with mp.get_context("fork").Pool(2) as pool:
        |         pool.map(work, [0, 1])
        """,
        """\
        | import os
        | import jax.numpy as jnp
        |
        | x = jnp.ones(3)
        | # ruleid: GD301
        | os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
        """,
        """\
        | import os
        | import cupy as cp
        |
        | def limit():
        |     cp.zeros(10)
        |     # ruleid: GD301
        |     os.putenv("CUPY_GPU_MEMORY_LIMIT", "50%")
        """,
        """\
        | import os
        | import torch
        |
        | t = torch.ones(2, device="cuda")
        | # ruleid: GD301
        | os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
        """,
    )
    VALID = (
        """\
        | import os
        | import tensorflow as tf
        |
        | os.environ["TF_FORCE_GPU_ALLOW_GROWTH"] = "true"
        | tf.constant(1.0)
        """,
        """\
        | import os
        | import cupy as cp
        |
        | cp.ones(3)
        | os.environ["TF_FORCE_GPU_ALLOW_GROWTH"] = "true"
        """,
        """\
        | import multiprocessing as mp
        | import os
        |
        | def work(gpu):
        |     os.environ["CUDA_VISIBLE_DEVICES"] = str(gpu)
        |     import tensorflow as tf
        |     return tf.constant(1.0).numpy()
        |
        | if __name__ == "__main__":
        |     with mp.get_context("spawn").Pool(2) as pool:
        |         pool.map(work, [0, 1])
        """,
        """\
        | import os
        | import tensorflow as tf
        |
        | os.environ["CUDA_VISIBLE_DEVICES"] = "0"
        | os.environ["TF_GPU_ALLOCATOR"] = "cuda_malloc_async"
        | tf.constant(1.0)
        """,
        """\
        | import os
        | import jax.numpy as jnp
        |
        | os.environ["XLA_PYTHON_CLIENT_MEM_FRACTION"] = ".25"
        | jnp.ones(3)
        | os.environ["SOME_OTHER_SETTING"] = "1"
        """,
        """\
        | import os
        | import torch
        |
        | print(torch.cuda.device_count())
        | os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
        | torch.ones(1, device="cuda")
        """,
    )

    def check(self, ctx: CheckContext) -> Iterator[Finding]:
        for flow, _, event, state in ctx.points():
            effect = event.effect
            if not isinstance(effect, EnvWrite):
                continue
            if effect.value and all(isinstance(a, SavedEnv) and a.var == effect.var for a in effect.value):
                continue  # a restore: the value read from this variable earlier, written back
            if _changes_nothing(effect, state):
                continue
            init_event = too_late(effect.var, state, event)
            if init_event is None:
                continue
            if isinstance(init_event.effect, Imported):
                yield self._after_import(effect, init_event, flow)
                continue
            init = init_event.effect
            assert isinstance(init, Init)
            what = "CUDA" if READERS[effect.var] is None else "its runtime"
            where, hint = "", None
            if init_event in flow.entry.inits:
                where = " in the parent before this process was forked"
            elif any(e is init_event for e in flow.events[:flow.served]):
                # The forkserver imported it (the main module, or a preloaded one) and
                # this process is a fork of the server.
                where = " in the forkserver process, before it forked this one"
                hint = ("Set the variable before the GPU is initialized at the main module's top level "
                        "(or in a module the forkserver preloads), or move that initialization under "
                        '`if __name__ == "__main__":`')
            elif any(e is init_event for e in flow.events[:flow.prelude]):
                # A spawned worker runs the main module's top level (re-importing it) first.
                where = " at the main module's top level, which this spawned process runs again first"
                hint = ('Move the module-level GPU call under `if __name__ == "__main__":` '
                        "(a spawned worker re-imports the main module before it runs anything else)")
            when = conditions_of(init_event.ctx.conditions, event.ctx.conditions)
            yield self.finding(
                effect.site,
                f"{effect.var} is set after {display(init.framework)} initialized {what}{where} "
                f"({init.api}, {line_of(init.site, effect.site)}{when_text(when, effect.site)}); "
                "the new value is ignored",
                (related_site(init.site, f"{display(init.framework)} initialized here"), *condition_sites(when)),
                hint=hint,
            )

    def _after_import(self, write: EnvWrite, import_event: Event, flow: Flow) -> Finding:
        imported = import_event.effect
        assert isinstance(imported, Imported)
        module = IMPORT_READERS[write.var]
        where, hint = "", None
        if import_event in flow.entry.imports:
            where = " in the parent before this process was forked"
            hint = f"Set {write.var} in the parent before it imports {module}, or start the worker with spawn"
        elif any(e is import_event for e in flow.events[:flow.prelude]):
            where = " at the main module's top level, which this spawned process runs again first"
            hint = (f"Set {write.var} in the parent before the workers start: a spawned worker inherits the "
                    f"parent's environment and imports {module} while it re-imports the main module")
        else:
            hint = (f"Set {write.var} before the first `import {module}` "
                    "(at the top of the program, or in the environment)")
        return self.finding(
            write.site,
            f"{write.var} is set after {module} was imported{where} ({line_of(imported.site, write.site)}); "
            f"{module} reads it when it is imported, so the new value is ignored",
            (related_site(imported.site, f"{module} imported here"),),
            hint=hint,
        )
