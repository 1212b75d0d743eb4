"""Send a PyTorch CUDA tensor made in the parent to a fork child.

Unsafe: the parent makes a tensor on the GPU and puts it on a ``fork``
``multiprocessing`` Queue; the child takes it off. PyTorch pickles a CUDA tensor
as a CUDA IPC handle (its ``torch.multiprocessing`` reductions), and rebuilding it
needs CUDA in the child, which PyTorch refuses in a fork child of a process that
initialized CUDA: ``RuntimeError: Cannot re-initialize CUDA in forked
subprocess``. (A plain pickle fails the same way: it rebuilds the tensor on the
GPU.)

Safe: the parent sends a host copy (``tensor.cpu()``) through a ``spawn`` Queue
and the child moves it to the GPU itself. Under spawn PyTorch can also share the
CUDA tensor itself through CUDA IPC, but only while the sender keeps it alive
until the receiver is done with it — which is why GD201 still warns there.

Needs a GPU and a CUDA build of PyTorch.
Run it yourself: ``python torch_object_to_worker.py unsafe|safe``.
"""

from __future__ import annotations

import multiprocessing
import sys
from typing import Any

import torch

SCENARIO = {
    "name": "torch-object-to-worker",
    "rule": "GD201",
    "needs": ["torch"],
    "gpu": True,
    "unsafe": "a CUDA tensor made in the parent is put on a fork Queue and taken off by the child",
    "safe": "a host copy (tensor.cpu()) goes through a spawn Queue; the child moves it to the GPU",
    "expect": {"unsafe": ["crashed", "hung"], "safe": ["ok"]},
}


def consume(queue: Any) -> None:
    tensor = queue.get().to("cuda")
    print(f"child: sum {float(tensor.sum()):.0f}", flush=True)


def run(method: str, payload: Any) -> None:
    context = multiprocessing.get_context(method)
    queue = context.Queue()
    # (Type stubs give Process to each start method's context, not to get_context(str)'s.)
    child = context.Process(target=consume, args=(queue,))  # type: ignore[attr-defined]
    child.start()
    queue.put(payload)
    child.join()
    if child.exitcode != 0:
        sys.exit(f"the child failed with exit status {child.exitcode}")


def unsafe() -> None:
    tensor = torch.arange(1000, dtype=torch.float32, device="cuda")
    run("fork", tensor)


def safe() -> None:
    tensor = torch.arange(1000, dtype=torch.float32, device="cuda")
    run("spawn", tensor.cpu())


if __name__ == "__main__":
    if sys.argv[1:] == ["unsafe"]:
        unsafe()
    else:
        safe()
