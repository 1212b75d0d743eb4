"""Two ranks of a torchrun job: rank 0 is stuck saving a checkpoint, rank 1 waits for it in
``barrier`` (the collective rank 0 never reaches under ``if rank == 0:``).

Run as ``torchrun --nproc-per-node 2 dist_barrier_skipped.py BACKEND`` (``nccl`` on a GPU,
``gloo`` on the CPU). With NCCL, rank 1 chooses its GPU first (one GPU is enough: rank 0
never touches it). Expected: the job hangs until gpudoctor stops it.
"""

import os
import sys
import threading

import torch
import torch.distributed as dist


def save_checkpoint() -> None:
    threading.Event().wait()  # SAVE: blocks for ever, as a stuck write to a full disk would


def main(backend: str) -> None:
    rank = int(os.environ["RANK"])
    if backend == "nccl" and rank != 0:
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]) % torch.cuda.device_count())
    dist.init_process_group(backend)
    if rank == 0:  # TEST
        save_checkpoint()  # CALL
    else:
        dist.barrier()  # BARRIER
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
