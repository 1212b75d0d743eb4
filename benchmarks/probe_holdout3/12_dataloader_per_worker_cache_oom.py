"""A Dataset that caches decoded samples, used with persistent DataLoader workers: RAM grows.

Report: https://github.com/ultralytics/yolov3/issues/642 ("cache_image stuck training";
maintainer: "each dataloader worker is caching images independently of the others. So ...
if you have 16 workers, each of them is caching 10k images"); see also
https://github.com/szymonmaszke/torchdatasets/issues/26.

The Dataset memoises every decoded full-resolution image in ``self.cache`` (random crops are
taken from the cached image each epoch) to make later epochs faster. With ``num_workers=2``
and ``persistent_workers=True`` each worker process holds its own copy of the Dataset, so
each builds its own cache: memory grows by ~3 MB per sample per worker and is never shared
with the parent or the other worker. The dataset (1,000 images of 3x512x512 float32, ~3 GB
decoded) does not fit even once per worker. Here the program caps each process
with ``RLIMIT_AS`` = 2 GiB (inherited by the forked workers), so a worker fails to allocate
in ``__getitem__`` after ~1.2 GB of cache, and the DataLoader re-raises the error in the
main process ("RuntimeError: Caught RuntimeError in DataLoader worker process N" ...
"DefaultCPUAllocator: can't allocate memory: you tried to allocate ... bytes"); on a real machine the kernel OOM killer kills a worker instead. The
probe's ``--memory-limit 1500MB`` stands for the machine's RAM.
Fix from the report: do not cache per worker (cache once in the parent before creating the
DataLoader, in shared memory / a memory-mapped file, or cache only the encoded bytes), or
use num_workers=0 when caching.
"""
import resource

import torch
from torch.utils.data import DataLoader, Dataset

resource.setrlimit(resource.RLIMIT_AS, (2 * 2**30, 2 * 2**30))


class CachedImages(Dataset):
    def __init__(self, n):
        self.n = n
        self.cache = {}

    def __len__(self):
        return self.n

    def decode(self, idx):
        g = torch.Generator().manual_seed(idx)
        return torch.rand((3, 512, 512), generator=g)        # stands for JPEG decode

    def __getitem__(self, idx):
        if idx not in self.cache:
            self.cache[idx] = self.decode(idx)
        top, left = torch.randint(0, 512 - 128, (2,)).tolist()   # random-crop augmentation
        return self.cache[idx][:, top:top + 128, left:left + 128].clone(), idx % 10


if __name__ == "__main__":
    loader = DataLoader(CachedImages(1000), batch_size=32, shuffle=True,
                        num_workers=2, persistent_workers=True)
    model = torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d(4), torch.nn.Flatten(), torch.nn.Linear(48, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(3):
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        print("epoch", epoch, "loss", float(loss), flush=True)
