"""Start several TensorFlow workers on one GPU with the default allocator.

Unsafe: three ``spawn`` worker processes start one after the other on GPU 0, each
running a 256 MiB matmul. TensorFlow reserves nearly all free GPU memory when it
initializes, so the first worker holds almost the whole device and the others
fail (``failed to allocate ... from device: CUDA_ERROR_OUT_OF_MEMORY``,
``CUDA runtime implicit initialization on GPU:0 failed. Status: out of memory``
or ``OOM when allocating tensor``). Each worker keeps its memory until all have
tried, as workers of a real job do.

Safe: each worker turns on memory growth before its first op (a per-worker
``memory_limit`` with ``set_logical_device_configuration``, or
``TF_FORCE_GPU_ALLOW_GROWTH=true`` in the workers' environment, work too).

Needs a GPU and a CUDA build of TensorFlow.
Run it yourself: ``python tensorflow_oom_grab_all.py unsafe|safe``.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Callable
from typing import Any

import tensorflow as tf

SCENARIO = {
    "name": "tensorflow-oom-grab-all",
    "rule": "GD401",
    "needs": ["tensorflow"],
    "gpu": True,
    "unsafe": "three spawn workers each initialize TensorFlow on GPU 0 with the default (grab-all) allocator",
    "safe": "each worker calls set_memory_growth before its first op",
    "expect": {"unsafe": ["oom", "crashed"], "safe": ["ok"]},
}

WORKERS = 3
SIDE = 8192  # 8192 x 8192 float32: 256 MiB per matrix


def matmul(index: int) -> None:
    with tf.device("/GPU:0"):
        ones = tf.ones((SIDE, SIDE))
        value = float(tf.matmul(ones, ones)[0, 0])
    print(f"worker {index} (pid {os.getpid()}): ok ({value:.0f})", flush=True)


def grab_all_worker(index: int, ready: Any, done: Any) -> None:
    try:
        matmul(index)
    finally:
        ready.set()
        done.wait(120)  # hold the memory until every worker has tried


def growing_worker(index: int, ready: Any, done: Any) -> None:
    try:
        for gpu in tf.config.list_physical_devices("GPU"):
            tf.config.experimental.set_memory_growth(gpu, True)
        matmul(index)
    finally:
        ready.set()
        done.wait(120)


def run(target: Callable[[int, Any, Any], None]) -> None:
    context = multiprocessing.get_context("spawn")
    done = context.Event()
    workers = []
    for index in range(WORKERS):
        ready = context.Event()
        process = context.Process(target=target, args=(index, ready, done))
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
    run(grab_all_worker)


def safe() -> None:
    run(growing_worker)


if __name__ == "__main__":
    if sys.argv[1:] == ["unsafe"]:
        unsafe()
    else:
        safe()
