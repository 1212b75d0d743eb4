"""Two ranks of a torchrun job: rank 1 raises while loading its shard; rank 0 waits for it in
``barrier`` until torchrun stops it.

Run as ``torchrun --nproc-per-node 2 dist_rank_raises.py BACKEND`` (``nccl`` on a GPU,
``gloo`` on the CPU). With NCCL, rank 0 chooses its GPU first (one GPU is enough: rank 1
never touches it). Expected: the job fails; rank 1's exception is the cause, rank 0's stop
its effect.
"""

import os
import sys

import torch
import torch.distributed as dist


def load_shard(rank: int) -> None:
    raise FileNotFoundError(f"shard-{rank}.pt")  # RAISE


def main(backend: str) -> None:
    rank = int(os.environ["RANK"])
    if backend == "nccl" and rank == 0:
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]) % torch.cuda.device_count())
    dist.init_process_group(backend)
    if rank == 1:
        load_shard(rank)  # LOAD
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
