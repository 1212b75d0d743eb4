"""PyTorch initializes CUDA, then the program forks a Pool whose workers use CUDA.

Expected: every task raises ``RuntimeError: Cannot re-initialize CUDA in forked
subprocess``; ``Pool.map`` re-raises it in the parent, which exits non-zero.
"""

import multiprocessing

import torch


def work(i: int) -> float:
    return float(torch.ones(1000 + i, device="cuda").sum())


if __name__ == "__main__":
    print("parent:", work(0), flush=True)  # CUDA is initialized in the parent now
    with multiprocessing.get_context("fork").Pool(2) as pool:
        print(pool.map(work, range(4)))
