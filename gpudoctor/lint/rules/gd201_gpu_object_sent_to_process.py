"""GD201: a GPU-resident object is sent to another process."""

from __future__ import annotations

from collections.abc import Iterator

from gpudoctor.knowledge import processes as P
from gpudoctor.knowledge.registry import BY_NAME, IPC_SHARING
from gpudoctor.lint.analysis.events import Send
from gpudoctor.lint.analysis.values import GpuObj, gpu_objects
from gpudoctor.lint.findings import ERROR, WARNING, Finding
from gpudoctor.lint.rules._base import (
    CheckContext,
    Rule,
    condition_sites,
    conditions_of,
    display,
    related_site,
    when_text,
)

CHANNELS = {
    "task": "as task arguments to a worker pool",
    "process-args": "as arguments of a new process",
    "initargs": "as pool initializer arguments",
    "queue": "through a multiprocessing queue",
    "pipe": "through a pipe",
    P.JOBLIB: "as task arguments to joblib's multiprocessing workers",
}


class GpuObjectSentToProcess(Rule):
    """## What it does
    Flags a device-resident object — a CuPy array, a CUDA tensor or module, a
    TensorFlow tensor, variable or model, a JAX array, a Numba device array, a PyCUDA
    GPU array — passed to another process: as `map`/`starmap`/`apply`/`submit`
    arguments (also inside lists, comprehensions and `zip`), as `Process(args=...)`,
    through `Queue.put` or `Connection.send`, or as the arguments of joblib's
    `delayed(f)(...)` calls run by its multiprocessing backend. Reported at the
    sending call. It is an error under fork and a warning under spawn or forkserver.

    PyTorch CUDA tensors and modules are the exception under spawn and forkserver:
    `import torch` registers picklers with `multiprocessing` that share them through
    CUDA IPC instead of copying them (torch/multiprocessing/reductions.py), on every
    channel above. A process handing them to the processes it starts (pool tasks,
    `Process(args=...)`, `torch.multiprocessing.spawn(fn, args=...)`, initializer
    arguments, its own queue and pipe puts) is the documented way to share GPU memory
    (Hogwild training: `model.share_memory()`, then one `Process` per trainer) and is
    not reported, on any channel. The one hazard left there is the sender's lifetime:
    the receiver maps the sender's memory, valid only while the sender runs, so a
    producer that exits while the receiver still holds its tensors takes the memory
    with it. Whether it does depends on timing no linter sees (most producers loop
    until shut down), so it is not reported either: PyTorch prints a warning when it
    happens, and `gpudoctor probe run` reports that warning with its meaning.
    (Running out of file descriptors under the default `file_descriptor` sharing
    strategy concerns CPU tensors: CUDA tensors travel as IPC handles, not descriptors.)

    A Numba `arr.get_ipc_handle()` is a host handle made to be sent, not a device
    array: sending it is not flagged. joblib's multiprocessing backend pickles task
    arguments with a pickler of its own that does not use PyTorch's picklers: CUDA
    tensors sent there are copied like any other framework's objects.

    ## Why is this bad?
    Device memory does not cross process boundaries by pickling. The object is
    copied to the host, pickled, and rebuilt on the GPU in the receiver, which must
    therefore initialize CUDA itself — impossible in a child forked after CUDA was
    initialized, and a full device round trip per task otherwise.

    PyTorch does not copy: under fork the receiver still needs CUDA to use the tensor,
    which a child forked after CUDA was initialized cannot initialize ("Cannot
    re-initialize CUDA in forked subprocess"). Nor does a forked `Process`: its
    `args` are inherited, not pickled, and the child meets the object as it is, with
    the same need.

    ## Example
    ```python
    | data = [cp.arange(10) for _ in range(4)]
    | pool.map(work, data)
    ```

    Use instead:
    ```python
    | data = [cp.asnumpy(cp.arange(10)) for _ in range(4)]
    | pool.map(work, data)
    ```

    ## References
    - [PyTorch: sharing CUDA tensors](https://pytorch.org/docs/stable/multiprocessing.html#sharing-cuda-tensors)
    - [PyTorch: Hogwild](https://pytorch.org/docs/stable/notes/multiprocessing.html#hogwild)
    - [CuPy: interoperability and host transfers](https://docs.cupy.dev/en/stable/user_guide/basic.html)
    - [Numba: sharing CUDA memory between processes](https://numba.readthedocs.io/en/stable/cuda/ipc.html)
    """

    code = "GD201"
    name = "gpu-object-sent-to-process"
    severity = ERROR
    summary = "GPU-resident object sent to another process"
    fix_title = "Send a host copy (numpy array) and move it to the GPU in the worker"
    INVALID = (
        """\
        | import multiprocessing as mp
        | import cupy as cp
        |
        | def work(x):
        |     return x
        |
        | if __name__ == "__main__":
        |     with mp.get_context("spawn").Pool(2) as pool:
        |         # ruleid: GD201
        |         pool.map(work, [cp.arange(3) for _ in range(2)])
        """,
        """\
        | import multiprocessing as mp
        | import torch
        |
        | def work(q):
        |     pass
        |
        | def main():
        |     q = mp.Queue()
        |     t = torch.ones(3).cuda()
        |     # ruleid: GD201
        |     q.put(t)
        """,
    )
    VALID = (
        """\
        | import multiprocessing as mp
        | import cupy as cp
        |
        | def work(x):
        |     return x
        |
        | if __name__ == "__main__":
        |     with mp.get_context("spawn").Pool(2) as pool:
        |         pool.map(work, [cp.asnumpy(cp.arange(3)) for _ in range(2)])
        """,
        """\
        | import multiprocessing as mp
        | import torch
        |
        | def main():
        |     q = mp.Queue()
        |     t = torch.ones(3).cuda()
        |     q.put(t.cpu().numpy())
        """,
        """\
        | import torch
        | import torch.multiprocessing as mp
        |
        | def train(model):
        |     model(torch.randn(8, 4, device="cuda")).sum().backward()
        |
        | if __name__ == "__main__":
        |     mp.set_start_method("spawn")
        |     model = torch.nn.Linear(4, 1).cuda()
        |     model.share_memory()
        |     workers = [mp.Process(target=train, args=(model,)) for _ in range(4)]
        |     for p in workers:
        |         p.start()
        |     for p in workers:
        |         p.join()
        """,
        """\
        | import multiprocessing as mp
        | import numpy as np
        | from numba import cuda
        |
        | def work(handle):
        |     with handle as arr:
        |         return arr.copy_to_host().sum()
        |
        | if __name__ == "__main__":
        |     d = cuda.to_device(np.arange(8))
        |     with mp.get_context("spawn").Pool(1) as pool:
        |         pool.map(work, [d.get_ipc_handle()])
        """,
    )

    def check(self, ctx: CheckContext) -> Iterator[Finding]:
        for _, _, event, state in ctx.points():
            effect = event.effect
            if not isinstance(effect, Send):
                continue
            method, _ = ctx.method_at(effect.method, state)
            fork = method == "fork"
            found = [o for o in gpu_objects(effect.value) if o.resident and self._reported(o, effect, fork)]
            if not found:
                continue
            first = min(found, key=lambda o: (o.site.row, o.site.col))
            name = display(first.framework)
            when = conditions_of(first.when, event.ctx.conditions)
            related = (related_site(first.site, f"the {name} object is created here"), *condition_sites(when))
            host_copy = BY_NAME[first.framework].host_copy
            sent = f"a {name} object that lives on the GPU is sent {CHANNELS[effect.channel]}" + \
                (f" (one made{when_text(when, effect.site)})" if when else "")
            # A forked Process inherits its arguments (nothing is pickled): it meets the
            # object as it is, which needs CUDA in a child forked after CUDA started.
            inherited = fork and effect.channel == "process-args"
            if not self._shared(first, effect) and not inherited:
                yield self.finding(
                    effect.site,
                    f"{sent}; it is copied to the host and rebuilt on the GPU in the receiver "
                    f"(send {host_copy} instead)",
                    related, severity=ERROR if fork else WARNING,
                )
            else:
                yield self.finding(
                    effect.site,
                    f"{sent}, under the fork start method{' (inherited, not copied)' if inherited else ''}; "
                    "the receiver can use it only if it can initialize CUDA itself, which a process forked "
                    "after CUDA was initialized cannot",
                    related, hint=f"Use the spawn start method, under which {name} shares it without a copy, "
                                  f"or send {host_copy}" if self._shared(first, effect) else
                    f"Send {host_copy} and build the {name} object in the child, or use the spawn start method "
                    "and initialize the GPU only in the processes that use it",
                )

    @staticmethod
    def _reported(obj: GpuObj, send: Send, fork: bool) -> bool:
        """Objects a framework shares without copying are reported only under fork (see the
        rule's docs)."""
        return fork or not GpuObjectSentToProcess._shared(obj, send)

    @staticmethod
    def _shared(obj: GpuObj, send: Send) -> bool:
        """Does the framework share this object by IPC on this channel (rather than copy it)?"""
        return obj.framework in IPC_SHARING and send.channel not in P.OWN_PICKLER_CHANNELS
