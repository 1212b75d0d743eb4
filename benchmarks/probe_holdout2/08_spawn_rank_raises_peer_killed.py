"""One rank of ``torch.multiprocessing.spawn`` raises; the other, waiting in a collective, is killed.

Report: https://github.com/LSH9832/edgeyolo/issues/20 ("torch.multiprocessing.spawn.
ProcessRaisedException: -- Process 1 terminated with the following error"); the spawn
helper's behaviour is described in https://github.com/pytorch/pytorch/pull/13518.

Two CPU ranks join a gloo process group and each loads its shard of the data. Rank 1's
shard has one short record, so ``torch.tensor(rows)`` raises ``ValueError: expected
sequence of length 3 at dim 1 (got 2)``. Rank 0 has meanwhile entered ``all_reduce`` and
waits for rank 1. ``spawn``'s join sees rank 1 exit with an error, terminates rank 0
(SIGTERM, so rank 0's death is a consequence, not a cause) and raises
``ProcessRaisedException`` in the parent with rank 1's traceback; exit status 1. The
failure to explain is rank 1's ``ValueError`` in ``load_shard``; the fix is in the data /
the loader (validate or pad ragged records before building the tensor), not in the
distributed setup.
"""
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def load_shard(rank):
    rows = [[1.0, 2.0, 3.0]] * 64
    if rank == 1:
        rows[17] = [1.0, 2.0]          # a short record in rank 1's shard
    return torch.tensor(rows)


def train(rank, world_size):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = "29542"
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    data = load_shard(rank)
    total = data.sum()
    dist.all_reduce(total)
    dist.destroy_process_group()


if __name__ == "__main__":
    mp.spawn(train, args=(2,), nprocs=2)
    print("done")
