"""GD106: a GPU-initializing process is created for each item of work."""

from __future__ import annotations

from collections.abc import Iterator

from gpudoctor.knowledge import processes as P
from gpudoctor.lint.analysis.events import Init, Start
from gpudoctor.lint.analysis.flows import FlowKind, first_gpu_use
from gpudoctor.lint.findings import WARNING, Finding
from gpudoctor.lint.rules._base import CheckContext, Rule, display, related_site


class GpuProcessPerTask(Rule):
    """## What it does
    Flags a `Process` whose target initializes a GPU runtime when it is created for a
    single item of work: started and joined in the same loop iteration, or started from
    a function that runs once per task in a worker pool. Starting one long-lived process
    per GPU in a loop (and joining them later) is the recommended pattern and is not
    flagged.

    ## Why is this bad?
    Every new process pays for CUDA initialization, a new context (hundreds of MiB of
    GPU memory) and, usually, loading the model again — often more than the task
    itself. A persistent pool whose `initializer` sets up the GPU once per worker does
    the same work once.

    ## Example
    ```python
    | for batch in batches:
    |     p = ctx.Process(target=infer, args=(batch,))
    |     p.start()
    |     p.join()
    ```

    Use instead:
    ```python
    | with ctx.Pool(1, initializer=load_model) as pool:
    |     pool.map(infer, batches)
    ```

    ## References
    - [Python: Pool initializer](https://docs.python.org/3/library/multiprocessing.html#multiprocessing.pool.Pool)
    """

    code = "GD106"
    name = "gpu-process-per-task"
    severity = WARNING
    summary = "A GPU-initializing process created per item of work"
    fix_title = "Use a persistent pool whose initializer sets up the GPU once per worker"
    INVALID = (
        """\
        | import multiprocessing as mp
        | import torch
        |
        | def infer(path):
        |     torch.load(path).cuda()
        |
        | if __name__ == "__main__":
        |     ctx = mp.get_context("spawn")
        |     for path in ["a.pt", "b.pt"]:
        |         p = ctx.Process(target=infer, args=(path,))
        |         # ruleid: GD106
        |         p.start()
        |         p.join()
        """,
        """\
        | import multiprocessing as mp
        | import cupy as cp
        |
        | def job(x):
        |     cp.asarray(x).sum()
        |
        | def task(x):
        |     p = mp.get_context("spawn").Process(target=job, args=(x,))
        |     # ruleid: GD106
        |     p.start()
        |     p.join()
        |
        | if __name__ == "__main__":
        |     from concurrent.futures import ProcessPoolExecutor
        |     with ProcessPoolExecutor(2, mp_context=mp.get_context("spawn")) as ex:
        |         list(ex.map(task, [[1], [2]]))
        """,
        """\
        | import multiprocessing as mp
        | import tensorflow as tf
        |
        | def fit(i):
        |     tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(1)])
        |
        | def main():
        |     ctx = mp.get_context("spawn")
        |     i = 0
        |     while i < 10:
        |         p = ctx.Process(target=fit, args=(i,))
        |         # ruleid: GD106
        |         p.start()
        |         p.join()
        |         i += 1
        """,
        """\
        | import multiprocessing as mp
        | import jax.numpy as jnp
        |
        | def step(x):
        |     return jnp.ones(3) * x
        |
        | def main(xs):
        |     ctx = mp.get_context("spawn")
        |     for x in xs:
        |         worker = ctx.Process(target=step, args=(x,))
        |         # ruleid: GD106
        |         worker.start()
        |         worker.join(timeout=60)
        """,
        """\
        | import multiprocessing as mp
        | from numba import cuda
        |
        | def kernel_job(a):
        |     cuda.to_device(a)
        |
        | def main(arrays):
        |     for a in arrays:
        |         p = mp.get_context("forkserver").Process(target=kernel_job, args=(a,))
        |         # ruleid: GD106
        |         p.start()
        |         p.join()
        """,
        """\
        | import multiprocessing as mp
        | import torch
        |
        | def run_one(path):
        |     torch.zeros(1, device="cuda")
        |
        | def main(paths):
        |     ctx = mp.get_context("spawn")
        |     for path in paths:
        |         proc = ctx.Process(target=run_one, args=(path,), daemon=False)
        |         # ruleid: GD106
        |         proc.start()
        |         proc.join()
        """,
    )
    VALID = (
        """\
        | import multiprocessing as mp
        | import os
        |
        | def gpu_worker(gpu, jobs):
        |     os.environ["CUDA_VISIBLE_DEVICES"] = str(gpu)
        |     import torch
        |     torch.zeros(1).cuda()
        |
        | if __name__ == "__main__":
        |     ctx = mp.get_context("spawn")
        |     jobs = ctx.Queue()
        |     workers = [ctx.Process(target=gpu_worker, args=(i, jobs)) for i in range(2)]
        |     for w in workers:
        |         w.start()
        |     for w in workers:
        |         w.join()
        """,
        """\
        | import multiprocessing as mp
        |
        | def cpu_job(path):
        |     return open(path).read()
        |
        | if __name__ == "__main__":
        |     ctx = mp.get_context("spawn")
        |     for path in ["a", "b"]:
        |         p = ctx.Process(target=cpu_job, args=(path,))
        |         p.start()
        |         p.join()
        """,
        """\
        | import multiprocessing as mp
        | import torch
        |
        | def init():
        |     global model
        |     model = torch.nn.Linear(2, 2).cuda()
        |
        | def infer(x):
        |     return x
        |
        | if __name__ == "__main__":
        |     with mp.get_context("spawn").Pool(2, initializer=init) as pool:
        |         pool.map(infer, range(10))
        """,
        """\
        | import multiprocessing as mp
        | import cupy as cp
        |
        | def serve(q):
        |     for item in iter(q.get, None):
        |         cp.asarray(item).sum()
        |
        | if __name__ == "__main__":
        |     ctx = mp.get_context("spawn")
        |     q = ctx.Queue()
        |     p = ctx.Process(target=serve, args=(q,))
        |     p.start()
        |     for i in range(100):
        |         q.put([i])
        |     q.put(None)
        |     p.join()
        """,
        """\
        | import multiprocessing as mp
        | import tensorflow as tf
        |
        | def fit(i):
        |     tf.constant(i)
        |
        | if __name__ == "__main__":
        |     ctx = mp.get_context("spawn")
        |     procs = []
        |     for i in range(2):
        |         p = ctx.Process(target=fit, args=(i,))
        |         p.start()
        |         procs.append(p)
        |     for p in procs:
        |         p.join()
        """,
        """\
        | import torch.multiprocessing as mp
        | import torch
        |
        | def train(rank):
        |     torch.cuda.set_device(rank)
        |
        | if __name__ == "__main__":
        |     mp.spawn(train, nprocs=2)
        """,
    )

    def check(self, ctx: CheckContext) -> Iterator[Finding]:
        for site in ctx.process_starts():
            effect, flow, index, event, child = site.start, site.flow, site.index, site.event, site.child
            if not isinstance(effect, Start) or effect.kind != P.PROCESS:
                continue
            use = first_gpu_use(child) if child is not None else None
            if use is None:
                continue
            parent = flow.start.effect if flow.kind == FlowKind.CHILD and flow.start is not None else None
            per_task = isinstance(parent, Start) and parent.kind in (P.POOL, P.EXECUTOR, P.JOBLIB)
            loop = event.ctx.loop
            per_item = loop is not None and ctx.joined_later(flow, index, effect.started, loop, threads=False)
            if not (per_task or per_item):
                continue
            init = use.effect
            assert isinstance(init, Init)
            where = "for every pool task" if per_task else "and joined in every loop iteration"
            yield self.finding(
                effect.site,
                f"a new process that initializes {display(init.framework)} is started {where}; "
                "each pays for CUDA initialization and a new GPU context",
                (related_site(init.site, f"the process initializes {display(init.framework)} here"),),
            )
