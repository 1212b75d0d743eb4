"""Fork worker processes after TensorFlow ran an op in the parent.

Unsafe: the parent multiplies two 1000x1000 matrices, which starts TensorFlow's
intra-op thread pool, then maps the same work over a ``fork`` Pool(2). A fork
child holds a copy of the pool's state but none of its threads, so the first op
in a worker waits forever (on a CPU-only machine; with a GPU the workers abort
with ``CUDA_ERROR_NOT_INITIALIZED`` or hang). Small matrices (64x64) run inline
and do not show it; importing TensorFlow alone before the fork is harmless.

Safe: the same work with a ``spawn`` Pool(2): each worker starts a fresh
interpreter and initializes its own TensorFlow. Every process turns on memory
growth at import, so that on a GPU the parent and two workers share the device
instead of the first one reserving all of it.

Run it yourself: ``python tensorflow_fork_after_init.py unsafe|safe``.
"""

from __future__ import annotations

import multiprocessing
import sys

import tensorflow as tf

# Runs in the parent and, on import of this file, in every spawn worker.
for _gpu in tf.config.list_physical_devices("GPU"):
    tf.config.experimental.set_memory_growth(_gpu, True)

SCENARIO = {
    "name": "tensorflow-fork-after-init",
    "rule": "GD101",
    "needs": ["tensorflow"],
    "gpu": False,
    "unsafe": "the parent runs a TensorFlow op (1000x1000 matmul), then a fork Pool(2) runs the same op",
    "safe": "the same work with a spawn Pool(2): each worker initializes its own TensorFlow",
    "expect": {"unsafe": ["hung", "crashed"], "safe": ["ok"]},
}

SIZE = 1000  # large enough for TensorFlow to hand the matmul to its thread pool


def work(i: int) -> float:
    """Run one op big enough to need the intra-op thread pool."""
    ones = tf.ones((SIZE, SIZE))
    return float(tf.reduce_sum(tf.matmul(ones, ones))) + i


def unsafe() -> None:
    work(0)
    with multiprocessing.get_context("fork").Pool(2) as pool:
        print(pool.map(work, range(4)))


def safe() -> None:
    work(0)
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        print(pool.map(work, range(4)))


if __name__ == "__main__":
    if sys.argv[1:] == ["unsafe"]:
        unsafe()
    else:
        safe()
