"""JAX starts its GPU backend (``jax.devices()``), then the program forks a Pool whose
workers run JAX.

Expected: JAX warns in the parent (``os.fork() was called ... JAX is multithreaded``)
and the fork children never finish their first op: the tree hangs.
"""

import multiprocessing

import jax
import jax.numpy as jnp


def work(i: int) -> float:
    return float(jnp.ones((64, 64)).sum() + i)


if __name__ == "__main__":
    print("parent devices:", jax.devices(), flush=True)
    with multiprocessing.get_context("fork").Pool(2) as pool:
        print(pool.map(work, range(4)))
