"""Send CuPy arrays created in the parent to fork workers.

Unsafe: the parent builds CuPy arrays (CUDA is now initialized in it) and passes
them to ``Pool.map`` on a ``fork`` pool. Each array is pickled to the worker,
which rebuilds it on the GPU — CUDA use in a fork child of an initialized
parent: ``cudaErrorInitializationError``. This is the "correct approach" of more
than one tutorial.

Safe: the parent sends host copies (``x.get()``, NumPy arrays) to a ``spawn``
Pool(2); each worker moves its piece to the GPU itself.

Needs a GPU. Run it yourself: ``python cupy_object_to_worker.py unsafe|safe``.
"""

from __future__ import annotations

import multiprocessing
import sys

import cupy as cp

SCENARIO = {
    "name": "cupy-object-to-worker",
    "rule": "GD201",
    "needs": ["cupy"],
    "gpu": True,
    "unsafe": "CuPy arrays made in the parent are sent to a fork Pool(2)",
    "safe": "host copies (x.get()) are sent to a spawn Pool(2); workers create their own CuPy arrays",
    "expect": {"unsafe": ["crashed", "hung"], "safe": ["ok"]},
}


def total(piece: object) -> float:
    return float(cp.asarray(piece).sum())


def unsafe() -> None:
    pieces = [cp.arange(1000, dtype=cp.float32) + i for i in range(4)]
    with multiprocessing.get_context("fork").Pool(2) as pool:
        print(pool.map(total, pieces))


def safe() -> None:
    pieces = [(cp.arange(1000, dtype=cp.float32) + i).get() for i in range(4)]
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        print(pool.map(total, pieces))


if __name__ == "__main__":
    if sys.argv[1:] == ["unsafe"]:
        unsafe()
    else:
        safe()
