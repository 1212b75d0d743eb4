"""GD103: a GPU module starts processes with the default start method, which is fork."""

from __future__ import annotations

from collections.abc import Iterator

from gpudoctor.knowledge import processes as P
from gpudoctor.lint.analysis.events import Init, Start
from gpudoctor.lint.analysis.flows import first_gpu_use, received_gpu_objects
from gpudoctor.lint.findings import WARNING, Finding
from gpudoctor.lint.rules._base import (
    CheckContext,
    Rule,
    display,
    line_of,
    method_set_elsewhere,
    related_site,
    spawn_hint,
)

KINDS = {P.POOL: "Pool", P.EXECUTOR: "ProcessPoolExecutor", P.PROCESS: "Process", P.LIBRARY_POOL: P.LIBRARY_POOL_SHOWN,
         P.JOBLIB: 'joblib\'s Parallel(backend="multiprocessing")'}


class ImplicitForkStartMethod(Rule):
    """## What it does
    Flags a process start (a `Pool`, a `ProcessPoolExecutor`, `Process.start()`,
    joblib's `Parallel(backend="multiprocessing")`) that relies on the platform's
    default start method when that default is `fork` for the target (Linux up to
    Python 3.13) and the children use a GPU framework — they initialize it, or they
    receive one of its device objects — while this process has not initialized it
    yet. Starts whose children do CPU-only work (tokenising, merging files, computing
    metrics) are not reported, nor is a child gpudoctor cannot see into. A
    `ProcessPoolExecutor` given `max_tasks_per_child` and no `mp_context` does not
    rely on the default: CPython spawns its workers (3.11+). It is advisory: it is
    not reported where GD101 or GD105 already reports the same start.

    ## Why is this bad?
    The code works only as long as nothing initializes the GPU before the start. One
    innocent call added later (`tf.config.list_physical_devices("GPU")`,
    `torch.cuda.is_available()`) turns it into a hang or a crash in every worker.
    Python 3.14 changed the Linux default to forkserver, so the behaviour also
    depends on the interpreter version.

    ## Example
    ```python
    | import multiprocessing as mp
    | import torch
    |
    | if __name__ == "__main__":
    |     with mp.Pool(4) as pool:
    |         pool.map(train_shard, range(4))
    ```

    Use instead:
    ```python
    | if __name__ == "__main__":
    |     with mp.get_context("spawn").Pool(4) as pool:
    |         pool.map(train_shard, range(4))
    ```

    ## Fix safety
    Unsafe: spawn re-imports the main module in every worker and needs picklable
    functions and arguments.

    ## References
    - [Python: contexts and start methods](https://docs.python.org/3/library/multiprocessing.html#contexts-and-start-methods)
    """

    code = "GD103"
    name = "implicit-fork-start-method"
    severity = WARNING
    summary = "Processes started with the implicit fork start method in a GPU module"
    fix_title = 'Choose the start method: multiprocessing.get_context("spawn")'
    suppressed_by = ("GD101", "GD105")
    INVALID = (
        """\
        | import multiprocess
        | import torch
        | import torch.multiprocessing as tmp
        |
        | def shard(i):
        |     return torch.ones(i, device="cuda").sum().item()
        |
        | if __name__ == "__main__":
        |     multiprocess.set_start_method("spawn")  # the multiprocess package's default only
        |     p = tmp.Process(target=shard, args=(4,))
        |     # ruleid: GD103
        |     p.start()
        """,
        """\
        | import multiprocessing as mp
        | import torch
        |
        | def shard(i):
        |     return torch.ones(i, device="cuda").sum().item()
        |
        | if __name__ == "__main__":
        |     # ruleid: GD103
        |     with mp.Pool(4) as pool:
        |         pool.map(shard, range(4))
        """,
        """\
        | from concurrent.futures import ProcessPoolExecutor
        | import cupy
        |
        | def work(i):
        |     return float(cupy.arange(i).sum())
        |
        | def main():
        |     # ruleid: GD103
        |     with ProcessPoolExecutor(2) as ex:
        |         list(ex.map(work, range(3)))
        """,
    )
    VALID = (
        """\
        | import multiprocess
        | import torch
        |
        | def shard(i):
        |     return torch.ones(i, device="cuda").sum().item()
        |
        | if __name__ == "__main__":
        |     multiprocess.set_start_method("spawn")
        |     with multiprocess.Pool(4) as pool:
        |         pool.map(shard, range(4))
        """,
        """\
        | import multiprocessing as mp
        | import torch
        |
        | def tokenize(line):
        |     return line.split()
        |
        | if __name__ == "__main__":
        |     # the workers do CPU-only work: forking them is fine
        |     with mp.Pool(4) as pool:
        |         pool.map(tokenize, ["a b", "c d"])
        """,
        """\
        | import multiprocessing as mp
        | import torch
        |
        | def shard(i):
        |     return torch.ones(i, device="cuda").sum().item()
        |
        | if __name__ == "__main__":
        |     mp.set_start_method("spawn")
        |     with mp.Pool(4) as pool:
        |         pool.map(shard, range(4))
        """,
        """\
        | import multiprocessing as mp
        |
        | def shard(i):
        |     return i * 2
        |
        | if __name__ == "__main__":
        |     with mp.Pool(4) as pool:
        |         pool.map(shard, range(4))
        """,
        """\
        | import multiprocessing as mp
        | import jax
        |
        | def shard(i):
        |     return i
        |
        | if __name__ == "__main__":
        |     with mp.get_context("fork").Pool(2) as pool:
        |         pool.map(shard, range(4))
        """,
    )

    def check(self, ctx: CheckContext) -> Iterator[Finding]:
        starts = []
        chosen: dict[object, set[str]] = {}  # start site -> methods chosen explicitly there
        for site in ctx.process_starts():
            if not isinstance(site.start, Start) or site.start.kind not in KINDS:
                continue
            if site.explicit:
                chosen.setdefault(site.start.site, set()).add(site.method)
            else:
                starts.append(site)
        for site in starts:
            effect, child = site.start, site.child
            assert isinstance(effect, Start)
            if site.method != "fork" or child is None:
                continue
            use = first_gpu_use(child)
            received = received_gpu_objects(child)
            if use is None and not received:
                continue  # the children do CPU-only work (or what they run is not known)
            if not self.first_at(effect.site):
                continue
            init = None if use is None else use.effect
            assert init is None or isinstance(init, Init)  # (what first_gpu_use finds)
            used = init.framework if init is not None else received[0]
            related = ((related_site(init.site, f"the child uses {display(used)} here"),)
                       if init is not None else ())
            # The same start reached with a context the code chose (``get_context("fork")
            # if ... else mp``): the default is one way among others, never the choice.
            others = chosen.get(effect.site)
            way = "" if not others else (
                f" on one way to it (on another the code chooses {' or '.join(sorted(others))} explicitly),")
            elsewhere = method_set_elsewhere(site)
            aside = ""
            if elsewhere is not None:  # a start method set on another package's context
                aside = f" ({elsewhere[1]}, {line_of(elsewhere[0], effect.site)})"
                related = (*related, related_site(elsewhere[0], elsewhere[1]))
            yield self.finding(
                effect.site,
                f"{KINDS[effect.kind]} uses the default start method, fork{aside},{way} and its workers use "
                f"{display(used)}; they break as soon as this process initializes {display(used)} "
                "before starting them",
                related,
                fix=ctx.spawn_fix(site),
                hint=spawn_hint(effect.kind, child, self.fix_title),
            )
