"""A Pool task that calls sys.exit(): the worker ends and Pool.map waits for ever.

Modelled on DaehwanKimLab/hisat-genotype#56 ("indefinite stalling caused by exit(1) within
process", https://github.com/DaehwanKimLab/hisat-genotype/issues/56), bonsai-team/matam#92
("When a process calls sys.exit, the pool process is hanging forever") and the CPython PR
python/cpython#101081 ("raising a BaseException in a multiprocessing worker pool causes
process hang"). A helper used inside the task exits the process on bad input, as command
line code does. SystemExit is a BaseException, the Pool's worker loop only catches
Exception, so the worker process exits (status 1) without sending a result; the Pool
starts a replacement and `pool.map` waits for ever for the lost task. The fix the
reporters made: raise an exception (e.g. ValueError) instead of calling sys.exit/exit in
code that runs in a worker (or catch SystemExit in the task).
"""
import multiprocessing
import sys


def check_input(x):
    if x == 3:
        print("bad record", x, file=sys.stderr)
        sys.exit(1)


def work(x):
    check_input(x)
    return x * x


if __name__ == "__main__":
    with multiprocessing.Pool(2) as pool:
        print(pool.map(work, range(8)))
