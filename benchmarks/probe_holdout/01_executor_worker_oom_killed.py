"""A ProcessPoolExecutor worker killed by the kernel's OOM killer in the middle of a task.

Modelled on epam/ai-dial-rag#11 (https://github.com/epam/ai-dial-rag/issues/11: "Run request
with a large file which could cause OOM in a worker process ... BrokenProcessPool: A child
process terminated abruptly, the process pool is not usable anymore") and
agronholm/apscheduler#362 (https://github.com/agronholm/apscheduler/issues/362). Each task
builds a large in-memory array for one "document"; one document is far bigger than the
others and the worker that handles it is SIGKILLed the way the OOM killer does it (this
machine has no memory cgroup to make the kernel do it, so the worker sends itself SIGKILL
once it holds ~400 MiB). The executor notices the dead worker, marks the pool broken and
every pending future raises concurrent.futures.process.BrokenProcessPool: the parent dies
with that traceback at the `for ... in executor.map(...)` line, exit status 1. The
reporters' fix: keep per-task memory down (process the large file in chunks, fewer
workers / a memory budget per worker), and catch BrokenProcessPool to rebuild the pool.
"""
import os
import signal
import sys
from concurrent.futures import ProcessPoolExecutor


def index_document(size_mb):
    chunks = []
    for _ in range(size_mb // 8):
        chunks.append(bytearray(8 * 1024 * 1024))
        if len(chunks) * 8 >= 400:
            # what the OOM killer does to the biggest process in a full memory cgroup
            os.kill(os.getpid(), signal.SIGKILL)
    return sum(len(c) for c in chunks)


if __name__ == "__main__":
    sizes = [16, 16, 16, 2000, 16, 16]
    with ProcessPoolExecutor(max_workers=2) as executor:
        for size, n in zip(sizes, executor.map(index_document, sizes)):
            print("indexed", size, "MB ->", n, flush=True)
    sys.exit(0)
