"""DDP launched with fewer processes than world_size: init_process_group waits for ever.

Report: https://github.com/helboukkouri/character-bert-pretraining/issues/4 ("Training
script hangs at torch.distributed.init_process_group"; the answer it quotes: "It will hang
unless you pass in nprocs=world_size to mp.spawn() ... it's waiting for the whole world to
show up"); also https://github.com/pytorch/pytorch/issues/49846.

The training script takes ``world_size`` from its config (2, written for a 2-GPU box) but
starts one process per visible GPU with ``torch.multiprocessing.spawn``; on this CPU-only
machine that is ``max(torch.cuda.device_count(), 1) == 1`` process. Rank 0 creates the
TCP store and then waits in ``init_process_group`` for rank 1 to register. Rank 1 is never
started, so rank 0 sleeps in the rendezvous (no CPU) until the default 30-minute timeout,
and the spawn parent waits in ``join``.
Fix: launch exactly world_size processes (``nprocs=world_size``, or derive world_size from
the number of processes / use torchrun which sets WORLD_SIZE), and pass a short
``timeout=`` to init_process_group so a missing rank fails fast.
"""
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

CONFIG = {"world_size": 2, "backend": "gloo", "lr": 0.01}


def train(rank, world_size):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = "29553"
    dist.init_process_group(CONFIG["backend"], rank=rank, world_size=world_size)
    model = torch.nn.Linear(16, 1)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=CONFIG["lr"])
    for _ in range(10):
        loss = ddp(torch.randn(32, 16)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    nprocs = max(torch.cuda.device_count(), 1)          # 1 on a CPU-only machine
    mp.spawn(train, args=(CONFIG["world_size"],), nprocs=nprocs)
    print("training finished")
