"""Fork worker processes after Numba's CUDA target initialized CUDA in the parent.

Unsafe: the parent copies an array to the GPU with ``numba.cuda.to_device``, then
maps the same GPU work over a ``fork`` Pool(2). Numba notices that CUDA was
initialized in the process it was forked from and refuses: each task raises
``CudaDriverError: CUDA initialized before forking``.

Safe: the same work with a ``spawn`` Pool(2).

Needs a GPU and Numba's CUDA target (the numba-cuda package).
Run it yourself: ``python numba_fork_after_init.py unsafe|safe``.
"""

from __future__ import annotations

import multiprocessing
import sys

import numpy as np
from numba import cuda

SCENARIO = {
    "name": "numba-fork-after-init",
    "rule": "GD101",
    "needs": ["numba"],
    "gpu": True,
    "unsafe": "the parent copies an array to the GPU with numba.cuda, then a fork Pool(2) does the same",
    "safe": "the same work with a spawn Pool(2)",
    "expect": {"unsafe": ["crashed"], "safe": ["ok"]},
}


def work(i: int) -> float:
    on_gpu = cuda.to_device(np.arange(1000, dtype=np.float32) + i)
    return float(on_gpu.copy_to_host().sum())


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
