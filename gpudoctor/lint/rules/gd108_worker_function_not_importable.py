"""GD108: a worker process is sent a function it cannot load."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from gpudoctor.knowledge import processes as P
from gpudoctor.lint.analysis.events import Child, DataLoaderStart, Start, Task
from gpudoctor.lint.analysis.pickling import MAIN_BLOCK, NOTEBOOK, UNPICKLABLE, shown_name, unloadable
from gpudoctor.lint.findings import ERROR, WARNING, Finding, Related
from gpudoctor.lint.rules._base import LOADING_STEPS, CheckContext, Later, Rule, line_of, related_site

if TYPE_CHECKING:
    from gpudoctor.lint.frontend.parsed import LazySite

# What each kind of start is called in a message, and what its workers do when they cannot
# load what they were sent (observed on CPython 3.11: a Pool replaces each dead worker and
# the lost tasks' results never arrive; an executor marks itself broken).
STARTS = {
    P.POOL: ("Pool", "the pool's results never arrive"),
    P.EXECUTOR: ("ProcessPoolExecutor", "the executor breaks (BrokenProcessPool)"),
    P.PROCESS: ("Process", "the process exits with code 1"),
    P.SPAWN_LAUNCHER: (P.SPAWN_LAUNCHER_NAME, "every process exits with code 1"),
    P.DATALOADER: ("DataLoader", "the loader fails (a worker exited unexpectedly)"),
}
ROLES = {
    "target": "its target", "process": "the class of the Process object, which is sent whole",
    "task": "a task", "initializer": "the initializer", "dataset": "the Dataset",
    "collate_fn": "collate_fn", "worker_init_fn": "worker_init_fn",
}
WHY = {
    NOTEBOOK: "`{name}` is defined in a notebook cell, which a {worker} cannot import: each worker fails with "
              "AttributeError: Can't get attribute '{name}' on <module '__main__' (built-in)>, and {consequence}",
    MAIN_BLOCK: '`{name}` is defined in the `if __name__ == "__main__":` block, which a {worker} does not run: '
                "each worker fails with AttributeError: Can't get attribute '{name}' on <module '__mp_main__'>, "
                "and {consequence}",
    # What CPython raises (checked with 3.10.13, 3.11.7, 3.12.1 and 3.13.0; 3.14's _pickle.c
    # raises PicklingError "Can't pickle local object <function ...>").
    "local": "`{name}` is defined inside a function, so pickle cannot send it by name: sending it fails "
             "with AttributeError: Can't pickle local object '...<locals>.{name}' (Python 3.10 to 3.12; "
             "\"Can't get local object\" on 3.13, a PicklingError on 3.14)",
    "lambda": "pickle cannot send a lambda: sending it fails with PicklingError: Can't pickle <function "
              "<lambda> at 0x...>: attribute lookup <lambda> on ... failed",
}
# A module that imports one of these may send functions by value, not by name: the pools of
# multiprocess and pathos pickle with dill; a module that imports cloudpickle or dill, or
# multiprocessing's ForkingPickler, may install them in multiprocessing's pickler (the
# notebook workaround ``ForkingPickler.reducer_override = ...``).
BY_VALUE_PICKLERS = frozenset({"multiprocess", "pathos", "cloudpickle", "dill",
                               "multiprocessing.reduction.ForkingPickler"})


class WorkerFunctionNotImportable(Rule):
    """## What it does
    Flags a function sent to worker processes that the workers cannot load: the
    target of a `Process`, the tasks and initializer of a `Pool` or
    `ProcessPoolExecutor`, the function of `torch.multiprocessing.spawn`, the
    Dataset, `collate_fn` and `worker_init_fn` of a `DataLoader` with workers. It is
    reported when the function is

    - defined in a Jupyter notebook cell, and the workers are started with spawn or
      forkserver (explicitly, or because that is the target's default: forkserver
      on Linux from Python 3.14, spawn on macOS and Windows);
    - defined in the script's `if __name__ == "__main__":` block, with spawn or
      forkserver;
    - a lambda or a function defined inside another function, with spawn or
      forkserver, or as a pool's task under any start method (tasks are always
      pickled).

    A start that leaves the method to the default is judged on every Python the project
    supports (its `requires-python`, up to 3.14 where it sets no upper bound): where the
    oldest forks and a later one starts a forkserver (Linux, 3.14), a function only the
    forkserver's workers cannot load is a warning that names that Python.

    Not reported in a module that sends functions by value: one using `multiprocess`
    or `pathos` (they pickle with dill), or importing cloudpickle, dill or
    multiprocessing's `ForkingPickler` (to install a by-value reducer). Such a patch
    made in another module is not seen.

    ## Why is this bad?
    Python sends a function to another process by name: the worker imports the
    function's module and looks the name up. A spawned worker starts a fresh
    interpreter, and a notebook's cells live in the kernel's `__main__`, which is
    not a file it can import: every worker dies with `AttributeError: Can't get
    attribute 'work' on <module '__main__' (built-in)>` — a `Pool` then waits
    forever. A script's `__main__` block does not run in the worker either. A
    lambda or a nested function has no importable name at all. In a notebook, the
    usual fix for a fork after GPU initialization ("use spawn") runs straight into
    this: move the function into a module first.

    ## Example
    ```python
    | import multiprocessing as mp
    |
    | if __name__ == "__main__":
    |     def work(i):
    |         return i * i
    |
    |     with mp.get_context("spawn").Pool(4) as pool:
    |         pool.map(work, range(8))
    ```

    Use instead:
    ```python
    | import multiprocessing as mp
    |
    | def work(i):
    |     return i * i
    |
    | if __name__ == "__main__":
    |     with mp.get_context("spawn").Pool(4) as pool:
    |         pool.map(work, range(8))
    ```

    In a notebook, put `work` in a module next to it (`workers.py`) and
    `from workers import work` in a cell.

    ## References
    - [Python: the spawn and forkserver start methods](https://docs.python.org/3/library/multiprocessing.html#the-spawn-and-forkserver-start-methods)
    - [Python: what can be pickled](https://docs.python.org/3/library/pickle.html#what-can-be-pickled-and-unpickled)
    """

    code = "GD108"
    name = "worker-function-not-importable"
    severity = ERROR
    summary = "A worker process is sent a function it cannot import"
    fix_title = "Define the function at the top level of a module the workers can import"
    shown_at_callers = False
    INVALID = (
        """\
        | import multiprocessing as mp
        |
        | if __name__ == "__main__":
        |     def work(i):
        |         return i * i
        |
        |     with mp.get_context("spawn").Pool(4) as pool:
        |         # ruleid: GD108
        |         pool.map(work, range(8))
        """,
        """\
        | import multiprocessing as mp
        |
        | def main():
        |     def step(i):
        |         print(i)
        |
        |     # ruleid: GD108
        |     p = mp.get_context("spawn").Process(target=step, args=(1,))
        |     p.start()
        |     p.join()
        |
        | if __name__ == "__main__":
        |     main()
        """,
        """\
        | from multiprocessing import Pool
        |
        | if __name__ == "__main__":
        |     with Pool(2) as pool:
        |         # ruleid: GD108
        |         print(pool.map(lambda x: x + 1, range(4)))
        """,
    )
    VALID = (
        """\
        | import multiprocessing as mp
        |
        | def work(i):
        |     return i * i
        |
        | if __name__ == "__main__":
        |     with mp.get_context("spawn").Pool(4) as pool:
        |         pool.map(work, range(8))
        """,
        """\
        | import multiprocessing as mp
        |
        | def main():
        |     def step(i):
        |         print(i)
        |
        |     # a forked child inherits the function: nothing is pickled
        |     p = mp.get_context("fork").Process(target=step, args=(1,))
        |     p.start()
        |     p.join()
        """,
        """\
        | import multiprocess as mp
        |
        | if __name__ == "__main__":
        |     with mp.get_context("spawn").Pool(2) as pool:
        |         pool.map(lambda x: x + 1, range(4))
        """,
    )

    def check(self, ctx: CheckContext) -> Iterator[Finding]:
        seen: set[tuple[object, str]] = set()
        starts = {id(site.event): site for site in ctx.process_starts()}
        for _, _, event, state in ctx.points():
            effect = event.effect
            if isinstance(effect, Start) and effect.kind in STARTS:
                site = effect.site if effect.kind != P.PROCESS else (effect.started or effect.site)
                kind, method, children = effect.kind, effect.method, effect.children
            elif isinstance(effect, Task) and effect.pool.kind in STARTS:
                site, kind, method, children = effect.site, effect.pool.kind, effect.pool.method, effect.children
            elif isinstance(effect, DataLoaderStart) and effect.workers != 0:
                site, kind, method, children = effect.site, P.DATALOADER, effect.method, effect.children
            else:
                continue
            if not children:
                continue
            start = starts.get(id(event))
            resolved, explicit = (start.method, start.explicit) if start else ctx.method_at(method, state)
            if ctx.imports_any(site.path, BY_VALUE_PICKLERS):
                continue
            later = ctx.later(resolved, explicit) if resolved == "fork" else None
            for child in children:
                why = unloadable(child.func)
                pickled = child.role == "task" and why in UNPICKLABLE  # (a pool pickles its tasks)
                if why is None or (resolved == "fork" and not pickled and later is None):
                    continue
                name = shown_name(child.func)
                if (site, name) in seen:
                    continue
                seen.add((site, name))
                if resolved == "fork" and not pickled and later is not None:
                    yield self._finding(ctx, site, kind, child, why, later.method, explicit, later)
                else:
                    yield self._finding(ctx, site, kind, child, why, resolved, explicit)

    def _finding(self, ctx: CheckContext, site: LazySite, kind: P.ProcessKind, child: Child, why: str,
                 method: str, explicit: bool, later: Later | None = None) -> Finding:
        what, consequence = STARTS[kind]
        name = shown_name(child.func)
        shown = "a lambda" if why == "lambda" else f"the Dataset `{name}`" if child.role == "dataset" else f"`{name}`"
        role = "" if child.role == "dataset" else f" ({ROLES.get(child.role, child.role)})"
        receivers = "its process" if kind == P.PROCESS else "workers"
        if method == "fork":  # only a pool's tasks are pickled under fork
            to = "to its workers (a pool pickles its tasks whatever the start method)"
        elif later is not None:
            to = f"to {receivers} started with the default start method, which is {later.words()}"
        elif explicit:
            to = f"to its {method} process" if kind == P.PROCESS else f"to {method} workers"
        else:
            to = f"to {receivers} started with {method}, the target's default"
        worker = "spawned worker" if method == "spawn" else f"{method} worker"
        reason = WHY[why].format(name=name, worker=worker, consequence=consequence)
        message = f"{what} sends {shown}{role} {to}; {reason}"
        related: tuple[Related, ...] = ()
        defined = ctx.definition_site(child.func)
        if defined is not None and why != "lambda":
            related = (related_site(defined, f"`{child.func.qualname}` is defined here ({line_of(defined, site)})"),)
        return self.finding(site, message, related, severity=WARNING if later is not None else None,
                            hint=LOADING_STEPS[why].format(name=name))
