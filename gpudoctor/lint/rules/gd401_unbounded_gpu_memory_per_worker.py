"""GD401: several workers each let TensorFlow or JAX reserve (nearly) all GPU memory."""

from __future__ import annotations

from collections.abc import Iterator

from gpudoctor.knowledge import processes as P
from gpudoctor.knowledge.registry import BY_NAME
from gpudoctor.knowledge.table import InitLevel
from gpudoctor.lint.analysis.events import EnvWrite, Event, Init, Start, TfConfig
from gpudoctor.lint.analysis.flows import Flow, State
from gpudoctor.lint.analysis.values import strings
from gpudoctor.lint.findings import WARNING, Finding
from gpudoctor.lint.rules._base import CheckContext, Rule, display, related_site

# The frameworks that reserve (nearly) all GPU memory by default, and how (their records'
# ``reserves``, ``memory_caps`` and ``capping_config`` say what bounds it).
GREEDY = {framework.name: framework.reserves for framework in BY_NAME.values() if framework.reserves}


def _caps(event: Event, framework: str, in_child: bool) -> bool:
    effect = event.effect
    if isinstance(effect, EnvWrite):
        if effect.var == "CUDA_VISIBLE_DEVICES":
            # In the child, a per-worker device; in the parent only hiding all GPUs helps.
            return in_child or "" in strings(effect.value)
        caps = BY_NAME[framework].memory_caps
        if effect.var not in caps:
            return False
        allowed = caps[effect.var]
        values = strings(effect.value)  # compared as the framework compares them: exactly
        return allowed is None or not values or bool(values & allowed)
    if isinstance(effect, TfConfig):
        return effect.api.rsplit(".", 1)[-1] in BY_NAME[framework].capping_config
    return False


def _concurrent_workers(ctx: CheckContext, flow: Flow, index: int, start: Start) -> int | None:
    """How many workers run at once, if more than one (None when unknown but several)."""
    if start.kind in (P.POOL, P.EXECUTOR, P.SPAWN_LAUNCHER, P.JOBLIB):
        if start.workers is not None and start.workers < 2:
            return 0
        return start.workers
    if start.kind == P.PROCESS and flow.points[index][0].ctx.loop is not None:
        if ctx.joined_later(flow, index, start.started, flow.points[index][0].ctx.loop):
            return 0  # started and joined one at a time
        return None
    return 0


class UnboundedGpuMemoryPerWorker(Rule):
    """## What it does
    Flags a pool, executor or set of processes whose workers run at the same time and
    each initialize TensorFlow or JAX without bounding their GPU memory: no memory
    growth or memory limit, no `TF_FORCE_GPU_ALLOW_GROWTH=true`, no
    `XLA_PYTHON_CLIENT_PREALLOCATE=false` / memory fraction / platform allocator /
    `JAX_PLATFORMS=cpu` before the worker's first use, and no per-worker
    `CUDA_VISIBLE_DEVICES`. Values count as the frameworks compare them: TensorFlow
    takes `TF_FORCE_GPU_ALLOW_GROWTH` only as exactly `true` (`1` or `True` is logged as
    unparseable and ignored), JAX turns preallocation off only for `false`, `False` or
    `0`. Reported at the pool constructor or the `.start()`. PyTorch,
    CuPy and Numba allocate on demand and are not flagged; a forked child of an
    initialized parent is GD101's case, and GD101's help then names this rule's fix as
    the step after spawn (spawned workers each reserve the memory).

    ## Why is this bad?
    By default TensorFlow reserves nearly all free memory of every visible GPU when it
    starts, and JAX preallocates 75 % of it. The first worker takes the GPU; the others
    fail with `CUDA_ERROR_OUT_OF_MEMORY` / `RESOURCE_EXHAUSTED`, or crawl.

    ## Example
    ```python
    | def work(x):
    |     return tf.square(x).numpy()
    |
    | with mp.get_context("spawn").Pool(4) as pool:
    |     pool.map(work, data)
    ```

    Use instead:
    ```python
    | def init_worker():
    |     os.environ["TF_FORCE_GPU_ALLOW_GROWTH"] = "true"
    |
    | with mp.get_context("spawn").Pool(4, initializer=init_worker) as pool:
    |     pool.map(work, data)
    ```

    ## References
    - [TensorFlow: limiting GPU memory growth](https://www.tensorflow.org/guide/gpu#limiting_gpu_memory_growth)
    - [JAX: GPU memory allocation](https://docs.jax.dev/en/latest/gpu_memory_allocation.html)
    """

    code = "GD401"
    name = "unbounded-gpu-memory-per-worker"
    severity = WARNING
    summary = "Several workers each let TensorFlow or JAX reserve most GPU memory"
    fix_title = "Bound each worker's GPU memory (memory growth, a memory limit, or its own device)"
    suppressed_by = ("GD101",)
    outlives_fix = True  # GD101's fix, spawn, leaves each worker reserving the GPU's memory
    INVALID = (
        """\
        | import multiprocessing as mp
        | import tensorflow as tf
        |
        | def work(x):
        |     return tf.square(x).numpy()
        |
        | if __name__ == "__main__":
        |     # ruleid: GD401
        |     with mp.get_context("spawn").Pool(4) as pool:
        |         pool.map(work, [1.0, 2.0])
        """,
        """\
        | import multiprocessing as mp
        | import jax.numpy as jnp
        |
        | def work(x):
        |     return float(jnp.sum(jnp.ones(3) * x))
        |
        | if __name__ == "__main__":
        |     # ruleid: GD401
        |     with mp.get_context("spawn").Pool() as pool:
        |         pool.map(work, [1, 2])
        """,
        """\
        | from concurrent.futures import ProcessPoolExecutor
        | import multiprocessing as mp
        | import tensorflow as tf
        |
        | def predict(path):
        |     model = tf.keras.models.load_model(path)
        |     return model.predict([[1.0]])
        |
        | def main(paths):
        |     # ruleid: GD401
        |     with ProcessPoolExecutor(max_workers=3, mp_context=mp.get_context("spawn")) as ex:
        |         return list(ex.map(predict, paths))
        """,
        """\
        | import multiprocessing as mp
        | import tensorflow as tf
        |
        | def fold(i):
        |     tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(1)])
        |
        | if __name__ == "__main__":
        |     ctx = mp.get_context("spawn")
        |     procs = [ctx.Process(target=fold, args=(i,)) for i in range(4)]
        |     for p in procs:
        |         # ruleid: GD401
        |         p.start()
        |     for p in procs:
        |         p.join()
        """,
        """\
        | import multiprocessing as mp
        | import os
        | import tensorflow as tf
        |
        | def work(x):
        |     return tf.square(x).numpy()
        |
        | if __name__ == "__main__":
        |     os.environ["CUDA_VISIBLE_DEVICES"] = "0"
        |     # ruleid: GD401
        |     with mp.get_context("spawn").Pool(2) as pool:
        |         pool.map(work, [1.0])
        """,
        """\
        | import multiprocessing as mp
        | import jax
        |
        | def work(x):
        |     return jax.device_put(x)
        |
        | def main():
        |     # ruleid: GD401
        |     pool = mp.Pool(processes=8)
        |     pool.map(work, range(8))
        """,
    )
    VALID = (
        """\
        | import multiprocessing as mp
        | import os
        | import tensorflow as tf
        |
        | def init():
        |     os.environ["TF_FORCE_GPU_ALLOW_GROWTH"] = "true"
        |
        | def work(x):
        |     return tf.square(x).numpy()
        |
        | if __name__ == "__main__":
        |     with mp.get_context("spawn").Pool(4, initializer=init) as pool:
        |         pool.map(work, [1.0])
        """,
        """\
        | import multiprocessing as mp
        | import os
        | import jax.numpy as jnp
        |
        | def work(x):
        |     return float(jnp.sum(jnp.ones(3) * x))
        |
        | if __name__ == "__main__":
        |     os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
        |     with mp.get_context("spawn").Pool(2) as pool:
        |         pool.map(work, [1, 2])
        """,
        """\
        | import multiprocessing as mp
        | import tensorflow as tf
        |
        | def work(x):
        |     for gpu in tf.config.list_physical_devices("GPU"):
        |         tf.config.experimental.set_memory_growth(gpu, True)
        |     return tf.square(x).numpy()
        |
        | if __name__ == "__main__":
        |     with mp.get_context("spawn").Pool(2) as pool:
        |         pool.map(work, [1.0])
        """,
        """\
        | import multiprocessing as mp
        | import tensorflow as tf
        |
        | def work(x):
        |     return tf.square(x).numpy()
        |
        | if __name__ == "__main__":
        |     with mp.get_context("spawn").Pool(1) as pool:
        |         pool.map(work, [1.0, 2.0])
        """,
        """\
        | import multiprocessing as mp
        | import torch
        |
        | def work(x):
        |     return torch.ones(3, device="cuda").sum().item()
        |
        | if __name__ == "__main__":
        |     with mp.get_context("spawn").Pool(4) as pool:
        |         pool.map(work, [1, 2])
        """,
        """\
        | import multiprocessing as mp
        | import os
        |
        | def worker(gpu):
        |     os.environ["CUDA_VISIBLE_DEVICES"] = str(gpu)
        |     import tensorflow as tf
        |     tf.constant(1.0)
        |
        | if __name__ == "__main__":
        |     ctx = mp.get_context("spawn")
        |     procs = [ctx.Process(target=worker, args=(g,)) for g in range(2)]
        |     for p in procs:
        |         p.start()
        """,
    )

    def check(self, ctx: CheckContext) -> Iterator[Finding]:
        for site in ctx.process_starts():
            effect, child = site.start, site.child
            if not isinstance(effect, Start):
                continue
            workers = _concurrent_workers(ctx, site.flow, site.index, effect)
            if workers == 0 or child is None:
                continue
            hit = self._greedy_init(child, site.parent)
            if hit is None:
                continue
            if not self.first_at(effect.site):
                continue
            init = hit.effect
            assert isinstance(init, Init)
            count = f"{workers} workers" if workers else "several workers"
            yield self.finding(
                effect.site,
                f"{count} run at once and each initializes {display(init.framework)}, which "
                f"{GREEDY[init.framework]} by default; the workers will run out of GPU memory",
                (related_site(init.site, f"each worker initializes {display(init.framework)} here"),),
            )

    def _greedy_init(self, child: Flow, parent: State) -> Event | None:
        seen: list[Event] = list(parent.env)
        for index, event in enumerate(child.events):
            effect = event.effect
            if isinstance(effect, Init) and index < child.served:
                continue  # the forkserver's, once: not each worker's (a forked worker is GD101's)
            if isinstance(effect, Init) and effect.framework in GREEDY and effect.level == InitLevel.RUNTIME:
                in_child = [e for e in seen if e not in parent.env]
                capped = any(_caps(e, effect.framework, False) for e in parent.env) or any(
                    _caps(e, effect.framework, True) for e in in_child)
                return None if capped else event
            seen.append(event)
        return None
