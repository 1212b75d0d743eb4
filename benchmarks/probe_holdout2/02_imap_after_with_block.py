"""Iterating a Pool.imap result after the ``with Pool()`` block has ended hangs for ever.

Report: https://github.com/uqfoundation/multiprocess/issues/57 (same behaviour with the
standard library's multiprocessing; see also https://github.com/python/cpython/issues/79559).

``imap`` returns a lazy iterator. The program creates it inside ``with Pool() as pool:``
but consumes it after the block. Leaving the block calls ``pool.terminate()``: the workers
are killed before they have produced (all) results, and the iterator's ``next()`` then
waits on a condition variable for results that no process will ever send. The parent is
the only process left, idle in ``IMapIterator.next`` -> ``Condition.wait``: a hang (Ctrl-C
shows ``self._cond.wait(timeout)``). Fix from the report: consume the iterator inside the
``with`` block (or call ``pool.close(); pool.join()`` instead of relying on ``__exit__``,
which terminates).
"""
import multiprocessing as mp


def square(x):
    return x * x


if __name__ == "__main__":
    with mp.Pool(2) as pool:
        results = pool.imap(square, range(200000), chunksize=1)
    total = 0
    for r in results:
        total += r
    print(total)
