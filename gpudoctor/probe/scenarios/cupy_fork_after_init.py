"""Fork worker processes after CuPy used the GPU in the parent.

Unsafe: the parent sums a CuPy array, which initializes CUDA, then maps CuPy work
over a ``fork`` Pool(2). CUDA cannot be used in a fork child of a process that
initialized it, and CuPy does not detect the fork: the workers fail with
``cudaErrorInitializationError``.

Safe: the same work with a ``spawn`` Pool(2); each worker initializes CUDA itself.

Needs a GPU: without a driver CuPy fails on first use in the parent already.
Run it yourself: ``python cupy_fork_after_init.py unsafe|safe``.
"""

from __future__ import annotations

import multiprocessing
import sys

import cupy as cp

SCENARIO = {
    "name": "cupy-fork-after-init",
    "rule": "GD101",
    "needs": ["cupy"],
    "gpu": True,
    "unsafe": "the parent sums a CuPy array, then a fork Pool(2) runs CuPy work",
    "safe": "the same work with a spawn Pool(2)",
    "expect": {"unsafe": ["crashed", "hung"], "safe": ["ok"]},
}


def work(i: int) -> int:
    return int(cp.arange(1000 + i).sum())


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
