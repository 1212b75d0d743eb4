"""The parent makes CuPy arrays and sends them to fork Pool workers.

Expected: each worker rebuilds the array it receives on the GPU, in a fork child of a
process that initialized CUDA: ``cudaErrorInitializationError``. The error comes while
the worker unpickles its task, which kills the worker; the pool starts another and
``Pool.map`` waits for a result that never comes (hung), or the program fails.
"""

import multiprocessing

import cupy as cp


def total(piece: object) -> float:
    return float(cp.asarray(piece).sum())


if __name__ == "__main__":
    pieces = [cp.arange(1000, dtype=cp.float32) + i for i in range(4)]
    with multiprocessing.get_context("fork").Pool(2) as pool:
        print(pool.map(total, pieces))
