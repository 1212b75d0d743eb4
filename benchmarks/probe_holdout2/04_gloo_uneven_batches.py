"""DDP-style training with gloo hangs when ranks get a different number of batches.

Report: https://github.com/pytorch/pytorch/issues/38174 (the RFC that led to the
``Join`` context manager; see the forum thread it links, "Best practice for uneven dataset
sizes with DistributedDataParallel").

Two CPU ranks are started with ``torch.multiprocessing.spawn`` and a gloo process group.
The data is sharded unevenly (rank 0 gets 5 batches, rank 1 gets 3). Each step all-reduces
the gradient. After its 3 batches rank 1 goes on to the final ``dist.barrier()`` while
rank 0 enters its 4th ``all_reduce``: the two ranks wait in different collectives for a
peer that never joins them. Both wait in gloo (no CPU), and the spawn parent waits in
``join``; without a watchdog this lasts until the process-group timeout (30 min for gloo).
Fix: give every rank the same number of steps (``DistributedSampler`` with
``drop_last=True`` / pad the shards), or wrap the loop in
``torch.distributed.algorithms.Join`` (``model.join()`` for DDP).
"""
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def train(rank, world_size):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = "29541"
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    n_batches = 5 if rank == 0 else 3          # uneven shards
    weights = torch.zeros(1000)
    for step in range(n_batches):
        grad = torch.randn(1000)
        dist.all_reduce(grad)
        weights -= 0.01 * grad / world_size
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    mp.spawn(train, args=(2,), nprocs=2)
    print("training finished")
