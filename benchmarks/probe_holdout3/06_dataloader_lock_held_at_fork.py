"""DataLoader workers forked while a background thread holds a lock: every worker deadlocks.

Report: https://github.com/pytorch/pytorch/issues/24927 ("dataloader can get stuck";
maintainer: "fork does inherit lock states. That could indeed be problematic"); same
mechanism analysed in https://github.com/ultralytics/ultralytics/pull/26085 ("Avoid
fork-inherited ... deadlocks in Linux data loaders").

The training script runs a metrics-reporter thread that pushes counters to a metrics
endpoint every few seconds and holds ``_stats_lock`` while it does the (slow) push. The
Dataset counts the samples it serves under the same lock. When the DataLoader forks its
workers (default ``fork`` start method on Linux) the reporter is in the middle of a push,
so each worker inherits ``_stats_lock`` in the locked state -- but not the thread that would
release it. The first ``__getitem__`` in every worker blocks for ever on the lock; the main
process waits in the DataLoader's ``_get_data`` loop (the workers are alive, so it never
raises). No process uses CPU.
Fix: do not share locks between background threads and forked workers (re-create the lock
in ``worker_init_fn`` / via ``os.register_at_fork``), keep counters per worker, or use the
``spawn``/``forkserver`` multiprocessing context for the DataLoader.
"""
import threading
import time

import torch
from torch.utils.data import DataLoader, Dataset

_stats_lock = threading.Lock()
_stats = {"samples": 0}
_pushing = threading.Event()


def metrics_reporter():
    while True:
        with _stats_lock:
            _pushing.set()
            snapshot = dict(_stats)
            time.sleep(30)                # slow HTTP push to the metrics endpoint
        del snapshot
        time.sleep(1)


class CountingDataset(Dataset):
    def __len__(self):
        return 512

    def __getitem__(self, idx):
        with _stats_lock:
            _stats["samples"] += 1
        return torch.full((3, 32, 32), float(idx)), idx % 10


if __name__ == "__main__":
    threading.Thread(target=metrics_reporter, daemon=True).start()
    _pushing.wait()
    loader = DataLoader(CountingDataset(), batch_size=32, num_workers=2)
    model = torch.nn.Linear(3 * 32 * 32, 10)
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x.flatten(1)), y)
    print("epoch done")
