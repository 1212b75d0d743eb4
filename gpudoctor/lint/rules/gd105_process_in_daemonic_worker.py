"""GD105: a process or pool started inside a daemonic process (a Pool worker, a daemon Process)."""

from __future__ import annotations

from collections.abc import Iterator

from gpudoctor.knowledge import processes as P
from gpudoctor.lint.analysis.events import Start
from gpudoctor.lint.analysis.flows import FlowKind
from gpudoctor.lint.findings import ERROR, Finding
from gpudoctor.lint.rules._base import CheckContext, Rule, related_site

STARTS = (P.POOL, P.EXECUTOR, P.PROCESS, P.SPAWN_LAUNCHER, P.LIBRARY_POOL, P.MANAGER)


class ProcessInDaemonicWorker(Rule):
    """## What it does
    Flags a `Process.start()`, a `Pool`, a `ProcessPoolExecutor` or a `Manager()` (whose
    server is a process) created in code that runs inside a `multiprocessing.Pool`
    worker (a task function or the pool's `initializer`) or inside a daemonic `Process`
    (`daemon=True`, or `p.daemon = True` before `p.start()`).

    ## Why is this bad?
    Pool workers are daemonic processes, and daemonic processes may not have
    children: the start raises `AssertionError: daemonic processes are not allowed to
    have children`. `ProcessPoolExecutor` workers are not daemonic (since Python 3.9)
    and may start processes.

    ## Example
    ```python
    | def task(x):
    |     p = mp.Process(target=gpu_job, args=(x,))
    |     p.start()
    |     p.join()
    |
    | with mp.Pool(4) as pool:
    |     pool.map(task, items)
    ```

    Use instead:
    ```python
    | with mp.get_context("spawn").Pool(4, initializer=init_gpu) as pool:
    |     pool.map(gpu_job, items)
    ```

    ## References
    - [Python: Process.daemon](https://docs.python.org/3/library/multiprocessing.html#multiprocessing.Process.daemon)
    """

    code = "GD105"
    name = "process-in-daemonic-worker"
    severity = ERROR
    summary = "Process started inside a daemonic pool worker"
    fix_title = "Start the processes from the parent, or run the work in the pool itself"
    INVALID = (
        """\
        | import multiprocessing as mp
        |
        | def job(x):
        |     return x
        |
        | def task(x):
        |     p = mp.Process(target=job, args=(x,))
        |     # ruleid: GD105
        |     p.start()
        |     p.join()
        |
        | if __name__ == "__main__":
        |     with mp.Pool(2) as pool:
        |         pool.map(task, [1, 2])
        """,
        """\
        | import multiprocessing as mp
        |
        | def count(words):
        |     # ruleid: GD105
        |     with mp.Manager() as manager:  # its server is a process too
        |         seen = manager.dict()
        |         for word in words:
        |             seen[word] = len(word)
        |         return dict(seen)
        |
        | if __name__ == "__main__":
        |     with mp.Pool(2) as pool:
        |         pool.map(count, [["a"], ["b", "c"]])
        """,
        """\
        | import multiprocessing as mp
        |
        | def inner(x):
        |     return x
        |
        | def outer(xs):
        |     # ruleid: GD105
        |     with mp.Pool(2) as pool:
        |         return pool.map(inner, xs)
        |
        | if __name__ == "__main__":
        |     with mp.Pool(2) as pool:
        |         pool.map(outer, [[1], [2]])
        """,
        """\
        | import multiprocessing as mp
        |
        | def supervise(xs):
        |     # ruleid: GD105
        |     with mp.Pool(2) as pool:
        |         return pool.map(abs, xs)
        |
        | if __name__ == "__main__":
        |     p = mp.Process(target=supervise, args=([-1, 2],))
        |     p.daemon = True
        |     p.start()
        |     p.join()
        """,
    )
    VALID = (
        """\
        | from concurrent.futures import ProcessPoolExecutor
        | import multiprocessing as mp
        |
        | def job(x):
        |     return x
        |
        | def task(x):
        |     p = mp.Process(target=job, args=(x,))
        |     p.start()
        |     p.join()
        |
        | if __name__ == "__main__":
        |     with ProcessPoolExecutor(2) as ex:
        |         list(ex.map(task, [1, 2]))
        """,
        """\
        | import multiprocessing as mp
        |
        | def job(x):
        |     return x
        |
        | if __name__ == "__main__":
        |     procs = [mp.Process(target=job, args=(i,)) for i in range(2)]
        |     for p in procs:
        |         p.start()
        """,
        """\
        | import multiprocessing as mp
        |
        | def supervise(xs):
        |     with mp.Pool(2) as pool:
        |         return pool.map(abs, xs)
        |
        | if __name__ == "__main__":
        |     p = mp.Process(target=supervise, args=([-1, 2],))
        |     p.daemon = False
        |     p.start()
        |     p.join()
        """,
        """\
        | import multiprocessing as mp
        | from multiprocessing.pool import ThreadPool
        |
        | def fetch(x):
        |     return x
        |
        | def task(xs):
        |     with ThreadPool(4) as threads:  # threads, not processes: allowed in a daemon
        |         return threads.map(fetch, xs)
        |
        | if __name__ == "__main__":
        |     with mp.Pool(2) as pool:
        |         pool.map(task, [[1], [2]])
        """,
    )

    def check(self, ctx: CheckContext) -> Iterator[Finding]:
        for flow in ctx.all_flows():
            if flow.kind != FlowKind.CHILD or not flow.daemonic or flow.start is None:
                continue
            for event, _ in flow.points[flow.prelude:]:
                effect = event.effect
                if isinstance(effect, Start) and effect.kind in STARTS:
                    parent = flow.start.effect
                    assert isinstance(parent, Start)  # (only a Start makes daemonic children)
                    pool = parent.kind != P.PROCESS
                    where = "a daemonic Pool worker" if pool else "a daemonic Process (daemon=True)"
                    what = "a Manager's server process" if effect.kind == P.MANAGER else "a process"
                    yield self.finding(
                        effect.site,
                        f"{what} is started inside {where}; it will fail with "
                        '"daemonic processes are not allowed to have children"',
                        (related_site(parent.site, "the worker runs in this Pool" if pool
                                 else "this Process is daemonic"),),
                    )
