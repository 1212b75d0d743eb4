"""GD104: spawn/forkserver processes started at import time, outside the main guard."""

from __future__ import annotations

from collections.abc import Iterator

from gpudoctor.knowledge import processes as P
from gpudoctor.lint.analysis.events import Start
from gpudoctor.lint.analysis.flows import FlowKind
from gpudoctor.lint.findings import ERROR, WARNING, Finding
from gpudoctor.lint.notebook import is_notebook
from gpudoctor.lint.rules._base import CheckContext, Rule


class ProcessStartWithoutMainGuard(Rule):
    """## What it does
    Flags a process start that uses the spawn or forkserver start method (explicitly,
    or because it is the default: macOS, Windows, Linux from Python 3.14) and runs
    when the module is imported: at module level, or in a function called from module
    level, outside `if __name__ == "__main__":`.

    ## Why is this bad?
    {{process-start-at-import.why}} Under forkserver it is
    the server that imports the main module (Python 3.13.8+ and 3.14.1+; before, each
    worker did), with the same error. A `ProcessPoolExecutor` given
    `max_tasks_per_child` and no `mp_context` spawns its workers on every platform.
    `gpudoctor probe` names this cause (and GD104) when the children of a run die of it.

    A start that leaves the method to the default is judged on every Python the project
    supports (its `requires-python`, up to 3.14 where it sets no upper bound): where the
    oldest forks (Linux up to 3.13) and a later one starts a forkserver (3.14), it is a
    warning that names that Python. A `requires-python` bound below 3.14, or an explicit
    start method, says the program never meets it.

    Not reported in a Jupyter notebook, nor for what a cell calls in a module of the
    project (its Pool started while the cell runs): IPython's `__main__` is a module made in
    memory, with no file and no spec (IPython 8 `InteractiveShell.prepare_user_module`),
    so a spawned child has no main module to run again (CPython 3.13
    `multiprocessing/spawn.py`, `get_preparation_data`). The child cannot find a
    function defined in a cell either: give the pool functions from a module.

    ## Example
    ```python
    | import multiprocessing as mp
    |
    | ctx = mp.get_context("spawn")
    | with ctx.Pool(2) as pool:
    |     pool.map(abs, [-1, -2])
    ```

    Use instead:
    ```python
    | if __name__ == "__main__":
    |     with ctx.Pool(2) as pool:
    |         pool.map(abs, [-1, -2])
    ```

    ## References
    - [Python: safe importing of the main module](https://docs.python.org/3/library/multiprocessing.html#the-spawn-and-forkserver-start-methods)
    """

    code = "GD104"
    name = "process-start-without-main-guard"
    severity = ERROR
    summary = "Spawned processes started at import time"
    fix_title = 'Move the process start under `if __name__ == "__main__":`'
    INVALID = (
        """\
        | import multiprocessing as mp
        |
        | def work(x):
        |     return x
        |
        | ctx = mp.get_context("spawn")
        | # ruleid: GD104
        | pool = ctx.Pool(2)
        | pool.map(work, [1, 2])
        """,
        """\
        | import torch.multiprocessing as mp
        |
        | def train(rank):
        |     pass
        |
        | # ruleid: GD104
        | mp.spawn(train, nprocs=2)
        """,
    )
    VALID = (
        """\
        | import multiprocessing as mp
        |
        | def work(x):
        |     return x
        |
        | if __name__ == "__main__":
        |     with mp.get_context("spawn").Pool(2) as pool:
        |         pool.map(work, [1, 2])
        """,
        """\
        | import multiprocessing as mp
        |
        | def work(x):
        |     return x
        |
        | with mp.get_context("fork").Pool(2) as pool:
        |     pool.map(work, [1, 2])
        """,
        """\
        | import multiprocessing as mp
        |
        | def work(x):
        |     return x
        |
        | def main():
        |     ctx = mp.get_context("spawn")
        |     procs = [ctx.Process(target=work, args=(i,)) for i in range(2)]
        |     for p in procs:
        |         p.start()
        |
        | if __name__ == "__main__":
        |     main()
        """,
    )

    def check(self, ctx: CheckContext) -> Iterator[Finding]:
        if is_notebook(ctx.module.path):
            return  # (a notebook's cells, and what they call in other modules, never run again in a child)
        modules = {id(flow) for flow in ctx.flows if flow.kind == FlowKind.MODULE}
        for site in ctx.process_starts():
            effect, method = site.start, site.method
            if id(site.flow) not in modules or not isinstance(effect, Start) or effect.kind in (P.OS_FORK, P.JOBLIB):
                continue  # (joblib run again in a spawned worker, a daemonic one, runs its tasks there)
            if not site.event.ctx.import_time or is_notebook(effect.site.path):
                continue  # (a notebook is never run again in a child: see the docs)
            if method in ("spawn", "forkserver"):
                who = "the forkserver" if method == "forkserver" and ctx.forkserver_preloads_main else "each child"
                yield self.finding(
                    effect.site,
                    f"processes are started with {method} while the module is being imported; "
                    f"{who} re-imports the main module and starts processes again",
                )
            elif (later := ctx.later(method, site.explicit)) is not None and later.method in ("spawn", "forkserver"):
                who = "the forkserver (each child, for a module run with -m)" \
                    if later.method == "forkserver" and later.preloads_main else "each child"
                yield self.finding(
                    effect.site,
                    f"processes are started with the default start method while the module is being imported; "
                    f"it is {later.words()}, and {who} re-imports the main module and starts processes again",
                    severity=WARNING,
                )
