"""Start several JAX workers on one GPU with the default preallocation.

Unsafe: three ``spawn`` worker processes start one after the other on GPU 0. JAX
preallocates 75% of the GPU's memory when its backend starts, so the first
worker holds three quarters of the device and the next ones fail
(``RESOURCE_EXHAUSTED: Out of memory while trying to allocate``). Each worker
keeps its memory until all have tried.

Safe: the parent sets ``XLA_PYTHON_CLIENT_PREALLOCATE=false`` before it starts
the workers, which inherit it (``XLA_PYTHON_CLIENT_MEM_FRACTION`` below 1/3
would work too).

Needs a GPU and JAX's CUDA plugin.
Run it yourself: ``python jax_oom_preallocate.py unsafe|safe``.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from typing import Any

import jax.numpy as jnp

SCENARIO = {
    "name": "jax-oom-preallocate",
    "rule": "GD401",
    "needs": ["jax"],
    "gpu": True,
    "unsafe": "three spawn workers each start JAX on GPU 0 with the default 75% preallocation",
    "safe": "XLA_PYTHON_CLIENT_PREALLOCATE=false is set for the workers before they start",
    "expect": {"unsafe": ["oom", "crashed"], "safe": ["ok"]},
}

WORKERS = 3


def worker(index: int, ready: Any, done: Any) -> None:
    try:
        ones = jnp.ones((4096, 4096))
        value = float((ones @ ones)[0, 0])
        print(f"worker {index} (pid {os.getpid()}): ok ({value:.0f})", flush=True)
    finally:
        ready.set()
        done.wait(120)  # hold the memory until every worker has tried


def run() -> None:
    context = multiprocessing.get_context("spawn")
    done = context.Event()
    workers = []
    for index in range(WORKERS):
        ready = context.Event()
        process = context.Process(target=worker, args=(index, ready, done))
        process.start()
        workers.append(process)
        # The next worker starts once this one holds its memory: "first" is well defined.
        while not ready.wait(0.2) and process.is_alive():
            pass
    done.set()
    for process in workers:
        process.join()
    failed = [p.pid for p in workers if p.exitcode != 0]
    if failed:
        sys.exit(f"workers {failed} failed")


def unsafe() -> None:
    run()


def safe() -> None:
    os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"  # inherited by spawn workers
    run()


if __name__ == "__main__":
    if sys.argv[1:] == ["unsafe"]:
        unsafe()
    else:
        safe()
