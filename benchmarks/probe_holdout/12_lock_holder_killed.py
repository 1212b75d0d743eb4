"""A worker is killed while it holds a multiprocessing.Lock: every other process waits
for ever.

Modelled on birdnet-team/birdnet#73 ("A worker killed mid-batch deadlocks the survivors
(ring-buffer lock never released)": multiprocessing.Lock is a semaphore with no owner; when
the process holding it is SIGKILLed by the OOM killer it is never released and every
other process waiting on it blocks forever, https://github.com/birdnet-team/birdnet/issues/73)
and python/cpython#88304 (bpo-44138, "multiprocessing documentation should note behavior
when process with Lock dies"). Three workers append results to a shared file under a
multiprocessing.Lock; worker 0 is killed (SIGKILL, as the OOM killer does; here it sends
the signal to itself) while inside the `with lock:` block. The other workers block in
lock.acquire() for ever and the parent blocks in join(): the whole tree sleeps, no CPU.
The fix from the report: do not do work that can be killed while holding the lock (keep
the critical section tiny), acquire with a timeout and check whether the holder is still
alive (record the holder's pid), or use a mechanism the kernel releases on death (fcntl
file locks) instead of a semaphore.
"""
import multiprocessing
import os
import signal
import tempfile
import time


def worker(lock, path, wid):
    for step in range(50):
        with lock:
            with open(path, "a") as f:
                f.write(f"{wid} {step}\n")
            if wid == 0 and step == 3:
                os.kill(os.getpid(), signal.SIGKILL)   # OOM-killed inside the lock
        time.sleep(0.01)


if __name__ == "__main__":
    lock = multiprocessing.Lock()
    path = os.path.join(tempfile.mkdtemp(), "results.txt")
    procs = [multiprocessing.Process(target=worker, args=(lock, path, w)) for w in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    print(open(path).read().count("\n"))
