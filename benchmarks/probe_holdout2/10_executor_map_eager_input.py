"""``ProcessPoolExecutor.map`` over a large generator submits (and keeps) every input at once.

Report: https://github.com/python/cpython/issues/74028 (bpo-29842, "Make Executor.map work
with infinite/large inputs correctly"; Python 3.14 added ``map(..., buffersize=N)``); the
same complaint for ``Pool.imap``: https://github.com/python/cpython/issues/84291.

The program streams records (each a 64 KiB block, standing for an image or a chunk of a
file) from a generator into ``executor.map`` expecting it to be lazy. ``Executor.map``
calls ``submit`` for every item before yielding the first result, so the generator is
drained at once and every block is kept in the parent's ``_pending_work_items`` until its
task has run; the two workers (each task sleeps a little, as I/O-bound work does) are far
behind. The parent's resident memory grows by ~64 KiB per record until the machine's memory
is exhausted. The program bounds itself with ``RLIMIT_AS`` = 1.5 GiB (it then dies with
``MemoryError`` in ``map``) and the probe's ``--memory-limit 600MB`` stands for the
machine. It is the parent, not the workers, that grows. Fix from the reports: feed the
executor in bounded batches (``itertools.islice`` chunks, or submit with a bounded window of
pending futures), or on Python 3.14+ ``executor.map(..., buffersize=N)``.
"""
import os
import resource
import time
from concurrent.futures import ProcessPoolExecutor

resource.setrlimit(resource.RLIMIT_AS, (1536 * 2**20, 1536 * 2**20))


def read_records(n):
    for i in range(n):
        yield os.urandom(64 * 1024)


def checksum(block):
    time.sleep(0.002)
    return sum(block[::4096])


if __name__ == "__main__":
    total = 0
    with ProcessPoolExecutor(max_workers=2) as ex:
        for c in ex.map(checksum, read_records(40_000)):
            total += c
    print(total)
