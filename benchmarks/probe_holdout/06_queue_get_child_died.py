"""The child raises before it puts its result: the parent's Queue.get() waits for ever.

Modelled on python/cpython#87971 (bpo-43805, "multiprocessing.Queue hangs when process on
other side dies", https://github.com/python/cpython/issues/87971) and pytorch/pytorch#171972
("When a child process exits before filling the completion queue the parent process will
wait forever for it to be filled"). Each worker Process computes a partial result and puts
it on a multiprocessing.Queue; one worker's computation raises ZeroDivisionError, its
traceback is printed ("Process Process-2: ... ZeroDivisionError") and it exits with status
1 without putting anything. The parent collects one result per worker with a blocking
`results.get()` and waits for ever for the missing one. The fix: never wait on the queue
without a timeout/liveness check (get(timeout=...) and check p.exitcode / is_alive), have
the worker put its exception on the queue (try/except in the target), or use a Pool /
ProcessPoolExecutor, which propagate the worker's exception.
"""
import multiprocessing


def partial_sum(q, lo, hi):
    total = 0
    for i in range(lo, hi):
        total += 100 // (i - 250)
    q.put(total)


if __name__ == "__main__":
    results = multiprocessing.Queue()
    procs = [multiprocessing.Process(target=partial_sum, args=(results, lo, lo + 100))
             for lo in range(0, 400, 100)]
    for p in procs:
        p.start()
    total = sum(results.get() for _ in procs)
    for p in procs:
        p.join()
    print(total)
