"""Passing a multiprocessing.Lock to Pool.map as an argument raises RuntimeError.

Report: https://superfastpython.com/multiprocessing-pool-mutex-lock (the error and its fixes);
the same failure from ``Pool._handle_tasks`` with a Queue argument:
https://github.com/dongzhang0725/PhyloSuite/issues/129.

Workers append to a shared log file and serialise the writes with a
``multiprocessing.Lock``, passed to each task through ``functools.partial``. Pool tasks are
pickled onto the task queue, and a ``multiprocessing.Lock`` refuses to be pickled outside
process creation: the Pool's task-handler thread fails with ``RuntimeError: Lock objects
should only be shared between processes through inheritance`` and ``pool.map`` re-raises it
in the parent. The program exits with status 1; no task has run. Fix from the answers:
give the lock to the workers at start through ``Pool(initializer=..., initargs=(lock,))``
(a global in each worker), or use ``multiprocessing.Manager().Lock()``, whose proxy can be
pickled.
"""
import functools
import multiprocessing as mp
import os
import tempfile


def record(item, lock, path):
    with lock:
        with open(path, "a") as f:
            f.write(f"{os.getpid()} {item}\n")
    return item


if __name__ == "__main__":
    log = os.path.join(tempfile.mkdtemp(), "results.log")
    lock = mp.Lock()
    with mp.Pool(2) as pool:
        done = pool.map(functools.partial(record, lock=lock, path=log), range(100))
    print(len(done))
