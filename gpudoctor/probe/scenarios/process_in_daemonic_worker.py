"""Start a process from inside a task of a multiprocessing Pool.

Unsafe: each task of ``Pool.map`` starts a ``multiprocessing.Process`` of its own.
Pool workers are daemonic, and a daemonic process may not have children: the
start raises ``AssertionError: daemonic processes are not allowed to have
children`` in the worker, and ``Pool.map`` re-raises it in the parent.

Safe: the pool does the inner work itself (one flat ``map`` over all the work
items); when a task really must start processes, a ``ProcessPoolExecutor``,
whose workers are not daemonic, can.

Run it yourself: ``python process_in_daemonic_worker.py unsafe|safe``.
"""

from __future__ import annotations

import multiprocessing
import sys

SCENARIO = {
    "name": "process-in-daemonic-worker",
    "rule": "GD105",
    "needs": [],
    "gpu": False,
    "unsafe": "each task of a Pool.map starts a multiprocessing.Process of its own",
    "safe": "the pool maps the inner work directly (no process started inside a worker)",
    "expect": {"unsafe": ["crashed"], "safe": ["ok"]},
}


def square(x: int) -> int:
    """Stand for a GPU job a task wanted to isolate in a process of its own."""
    return x * x


def task(x: int) -> int:
    child = multiprocessing.Process(target=square, args=(x,))
    child.start()
    child.join()
    return x


def unsafe() -> None:
    with multiprocessing.Pool(2) as pool:
        print(pool.map(task, range(4)))


def safe() -> None:
    with multiprocessing.Pool(2) as pool:
        print(pool.map(square, range(4)))


if __name__ == "__main__":
    if sys.argv[1:] == ["unsafe"]:
        unsafe()
    else:
        safe()
