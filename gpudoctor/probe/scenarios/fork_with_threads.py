"""Fork while another thread of the parent holds a lock.

Unsafe: a background thread (a metrics flusher, a logging or connection-pool
thread) takes a lock for each of its short writes; the main thread forks a
Pool(2) while a write is in progress. Each child gets a copy of the lock in its
locked state, but not the thread that would release it: the first task that
takes the lock in a worker waits forever, even though the parent's thread
releases its own copy a moment later. GPU runtimes are full of such threads and
locks, which is why a fork after they started is the same bug.

Safe: the same program with a ``spawn`` Pool(2): workers start from a fresh
interpreter with fresh, unlocked locks. (Starting the pool before any thread
also works.)

Run it yourself: ``python fork_with_threads.py unsafe|safe``.
"""

from __future__ import annotations

import multiprocessing
import sys
import threading
import time

SCENARIO = {
    "name": "fork-with-threads",
    "rule": "GD102",
    "needs": [],
    "gpu": False,
    "unsafe": "a thread holds a lock during its writes; the main thread forks a Pool(2) whose tasks take the lock",
    "safe": "the same program with a spawn Pool(2)",
    "expect": {"unsafe": ["hung"], "safe": ["ok"]},
}

_lock = threading.Lock()
_writing = threading.Event()


def _flusher() -> None:
    """Hold the lock for each write, as a metrics or logging thread does."""
    while True:
        with _lock:
            _writing.set()
            time.sleep(0.5)  # a slow write to disk or network
        time.sleep(0.01)


def work(i: int) -> int:
    with _lock:
        return i * i


def start_flusher() -> None:
    threading.Thread(target=_flusher, name="flusher", daemon=True).start()
    _writing.wait()  # fork in the middle of a write, as happens sooner or later


def unsafe() -> None:
    start_flusher()
    with multiprocessing.get_context("fork").Pool(2) as pool:
        print(pool.map(work, range(4)))


def safe() -> None:
    start_flusher()
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        print(pool.map(work, range(4)))


if __name__ == "__main__":
    if sys.argv[1:] == ["unsafe"]:
        unsafe()
    else:
        safe()
