"""Two spawn processes start JAX on GPU 0 with the default preallocation.

Expected: the first preallocates 75% of the GPU's memory and holds it; the second
asks for 75% of its own and runs out of memory (``RESOURCE_EXHAUSTED``). NVML shows
the first holding most of the device while the second failed.
"""

import multiprocessing
import os
import sys
from typing import Any


def worker(index: int, ready: Any, done: Any) -> None:
    try:
        import jax.numpy as jnp

        ones = jnp.ones((2048, 2048))
        print(f"worker {index} (pid {os.getpid()}): {float((ones @ ones)[0, 0]):.0f}", flush=True)
    finally:
        ready.set()
        done.wait(120)  # hold the memory until both have tried


if __name__ == "__main__":
    os.environ.pop("XLA_PYTHON_CLIENT_PREALLOCATE", None)  # JAX's default: preallocate
    os.environ.pop("XLA_PYTHON_CLIENT_MEM_FRACTION", None)
    context = multiprocessing.get_context("spawn")
    done = context.Event()
    workers = []
    for index in range(2):
        ready = context.Event()
        process = context.Process(target=worker, args=(index, ready, done))
        process.start()
        workers.append(process)
        while not ready.wait(0.2) and process.is_alive():
            pass  # the second starts once the first holds its memory
    done.set()
    for process in workers:
        process.join()
    failed = [p.pid for p in workers if p.exitcode != 0]
    if failed:
        sys.exit(f"workers {failed} failed")
