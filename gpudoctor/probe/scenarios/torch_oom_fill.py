"""Start several PyTorch workers on one GPU that each need most of its memory.

Unsafe: two ``spawn`` workers start one after the other on GPU 0, each filling a
buffer of 60% of the device's total memory. PyTorch allocates on demand, so the
first worker gets its buffer and holds it; the second asks for more than is left
and fails with ``torch.OutOfMemoryError: CUDA out of memory``. Each worker keeps
its memory until both have tried. Nothing is wrong with either worker alone: the
demand of the workers together is more than the device has, and only the
per-process GPU memory (NVML) shows who held it.

Safe: the same two fills run one at a time, each in a worker process of its
own (``Pool(1, maxtasksperchild=1)``) that frees its memory by exiting before
the next starts.

Needs a GPU and a CUDA build of PyTorch.
Run it yourself: ``python torch_oom_fill.py unsafe|safe``.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from typing import Any

import torch

SCENARIO = {
    "name": "torch-oom-fill",
    "rule": "GD401",
    "needs": ["torch"],
    "gpu": True,
    "unsafe": "two spawn workers run at once on GPU 0, each filling 60% of its memory",
    "safe": "the same two fills run one after the other, each in a new spawn worker",
    "expect": {"unsafe": ["oom", "crashed"], "safe": ["ok"]},
}

WORKERS = 2
SHARE = 0.6


def fill(index: int) -> int:
    """Fill SHARE of GPU 0's total memory; return the MiB held."""
    _, total = torch.cuda.mem_get_info()
    buffer = torch.empty(int(SHARE * total), dtype=torch.uint8, device="cuda").fill_(1)
    torch.cuda.synchronize()
    held: int = buffer.numel() >> 20
    print(f"worker {index} (pid {os.getpid()}): holds {held} MiB", flush=True)
    return held


def worker(index: int, ready: Any, done: Any) -> None:
    try:
        fill(index)
    finally:
        ready.set()
        done.wait(120)  # hold the memory until every worker has tried


def unsafe() -> None:
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


def safe() -> None:
    # One worker process at a time, a new one per task: each frees its memory as it exits.
    with multiprocessing.get_context("spawn").Pool(1, maxtasksperchild=1) as pool:
        print(pool.map(fill, range(WORKERS)))


if __name__ == "__main__":
    if sys.argv[1:] == ["unsafe"]:
        unsafe()
    else:
        safe()
