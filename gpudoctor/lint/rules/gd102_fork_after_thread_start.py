"""GD102: a process is forked while threads started by this process may still run."""

from __future__ import annotations

from collections.abc import Iterator

from gpudoctor.knowledge import processes as P
from gpudoctor.lint.analysis.events import Start, ThreadStart, site_of
from gpudoctor.lint.findings import WARNING, Finding
from gpudoctor.lint.rules._base import (
    CheckContext,
    Rule,
    condition_sites,
    conditions_of,
    line_of,
    related_site,
    when_text,
)

FORKING = (P.POOL, P.EXECUTOR, P.PROCESS, P.OS_FORK, P.JOBLIB, P.LIBRARY_POOL)


class ForkAfterThreadStart(Rule):
    """## What it does
    Flags a fork (a `Pool`, `ProcessPoolExecutor` or `Process` under the fork start
    method, or `os.fork()`) while a thread this process started may still be running:
    a `threading.Thread` started and not joined, a `ThreadPoolExecutor` or `ThreadPool`
    not shut down. A thread started in one branch of an `if`/`elif` chain is not
    counted at a fork in another branch of the same run of that chain (one run takes
    one branch); it is on a later run (a loop's next iteration, a second call).

    Some threads start without a `Thread` in sight:
    - the first call of a function or model compiled with `torch.compile` (decorator,
      with or without arguments, or `model = torch.compile(model)`): Inductor, the
      default backend, compiles its kernels with compile workers whose results a
      thread of this process reads, or on a thread pool, and they live until exit
      (torch 2.11; when compile threads > 1, the default except on Windows or with
      `TORCHINDUCTOR_COMPILE_THREADS=1`). Compiling alone starts nothing, and other
      backends (`backend="eager"`) are not counted;
    - iterating a `DataLoader` with `pin_memory=True` and workers: its iterator starts
      a pin-memory thread in this process, which lives as long as the iterator — the
      `for` loop over it, or the loader's whole life with `persistent_workers=True`;
    - `torch.distributed.init_process_group`: it builds the group's backends at once,
      and they start threads that run until `destroy_process_group()` — Gloo's worker
      threads (two by default) and NCCL's watchdog and heartbeat monitor; the default
      backend on a CUDA machine is both. (A fork after `destroy_process_group()` is
      still reported: the analysis does not pair the two calls.)

    ## Why is this bad?
    {{multithreaded-fork.why}} CPython 3.12+
    warns: "This process is multi-threaded, use of fork() may lead to deadlocks in the
    child." GPU runtimes make this worse: they start their own threads.

    ## Example
    ```python
    | threading.Thread(target=prefetch, daemon=True).start()
    | with mp.Pool(4) as pool:
    |     pool.map(work, items)
    ```

    Use instead:
    ```python
    | with mp.get_context("spawn").Pool(4) as pool:
    |     pool.map(work, items)
    ```

    ## References
    - [Python: os.fork and threads](https://docs.python.org/3/library/os.html#os.fork)
    - [CPython gh-100228](https://github.com/python/cpython/issues/100228)
    """

    code = "GD102"
    name = "fork-after-thread-start"
    severity = WARNING
    summary = "Process forked while other threads may be running"
    fix_title = 'Use the spawn start method, or start the processes before the threads'
    INVALID = (
        """\
        | import multiprocessing as mp
        | import threading
        |
        | def beat():
        |     pass
        |
        | def work(x):
        |     return x
        |
        | if __name__ == "__main__":
        |     threading.Thread(target=beat, daemon=True).start()
        |     # ruleid: GD102
        |     with mp.Pool(2) as pool:
        |         pool.map(work, [1, 2])
        """,
        """\
        | import os
        | from concurrent.futures import ThreadPoolExecutor
        |
        | ex = ThreadPoolExecutor(4)
        | ex.submit(print, "hi")
        | # ruleid: GD102
        | pid = os.fork()
        """,
        """\
        | import multiprocessing as mp
        | import threading
        |
        | class Poller(threading.Thread):
        |     def run(self):
        |         pass
        |
        | def work(x):
        |     return x
        |
        | def main():
        |     Poller().start()
        |     p = mp.Process(target=work, args=(1,))
        |     # ruleid: GD102
        |     p.start()
        """,
        """\
        | import multiprocessing as mp
        | from multiprocessing.pool import ThreadPool
        |
        | def work(x):
        |     return x
        |
        | def main():
        |     tp = ThreadPool(2)
        |     tp.map(work, [1])
        |     # ruleid: GD102
        |     pool = mp.get_context("fork").Pool(2)
        |     pool.map(work, [1])
        """,
        """\
        | import os
        | import threading
        |
        | def main(jobs):
        |     threads = [threading.Thread(target=print, args=(j,)) for j in jobs]
        |     for t in threads:
        |         t.start()
        |     # ruleid: GD102
        |     if os.fork() == 0:
        |         os._exit(0)
        """,
        """\
        | import multiprocessing as mp
        | import threading
        |
        | def work(x):
        |     return x
        |
        | def main():
        |     t = threading.Thread(target=print)
        |     t.start()
        |     # ruleid: GD102
        |     with mp.Pool(2) as pool:
        |         pool.map(work, [1])
        |     t.join()
        |     with mp.Pool(2) as pool:
        |         pool.map(work, [2])
        """,
    )
    VALID = (
        """\
        | import multiprocessing as mp
        | import threading
        |
        | def work(x):
        |     return x
        |
        | if __name__ == "__main__":
        |     t = threading.Thread(target=print)
        |     t.start()
        |     t.join()
        |     with mp.Pool(2) as pool:
        |         pool.map(work, [1, 2])
        """,
        """\
        | import multiprocessing as mp
        | import threading
        |
        | def work(x):
        |     return x
        |
        | if __name__ == "__main__":
        |     threading.Thread(target=print).start()
        |     with mp.get_context("spawn").Pool(2) as pool:
        |         pool.map(work, [1, 2])
        """,
        """\
        | import os
        | from concurrent.futures import ThreadPoolExecutor
        |
        | with ThreadPoolExecutor(2) as ex:
        |     ex.submit(print, "hi")
        | pid = os.fork()
        """,
        """\
        | import multiprocessing as mp
        | import threading
        |
        | def work(x):
        |     return x
        |
        | if __name__ == "__main__":
        |     with mp.Pool(2) as pool:
        |         threading.Thread(target=print).start()
        |         pool.map(work, [1, 2])
        """,
        """\
        | import threading
        | import subprocess
        |
        | threading.Thread(target=print).start()
        | subprocess.run(["echo", "hi"])
        """,
        """\
        | import os
        | from concurrent.futures import ThreadPoolExecutor
        |
        | def main():
        |     ex = ThreadPoolExecutor(2)
        |     ex.submit(print, "hi")
        |     ex.shutdown(wait=True)
        |     os.fork()
        """,
    )

    def check(self, ctx: CheckContext) -> Iterator[Finding]:
        for site in ctx.process_starts():
            effect, parent, flow, index = site.start, site.parent, site.flow, site.index
            if not isinstance(effect, Start) or effect.kind not in FORKING or site.method != "fork":
                continue
            # (threads started in another branch of an if chain than the start's are not
            # running there, even where the workers start later, at an executor's first task)
            running = parent.threads_at(flow.points[index][1].branches)
            # A call that starts a thread or a process, as the value it is made on may be
            # either (``p = Process(...) if mp else Thread(...)``), does one or the other.
            running = [t for t in running if site_of(t.effect) != effect.site]
            # A thread that forks is not "another thread" at its own fork.
            running = [t for t in running if site_of(t.effect) not in site.event.ctx.threads]
            if not running:
                continue
            started = running[0].effect
            assert isinstance(started, ThreadStart)
            when = conditions_of(running[0].ctx.conditions, site.event.ctx.conditions)
            where = line_of(started.site, effect.site)
            if started.api == "thread pool":
                message = (f"the process is forked while threads of the thread pool created at {where} "
                           f"may still run (they start with its first task and live until shutdown"
                           f"{when_text(when, effect.site)}); locks they hold stay locked in the child")
                related = related_site(started.site, "thread pool created here")
            else:
                message = (f"the process is forked while a thread started at {where} ({started.api}"
                           f"{when_text(when, effect.site)}) may still run; locks held by that thread stay "
                           "locked in the child")
                related = related_site(started.site, "thread started here")
            yield self.finding(effect.site, message, (related, *condition_sites(when)))
