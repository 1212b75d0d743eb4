"""Fork worker processes after JAX started its GPU backend in the parent.

Unsafe: the parent runs a ``jax.numpy`` op, which starts the backend and its
threads, then maps JAX work over a ``fork`` Pool(2). JAX warns in the parent
(``os.fork() was called. os.fork() is incompatible with multithreaded code, and
JAX is multithreaded``) and the workers hang or fail.

Safe: the same work with a ``spawn`` Pool(2). Every process turns off JAX's
75% preallocation before it imports JAX, so that the parent and two workers
share the GPU.

Needs a GPU and JAX's CUDA plugin (on JAX's CPU backend the outcome depends on
the version, so the scenario does not claim it).
Run it yourself: ``python jax_fork_after_init.py unsafe|safe``.
"""

from __future__ import annotations

import multiprocessing
import os
import sys

# Runs in the parent and, on import of this file, in every spawn worker.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

SCENARIO = {
    "name": "jax-fork-after-init",
    "rule": "GD101",
    "needs": ["jax"],
    "gpu": True,
    "unsafe": "the parent runs a jax.numpy op, then a fork Pool(2) runs JAX work",
    "safe": "the same work with a spawn Pool(2)",
    "expect": {"unsafe": ["hung", "crashed"], "safe": ["ok"]},
}


def work(i: int) -> float:
    import jax.numpy as jnp

    ones = jnp.ones((1000, 1000))
    return float((ones @ ones).sum()) + i


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
