"""Shut down the multiprocessing pools a hung test left running, the way Pool itself does.

Killing pool workers from outside is not enough: the pool's handler thread forks
replacements, and a worker killed while it held the task queue's lock leaves that
lock taken for good, so ``Pool.terminate()`` (also run at interpreter exit) would
block forever. ``Pool.terminate()`` first, while the workers are still whole, avoids
both.
"""

from __future__ import annotations

import gc
import sys


def terminate_pools(worker_pids: set[int]) -> list[int]:
    """Terminate each running ``multiprocessing`` pool with a worker in ``worker_pids``.

    Return the PIDs of the workers of the pools terminated. A pool whose module
    was never imported cannot exist, so nothing is imported here.
    """
    module = sys.modules.get("multiprocessing.pool")
    if module is None or not worker_pids:
        return []
    stopped: list[int] = []
    for candidate in gc.get_objects():
        if not isinstance(candidate, module.Pool) or getattr(candidate, "_state", None) != module.RUN:
            continue
        workers = {getattr(worker, "pid", None) for worker in getattr(candidate, "_pool", ())}
        if workers & worker_pids:
            candidate.terminate()
            stopped += sorted(p for p in workers if isinstance(p, int))
    return stopped
