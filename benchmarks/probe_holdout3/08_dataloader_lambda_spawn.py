"""DataLoader with num_workers>0 and a lambda collate_fn under the spawn start method.

Report: https://github.com/HazyResearch/cartridges/issues/20 ("DataLoader(collate_fn=lambda
..., num_workers=1) breaks on Windows (multiprocessing spawn can't pickle a local lambda)");
many duplicates, e.g. https://github.com/facebookresearch/SparseConvNet/issues/125.

The script switches multiprocessing to ``spawn`` (as needed on Windows/macOS, or when
workers must initialise CUDA) and builds its DataLoader inside ``train()`` with a
locally-defined ``lambda`` as ``collate_fn``. With spawn, starting each worker pickles the
dataset, sampler and collate function; a local lambda cannot be pickled, so the first
``iter(loader)`` raises ``AttributeError: Can't pickle local object
'train.<locals>.<lambda>'`` in the parent (from ``Process.start`` -> ``reduction.dump``) and
the program exits 1. Under fork nothing is pickled, so the bug is invisible on Linux by
default.
Fix: make the collate function a module-level ``def`` (or a functools.partial of one), or
use num_workers=0.
"""
import torch
import torch.multiprocessing as mp
from torch.utils.data import DataLoader, TensorDataset


def train():
    data = TensorDataset(torch.randn(256, 10), torch.randint(0, 2, (256,)))
    loader = DataLoader(
        data,
        batch_size=16,
        num_workers=2,
        collate_fn=lambda batch: (torch.stack([b[0] for b in batch]), torch.stack([b[1] for b in batch])),
    )
    model = torch.nn.Linear(10, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print("loss", float(loss))


if __name__ == "__main__":
    mp.set_start_method("spawn")
    train()
