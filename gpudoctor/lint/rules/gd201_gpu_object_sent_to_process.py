"""GD201: a GPU-resident object is sent to another process."""

from __future__ import annotations

from collections.abc import Iterator

from gpudoctor.lint.analysis.events import Send
from gpudoctor.lint.analysis.values import gpu_objects
from gpudoctor.lint.findings import ERROR, WARNING, Finding, Related
from gpudoctor.lint.knowledge import processes as P
from gpudoctor.lint.knowledge.registry import BY_NAME
from gpudoctor.lint.rules._base import CheckContext, Rule, display

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
    `delayed(f)(...)` calls run by its multiprocessing backend. Reported at the sending call. It is an
    error under fork and a warning under spawn.

    ## Why is this bad?
    Device memory does not cross process boundaries by pickling. The object is
    copied to the host, pickled, and rebuilt on the GPU in the receiver, which must
    therefore initialize CUDA itself — impossible in a child forked after CUDA was
    initialized, and a full device round trip per task otherwise. CUDA IPC
    (`torch.multiprocessing` with spawn) is the exception that has to be chosen on
    purpose.

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
    - [CuPy: interoperability and host transfers](https://docs.cupy.dev/en/stable/user_guide/basic.html)
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
    )

    def check(self, ctx: CheckContext) -> Iterator[Finding]:
        for _flow, _, event, state in ctx.points():
            effect = event.effect
            if not isinstance(effect, Send):
                continue
            found = gpu_objects(effect.value)
            if not found:
                continue
            method, _ = ctx.builder.resolve_method(effect.method, state)
            first = min(found, key=lambda o: (o.site.row, o.site.col))
            name = display(first.framework)
            yield self.finding(
                effect.site,
                f"a {name} object that lives on the GPU is sent {CHANNELS[effect.channel]}; "
                f"it is copied to the host and rebuilt on the GPU in the receiver "
                f"(send {BY_NAME[first.framework].host_copy} instead)",
                (Related(first.site, f"the {name} object is created here"),),
                severity=ERROR if method == "fork" else WARNING,
            )
