"""The Manager's server process dies while workers use its proxies: every proxy call fails.

Modelled on brickbots/PiFinder#476 ("When the multiprocessing Manager process that owns
SharedStateObj dies, every worker that holds a proxy gets a BrokenPipeError /
ConnectionResetError / EOFError on its next shared_state.* call",
https://github.com/brickbots/PiFinder/pull/476) and rix1337/FeedCrawler#742
(ConnectionRefusedError from a Manager dict proxy). Two worker processes record progress in
a Manager().dict(); the manager's server process is killed with SIGKILL, as the OOM killer
does to a manager that grew too big (modelled here by the parent killing it once the
workers are running). The workers' next `shared[...] = ...` raises BrokenPipeError /
EOFError / ConnectionRefusedError and they die with status 1; the parent's read of the dict
after join raises too and the program exits with status 1. The fix: keep the manager
process alive (do not let it grow -- it holds every object put in the dict -- or protect it
from the OOM killer), treat its death as fatal (catch the connection errors and stop), or
avoid a Manager for bulk data (shared_memory, files, a Queue of results).
"""
import multiprocessing
import os
import signal
import time


def worker(shared, wid, ready):
    ready.set()
    for step in range(10_000):
        shared[f"w{wid}"] = step
        time.sleep(0.01)


if __name__ == "__main__":
    manager = multiprocessing.Manager()
    shared = manager.dict()
    events = [multiprocessing.Event() for _ in range(2)]
    procs = [multiprocessing.Process(target=worker, args=(shared, i, e)) for i, e in enumerate(events)]
    for p in procs:
        p.start()
    for e in events:
        e.wait()
    time.sleep(0.5)
    os.kill(manager._process.pid, signal.SIGKILL)   # the OOM killer's choice
    for p in procs:
        p.join()
    print(dict(shared))
