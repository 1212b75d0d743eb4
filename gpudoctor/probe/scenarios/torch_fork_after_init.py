"""Fork worker processes after PyTorch initialized CUDA in the parent.

Unsafe: the parent creates a tensor on the GPU, then maps GPU work over a
``fork`` Pool(2). PyTorch marks a process that initialized CUDA and refuses to
use CUDA in its fork children: each task raises ``RuntimeError: Cannot
re-initialize CUDA in forked subprocess`` (``torch.cuda.is_available()`` in the
parent is enough to cause it on many versions).

Safe: the same work with a ``spawn`` Pool(2).

Needs a GPU and a CUDA build of PyTorch.
Run it yourself: ``python torch_fork_after_init.py unsafe|safe``.
"""

from __future__ import annotations

import multiprocessing
import sys

import torch

SCENARIO = {
    "name": "torch-fork-after-init",
    "rule": "GD101",
    "needs": ["torch"],
    "gpu": True,
    "unsafe": "the parent creates a CUDA tensor, then a fork Pool(2) runs CUDA work",
    "safe": "the same work with a spawn Pool(2)",
    "expect": {"unsafe": ["crashed"], "safe": ["ok"]},
}


def work(i: int) -> float:
    return float(torch.ones(1000 + i, device="cuda").sum())


def unsafe() -> None:
    print(work(0))
    with multiprocessing.get_context("fork").Pool(2) as pool:
        print(pool.map(work, range(4)))


def safe() -> None:
    print(work(0))
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        print(pool.map(work, range(4)))


if __name__ == "__main__":
    if sys.argv[1:] == ["unsafe"]:
        unsafe()
    else:
        safe()
