"""DataLoader workers fill a small /dev/shm: "unable to write to file </torch_...>" or a
worker "killed by signal: Bus error".

Modelled on pytorch/pytorch#5040 ("Give a better error when we run out of shared memory,
instead of RuntimeError: DataLoader worker (pid 13) is killed by signal: Bus error.",
https://github.com/pytorch/pytorch/issues/5040) and pytorch/pytorch#16979 ("Dataloader Shm
Error on Kubernetes"). In a Docker container /dev/shm is 64 MB by default; DataLoader
workers put every batch in a /dev/shm segment. To reproduce that without touching the
host, the program enters its own mount namespace (it runs as root here) and mounts a
32 MiB tmpfs on /dev/shm, then loads 24 MiB batches with 2 workers and prefetching: the
segments of the batches in flight do not fit. A worker fails allocating its batch
("RuntimeError: unable to allocate shared memory(shm) for file </torch_...>: No space left
on device (28)"; older torch: "unable to write to file </torch_...>") or dies of SIGBUS,
and the parent's `for batch in loader:` raises RuntimeError ("Caught RuntimeError in
DataLoader worker process N" / "DataLoader worker ... is killed by signal: Bus error ...
out of shared memory"); exit status 1. The fix from the reports: give the
container more shared memory (`docker run --shm-size=...` or `--ipc=host`), or fewer
workers / smaller batches / a smaller prefetch_factor.
"""
import ctypes
import os

CLONE_NEWNS = 0x00020000
MS_REC, MS_PRIVATE = 0x4000, 1 << 18
libc = ctypes.CDLL(None, use_errno=True)


def small_dev_shm(size):
    if libc.unshare(CLONE_NEWNS) != 0:
        raise OSError(ctypes.get_errno(), "unshare")
    if libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        raise OSError(ctypes.get_errno(), "make / private")
    if libc.mount(b"tmpfs", b"/dev/shm", b"tmpfs", 0, f"size={size}".encode()) != 0:
        raise OSError(ctypes.get_errno(), "mount tmpfs")


small_dev_shm("32m")   # what `docker run` gives without --shm-size (64 MB), smaller

import torch  # noqa: E402
from torch.utils.data import DataLoader, Dataset  # noqa: E402


class Images(Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        return torch.full((3, 512, 512), float(i))   # 3 MiB per image


if __name__ == "__main__":
    loader = DataLoader(Images(), batch_size=8, num_workers=2, prefetch_factor=2)
    total = 0.0
    for batch in loader:
        total += float(batch.mean())
    print(total, os.getpid())
